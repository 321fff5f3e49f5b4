//===- DslCalls.cpp - the model DSL's functions ---------------------------===//
//
// One case per function of the language, each checking its own arguments:
// a table of the language in one place (long, and meant to be).
//
//===----------------------------------------------------------------------===//
#include "DslSyntax.h"
#include "gpuc/Frontend/Limits.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::dsl;

FailureOr<Operand> DslParser::parseCall(StringRef callee, Location l) {
  advance(); // '('
  SmallVector<Operand> positional;
  SmallVector<std::optional<Shape>> positionalLists;
  std::map<std::string, NamedArg> named;
  while (!isPunct(')')) {
    Location argLoc = loc();
    if (isPunct('[')) {
      FailureOr<Shape> list = parseIntList();
      if (failed(list))
        return failure();
      positional.push_back(Operand{Value(), std::nullopt, argLoc});
      positionalLists.push_back(*list);
    } else if (tok.kind == Tok::Name) {
      // NAME '=' value is a named argument; anything else an expression.
      Lexer saved = lexer;
      Token nameTok = tok;
      advance();
      if (isPunct('=')) {
        advance();
        NamedArg arg{std::nullopt, std::nullopt, argLoc};
        if (isPunct('[')) {
          FailureOr<Shape> list = parseIntList();
          if (failed(list))
            return failure();
          arg.list = *list;
        } else {
          Location numberLoc = loc();
          FailureOr<double> n = parseNumber();
          if (failed(n))
            return failure();
          // Every argument is a count, an axis, a flag or a small real
          // (eps, ratio): beyond 2^53 none is meaningful, and converting
          // one to an integer would overflow.
          if (!std::isfinite(*n) || std::fabs(*n) > 9007199254740992.0)
            return error(numberLoc)
                   << "'" << nameTok.text << "=" << *n
                   << "' is out of range: arguments lie within +-2^53";
          arg.number = *n;
        }
        named.insert_or_assign(nameTok.text.str(), arg);
      } else {
        lexer = saved;
        tok = nameTok;
        FailureOr<Operand> e = parseExpr();
        if (failed(e))
          return failure();
        positional.push_back(*e);
        positionalLists.push_back(std::nullopt);
      }
    } else {
      FailureOr<Operand> e = parseExpr();
      if (failed(e))
        return failure();
      positional.push_back(*e);
      positionalLists.push_back(std::nullopt);
    }
    if (!isPunct(')') && failed(expect(',', "between call arguments")))
      return failure();
  }
  advance(); // ')'

  std::set<std::string> consumed;
  auto num = [&](StringRef key, double dflt) {
    consumed.insert(key.str());
    auto it = named.find(key.str());
    return it != named.end() && it->second.number ? *it->second.number : dflt;
  };
  auto list = [&](StringRef key, Shape dflt) {
    consumed.insert(key.str());
    auto it = named.find(key.str());
    return it != named.end() && it->second.list ? *it->second.list : dflt;
  };
  auto emit = [&] { return error(l) << "'" << callee << "': "; };
  auto wantArgs = [&](size_t n) -> LogicalResult {
    if (positional.size() != n)
      return emit() << "expects " << n << " positional argument(s), got "
                    << positional.size();
    return success();
  };
  auto tensorAt = [&](size_t i) -> FailureOr<Value> {
    if (positionalLists[i])
      return error(positional[i].loc)
             << "'" << callee << "' expects a tensor here, not a list";
    return tensorArg(positional[i], callee);
  };
  auto listAt = [&](size_t i) -> FailureOr<Shape> {
    if (!positionalLists[i])
      return error(positional[i].loc)
             << "'" << callee << "' expects a list [..] here";
    return *positionalLists[i];
  };
  auto finish = [&](Value v) -> FailureOr<Operand> {
    for (auto &[key, arg] : named)
      if (!consumed.count(key))
        return error(arg.loc)
               << "'" << callee << "' has no argument '" << key << "'";
    return Operand{v, std::nullopt, l};
  };

  // Elementwise functions of one tensor.
  using UnaryBuilder = std::function<Value(Value)>;
  auto unary = [&](auto tag) -> UnaryBuilder {
    using OpTy = decltype(tag);
    return
        [&](Value x) { return builder.createOrFold<OpTy>(l, x.getType(), x); };
  };
  std::map<std::string, UnaryBuilder> unaries = {
      {"relu", unary(ReluOp())},       {"tanh", unary(TanhOp())},
      {"cos", unary(CosOp())},         {"sin", unary(SinOp())},
      {"sigmoid", unary(SigmoidOp())}, {"exp", unary(ExpOp())},
      {"log", unary(LogOp())},         {"sqrt", unary(SqrtOp())},
      {"rsqrt", unary(RsqrtOp())},     {"erf", unary(ErfOp())},
      {"abs", unary(AbsOp())},         {"reciprocal", unary(ReciprocalOp())},
  };
  if (auto it = unaries.find(callee.str()); it != unaries.end()) {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    return finish(it->second(*x));
  }
  if (callee == "gelu") {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    bool useTanh = num("tanh", 0) != 0;
    return finish(GeluOp::create(builder, l, *x, useTanh));
  }
  if (callee == "matmul") {
    if (failed(wantArgs(2)))
      return failure();
    FailureOr<Value> a = tensorAt(0), b = tensorAt(1);
    if (failed(a) || failed(b))
      return failure();
    bool ta = num("transpose_a", 0) != 0, tb = num("transpose_b", 0) != 0;
    FailureOr<Shape> shape = inferMatmulShape(
        TensorBuilder::shapeOf(*a), TensorBuilder::shapeOf(*b), ta, tb, emit);
    if (failed(shape))
      return failure();
    return finish(MatmulOp::create(
        builder, l, TensorBuilder::withShape(*a, *shape), *a, *b, ta, tb));
  }
  if (callee == "flatten" || callee == "reshape") {
    if (failed(wantArgs(callee == "flatten" ? 1 : 2)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    ArrayRef<int64_t> in = TensorBuilder::shapeOf(*x);
    Shape shape;
    if (callee == "flatten") {
      int64_t axis = num("axis", 1);
      if (axis < 1 || axis > static_cast<int64_t>(in.size()))
        return emit() << "axis " << axis << " is out of range";
      shape = {getNumElements(in.take_front(axis)),
               getNumElements(in.drop_front(axis))};
    } else {
      FailureOr<Shape> given = listAt(1);
      if (failed(given))
        return failure();
      shape = *given;
      int64_t known = 1, inferred = -1;
      for (auto [i, d] : llvm::enumerate(shape)) {
        if (d == -1 && inferred < 0)
          inferred = i;
        else if (d <= 0)
          return emit() << "dimension " << d
                        << " is invalid (one -1 may be "
                           "inferred)";
        else
          known *= d;
      }
      if (inferred >= 0)
        shape[inferred] = getNumElements(in) / known;
      if (getNumElements(shape) != getNumElements(in))
        return emit() << "cannot reshape " << formatShape(in) << " into "
                      << formatShape(shape);
    }
    return finish(tensors.reshape(l, *x, shape));
  }
  if (callee == "transpose") {
    if (failed(wantArgs(2)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    FailureOr<Shape> perm = listAt(1);
    if (failed(x) || failed(perm))
      return failure();
    FailureOr<Shape> shape =
        inferTransposeShape(TensorBuilder::shapeOf(*x), *perm, emit);
    if (failed(shape))
      return failure();
    return finish(builder.createOrFold<TransposeOp>(
        l, TensorBuilder::withShape(*x, *shape), *x, *perm));
  }
  if (callee == "sum" || callee == "mean" || callee == "max") {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    int64_t rank = TensorBuilder::shapeOf(*x).size();
    Shape axes = list("axes", llvm::to_vector(llvm::seq<int64_t>(0, rank)));
    for (int64_t &a : axes)
      if (a < 0)
        a += rank;
    llvm::sort(axes);
    if (failed(verifyAxes(axes, rank, emit)))
      return failure();
    bool keep = num("keepdims", 0) != 0;
    Type t = TensorBuilder::withShape(
        *x, inferReduceShape(TensorBuilder::shapeOf(*x), axes, keep));
    Value r = callee == "sum"
                  ? Value(ReduceSumOp::create(builder, l, t, *x, axes, keep))
              : callee == "mean"
                  ? Value(ReduceMeanOp::create(builder, l, t, *x, axes, keep))
                  : Value(ReduceMaxOp::create(builder, l, t, *x, axes, keep));
    return finish(r);
  }
  if (callee == "softmax" || callee == "log_softmax") {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    FailureOr<int64_t> axis =
        normalizeAxis(num("axis", -1), TensorBuilder::shapeOf(*x).size(), emit);
    if (failed(axis))
      return failure();
    Value r = callee == "softmax"
                  ? Value(SoftmaxOp::create(builder, l, *x, *axis))
                  : Value(LogSoftmaxOp::create(builder, l, *x, *axis));
    return finish(r);
  }
  if (callee == "layer_norm") {
    if (failed(wantArgs(3)))
      return failure();
    FailureOr<Value> x = tensorAt(0), g = tensorAt(1), b = tensorAt(2);
    if (failed(x) || failed(g) || failed(b))
      return failure();
    FailureOr<int64_t> axis =
        normalizeAxis(num("axis", -1), TensorBuilder::shapeOf(*x).size(), emit);
    if (failed(axis))
      return failure();
    return finish(
        LayerNormOp::create(builder, l, *x, *g, *b, *axis,
                            builder.getF64FloatAttr(num("eps", 1e-5))));
  }
  if (callee == "batch_norm") {
    if (failed(wantArgs(5)))
      return failure();
    SmallVector<Value> args;
    for (size_t i = 0; i < 5; ++i) {
      FailureOr<Value> v = tensorAt(i);
      if (failed(v))
        return failure();
      args.push_back(*v);
    }
    auto op = BatchNormTrainOp::create(
        builder, l, args[0], args[1], args[2], args[3], args[4],
        builder.getF64FloatAttr(num("eps", 1e-5)),
        builder.getF64FloatAttr(num("momentum", 0.9)),
        /*unbiased_running_var=*/true);
    for (auto [stat, updated] : {std::pair{args[3], op.getNewRunningMean()},
                                 {args[4], op.getNewRunningVar()}}) {
      if (ParameterOp param = paramOfArg.lookup(stat)) {
        param.setTrainable(false);
        updates.push_back({param, updated});
      }
    }
    return finish(op.getResult());
  }
  if (callee == "dropout") {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    double ratio = num("ratio", 0.5);
    if (!(ratio >= 0.0 && ratio < 1.0))
      return emitError(l) << "dropout ratio " << ratio << " must be in [0, 1)";
    if (!rngKey)
      rngKey = addArgument(RankedTensorType::get({2}, builder.getI64Type()),
                           builder.getNamedAttr(GpucDialect::kRngAttrName,
                                                builder.getUnitAttr()));
    return finish(DropoutOp::create(builder, l, x->getType(), *x, rngKey,
                                    builder.getF64FloatAttr(ratio),
                                    dropoutStreams++));
  }
  if (callee == "conv2d") {
    if (failed(wantArgs(2)))
      return failure();
    FailureOr<Value> x = tensorAt(0), w = tensorAt(1);
    if (failed(x) || failed(w))
      return failure();
    Shape strides = list("stride", {1, 1}), pads = list("pad", {0, 0, 0, 0}),
          dilations = list("dilation", {1, 1});
    int64_t groups = num("groups", 1);
    FailureOr<Shape> shape =
        inferConv2DShape(TensorBuilder::shapeOf(*x), TensorBuilder::shapeOf(*w),
                         strides, pads, dilations, groups, emit);
    if (failed(shape))
      return failure();
    return finish(Conv2DOp::create(builder, l,
                                   TensorBuilder::withShape(*x, *shape), *x, *w,
                                   strides, pads, dilations, groups));
  }
  if (callee == "max_pool2d" || callee == "avg_pool2d") {
    if (failed(wantArgs(1)))
      return failure();
    FailureOr<Value> x = tensorAt(0);
    if (failed(x))
      return failure();
    Shape kernel = list("kernel", {2, 2});
    Shape strides = list("stride", kernel), pads = list("pad", {0, 0, 0, 0});
    FailureOr<Shape> shape = inferPool2DShape(TensorBuilder::shapeOf(*x),
                                              kernel, strides, pads, emit);
    if (failed(shape))
      return failure();
    Type t = TensorBuilder::withShape(*x, *shape);
    Value r = callee == "max_pool2d"
                  ? Value(MaxPool2DOp::create(builder, l, t, *x, kernel,
                                              strides, pads))
                  : Value(AvgPool2DOp::create(builder, l, t, *x, kernel,
                                              strides, pads, false));
    return finish(r);
  }
  if (callee == "gather") {
    if (failed(wantArgs(2)))
      return failure();
    FailureOr<Value> table = tensorAt(0), idx = tensorAt(1);
    if (failed(table) || failed(idx))
      return failure();
    int64_t axis = num("axis", 0);
    FailureOr<Shape> shape =
        inferGatherShape(TensorBuilder::shapeOf(*table),
                         TensorBuilder::shapeOf(*idx), axis, emit);
    if (failed(shape))
      return failure();
    return finish(GatherOp::create(builder, l,
                                   TensorBuilder::withShape(*table, *shape),
                                   *table, *idx, axis));
  }
  if (callee == "cross_entropy" || callee == "nll_loss" || callee == "mse") {
    if (failed(wantArgs(2)))
      return failure();
    FailureOr<Value> x = tensorAt(0), y = tensorAt(1);
    if (failed(x) || failed(y))
      return failure();
    auto scalarType =
        RankedTensorType::get({}, TensorBuilder::typeOf(*x).getElementType());
    Value r;
    if (callee == "mse")
      r = MseLossOp::create(builder, l, scalarType, *x, *y, Reduction::mean);
    else if (callee == "cross_entropy")
      r = CrossEntropyOp::create(builder, l, scalarType, *x, *y,
                                 Reduction::mean, IntegerAttr());
    else
      r = NllLossOp::create(builder, l, scalarType, *x, *y, Reduction::mean,
                            IntegerAttr());
    return finish(r);
  }
  return error(l) << "unknown function '" << callee
                  << "'; docs/dsl.md lists the functions";
}

//===- Pointwise.cpp - an op's value at an index --------------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

FailureOr<std::string> Emitter::at(Value v, const std::string &idx) {
  auto it = memo.find({v.getAsOpaquePointer(), idx});
  if (it != memo.end())
    return it->second;
  auto row = rowValues.find(v.getAsOpaquePointer());
  if (row != rowValues.end())
    return row->second;
  std::string reg;
  auto staged = stagedInputs.find(v);
  auto position = stagedPositions.find(idx);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    std::string pointer = "in" + std::to_string(arg.getArgNumber());
    auto guard = guardLoads ? loadGuards.find(v) : loadGuards.end();
    if (staged != stagedInputs.end() && position != stagedPositions.end()) {
      reg = define(v,
                   stagedInRegisters
                       ? llvm::formatv("rowIn{0}[{1}]", arg.getArgNumber(),
                                       position->second)
                             .str()
                       : llvm::formatv("gpuc::stagedRow<{0}>({1})[{2}]",
                                       storageCType(elementOf(v)),
                                       staged->second, position->second)
                             .str(),
                   /*exact=*/true);
    } else if (guard != loadGuards.end()) {
      FailureOr<std::string> condition = at(guard->second.condition, idx);
      if (failed(condition))
        return failure();
      reg = define(v,
                   llvm::formatv("{0}{1} ? (float){2}[{3}] : 0.0f",
                                 guard->second.whenTrue ? "" : "!", *condition,
                                 pointer, idx),
                   /*exact=*/true);
    } else {
      reg = load(v, pointer, idx);
    }
  } else if (auto stored = storedOutputs.find(v);
             stored != storedOutputs.end()) {
    if (stagingText && keptInRegisters.count(v) &&
        position != stagedPositions.end())
      reg = define(
          v,
          llvm::formatv("rowOut{0}[{1}]", stored->second, position->second)
              .str(),
          /*exact=*/true);
    else
      reg = load(v, "out" + std::to_string(stored->second), idx);
  } else {
    FailureOr<std::string> computed = compute(v.getDefiningOp(), v, idx);
    if (failed(computed))
      return failure();
    reg = *computed;
  }
  remember(v, idx, reg);
  return reg;
}

/// Whether `v` is computed from indices alone: iotas and constants through
/// pointwise ops and reshapes, no input.
static bool computedFromIndices(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (isa<IotaOp, ConstantOp>(def))
    return true;
  return (isPointwise(def) || isAlias(def)) &&
         llvm::all_of(def->getOperands(), computedFromIndices);
}

/// The one guard under which every use of `v` (read at the index of the
/// values it reaches) matters, if there is one. `known` holds the answers
/// for values already seen (a pointwise graph's paths can share them).
static std::optional<LoadGuard>
guardOfUses(Value v, DenseMap<Value, std::optional<LoadGuard>> &known) {
  auto seen = known.find(v);
  if (seen != known.end())
    return seen->second;
  std::optional<LoadGuard> common;
  int64_t elements = getNumElements(shapeOf(v));
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    std::optional<LoadGuard> guard;
    if (auto select = dyn_cast<SelectOp>(user)) {
      if (use.getOperandNumber() != 0 &&
          computedFromIndices(select.getOperand(0)))
        guard = LoadGuard{select.getOperand(0), use.getOperandNumber() == 1};
    } else if ((isPointwise(user) || isAlias(user)) &&
               user->getNumResults() == 1 &&
               getNumElements(shapeOf(user->getResult(0))) == elements) {
      guard = guardOfUses(user->getResult(0), known);
    }
    if (!guard || (common && (common->condition != guard->condition ||
                              common->whenTrue != guard->whenTrue))) {
      common = std::nullopt;
      break;
    }
    common = guard;
  }
  known[v] = common;
  return common;
}

void Emitter::findLoadGuards() {
  loadGuards.clear();
  DenseMap<Value, std::optional<LoadGuard>> known;
  for (BlockArgument arg : fusion.getBodyBlock().getArguments())
    if (isa<FloatType>(elementOf(arg)))
      if (std::optional<LoadGuard> guard = guardOfUses(arg, known))
        loadGuards[arg] = *guard;
}

FailureOr<std::string> Emitter::compute(Operation *op, Value v,
                                        const std::string &idx) {
  auto operand = [&](unsigned i) { return at(op->getOperand(i), idx); };
  auto unary = [&](auto format) -> FailureOr<std::string> {
    FailureOr<std::string> x = operand(0);
    if (failed(x))
      return failure();
    return define(v, format(*x));
  };
  auto binary = [&](auto format) -> FailureOr<std::string> {
    FailureOr<std::string> a = operand(0), b = operand(1);
    if (failed(a) || failed(b))
      return failure();
    return define(v, format(*a, *b));
  };
  auto fmt = [](const char *pattern) {
    return [pattern](const std::string &x) { return substitute(pattern, {x}); };
  };
  auto fmt2 = [](const char *pattern) {
    return [pattern](const std::string &a, const std::string &b) {
      return substitute(pattern, {a, b});
    };
  };
  bool floating = isFloat(v);
  ArrayRef<int64_t> shape = shapeOf(v);

  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](ConstantOp c) -> FailureOr<std::string> {
        auto dense = cast<DenseElementsAttr>(c.getValue());
        Type type = elementOf(v);
        double value =
            isa<FloatType>(type)
                ? dense.getSplatValue<APFloat>().convertToDouble()
                : (double)dense.getSplatValue<APInt>().getSExtValue();
        if (type.isInteger(1))
          value = dense.getSplatValue<bool>();
        return literal(value, type);
      })
      .Case([&](NegOp) { return unary(fmt("(-{0})")); })
      .Case([&](AbsOp) {
        return unary(floating ? fmt("fabsf({0})")
                              : fmt("({0} < 0 ? -{0} : {0})"));
      })
      .Case([&](ExpOp) { return unary(fmt("gpuc::exponential({0})")); })
      .Case([&](LogOp) { return unary(fmt("logf({0})")); })
      .Case([&](SqrtOp) { return unary(fmt("sqrtf({0})")); })
      .Case([&](RsqrtOp) { return unary(fmt("rsqrtf({0})")); })
      .Case([&](ReciprocalOp) { return unary(fmt("(1.0f / {0})")); })
      .Case([&](TanhOp) { return unary(fmt("tanhf({0})")); })
      .Case([&](CosOp) { return unary(fmt("cosf({0})")); })
      .Case([&](SinOp) { return unary(fmt("sinf({0})")); })
      .Case([&](ErfOp) { return unary(fmt("erff({0})")); })
      .Case([&](SigmoidOp) {
        return unary(fmt("(1.0f / (1.0f + gpuc::exponential(-{0})))"));
      })
      .Case([&](ReluOp) {
        return unary(fmt("gpuc::selectFloat({0} > 0.0f, {0}, 0.0f)"));
      })
      .Case([&](GeluOp g) {
        return unary(g.getTanh()
                         ? fmt("(0.5f * {0} * (1.0f + tanhf(0.7978845608f * "
                               "({0} + 0.044715f * {0} * {0} * {0}))))")
                         : fmt("(0.5f * {0} * (1.0f + erff({0} * "
                               "0.70710678118f)))"));
      })
      .Case([&](AddOp) { return binary(fmt2("({0} + {1})")); })
      .Case([&](SubOp) { return binary(fmt2("({0} - {1})")); })
      .Case([&](MulOp) { return binary(fmt2("({0} * {1})")); })
      .Case([&](DivOp) {
        return binary(floating ? fmt2("({0} / {1})")
                               : fmt2("gpuc::divInt({0}, {1})"));
      })
      .Case([&](PowOp) {
        return binary(floating ? fmt2("powf({0}, {1})")
                               : fmt2("(decltype({0}))pow((double){0}, "
                                      "(double){1})"));
      })
      .Case([&](MaxOp) {
        return binary(floating ? fmt2("gpuc::maxNaN({0}, {1})")
                               : fmt2("gpuc::maxInt({0}, {1})"));
      })
      .Case([&](MinOp) {
        return binary(floating ? fmt2("gpuc::minNaN({0}, {1})")
                               : fmt2("gpuc::minInt({0}, {1})"));
      })
      .Case([&](CompareOp c) {
        const char *symbol = "==";
        switch (c.getPredicate()) {
        case ComparePredicate::eq:
          symbol = "==";
          break;
        case ComparePredicate::ne:
          symbol = "!=";
          break;
        case ComparePredicate::lt:
          symbol = "<";
          break;
        case ComparePredicate::le:
          symbol = "<=";
          break;
        case ComparePredicate::gt:
          symbol = ">";
          break;
        case ComparePredicate::ge:
          symbol = ">=";
          break;
        }
        // An index (iota) is a coordinate, within gidx: compared in gidx
        // with the other side clamped to gidx's range (which changes no
        // result), the loop needs no 64-bit lanes, which the host compiler
        // may not vectorize next to float ones. The index itself is only
        // cast back: a clamp of it cost the GPU seven integer instructions
        // an element where the compiler could not see that it fits (a
        // head's labelled logit, picked at each of 50k classes).
        auto isIndex = [](Value x) {
          return x.getDefiningOp<IotaOp>() && isa<IntegerType>(elementOf(x));
        };
        auto inGidx = [&](Value x, const std::string &reg) {
          return isIndex(x) ? "(gidx)" + reg
                            : "gpuc::narrowIndex<gidx>(" + reg + ")";
        };
        if (isIndex(c.getLhs()) || isIndex(c.getRhs()))
          return binary([&](const std::string &a, const std::string &b) {
            return llvm::formatv("({0} {1} {2})", inGidx(c.getLhs(), a), symbol,
                                 inGidx(c.getRhs(), b))
                .str();
          });
        return binary([&](const std::string &a, const std::string &b) {
          return llvm::formatv("({0} {1} {2})", a, symbol, b).str();
        });
      })
      .Case([&](SelectOp) -> FailureOr<std::string> {
        FailureOr<std::string> c = operand(0), t = operand(1), f = operand(2);
        if (failed(c) || failed(t) || failed(f))
          return failure();
        if (isFloat(v))
          return define(
              v, llvm::formatv("gpuc::selectFloat({0}, {1}, {2})", *c, *t, *f));
        return define(v, llvm::formatv("({0} ? {1} : {2})", *c, *t, *f));
      })
      .Case([&](CastOp) {
        if (elementOf(v).isInteger(1))
          return unary(fmt("({0} != 0)"));
        std::string type = registerCType(elementOf(v)).str();
        // A bool goes through int: GCC vectorizes (float)(int)b, but not
        // (float)b (a one-hot mask built beside float math left the
        // whole loop scalar, expf included).
        bool fromBool =
            getElementTypeOrSelf(op->getOperand(0).getType()).isInteger(1);
        return unary([type, fromBool](const std::string &x) {
          return "(" + type + ")(" + (fromBool ? "(int)" : "") + x + ")";
        });
      })
      .Case([&](DropoutOp d) -> FailureOr<std::string> {
        FailureOr<std::string> x = operand(0);
        FailureOr<std::string> seed = at(d.getRngKey(), "0");
        FailureOr<std::string> step = at(d.getRngKey(), "1");
        if (failed(x) || failed(seed) || failed(step))
          return failure();
        double ratio = d.getRatio().convertToDouble();
        return define(
            v, llvm::formatv("(gpuc::dropoutKeeps((unsigned long long){0}, "
                             "(unsigned long long){1}, {2}ULL, (unsigned long "
                             "long)({3}), {7}ULL, {4}) ? {5} * {6} : 0.0f)",
                             *seed, *step, d.getStream(), idx,
                             literal(ratio, Float32Type::get(op->getContext())),
                             *x,
                             literal(1.0 / (1.0 - ratio),
                                     Float32Type::get(op->getContext())),
                             getNumElements(shapeOf(d.getResult())))
                   .str());
      })
      .Case([&](ReshapeOp r) { return at(r.getInput(), idx); })
      .Case([&](BroadcastOp b) -> FailureOr<std::string> {
        ArrayRef<int64_t> in = shapeOf(b.getInput());
        // A single element (an optimizer's learning rate) needs no
        // coordinates: unravelling them would divide for nothing, and a
        // division makes the CPU walk lines instead of the flat range.
        if (getNumElements(in) == 1)
          return at(b.getInput(), "0");
        SmallVector<std::string> coords = unravel(idx, shape);
        int64_t lead = shape.size() - in.size();
        SmallVector<std::string> inCoords;
        for (size_t d = 0; d < in.size(); ++d)
          inCoords.push_back(in[d] == 1 ? "0" : coords[d + lead]);
        return at(b.getInput(), raveled(inCoords, in));
      })
      .Case([&](TransposeOp t) -> FailureOr<std::string> {
        ArrayRef<int64_t> in = shapeOf(t.getInput());
        SmallVector<std::string> coords = unravel(idx, shape);
        SmallVector<std::string> inCoords(in.size());
        for (auto [d, p] : llvm::enumerate(t.getPerm()))
          inCoords[p] = coords[d];
        return at(t.getInput(), raveled(inCoords, in));
      })
      .Case([&](SliceOp s) -> FailureOr<std::string> {
        // One stretch of the input: the index moves by a constant, with no
        // coordinates to unravel (and at offset 0 it is the same index,
        // which loads ahead with the others: inputsReadAtStoredIndex).
        if (std::optional<int64_t> offset = contiguousSliceOffset(s))
          return at(s.getInput(),
                    *offset == 0
                        ? idx
                        : index(llvm::formatv("{0} + {1}", idx, *offset)));
        ArrayRef<int64_t> in = shapeOf(s.getInput());
        SmallVector<std::string> coords = unravel(idx, shape);
        SmallVector<std::string> inCoords;
        for (size_t d = 0; d < in.size(); ++d)
          inCoords.push_back(
              index(llvm::formatv("{0} + {1} * {2}", s.getStarts()[d],
                                  coords[d], s.getStrides()[d])));
        return at(s.getInput(), raveled(inCoords, in));
      })
      .Case([&](PadOp p) -> FailureOr<std::string> {
        ArrayRef<int64_t> in = shapeOf(p.getInput());
        SmallVector<std::string> coords = unravel(idx, shape);
        SmallVector<std::string> inCoords;
        std::string inside = "true";
        for (size_t d = 0; d < in.size(); ++d) {
          std::string c =
              index(llvm::formatv("{0} - {1}", coords[d], p.getLow()[d]).str());
          inside += llvm::formatv(" && {0} >= 0 && {0} < {1}", c, in[d]);
          inCoords.push_back(c);
        }
        std::string reg = fresh("v");
        line(llvm::formatv(
            "{0} {1} = {2};", registerCType(elementOf(v)), reg,
            literal(p.getValue().convertToDouble(), elementOf(v))));
        open("if (" + inside + ")");
        FailureOr<std::string> x = at(p.getInput(), raveled(inCoords, in));
        if (failed(x))
          return failure();
        line(reg + " = " + *x + ";");
        close();
        return reg;
      })
      .Case([&](ConcatOp c) -> FailureOr<std::string> {
        int64_t axis = c.getAxis();
        SmallVector<std::string> coords = unravel(idx, shape);
        if (concatenatesKernelInputs(c))
          return concatOfArguments(c, v, coords);
        std::string reg = fresh("v");
        line(llvm::formatv("{0} {1};", registerCType(elementOf(v)), reg));
        int64_t offset = 0;
        for (auto [k, input] : llvm::enumerate(c.getInputs())) {
          ArrayRef<int64_t> in = shapeOf(input);
          int64_t end = offset + in[axis];
          bool last = k + 1 == c.getInputs().size();
          open(k == 0 ? llvm::formatv("if ({0} < {1})", coords[axis], end).str()
               : last ? std::string("else")
                      : llvm::formatv("else if ({0} < {1})", coords[axis], end)
                            .str());
          SmallVector<std::string> inCoords(coords);
          inCoords[axis] =
              index(llvm::formatv("{0} - {1}", coords[axis], offset).str());
          FailureOr<std::string> x = at(input, raveled(inCoords, in));
          if (failed(x))
            return failure();
          line(reg + " = " + *x + ";");
          close();
          offset = end;
        }
        return reg;
      })
      .Case([&](GatherOp g) -> FailureOr<std::string> {
        ArrayRef<int64_t> data = shapeOf(g.getData());
        int64_t axis = g.getAxis();
        int64_t inner = 1;
        for (size_t d = axis + 1; d < data.size(); ++d)
          inner *= data[d];
        int64_t n = getNumElements(shapeOf(g.getIndices()));
        std::string outer =
            index(llvm::formatv("{0} / {1}", idx, n * inner).str());
        std::string j =
            index(llvm::formatv("({0} / {1}) % {2}", idx, inner, n).str());
        std::string b = index(llvm::formatv("{0} % {1}", idx, inner).str());
        FailureOr<std::string> k = at(g.getIndices(), j);
        if (failed(k))
          return failure();
        std::string wrapped = index(llvm::formatv(
            "gpuc::wrapIndex((int64_t){0}, {1})", *k, data[axis]));
        return at(g.getData(),
                  index(llvm::formatv("({0} * {1} + {2}) * {3} + {4}", outer,
                                      data[axis], wrapped, inner, b)));
      })
      .Case([&](SegmentSumOp s) -> FailureOr<std::string> {
        // r[o, k, b] = sum over p in row k's group of u[o, order[p], b]:
        // the group's bounds are two loads shared by the whole row, and the
        // sum runs in increasing position.
        // (Coordinates, not divisions: on the CPU, the line's loop knows
        // all but the innermost.)
        int64_t axis = s.getAxis();
        SmallVector<std::string> coords = unravel(idx, shape);
        std::string k = coords[axis];
        FailureOr<std::string> begin = at(s.getOffsets(), k);
        FailureOr<std::string> end =
            at(s.getOffsets(), index(llvm::formatv("{0} + 1", k).str()));
        if (failed(begin) || failed(end))
          return failure();
        std::string sum = fresh("acc"), p = fresh("p");
        line(llvm::formatv("float {0} = 0.0f;", sum));
        open(llvm::formatv("for (gidx {0} = {1}; {0} < {2}; ++{0})", p, *begin,
                           *end));
        FailureOr<std::string> position = at(s.getOrder(), p);
        if (failed(position))
          return failure();
        SmallVector<std::string> from(coords);
        from[axis] = index("(gidx)" + *position);
        FailureOr<std::string> update =
            at(s.getUpdates(), raveled(from, shapeOf(s.getUpdates())));
        if (failed(update))
          return failure();
        line(llvm::formatv("{0} += {1};", sum, *update));
        close();
        return define(v, sum);
      })
      .Case([&](IotaOp i) -> FailureOr<std::string> {
        SmallVector<std::string> coords = unravel(idx, shape);
        return define(v, "(" + registerCType(elementOf(v)).str() + ")" +
                             coords[i.getDim()]);
      })
      .Case<MaxPool2DOp, MaxPool2DArgmaxOp, AvgPool2DOp>(
          [&](Operation *p) { return pool(p, v, idx); })
      .Case<MaxPool2DBackwardOp, AvgPool2DBackwardOp>(
          [&](Operation *p) { return poolBackward(p, v, idx); })
      .Default([&](Operation *other) -> FailureOr<std::string> {
        return other->emitOpError()
               << "has no code generation inside a kernel at this position "
                  "(a reduction must be the kernel's only one, and library "
                  "calls run outside kernels)";
      });
}

} // namespace mlir::gpuc::kernel_emitter

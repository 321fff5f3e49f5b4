//===- DslParser.cpp - gpuc's small model language ------------------------===//
//
// A recursive-descent parser that builds gpuc ops directly, one method per
// construct, every token carrying its source location.
//
//   model   := (stmt NEWLINE)*
//   stmt    := 'input' NAME ':' type
//            | 'param' NAME ':' type '=' init
//            | 'output' NAME (',' NAME)*
//            | NAME '=' expr
//   type    := ('f32'|'f16'|'bf16'|'i64'|'i32') '[' dim (',' dim)* ']'
//   dim     := INT | 'B'
//   init    := 'zeros' | 'ones' | 'normal' '(' num ',' num ')'
//            | 'uniform' '(' num ',' num ')' | 'constant' '(' num ')'
//   expr    := term (('+'|'-') term)*
//   term    := unary (('*'|'/') unary)*
//   unary   := '-' unary | primary
//   primary := NUMBER | NAME | NAME '(' args ')' | '(' expr ')'
//   args    := arg (',' arg)*     arg := expr | list | NAME '=' (num | list)
//
//===----------------------------------------------------------------------===//
#include "DslSyntax.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Frontend/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::dsl;

FailureOr<double> DslParser::parseNumber() {
  bool negative = false;
  if (isPunct('-')) {
    negative = true;
    advance();
  }
  if (tok.kind != Tok::Number)
    return error() << "expected a number, found '" << describe() << "'";
  double v = tok.number;
  advance();
  return negative ? -v : v;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType> DslParser::parseType() {
  Location typeLoc = loc();
  FailureOr<std::string> name = expectName("an element type (f32, f16, bf16, "
                                           "i64, i32)");
  if (failed(name))
    return failure();
  Type elementType = llvm::StringSwitch<Type>(*name)
                         .Case("f32", builder.getF32Type())
                         .Case("f16", builder.getF16Type())
                         .Case("bf16", builder.getBF16Type())
                         .Case("i64", builder.getI64Type())
                         .Case("i32", builder.getI32Type())
                         .Default(Type());
  if (!elementType)
    return error(typeLoc) << "unknown element type '" << *name
                          << "'; use f32, f16, bf16, i64 or i32";
  if (failed(expect('[', "to start the shape")))
    return failure();
  Shape shape;
  while (true) {
    if (isName("B")) {
      if (!options.batch)
        return error() << "the batch dimension B needs a value: pass --batch N";
      shape.push_back(*options.batch);
      advance();
    } else if (tok.kind == Tok::Number && tok.isInteger && tok.number > 0 &&
               tok.number <= kMaxDim) {
      shape.push_back(static_cast<int64_t>(tok.number));
      advance();
    } else if (tok.kind == Tok::Number && tok.isInteger && tok.number > 0) {
      return error() << "dimension " << describe() << " exceeds gpuc's limit "
                     << "of " << (int64_t)kMaxDim << " per dimension";
    } else {
      return error() << "expected a positive dimension or B, found '"
                     << describe() << "'";
    }
    if (isPunct(']'))
      break;
    if (failed(expect(',', "between dimensions")))
      return failure();
  }
  if (!boundedElements(shape))
    return error(typeLoc) << "the shape holds more than gpuc's limit of "
                          << kMaxElements << " elements per tensor";
  advance();
  return RankedTensorType::get(shape, elementType);
}

/// splitmix64: a tiny, well-mixed generator, so initial weights are the same
/// on every platform.
static uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t &state) {
  return (nextRandom(state) >> 11) * (1.0 / 9007199254740992.0);
}

FailureOr<std::string> DslParser::parseInit(RankedTensorType type,
                                            StringRef name) {
  Location initLoc = loc();
  FailureOr<std::string> kind =
      expectName("an initializer (zeros, ones, normal, uniform, constant)");
  if (failed(kind))
    return failure();
  SmallVector<double> args;
  if (isPunct('(')) {
    advance();
    while (!isPunct(')')) {
      FailureOr<double> n = parseNumber();
      if (failed(n))
        return failure();
      args.push_back(*n);
      if (!isPunct(')') && failed(expect(',', "between initializer arguments")))
        return failure();
    }
    advance();
  }
  size_t wanted = llvm::StringSwitch<size_t>(*kind)
                      .Cases({"zeros", "ones"}, 0)
                      .Case("constant", 1)
                      .Cases({"normal", "uniform"}, 2)
                      .Default(99);
  if (wanted == 99)
    return error(initLoc) << "unknown initializer '" << *kind
                          << "'; use zeros, ones, constant(v), normal(mean, "
                             "std) or uniform(low, high)";
  if (args.size() != wanted)
    return error(initLoc) << "'" << *kind << "' takes " << wanted
                          << " argument(s), got " << args.size();
  if (!type.getElementType().isF32())
    return error(initLoc) << "parameters must be f32 (master weights); "
                             "mixed precision is chosen at compile time";
  uint64_t state = options.seed ^ 0x5851f42d4c957f2dULL;
  for (char c : name)
    state = (state ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  int64_t n = type.getNumElements();
  if (n > options.maxInitializedElements)
    return error(initLoc) << "parameter '" << name << "' has " << n
                          << " elements; the DSL initializes parameters at "
                             "compile time, up to "
                          << options.maxInitializedElements
                          << " elements each (import larger models from ONNX "
                             "with their data)";
  // The kind is settled before the loop: comparing strings at every
  // element was half of a 128M-element parameter's 4.7 s.
  std::vector<float> data(n, 0.0f);
  if (*kind == "ones" || *kind == "constant") {
    std::fill(data.begin(), data.end(),
              static_cast<float>(*kind == "ones" ? 1.0 : args[0]));
  } else if (*kind == "uniform") {
    for (float &v : data)
      v = static_cast<float>(args[0] + (args[1] - args[0]) * uniform01(state));
  } else if (*kind == "normal") {
    for (float &v : data) {
      double u1 = std::max(uniform01(state), 1e-300), u2 = uniform01(state);
      v = static_cast<float>(args[0] + args[1] * std::sqrt(-2 * std::log(u1)) *
                                           std::cos(2 * M_PI * u2));
    }
  }
  return std::string(reinterpret_cast<const char *>(data.data()), n * 4);
}

LogicalResult DslParser::parseInput() {
  advance();
  Location nameLoc = loc();
  FailureOr<std::string> name = expectName("an input name");
  if (failed(name) || failed(expect(':', "after the input name")))
    return failure();
  FailureOr<RankedTensorType> type = parseType();
  if (failed(type))
    return failure();
  if (values.count(*name))
    return error(nameLoc) << "'" << *name << "' is already defined";
  values[*name] =
      addArgument(*type, builder.getNamedAttr(GpucDialect::kInputAttrName,
                                              builder.getStringAttr(*name)));
  return success();
}

LogicalResult DslParser::parseParam() {
  advance();
  Location nameLoc = loc();
  FailureOr<std::string> name = expectName("a parameter name");
  if (failed(name) || failed(expect(':', "after the parameter name")))
    return failure();
  FailureOr<RankedTensorType> type = parseType();
  if (failed(type) || failed(expect('=', "before the initializer")))
    return failure();
  FailureOr<std::string> bytes = parseInit(*type, *name);
  if (failed(bytes))
    return failure();
  if (values.count(*name))
    return error(nameLoc) << "'" << *name << "' is already defined";
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(module.getBody()->getTerminator()
                                ? module.getBody()->getTerminator()
                                : &module.getBody()->back());
  builder.setInsertionPoint(body->getParentOp());
  ParameterOp param =
      createParameter(builder, nameLoc, *name, *type,
                      ArrayRef<char>(bytes->data(), bytes->size()),
                      /*trainable=*/true);
  Value arg =
      addArgument(*type, builder.getNamedAttr(GpucDialect::kParamAttrName,
                                              FlatSymbolRefAttr::get(param)));
  paramOfArg[arg] = param;
  values[*name] = arg;
  return success();
}

LogicalResult DslParser::parseOutput() {
  advance();
  while (true) {
    Location nameLoc = loc();
    FailureOr<std::string> name = expectName("a value to output");
    if (failed(name))
      return failure();
    Value v = values.lookup(*name);
    if (!v)
      return error(nameLoc) << "unknown value '" << *name << "'";
    outputs.push_back({*name, v});
    if (!isPunct(','))
      return success();
    advance();
  }
}

LogicalResult DslParser::parseAssignment() {
  Location nameLoc = loc();
  std::string name = tok.text.str();
  advance();
  if (failed(expect('=', "after '" + name +
                             "' (statements are 'input', "
                             "'param', 'output' or NAME = "
                             "expression)")))
    return failure();
  if (values.count(name))
    return error(nameLoc) << "'" << name
                          << "' is already defined; values "
                             "are assigned once";
  FailureOr<Operand> value = parseExpr();
  if (failed(value))
    return failure();
  if (!value->value)
    return error(nameLoc) << "'" << name
                          << "' is a bare number; only tensors "
                             "can be named";
  values[name] = value->value;
  return success();
}

LogicalResult DslParser::parseStatement() {
  if (isName("input"))
    return parseInput();
  if (isName("param"))
    return parseParam();
  if (isName("output"))
    return parseOutput();
  if (tok.kind == Tok::Name)
    return parseAssignment();
  return error() << "expected a statement, found '" << describe() << "'";
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

FailureOr<Value> DslParser::materialize(const Operand &operand,
                                        Type elementType) {
  if (operand.value)
    return operand.value;
  if (!isa<FloatType>(elementType))
    return error(operand.loc) << "number literals combine only with float "
                                 "tensors";
  return tensors.scalar(operand.loc, elementType, *operand.number);
}

FailureOr<Value> DslParser::tensorArg(const Operand &operand,
                                      StringRef callee) {
  if (!operand.value)
    return error(operand.loc)
           << "'" << callee << "' expects a tensor here, not a number";
  return operand.value;
}

FailureOr<Operand> DslParser::binary(char op, Operand lhs, Operand rhs,
                                     Location l) {
  if (!lhs.value && !rhs.value) {
    double a = *lhs.number, b = *rhs.number;
    double r = op == '+'   ? a + b
               : op == '-' ? a - b
               : op == '*' ? a * b
                           : a / b;
    return Operand{Value(), r, l};
  }
  Type et =
      TensorBuilder::typeOf(lhs.value ? lhs.value : rhs.value).getElementType();
  FailureOr<Value> a = materialize(lhs, et), b = materialize(rhs, et);
  if (failed(a) || failed(b))
    return failure();
  if (TensorBuilder::typeOf(*a).getElementType() !=
      TensorBuilder::typeOf(*b).getElementType())
    return error(l) << "operands of '" << op
                    << "' have different element "
                       "types";
  auto operands = tensors.broadcastAll(
      l, {*a, *b}, [&] { return error(l) << "'" << op << "': "; });
  if (failed(operands))
    return failure();
  Value x = (*operands)[0], y = (*operands)[1];
  Type t = x.getType();
  Value r;
  switch (op) {
  case '+':
    r = builder.createOrFold<AddOp>(l, t, x, y);
    break;
  case '-':
    r = builder.createOrFold<SubOp>(l, t, x, y);
    break;
  case '*':
    r = builder.createOrFold<MulOp>(l, t, x, y);
    break;
  default:
    r = builder.createOrFold<DivOp>(l, t, x, y);
    break;
  }
  return Operand{r, std::nullopt, l};
}

FailureOr<Operand> DslParser::parseExpr() {
  FailureOr<Operand> lhs = parseTerm();
  while (succeeded(lhs) && (isPunct('+') || isPunct('-'))) {
    char op = tok.text[0];
    Location l = loc();
    advance();
    FailureOr<Operand> rhs = parseTerm();
    if (failed(rhs))
      return failure();
    lhs = binary(op, *lhs, *rhs, l);
  }
  return lhs;
}

FailureOr<Operand> DslParser::parseTerm() {
  FailureOr<Operand> lhs = parseUnary();
  while (succeeded(lhs) && (isPunct('*') || isPunct('/'))) {
    char op = tok.text[0];
    Location l = loc();
    advance();
    FailureOr<Operand> rhs = parseUnary();
    if (failed(rhs))
      return failure();
    lhs = binary(op, *lhs, *rhs, l);
  }
  return lhs;
}

FailureOr<Operand> DslParser::parseUnary() {
  // Every nested expression (parentheses, calls, unary minus) passes here:
  // bounding the depth bounds the parser's stack, whatever the input.
  struct Depth {
    int &depth;
    explicit Depth(int &d) : depth(++d) {}
    ~Depth() { --depth; }
  } nested(expressionDepth);
  if (expressionDepth > kMaxExpressionDepth)
    return error() << "the expression nests deeper than " << kMaxExpressionDepth
                   << " levels (parentheses, calls and unary minus); split "
                      "it into named steps";
  if (!isPunct('-'))
    return parsePrimary();
  Location l = loc();
  advance();
  FailureOr<Operand> x = parseUnary();
  if (failed(x))
    return failure();
  if (!x->value)
    return Operand{Value(), -*x->number, l};
  return Operand{builder.createOrFold<NegOp>(l, x->value.getType(), x->value),
                 std::nullopt, l};
}

FailureOr<Operand> DslParser::parsePrimary() {
  Location l = loc();
  if (tok.kind == Tok::Number) {
    double v = tok.number;
    advance();
    return Operand{Value(), v, l};
  }
  if (isPunct('(')) {
    advance();
    FailureOr<Operand> inner = parseExpr();
    if (failed(inner) || failed(expect(')', "to close the parenthesis")))
      return failure();
    return inner;
  }
  if (tok.kind != Tok::Name)
    return error() << "expected an expression, found '" << describe() << "'";
  std::string name = tok.text.str();
  advance();
  if (isPunct('('))
    return parseCall(name, l);
  Value v = values.lookup(name);
  if (!v)
    return error(l) << "unknown value '" << name << "'";
  return Operand{v, std::nullopt, l};
}

FailureOr<Shape> DslParser::parseIntList() {
  if (failed(expect('[', "to start a list")))
    return failure();
  Shape list;
  while (!isPunct(']')) {
    if (isName("B")) {
      if (!options.batch)
        return error() << "the batch dimension B needs a value: pass --batch N";
      list.push_back(*options.batch);
      advance();
    } else {
      Location numberLoc = loc();
      FailureOr<double> n = parseNumber();
      if (failed(n))
        return failure();
      if (*n != std::trunc(*n) || std::fabs(*n) > 2147483647.0)
        return error(numberLoc)
               << "list entry " << *n << " is not an integer within +-2^31";
      list.push_back(static_cast<int64_t>(*n));
    }
    if (!isPunct(']') && failed(expect(',', "between list entries")))
      return failure();
  }
  advance();
  return list;
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> DslParser::parse() {
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "forward",
                                   builder.getFunctionType({}, {}));
  body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  bool ok = true;
  while (tok.kind != Tok::Eof) {
    if (tok.kind == Tok::Newline) {
      advance();
      continue;
    }
    if (failed(parseStatement())) {
      ok = false;
      break;
    }
    if (tok.kind != Tok::Newline && tok.kind != Tok::Eof) {
      error() << "expected the end of the statement, found '" << describe()
              << "'";
      ok = false;
      break;
    }
  }
  if (ok && outputs.empty()) {
    emitError(fileLoc) << "the model has no 'output' statement";
    ok = false;
  }
  if (!ok) {
    module->erase();
    return nullptr;
  }
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto &[name, v] : outputs) {
    results.push_back(v);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kOutputAttrName, builder.getStringAttr(name))));
  }
  for (auto &[param, v] : updates) {
    results.push_back(v);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kUpdateAttrName, FlatSymbolRefAttr::get(param))));
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setFunctionType(builder.getFunctionType(body->getArgumentTypes(),
                                               ValueRange(results).getTypes()));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  if (failed(verify(module))) {
    module->erase();
    return nullptr;
  }
  return OwningOpRef<ModuleOp>(module);
}

OwningOpRef<ModuleOp> mlir::gpuc::parseDslFile(StringRef path,
                                               MLIRContext *context,
                                               llvm::SourceMgr &sourceMgr,
                                               const DslOptions &options) {
  context->loadDialect<GpucDialect, func::FuncDialect>();
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer) {
    emitError(FileLineColLoc::get(context, path, 0, 0))
        << "cannot read the model: " << buffer.getError().message();
    return nullptr;
  }
  unsigned id = sourceMgr.AddNewSourceBuffer(std::move(*buffer), SMLoc());
  return DslParser(context, sourceMgr, id, path, options).parse();
}

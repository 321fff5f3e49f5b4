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
#include "gpuc/Frontend/DslParser.h"
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

namespace {

enum class Tok { Eof, Newline, Name, Number, Punct };

struct Token {
  Tok kind;
  StringRef text;
  double number = 0;
  bool isInteger = false;
  const char *pos;
};

class Lexer {
public:
  explicit Lexer(StringRef buffer) : cur(buffer.begin()), end(buffer.end()) {}

  Token next() {
    while (true) {
      while (cur < end && (*cur == ' ' || *cur == '\t' || *cur == '\r' ||
                           (*cur == '\n' && depth > 0)))
        ++cur;
      if (cur < end && *cur == '#') {
        while (cur < end && *cur != '\n')
          ++cur;
        continue;
      }
      break;
    }
    const char *start = cur;
    if (cur >= end)
      return {Tok::Eof, StringRef(), 0, false, start};
    char c = *cur;
    if (c == '\n') {
      ++cur;
      return {Tok::Newline, StringRef(start, 1), 0, false, start};
    }
    if (isalpha(c) || c == '_') {
      while (cur < end && (isalnum(*cur) || *cur == '_' || *cur == '.'))
        ++cur;
      return {Tok::Name, StringRef(start, cur - start), 0, false, start};
    }
    if (isdigit(c) || (c == '.' && cur + 1 < end && isdigit(cur[1]))) {
      bool integer = true;
      while (cur < end && isdigit(*cur))
        ++cur;
      if (cur < end && *cur == '.') {
        integer = false;
        ++cur;
        while (cur < end && isdigit(*cur))
          ++cur;
      }
      if (cur < end && (*cur == 'e' || *cur == 'E')) {
        const char *save = cur++;
        if (cur < end && (*cur == '+' || *cur == '-'))
          ++cur;
        if (cur < end && isdigit(*cur)) {
          integer = false;
          while (cur < end && isdigit(*cur))
            ++cur;
        } else {
          cur = save;
        }
      }
      StringRef text(start, cur - start);
      return {Tok::Number, text, std::strtod(text.str().c_str(), nullptr),
              integer, start};
    }
    ++cur;
    if (c == '(' || c == '[')
      ++depth;
    if ((c == ')' || c == ']') && depth > 0)
      --depth;
    return {Tok::Punct, StringRef(start, 1), 0, false, start};
  }

private:
  const char *cur, *end;
  int depth = 0;
};

/// An expression's value: a tensor, or a number literal not yet given a type.
struct Operand {
  Value value;
  std::optional<double> number;
  Location loc;
};

/// A named call argument: a number or a list of integers.
struct NamedArg {
  std::optional<double> number;
  std::optional<Shape> list;
  Location loc;
};

class DslParser {
public:
  DslParser(MLIRContext *context, llvm::SourceMgr &sourceMgr, unsigned bufferId,
            StringRef path, const DslOptions &options)
      : context(context), sourceMgr(sourceMgr), path(path.str()),
        options(options), builder(context), tensors(builder),
        lexer(sourceMgr.getMemoryBuffer(bufferId)->getBuffer()) {
    advance();
  }

  OwningOpRef<ModuleOp> parse();

private:
  //===--- tokens and diagnostics
  //------------------------------------------===//
  void advance() { tok = lexer.next(); }
  Location locOf(const char *pos) {
    auto [line, col] = sourceMgr.getLineAndColumn(SMLoc::getFromPointer(pos));
    return FileLineColLoc::get(context, path, line, col);
  }
  Location loc() { return locOf(tok.pos); }
  InFlightDiagnostic error(Location l) { return emitError(l); }
  InFlightDiagnostic error() { return emitError(loc()); }
  bool isPunct(char c) { return tok.kind == Tok::Punct && tok.text[0] == c; }
  bool isName(StringRef s) { return tok.kind == Tok::Name && tok.text == s; }
  LogicalResult expect(char c, StringRef context) {
    if (!isPunct(c))
      return error() << "expected '" << c << "' " << context << ", found '"
                     << describe() << "'";
    advance();
    return success();
  }
  std::string describe() {
    switch (tok.kind) {
    case Tok::Eof:
      return "end of file";
    case Tok::Newline:
      return "end of line";
    default:
      return tok.text.str();
    }
  }
  FailureOr<std::string> expectName(StringRef what) {
    if (tok.kind != Tok::Name)
      return error() << "expected " << what << ", found '" << describe() << "'";
    std::string name = tok.text.str();
    advance();
    return name;
  }
  FailureOr<double> parseNumber();

  //===--- statements
  //------------------------------------------------------===//
  LogicalResult parseStatement();
  LogicalResult parseInput();
  LogicalResult parseParam();
  LogicalResult parseOutput();
  LogicalResult parseAssignment();
  FailureOr<RankedTensorType> parseType();
  FailureOr<std::string> parseInit(RankedTensorType type, StringRef name);

  //===--- expressions
  //-----------------------------------------------------===//
  FailureOr<Operand> parseExpr();
  /// How deeply the expression being parsed nests, and the most it may.
  int expressionDepth = 0;
  static constexpr int kMaxExpressionDepth = 256;
  FailureOr<Operand> parseTerm();
  FailureOr<Operand> parseUnary();
  FailureOr<Operand> parsePrimary();
  FailureOr<Operand> parseCall(StringRef callee, Location calleeLoc);
  FailureOr<Shape> parseIntList();
  FailureOr<Value> materialize(const Operand &operand, Type elementType);
  FailureOr<Value> tensorArg(const Operand &operand, StringRef callee);
  FailureOr<Operand> binary(char op, Operand lhs, Operand rhs, Location l);

  Value addArgument(Type type, NamedAttribute attr) {
    Value arg = body->addArgument(type, builder.getUnknownLoc());
    argAttrs.push_back(builder.getDictionaryAttr(attr));
    return arg;
  }

  MLIRContext *context;
  llvm::SourceMgr &sourceMgr;
  std::string path;
  const DslOptions &options;
  OpBuilder builder;
  TensorBuilder tensors;
  Lexer lexer;
  Token tok;

  ModuleOp module;
  Block *body = nullptr;
  SmallVector<DictionaryAttr> argAttrs;
  llvm::StringMap<Value> values;
  DenseMap<Value, ParameterOp> paramOfArg;
  SmallVector<std::pair<std::string, Value>> outputs;
  SmallVector<std::pair<ParameterOp, Value>> updates;
  /// The (seed, step) random key, added by the first dropout.
  Value rngKey;
  int64_t dropoutStreams = 0;
};

} // namespace

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

// One case per DSL function, each checking its own arguments: a table of
// the language in one place (long, and meant to be).
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
                  << "'; see README.md, 'The model DSL', for the list";
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

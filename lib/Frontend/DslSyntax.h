//===- DslSyntax.h - the model DSL's lexer and parser ---------*- C++ -*-===//
//
// The lexer and the recursive-descent parser of gpuc's model language,
// shared by its files: DslParser.cpp (statements, expressions, the model)
// and DslCalls.cpp (the table of the language's functions).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FRONTEND_DSLSYNTAX_H
#define GPUC_FRONTEND_DSLSYNTAX_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Frontend/DslParser.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace mlir::gpuc::dsl {

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
  // Tokens and diagnostics.
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

  // Statements.
  LogicalResult parseStatement();
  LogicalResult parseInput();
  LogicalResult parseParam();
  LogicalResult parseOutput();
  LogicalResult parseAssignment();
  FailureOr<RankedTensorType> parseType();
  FailureOr<std::string> parseInit(RankedTensorType type, StringRef name);

  // Expressions.
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

} // namespace mlir::gpuc::dsl

#endif // GPUC_FRONTEND_DSLSYNTAX_H

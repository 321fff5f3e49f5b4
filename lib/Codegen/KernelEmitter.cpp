//===- KernelEmitter.cpp - a gpuc.fusion as one CUDA C++ kernel -----------===//
//
// Values are computed "at an index": `at(v, idx)` emits the statements that
// compute element `idx` (a C++ expression of v's linear index) of `v` and
// returns the register that holds it. Kernel inputs are loads; ops inside the
// region translate the index to their operands' (broadcast, transpose,
// slice, gather, windows...) and combine the operands' registers. Results are
// memoized per (value, index) within a C++ scope, so a value read twice at
// the same position is computed once.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <numeric>

using namespace mlir;
using namespace mlir::gpuc;

StringRef mlir::gpuc::storageCType(Type elementType) {
  if (elementType.isF32())
    return "float";
  if (elementType.isInteger(64))
    return "int64_t";
  if (elementType.isInteger(32))
    return "int32_t";
  if (elementType.isInteger(8))
    return "signed char";
  if (elementType.isInteger(1))
    return "bool";
  if (elementType.isF16())
    return "gpuc::f16";
  if (elementType.isBF16())
    return "gpuc::bf16";
  return "";
}

StringRef mlir::gpuc::registerCType(Type elementType) {
  if (isa<FloatType>(elementType))
    return "float";
  return storageCType(elementType);
}

namespace {

/// Whether every input of `c` is one of the kernel's inputs (so a read is
/// one load from the input that holds the element: concatOfArguments).
bool concatenatesKernelInputs(ConcatOp c) {
  return llvm::all_of(c.getInputs(),
                      [](Value in) { return isa<BlockArgument>(in); });
}

/// `pattern` with {0}, {1}, ... replaced by `args` ({{ is a brace): what
/// llvm::formatv does for plain strings, without parsing a format each
/// time, for the emitter's hottest helpers (the fusion pass emits every
/// candidate kernel).
std::string substitute(StringRef pattern, ArrayRef<StringRef> args) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '{' && i + 2 < pattern.size() && isdigit(pattern[i + 1]) &&
               pattern[i + 2] == '}') {
      out += args[pattern[i + 1] - '0'];
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

/// The CPU's loops over a line of elements: accumulators per lane of a
/// group (a reduction's order is then fixed by the text), and the shortest
/// innermost dimension worth a loop of its own.
constexpr int64_t kCpuLanes = 8;
constexpr int64_t kCpuMinLine = 8;
/// `expr`, a float, rounded to `type` when that is f16 or bf16.
std::string rounded(Type type, const std::string &expr) {
  if (type.isF16())
    return "gpuc::roundF16(" + expr + ")";
  if (type.isBF16())
    return "gpuc::roundBF16(" + expr + ")";
  return expr;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }
bool isFloat(Value v) { return isa<FloatType>(elementOf(v)); }

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

std::string literal(double value, Type type) {
  if (isa<FloatType>(type)) {
    if (std::isnan(value))
      return "NAN";
    if (std::isinf(value))
      return value > 0 ? "INFINITY" : "(-INFINITY)";
    return llvm::formatv("{0:e9}f", value).str();
  }
  if (type.isInteger(1))
    return value != 0 ? "true" : "false";
  return llvm::formatv("(({0}){1}LL)", storageCType(type), (int64_t)value)
      .str();
}

/// The window geometry shared by the pooling ops and their gradients.
struct Window {
  ArrayRef<int64_t> kernel, strides, pads;
  bool countIncludePad = false;
};

class Emitter {
public:
  explicit Emitter(FusionOp fusion) : fusion(fusion) {}
  FailureOr<EmittedKernel> run(StringRef name);

private:
  using Key = std::pair<void *, std::string>;
  using CoordKey = std::pair<std::string, std::vector<int64_t>>;

  void line(const Twine &text) {
    body.append(2 * depth, ' ');
    text.print(bodyStream);
    body += '\n';
  }
  std::string fresh(StringRef prefix) { return (prefix + Twine(next++)).str(); }
  void open(const Twine &header) {
    line(header + " {");
    ++depth;
    pushScope();
  }
  void close() {
    popScope();
    --depth;
    line("}");
  }
  /// What is remembered from here on is forgotten at popScope (a block's
  /// braces, or a stretch of text emitted twice, once per target).
  void pushScope() {
    scopes.emplace_back();
    coordScopes.emplace_back();
  }
  void popScope() {
    for (const Key &key : scopes.back())
      memo.erase(key);
    scopes.pop_back();
    for (const CoordKey &key : coordScopes.back())
      coordMemo.erase(key);
    coordScopes.pop_back();
  }
  void remember(Value v, const std::string &idx, const std::string &reg) {
    Key key{v.getAsOpaquePointer(), idx};
    memo[key] = reg;
    scopes.back().push_back(key);
  }
  /// Declares a register holding `expr` and returns its name. An f16 or
  /// bf16 value is computed in f32 and rounded to its type, so a fused
  /// kernel computes what the op-by-op interpreter does; `exact` (a load)
  /// needs no rounding.
  std::string define(Value v, const std::string &expr, bool exact = false) {
    std::string reg = fresh("v");
    std::string value = exact ? expr : rounded(elementOf(v), expr);
    line(substitute("const {0} {1} = {2};",
                    {registerCType(elementOf(v)), reg, value}));
    return reg;
  }
  /// Declares an index register.
  std::string index(const std::string &expr) {
    std::string reg = fresh("i");
    line(substitute("const gidx {0} = {1};", {reg, expr}));
    return reg;
  }
  /// The coordinates of linear index `idx` in `shape`.
  SmallVector<std::string> unravel(const std::string &idx,
                                   ArrayRef<int64_t> shape) {
    // An index built from known coordinates, or already unravelled in this
    // scope, gives its coordinates back without any division.
    CoordKey key{idx, std::vector<int64_t>(shape.begin(), shape.end())};
    auto known = coordMemo.find(key);
    if (known != coordMemo.end())
      return known->second;
    // Known in a shape with the same leading dimensions (a row kernel's
    // [n, c, h*w] for an NCHW tensor): those coordinates are taken as they
    // are, and only the trailing ones are unravelled from theirs.
    for (auto it = coordMemo.lower_bound({idx, {}});
         it != coordMemo.end() && it->first.first == idx; ++it) {
      ArrayRef<int64_t> other = it->first.second;
      size_t common = 0;
      while (common < other.size() && common < shape.size() &&
             other[common] == shape[common])
        ++common;
      if (common == 0 || common == shape.size() || common == other.size() ||
          getNumElements(other) != getNumElements(shape))
        continue;
      SmallVector<std::string> coords(it->second.begin(),
                                      it->second.begin() + common);
      ArrayRef<std::string> knownRest = ArrayRef(it->second).drop_front(common);
      std::string rest = knownRest.size() == 1
                             ? knownRest[0]
                             : raveled(knownRest, other.drop_front(common));
      llvm::append_range(coords, unravel(rest, shape.drop_front(common)));
      rememberCoords(key, coords);
      return coords;
    }
    SmallVector<int64_t> strides = stridesOf(shape);
    SmallVector<std::string> coords;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) {
        coords.push_back("0");
        continue;
      }
      std::string e = strides[d] == 1
                          ? idx
                          : llvm::formatv("({0} / {1})", idx, strides[d]).str();
      if (d > 0)
        e = llvm::formatv("({0} % {1})", e, shape[d]).str();
      if (e == idx) {
        coords.push_back(idx);
        continue;
      }
      ++divisions;
      coords.push_back(index(e));
    }
    rememberCoords(key, coords);
    return coords;
  }
  void rememberCoords(const CoordKey &key, ArrayRef<std::string> coords) {
    coordMemo[key] = SmallVector<std::string>(coords);
    coordScopes.back().push_back(key);
  }
  /// An index register for `coords` in `shape`, whose coordinates are known.
  std::string raveled(ArrayRef<std::string> coords, ArrayRef<int64_t> shape) {
    std::string reg = index(ravel(coords, shape));
    rememberCoords({reg, std::vector<int64_t>(shape.begin(), shape.end())},
                   coords);
    return reg;
  }
  std::string ravel(ArrayRef<std::string> coords, ArrayRef<int64_t> shape) {
    SmallVector<int64_t> strides = stridesOf(shape);
    std::string e;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1 || coords[d] == "0")
        continue;
      if (!e.empty())
        e += " + ";
      e += strides[d] == 1
               ? coords[d]
               : llvm::formatv("{0} * {1}", coords[d], strides[d]).str();
    }
    return e.empty() ? "0" : "(" + e + ")";
  }

  /// Emits a loop twice when the CPU is better served by another form: the
  /// portable loop (a block's threads stride over a flat range) for the GPU,
  /// and `cpu` under GPUC_CPU. With `onlyIfDivides`, the portable loop alone
  /// is kept unless its body unravels an index by division.
  LogicalResult splitByTarget(function_ref<LogicalResult()> portable,
                              function_ref<LogicalResult()> cpu,
                              bool onlyIfDivides);
  /// The CPU's loop over the flat range [begin, end) of `shape`: a loop over
  /// lines (the innermost dimension, or the trailing dimensions that make a
  /// line kCpuMinLine long) whose outer coordinates are unravelled once per
  /// line, and an inner loop over the line that the host compiler
  /// vectorizes. The flat index is the register `flat`,
  /// with its coordinates in `shape` known. How the line's loop runs:
  enum class CpuLine {
    /// vectorized along the line;
    Simd,
    /// vectorized along the line kCpuLanes elements at a time, `emitBody`
    /// receiving the lane register ("lane"): a reduction adds element k of
    /// a group to its accumulator k, so the sum's order is fixed by the
    /// text, not by the vectorizer;
    Lanes,
    /// in order, element by element (the body vectorizes across something
    /// else: a column reduction's rows).
    Plain,
  };
  /// `boundsDivisor` divides both `begin` and `end` (1 when nothing is
  /// known): lines that are all whole and a multiple of kCpuLanes long need
  /// no loop for a last, partial group of lanes.
  LogicalResult cpuLoopNest(const std::string &flat, const std::string &begin,
                            const std::string &end, int64_t boundsDivisor,
                            ArrayRef<int64_t> shape, CpuLine mode,
                            function_ref<LogicalResult(StringRef)> emitBody);
  FailureOr<std::string> at(Value v, const std::string &idx);
  FailureOr<std::string> compute(Operation *op, Value v,
                                 const std::string &idx);
  FailureOr<std::string> pool(Operation *op, Value v, const std::string &idx);
  std::string concatOfArguments(ConcatOp c, Value v,
                                ArrayRef<std::string> coords);
  /// Declares and sets the pointer to the input of `c` that holds
  /// `coordinate` along its axis (with that input's extent and first
  /// coordinate there), once per scope; returns its name.
  std::string selectConcatInput(ConcatOp c, const std::string &coordinate);
  std::string windowCount(const std::string &top, const std::string &left,
                          const Window &w, ArrayRef<int64_t> in);
  FailureOr<std::string> poolBackward(Operation *op, Value v,
                                      const std::string &idx);
  LogicalResult storeResults(ValueRange values, const std::string &idx);
  /// Per result: the operand it overwrites in place (gpuc.in_place), or -1.
  SmallVector<int64_t> inPlace;
  /// Blocks per row of a row kernel (rowKernelSplits).
  int64_t splits = 1;
  /// Index divisions unravel has emitted so far.
  unsigned divisions = 0;

  FusionOp fusion;
  std::string body;
  /// Writes to `body` (unbuffered): line() prints a Twine without first
  /// building a string of it.
  llvm::raw_string_ostream bodyStream{body};
  int depth = 1;
  unsigned next = 0;
  std::map<Key, std::string> memo;
  std::vector<std::vector<Key>> scopes{1};
  /// In a row kernel, a reduction's result is one register per block,
  /// whatever index of it is asked for.
  DenseMap<void *, std::string> rowValues;
  std::map<CoordKey, SmallVector<std::string>> coordMemo;
  std::vector<std::vector<CoordKey>> coordScopes{1};
};

LogicalResult Emitter::splitByTarget(function_ref<LogicalResult()> portable,
                                     function_ref<LogicalResult()> cpu,
                                     bool onlyIfDivides) {
  size_t mark = body.size();
  unsigned divided = divisions;
  if (failed(portable()))
    return failure();
  if (onlyIfDivides && divisions == divided)
    return success();
  std::string portableText = body.substr(mark);
  body.resize(mark);
  line("#ifdef GPUC_CPU");
  if (failed(cpu()))
    return failure();
  line("#else");
  body += portableText;
  line("#endif");
  return success();
}

LogicalResult
Emitter::cpuLoopNest(const std::string &flat, const std::string &begin,
                     const std::string &end, int64_t boundsDivisor,
                     ArrayRef<int64_t> shape, CpuLine mode,
                     function_ref<LogicalResult(StringRef)> emitBody) {
  // A line is the innermost dimension, or as many trailing ones as make it
  // kCpuMinLine long (coordinates inside it are then unravelled).
  size_t lineRank = 1;
  int64_t inner = shape.back();
  while (inner < kCpuMinLine && lineRank < shape.size())
    inner *= shape[shape.size() - ++lineRank];
  std::string lineIdx = flat + "Line", pos = flat + "At";
  open(llvm::formatv("for (gidx {0} = {1} / {2}; {0} * {2} < {3}; ++{0})",
                     lineIdx, begin, inner, end));
  line(llvm::formatv("const gidx {0}Begin = {1} * {2} < {3} ? {3} - {1} * "
                     "{2} : 0;",
                     pos, lineIdx, inner, begin));
  line(llvm::formatv("const gidx {0}End = {1} - {2} * {3} < {3} ? {1} - {2} "
                     "* {3} : {3};",
                     pos, end, lineIdx, inner));
  SmallVector<std::string> outer = unravel(lineIdx, shape.drop_back(lineRank));
  auto inside = [&](StringRef lane) {
    line(llvm::formatv("const gidx {0} = {1} * {2} + {3};", flat, lineIdx,
                       inner, pos));
    SmallVector<std::string> coords(outer);
    llvm::append_range(coords, unravel(pos, shape.take_back(lineRank)));
    rememberCoords({flat, std::vector<int64_t>(shape.begin(), shape.end())},
                   coords);
    return emitBody(lane);
  };
  if (mode != CpuLine::Lanes) {
    if (mode == CpuLine::Simd)
      line("GPUC_INDEPENDENT_ITERATIONS");
    open(llvm::formatv("for (gidx {0} = {0}Begin; {0} < {0}End; ++{0})", pos));
    if (failed(inside("")))
      return failure();
    close();
  } else {
    line(llvm::formatv("gidx {0}Group = {0}Begin;", pos));
    open(llvm::formatv("for (; {0}Group + {1} <= {0}End; {0}Group += {1})", pos,
                       kCpuLanes));
    line("GPUC_INDEPENDENT_ITERATIONS");
    open(llvm::formatv("for (gidx lane = 0; lane < {0}; ++lane)", kCpuLanes));
    line(llvm::formatv("const gidx {0} = {0}Group + lane;", pos));
    if (failed(inside("lane")))
      return failure();
    close();
    close();
    // The line's last elements, fewer than a group, go to the first lanes
    // (unless every line is whole and its groups are all full).
    if (boundsDivisor % inner != 0 || inner % kCpuLanes != 0) {
      open(llvm::formatv(
          "for (gidx lane = 0; {0}Group + lane < {0}End; ++lane)", pos));
      line(llvm::formatv("const gidx {0} = {0}Group + lane;", pos));
      if (failed(inside("lane")))
        return failure();
      close();
    }
  }
  close();
  return success();
}

FailureOr<std::string> Emitter::at(Value v, const std::string &idx) {
  auto it = memo.find({v.getAsOpaquePointer(), idx});
  if (it != memo.end())
    return it->second;
  auto row = rowValues.find(v.getAsOpaquePointer());
  if (row != rowValues.end())
    return row->second;
  std::string reg;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    reg = define(
        v, substitute("in{0}[{1}]", {std::to_string(arg.getArgNumber()), idx}),
        /*exact=*/true);
  } else {
    FailureOr<std::string> computed = compute(v.getDefiningOp(), v, idx);
    if (failed(computed))
      return failure();
    reg = *computed;
  }
  remember(v, idx, reg);
  return reg;
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
      .Case([&](ExpOp) { return unary(fmt("expf({0})")); })
      .Case([&](LogOp) { return unary(fmt("logf({0})")); })
      .Case([&](SqrtOp) { return unary(fmt("sqrtf({0})")); })
      .Case([&](RsqrtOp) { return unary(fmt("rsqrtf({0})")); })
      .Case([&](ReciprocalOp) { return unary(fmt("(1.0f / {0})")); })
      .Case([&](TanhOp) { return unary(fmt("tanhf({0})")); })
      .Case([&](ErfOp) { return unary(fmt("erff({0})")); })
      .Case(
          [&](SigmoidOp) { return unary(fmt("(1.0f / (1.0f + expf(-{0})))")); })
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
        return unary([type](const std::string &x) {
          return "(" + type + ")(" + x + ")";
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
                             "long)({3}), {4}) ? {5} * {6} : 0.0f)",
                             *seed, *step, d.getStream(), idx,
                             literal(ratio, Float32Type::get(op->getContext())),
                             *x,
                             literal(1.0 / (1.0 - ratio),
                                     Float32Type::get(op->getContext())))
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

/// A concatenation of the kernel's inputs read at `coords`: a chain of
/// comparisons picks the input that holds the coordinate along the axis
/// (selectConcatInput), and one load reads it. Only the axis's extent tells
/// the inputs' layouts apart, so the coordinates before and after the axis
/// ravel once for all of them. (The general form, a load per branch, would
/// repeat the index arithmetic for every input at every read: DenseNet's
/// concatenations of up to 32 inputs, fused into the batch norms that read
/// them, were a third of its kernel source.)
std::string Emitter::concatOfArguments(ConcatOp c, Value v,
                                       ArrayRef<std::string> coords) {
  int64_t axis = c.getAxis();
  ArrayRef<int64_t> shape = shapeOf(v);
  std::string outer =
                  index(ravel(coords.take_front(axis), shape.take_front(axis))),
              inner = index(ravel(coords.drop_front(axis + 1),
                                  shape.drop_front(axis + 1)));
  std::string from = selectConcatInput(c, coords[axis]);
  std::string at = index(llvm::formatv(
      "({0} * {1}Extent + {2} - {1}Start) * {3} + {4}", outer, from,
      coords[axis], getNumElements(shape.drop_front(axis + 1)), inner));
  return define(v, from + "[" + at + "]", /*exact=*/true);
}

std::string Emitter::selectConcatInput(ConcatOp c,
                                       const std::string &coordinate) {
  // Remembered like a value: a row kernel selects once per row, before its
  // loops, for a concatenation along an axis it keeps.
  std::string key = "concat input at " + coordinate;
  auto known = memo.find({c.getResult().getAsOpaquePointer(), key});
  if (known != memo.end())
    return known->second;
  int64_t axis = c.getAxis();
  std::string from = fresh("p");
  line(llvm::formatv("const {0} *{1}; gidx {1}Extent, {1}Start;",
                     storageCType(elementOf(c.getResult())), from));
  int64_t start = 0;
  for (auto [k, input] : llvm::enumerate(c.getInputs())) {
    int64_t extent = shapeOf(input)[axis];
    bool last = k + 1 == c.getInputs().size();
    std::string test =
        last ? (k == 0 ? "" : "else")
             : llvm::formatv("{0}if ({1} < {2})", k == 0 ? "" : "else ",
                             coordinate, start + extent)
                   .str();
    line(llvm::formatv("{0} {{ {1} = in{2}; {1}Extent = {3}; {1}Start = {4}; }",
                       test, from, cast<BlockArgument>(input).getArgNumber(),
                       extent, start));
    start += extent;
  }
  remember(c.getResult(), key, from);
  return from;
}

Window windowOf(Operation *op) {
  if (auto p = dyn_cast<MaxPool2DOp>(op))
    return {p.getKernel(), p.getStrides(), p.getPads()};
  if (auto p = dyn_cast<MaxPool2DArgmaxOp>(op))
    return {p.getKernel(), p.getStrides(), p.getPads()};
  if (auto p = dyn_cast<AvgPool2DOp>(op))
    return {p.getKernel(), p.getStrides(), p.getPads(), p.getCountIncludePad()};
  if (auto p = dyn_cast<MaxPool2DBackwardOp>(op))
    return {p.getKernel(), p.getStrides(), p.getPads()};
  auto p = cast<AvgPool2DBackwardOp>(op);
  return {p.getKernel(), p.getStrides(), p.getPads(), p.getCountIncludePad()};
}

std::string Emitter::windowCount(const std::string &top,
                                 const std::string &left, const Window &w,
                                 ArrayRef<int64_t> in) {
  // The positions of the window starting at (top, left) that count: inside
  // the input, or inside the padded input with count_include_pad.
  int64_t bottom = in[2] + (w.countIncludePad ? w.pads[2] : 0);
  int64_t right = in[3] + (w.countIncludePad ? w.pads[3] : 0);
  auto start = [&](const std::string &c) {
    return w.countIncludePad ? c : "gpuc::maxInt<gidx>(" + c + ", 0)";
  };
  return index(llvm::formatv("(gpuc::minInt<gidx>({0} + {1}, {2}) - {3}) * "
                             "(gpuc::minInt<gidx>({4} + {5}, {6}) - {7})",
                             top, w.kernel[0], bottom, start(top), left,
                             w.kernel[1], right, start(left)));
}

/// The max_pool2d (or max_pool2d_argmax) beside `op` in its kernel: the
/// other half of the same scan, or null.
static Operation *maxPoolTwin(Operation *op) {
  auto same = [&](auto a, auto b) {
    return a.getInput() == b.getInput() && a.getKernel() == b.getKernel() &&
           a.getStrides() == b.getStrides() && a.getPads() == b.getPads();
  };
  for (Operation *user : op->getOperand(0).getUsers()) {
    if (user->getBlock() != op->getBlock())
      continue;
    if (auto max = dyn_cast<MaxPool2DOp>(op))
      if (auto argmax = dyn_cast<MaxPool2DArgmaxOp>(user);
          argmax && same(max, argmax))
        return argmax;
    if (auto argmax = dyn_cast<MaxPool2DArgmaxOp>(op))
      if (auto max = dyn_cast<MaxPool2DOp>(user); max && same(max, argmax))
        return max;
  }
  return nullptr;
}

FailureOr<std::string> Emitter::pool(Operation *op, Value v,
                                     const std::string &idx) {
  Window w = windowOf(op);
  Value input = op->getOperand(0);
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(v);
  // Max pooling and its argmax over the same windows share one scan: each
  // input is loaded (or computed) once, and the twin's value is remembered
  // at this index. The argmax tracks the first maximum's position in the
  // window: the first position inside the input wins until a later one is
  // strictly greater.
  Operation *twin = maxPoolTwin(op);
  Operation *maxOp = isa<MaxPool2DOp>(op) ? op : twin;
  Operation *argmaxOp = isa<MaxPool2DArgmaxOp>(op) ? op : twin;
  SmallVector<std::string> coords = unravel(idx, out);
  std::string acc = fresh("acc"), best = fresh("best"),
              bestAt = fresh("bestAt");
  if (argmaxOp)
    line(llvm::formatv("float {0} = -INFINITY; int {1} = -1;", best, bestAt));
  // A maximum is exact in float; a sum accumulates in gpuc::Accumulator.
  if (maxOp || !argmaxOp)
    line(llvm::formatv("{0} {1} = {2};", maxOp ? "float" : "gpuc::Accumulator",
                       acc, maxOp ? "-INFINITY" : "0"));
  std::string top = index(
      llvm::formatv("{0} * {1} - {2}", coords[2], w.strides[0], w.pads[0]));
  std::string left = index(
      llvm::formatv("{0} * {1} - {2}", coords[3], w.strides[1], w.pads[1]));
  // An axis without padding whose last window ends inside the input needs
  // no bounds check: the window loop then has a fixed trip count without
  // branches, which the host compiler unrolls and vectorizes.
  auto inside = [&](int axis) {
    return w.pads[axis] == 0 &&
           (out[2 + axis] - 1) * w.strides[axis] + w.kernel[axis] <=
               in[2 + axis];
  };
  std::string ky = fresh("ky"), kx = fresh("kx");
  open(llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", ky, w.kernel[0]));
  std::string iy = index(top + " + " + ky);
  if (!inside(0))
    line(llvm::formatv("if ({0} < 0 || {0} >= {1}) continue;", iy, in[2]));
  open(llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", kx, w.kernel[1]));
  std::string ix = index(left + " + " + kx);
  if (!inside(1))
    line(llvm::formatv("if ({0} < 0 || {0} >= {1}) continue;", ix, in[3]));
  FailureOr<std::string> x =
      at(input, raveled({coords[0], coords[1], iy, ix}, in));
  if (failed(x))
    return failure();
  if (argmaxOp) {
    // Without a branch: which position of a window holds its maximum is
    // data, and a jump on it mispredicts on the CPU.
    std::string take = fresh("take");
    line(llvm::formatv("const bool {0} = {1} < 0 || {2} > {3};", take, bestAt,
                       *x, best));
    line(llvm::formatv("{0} = gpuc::selectFloat({1}, {2}, {0});", best, take,
                       *x));
    line(llvm::formatv("{0} = {1} ? (int)({2} * {3} + {4}) : {0};", bestAt,
                       take, ky, w.kernel[1], kx));
  }
  if (maxOp)
    line(llvm::formatv("{0} = gpuc::selectFloat({1} > {0}, {1}, {0});", acc,
                       *x));
  else if (!argmaxOp)
    line(llvm::formatv("{0} += {1};", acc, *x));
  close();
  close();
  std::string argmaxReg, maxReg;
  if (argmaxOp) {
    Value result = argmaxOp->getResult(0);
    argmaxReg =
        define(result, llvm::formatv("({0})({1} < 0 ? 0 : {1})",
                                     registerCType(elementOf(result)), bestAt)
                           .str());
  }
  if (maxOp)
    maxReg = define(maxOp->getResult(0), "(float)" + acc);
  if (twin)
    remember(twin->getResult(0), idx, twin == argmaxOp ? argmaxReg : maxReg);
  if (argmaxOp || maxOp)
    return op == argmaxOp ? argmaxReg : maxReg;
  // Every window inside the input counts all its positions.
  std::string divisor = inside(0) && inside(1)
                            ? std::to_string(w.kernel[0] * w.kernel[1])
                            : windowCount(top, left, w, in);
  return define(v, llvm::formatv("(float)({0} / (gpuc::Accumulator)({1} > 0 ? "
                                 "{1} : 1))",
                                 acc, divisor)
                       .str());
}

FailureOr<std::string> Emitter::poolBackward(Operation *op, Value v,
                                             const std::string &idx) {
  // dx at (p, h, w) gathers the gradient of every window that contains it:
  // windows oy in [ceil((h + pad - k + 1) / s), floor((h + pad) / s)]. Max
  // pooling's gradient goes to the position its `indices` names.
  Window w = windowOf(op);
  auto maxOp = dyn_cast<MaxPool2DBackwardOp>(op);
  Value dy = maxOp ? maxOp.getGradOutput() : op->getOperand(0);
  ArrayRef<int64_t> in = shapeOf(v), out = shapeOf(dy);
  SmallVector<std::string> coords = unravel(idx, in);
  const std::string &h = coords[2], &x = coords[3];
  // Windows that tile the input exactly (stride = kernel, no padding, the
  // output covering every row and column): the one window holding (h, x)
  // is known without a search and needs no bounds checks.
  bool tiles = maxOp && llvm::all_of(llvm::seq(0, 4),
                                     [&](int i) { return w.pads[i] == 0; });
  for (int a = 0; tiles && a < 2; ++a)
    tiles =
        w.strides[a] == w.kernel[a] && out[2 + a] * w.kernel[a] == in[2 + a];
  if (tiles) {
    std::string oy = index(llvm::formatv("{0} / {1}", h, w.kernel[0]));
    std::string ox = index(llvm::formatv("{0} / {1}", x, w.kernel[1]));
    std::string o = raveled({coords[0], coords[1], oy, ox}, out);
    FailureOr<std::string> position = at(maxOp.getIndices(), o);
    FailureOr<std::string> g = at(dy, o);
    if (failed(position) || failed(g))
      return failure();
    return define(v, llvm::formatv("gpuc::selectFloat((int){0} == ({1} - {2} "
                                   "* {3}) * {4} + ({5} - {6} * {4}), {7}, "
                                   "0.0f)",
                                   *position, h, oy, w.kernel[0], w.kernel[1],
                                   x, ox, *g)
                         .str());
  }
  std::string acc = fresh("acc");
  line("gpuc::Accumulator " + acc + " = 0;");
  auto range = [&](const std::string &c, int axis, std::string &lo,
                   std::string &hi) {
    int64_t k = w.kernel[axis], s = w.strides[axis], pad = w.pads[axis];
    // Smallest o with o*s - pad + k - 1 >= c, largest with o*s - pad <= c.
    lo = index(llvm::formatv(
        "gpuc::maxInt<gidx>(0, ({0} + {1} - {2} + {3} - 1) / {3})", c, pad,
        k - 1, s));
    hi = index(llvm::formatv("gpuc::minInt<gidx>({0} - 1, ({1} + {2}) / {3})",
                             out[2 + axis], c, pad, s));
  };
  std::string loY, hiY, loX, hiX;
  range(h, 0, loY, hiY);
  range(x, 1, loX, hiX);
  std::string oy = fresh("oy"), ox = fresh("ox");
  open(llvm::formatv("for (gidx {0} = {1}; {0} <= {2}; ++{0})", oy, loY, hiY));
  open(llvm::formatv("for (gidx {0} = {1}; {0} <= {2}; ++{0})", ox, loX, hiX));
  std::string top =
      index(llvm::formatv("{0} * {1} - {2}", oy, w.strides[0], w.pads[0]));
  std::string left =
      index(llvm::formatv("{0} * {1} - {2}", ox, w.strides[1], w.pads[1]));
  std::string o = raveled({coords[0], coords[1], oy, ox}, out);
  FailureOr<std::string> g = at(dy, o);
  if (failed(g))
    return failure();
  if (maxOp) {
    FailureOr<std::string> position = at(maxOp.getIndices(), o);
    if (failed(position))
      return failure();
    line(llvm::formatv("if ((int){0} == ({1} - {2}) * {3} + {4} - {5}) {6} += "
                       "{7};",
                       *position, h, top, w.kernel[1], x, left, acc, *g));
  } else {
    std::string count = windowCount(top, left, w, in);
    line(llvm::formatv("{0} += {1} / (gpuc::Accumulator)({2} > 0 ? {2} : 1);",
                       acc, *g, count));
  }
  close();
  close();
  return define(v, "(float)" + acc);
}

LogicalResult Emitter::storeResults(ValueRange values, const std::string &idx) {
  auto yield = cast<YieldOp>(fusion.getBodyBlock().getTerminator());
  // An operand that a result stored here overwrites in place is loaded
  // before anything is stored (gpuc-plan-memory only picks operands read at
  // the stored index, so these loads are all its reads at this index).
  for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
    if (inPlace[k] >= 0 && llvm::is_contained(values, yielded) &&
        failed(at(fusion.getBodyBlock().getArgument(inPlace[k]), idx)))
      return failure();
  for (Value value : values) {
    FailureOr<std::string> reg = at(value, idx);
    if (failed(reg))
      return failure();
    // A value yielded twice is written to each of its outputs.
    for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
      if (yielded == value)
        line(llvm::formatv("out{0}[{1}] = {2};", k, idx, *reg));
  }
  return success();
}

/// The axes a reduction reduces.
SmallVector<int64_t> reducedAxes(Operation *reduce) {
  if (auto r = dyn_cast<ReduceSumOp>(reduce))
    return SmallVector<int64_t>(r.getAxes());
  if (auto r = dyn_cast<ReduceMaxOp>(reduce))
    return SmallVector<int64_t>(r.getAxes());
  return SmallVector<int64_t>(cast<ReduceMeanOp>(reduce).getAxes());
}

FailureOr<EmittedKernel> Emitter::run(StringRef name) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  SmallVector<Operation *> reductions;
  for (Operation &op : block.without_terminator())
    if (isReduction(&op))
      reductions.push_back(&op);

  EmittedKernel kernel;
  kernel.name = name.str();
  // Blocks of the CPU's launch, when not the GPU's grid.
  int64_t cpuGrid = 0;
  inPlace.assign(fusion.getNumResults(), -1);
  if (auto attr = fusion->getAttrOfType<DenseI64ArrayAttr>(
          GpucDialect::kInPlaceAttrName)) {
    if (attr.size() != fusion.getNumResults())
      return fusion.emitOpError() << "'" << GpucDialect::kInPlaceAttrName
                                  << "' needs one entry per result";
    inPlace.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  }
  if (reductions.empty()) {
    // Elementwise. Values written with the same number of elements share an
    // iteration space; several spaces (the updates of many parameters, a
    // multi-tensor kernel) are segments of the grid, each block owning a
    // tile of one segment.
    SmallVector<std::pair<int64_t, SmallVector<Value>>> segments;
    for (Value value : yield.getValues()) {
      int64_t n = getNumElements(shapeOf(value));
      auto it = llvm::find_if(segments, [&](auto &s) { return s.first == n; });
      if (it == segments.end())
        segments.push_back({n, {value}});
      else
        it->second.push_back(value);
    }
    int64_t base = 0;
    for (auto &[elements, values] : segments) {
      int64_t tile = kPointwiseTile;
      int64_t tiles = std::max<int64_t>(1, (elements + tile - 1) / tile);
      bool only = segments.size() == 1;
      if (!only)
        open(llvm::formatv("if (blockIdx.x >= {0} && blockIdx.x < {1})", base,
                           base + tiles));
      line(llvm::formatv("const gidx begin = ((gidx)blockIdx.x - {0}) * {1};",
                         base, tile));
      line(llvm::formatv("const gidx end = begin + {0} < {1} ? begin + "
                         "{0} : {1};",
                         tile, elements));
      auto portable = [&]() -> LogicalResult {
        line("GPUC_INDEPENDENT_ITERATIONS");
        open("for (gidx i = begin + threadIdx.x; i < end; i += blockDim.x)");
        if (failed(storeResults(values, "i")))
          return failure();
        close();
        return success();
      };
      // The CPU walks the lines of the first result of more than one
      // dimension, when the flat loop would divide to find coordinates.
      auto lined =
          llvm::find_if(values, [](Value v) { return shapeOf(v).size() > 1; });
      if (lined == values.end()
              ? failed(portable())
              : failed(splitByTarget(
                    portable,
                    [&] {
                      return cpuLoopNest(
                          "i", "begin", "end", /*boundsDivisor=*/1,
                          shapeOf(*lined), CpuLine::Simd,
                          [&](StringRef) { return storeResults(values, "i"); });
                    },
                    /*onlyIfDivides=*/true)))
        return failure();
      if (!only)
        close();
      base += tiles;
    }
    kernel.grid = base;
  } else {
    // A row kernel: one block per element of the kept axes ("row"); every
    // reduction reduces the same axes of the same shape. Each reduction is a
    // pass over the row (threads stride, then a block reduction), after
    // which its value is a register of the block; values written per row
    // are stored by thread 0, values of the full shape in a last pass.
    ArrayRef<int64_t> full = shapeOf(reductions[0]->getOperand(0));
    SmallVector<int64_t> axes = reducedAxes(reductions[0]);
    for (Operation *reduce : reductions)
      if (shapeOf(reduce->getOperand(0)) != full || reducedAxes(reduce) != axes)
        return reduce->emitOpError()
               << "reduces other axes or another shape than the kernel's "
                  "first reduction; a kernel's reductions share their rows";
    SmallVector<int64_t> keptShape, rowShape;
    for (size_t d = 0; d < full.size(); ++d)
      (llvm::is_contained(axes, (int64_t)d) ? rowShape : keptShape)
          .push_back(full[d]);
    int64_t rows = getNumElements(keptShape);
    int64_t rowLength = getNumElements(rowShape);
    SmallVector<Value> perRow, perElement;
    for (Value value : yield.getValues()) {
      int64_t n = getNumElements(shapeOf(value));
      if (n == rows)
        perRow.push_back(value);
      else if (shapeOf(value) == full)
        perElement.push_back(value);
      else
        return fusion.emitOpError()
               << "writes " << value.getType()
               << ", neither one value per row nor the reduced shape";
    }
    // A reduction's result lives in a register of its row, read whatever
    // index asks for it: every op between it and a store must read it at
    // its own row, so only pointwise ops, reshapes (the linear index stays)
    // and broadcasts back to the reduced shape may follow. A permutation
    // (a transpose of the per-row values, as a gather's gradient has) would
    // store row o's value where another row's belongs.
    DenseSet<Value> fromRows;
    for (Operation &op : block.without_terminator()) {
      bool readsRows = llvm::any_of(
          op.getOperands(), [&](Value v) { return fromRows.contains(v); });
      if (!readsRows) {
        if (isReduction(&op))
          fromRows.insert(op.getResult(0));
        continue;
      }
      auto broadcast = dyn_cast<BroadcastOp>(op);
      if (!isPointwise(&op) && !isReduction(&op) && !isa<ReshapeOp>(op) &&
          !(broadcast && shapeOf(broadcast.getResult()) == full))
        return op.emitOpError()
               << "reads a row kernel's per-row value at other positions than "
                  "its row; it needs a kernel of its own";
      for (Value result : op.getResults())
        fromRows.insert(result);
    }
    // Per-element values that depend on no reduction (and overwrite no
    // operand) are stored in the first pass over the row, which visits
    // every element once (split rows: the first launch, each block its
    // chunk), so only values computed from a reduction need the last pass.
    // A dropout gradient summed over the batch then draws its mask once,
    // not once per pass.
    DenseSet<Operation *> afterReduction;
    for (Operation &op : block.without_terminator())
      if (isReduction(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && afterReduction.contains(def);
          }))
        afterReduction.insert(&op);
    // A value written over an operand stays in the last pass: the row's
    // reductions read that operand until then (canOverwrite's contract).
    auto writtenInPlace = [&](Value v) {
      for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
        if (yielded == v && inPlace[k] >= 0)
          return true;
      return false;
    };
    SmallVector<Value> firstPass;
    llvm::erase_if(perElement, [&](Value v) {
      Operation *def = v.getDefiningOp();
      if ((def && afterReduction.contains(def)) || writtenInPlace(v))
        return false;
      firstPass.push_back(v);
      return true;
    });
    // A reduction's level: 0 when it reads no reduction's result, else one
    // more than the highest level it reads.
    DenseMap<Operation *, int64_t> levelAfter; // of ops after a reduction
    SmallVector<int64_t> levelOf;
    int64_t levels = 0;
    for (Operation &op : block.without_terminator()) {
      int64_t reads = -1;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp())
          if (levelAfter.count(def))
            reads = std::max(reads, levelAfter[def]);
      if (isReduction(&op)) {
        levelOf.push_back(reads + 1);
        levels = std::max(levels, reads + 2);
        levelAfter[&op] = reads + 1;
      } else if (reads >= 0) {
        levelAfter[&op] = reads;
      }
    }
    // Few long rows (batch norm's per-channel statistics) would leave most
    // of a GPU idle with one block per row: such a row is split into
    // `splits` chunks, one block each, and the kernel runs as one launch
    // per reduction (each block reduces its chunk into `partials`) plus a
    // last launch that writes the results. Every launch combines the
    // partials of the reductions before its own in the same order, so all
    // blocks of a row agree and replays are bit-identical.
    splits = rowKernelSplits(rows, rowLength);
    int64_t chunk = (rowLength + splits - 1) / splits;
    kernel.grid = std::max<int64_t>(1, rows) * splits;
    // Launches of a split kernel: one per reduction, one writing the
    // per-element values, then (when there are any) one writing the per-row
    // values, so that a per-row result may overwrite a per-row operand that
    // the per-element launch still reads in every block of the row.
    int64_t elementPhase = levels;
    int64_t rowPhase = !perRow.empty() && !perElement.empty() ? elementPhase + 1
                                                              : elementPhase;
    kernel.launches = splits > 1 ? rowPhase + 1 : 1;
    if (splits > 1)
      kernel.workspaceBytes = (int64_t)reductions.size() * rows * splits * 8;
    // Adjacent axes that are both kept or both reduced are one axis of the
    // iteration (batch norm's [N, C, H, W] over {0, 2, 3} is [N, C, H*W]
    // over {0, 2}), so an element's index costs one division less per
    // merged axis; the original coordinates are derived from the merged
    // ones (the host compiler drops those nobody reads).
    struct Run {
      bool reduced;
      int64_t size;
      SmallVector<int64_t> dims;
    };
    SmallVector<Run> runs;
    for (size_t d = 0; d < full.size(); ++d) {
      bool reduced = llvm::is_contained(axes, (int64_t)d);
      if (runs.empty() || runs.back().reduced != reduced)
        runs.push_back({reduced, 1, {}});
      runs.back().size *= full[d];
      runs.back().dims.push_back(full[d]);
    }
    SmallVector<int64_t> mergedFull, mergedKept, mergedRow;
    for (const Run &run : runs) {
      mergedFull.push_back(run.size);
      (run.reduced ? mergedRow : mergedKept).push_back(run.size);
    }
    // On the CPU, a row kernel whose rows are adjacent elements (its
    // innermost axis is kept: a bias gradient's sum over the batch, an
    // embedding's gradient) runs kCpuLanes rows per block, the row's loop
    // outside and the rows' lanes inside: the lanes load adjacent elements
    // and vectorize, where each row alone would gather elements a row's
    // length apart. Each row still adds its elements in order.
    bool columns = splits == 1 && !runs.back().reduced &&
                   runs.back().dims.back() % kCpuLanes == 0;
    SmallVector<std::string> kept;
    auto emitRows = [&](bool column) -> LogicalResult {
      // The part of the row this block covers: all of it, or its chunk.
      std::string rowBegin = "0", rowEnd = llvm::formatv("{0}", rowLength);
      // Divides both ends of the block's part of the row.
      int64_t rowBoundsDivisor =
          splits > 1 ? std::gcd(chunk, rowLength) : rowLength;
      if (column) {
        line(llvm::formatv("const gidx oGroup = (gidx)blockIdx.x * {0};",
                           kCpuLanes));
      } else if (splits > 1) {
        line(llvm::formatv("const gidx o = blockIdx.x / {0};", splits));
        line(llvm::formatv("const gidx part = blockIdx.x % {0};", splits));
        line(llvm::formatv("const gidx rowBegin = part * {0};", chunk));
        line(llvm::formatv("const gidx rowEnd = rowBegin + {0} < {1} ? "
                           "rowBegin + {0} : {1};",
                           chunk, rowLength));
        line("gpuc::Accumulator *partials = (gpuc::Accumulator *)workspace;");
        rowBegin = "rowBegin";
        rowEnd = "rowEnd";
      } else {
        line("const gidx o = blockIdx.x;");
      }
      // A column block's rows share every kept coordinate but the
      // innermost, which is the group's plus the lane (the group starts at
      // a multiple of kCpuLanes, which divides the innermost kept axis).
      SmallVector<std::string> keptGroup;
      if (column)
        keptGroup = unravel("oGroup", mergedKept);
      else
        kept = unravel("o", mergedKept);
      // A concatenation of inputs along a kept axis (DenseNet's batch norms
      // over the concatenated features) picks its input once per row, here,
      // rather than at each element of every pass over the row.
      if (!column) {
        std::map<int64_t, std::string> keptAxes;
        size_t d = 0, nk = 0;
        for (const Run &run : runs) {
          if (!run.reduced && run.dims.size() == 1)
            keptAxes[d] = kept[nk];
          nk += !run.reduced;
          d += run.dims.size();
        }
        fusion.getBody().walk([&](ConcatOp c) {
          auto axis = keptAxes.find(c.getAxis());
          if (axis != keptAxes.end() && shapeOf(c.getResult()) == full &&
              concatenatesKernelInputs(c))
            selectConcatInput(c, axis->second);
        });
      }
      // A column block's loop over its rows, innermost; `o` is the row.
      auto openRowLanes = [&] {
        line("GPUC_INDEPENDENT_ITERATIONS");
        open(llvm::formatv("for (gidx lane = 0; lane < {0}; ++lane)",
                           kCpuLanes));
        line("const gidx o = oGroup + lane;");
        kept = keptGroup;
        kept.back() = index(keptGroup.back() + " + lane");
        ArrayRef<int64_t> dims = runs.back().dims;
        if (dims.size() > 1) {
          SmallVector<std::string> coords = unravel(keptGroup.back(), dims);
          coords.back() = index(coords.back() + " + lane");
          rememberCoords(
              {kept.back(), std::vector<int64_t>(dims.begin(), dims.end())},
              coords);
        }
      };
      auto fullIndex = [&](StringRef r) {
        SmallVector<std::string> rcoords = unravel(r.str(), mergedRow);
        SmallVector<std::string> merged, coords;
        size_t nk = 0, nr = 0;
        for (const Run &run : runs) {
          merged.push_back(run.reduced ? rcoords[nr++] : kept[nk++]);
          if (run.dims.size() == 1)
            coords.push_back(merged.back());
          else
            llvm::append_range(coords, unravel(merged.back(), run.dims));
        }
        std::string idx = raveled(merged, mergedFull);
        rememberCoords({idx, std::vector<int64_t>(full.begin(), full.end())},
                       coords);
        return idx;
      };
      // The CPU walks a row by lines of its innermost merged axis
      // (cpuLoopNest) when those are long enough.
      bool cpuLines = !columns && getNumElements(mergedRow) >= kCpuMinLine;
      // The CPU's walk over a row: by lines of the merged axes, or of the
      // row's own axes when the body needs coordinates inside a merged axis
      // (a pooling gradient's row and column), which the lines of the row's
      // axes give without division.
      auto cpuRowNest = [&](CpuLine mode,
                            function_ref<LogicalResult(StringRef)> pass) {
        size_t mark = body.size();
        unsigned divided = divisions;
        if (failed(cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor,
                               mergedRow, mode, pass)))
          return failure();
        if (divisions == divided || rowShape == mergedRow)
          return success();
        body.resize(mark);
        return cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor, rowShape,
                           mode, pass);
      };
      // The GPU's loop over the row's elements, `pass` its body.
      auto portableRowLoop =
          [&](function_ref<LogicalResult(StringRef)> pass) -> LogicalResult {
        open(llvm::formatv(
            "for (gidx r = {0} + threadIdx.x; r < {1}; r += blockDim.x)",
            rowBegin, rowEnd));
        if (failed(pass("")))
          return failure();
        close();
        return success();
      };
      // A column block's walk: each element of the row, the rows' lanes
      // inside (lane k of a reduction adds row k's elements in order).
      auto cpuColumnNest = [&](function_ref<LogicalResult(StringRef)> pass,
                               StringRef lane) {
        return cpuRowNest(CpuLine::Plain, [&](StringRef) -> LogicalResult {
          openRowLanes();
          if (failed(pass(lane)))
            return failure();
          close();
          return success();
        });
      };
      // Reductions that read no other reduction's result share one pass over
      // the row, and so on by level: batch norm's gradient takes two passes
      // (the sums of dy, dy*x, ... then the one that needs them), not one per
      // sum. Each accumulator still adds the same elements in the same order.
      for (int64_t level = 0; level < levels; ++level) {
        SmallVector<size_t> members;
        for (size_t j = 0; j < reductions.size(); ++j)
          if (levelOf[j] == level)
            members.push_back(j);
        SmallVector<std::string> accs;
        for (size_t j : members) {
          accs.push_back(fresh("acc"));
          StringRef init = isa<ReduceMaxOp>(reductions[j]) ? "-INFINITY" : "0";
          if (column)
            line(llvm::formatv("gpuc::Accumulator {0}Lanes[{1}]; for (int lane "
                               "= 0; lane < {1}; ++lane) {0}Lanes[lane] = {2};",
                               accs.back(), kCpuLanes, init));
          else
            line(llvm::formatv("gpuc::Accumulator {0} = {1};", accs.back(),
                               init));
        }
        auto accumulate = [&](size_t m, const std::string &x,
                              StringRef lane = "") {
          std::string acc =
              lane.empty() ? accs[m] : (accs[m] + "Lanes[" + lane + "]").str();
          if (isa<ReduceMaxOp>(reductions[members[m]]))
            line(llvm::formatv("{0} = ({1} > {0} || {1} != {1}) ? "
                               "(gpuc::Accumulator){1} : {0};",
                               acc, x));
          else
            line(llvm::formatv("{0} += {1};", acc, x));
        };
        auto slot = [&](size_t m) {
          return llvm::formatv("({0} + o) * {1}", (int64_t)members[m] * rows,
                               splits)
              .str();
        };
        if (splits > 1) {
          // An earlier launch reduced this row's chunks: combine them.
          open(llvm::formatv("if (phase > {0})", level));
          std::string s = fresh("s");
          open(
              llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", s, splits));
          for (size_t m = 0; m < members.size(); ++m)
            accumulate(m,
                       llvm::formatv("partials[{0} + {1}]", slot(m), s).str());
          close();
          close();
          open("else");
        }
        auto pass = [&](StringRef lane) -> LogicalResult {
          std::string element = fullIndex("r");
          for (size_t m = 0; m < members.size(); ++m) {
            FailureOr<std::string> x =
                at(reductions[members[m]]->getOperand(0), element);
            if (failed(x))
              return failure();
            accumulate(m, *x, lane);
          }
          if (level == 0 && failed(storeResults(firstPass, element)))
            return failure();
          return success();
        };
        auto portable = [&] { return portableRowLoop(pass); };
        // The CPU adds a row's elements in lanes (one accumulator per lane,
        // combined in lane order), so the adds vectorize and no longer wait
        // on each other.
        auto cpu = [&]() -> LogicalResult {
          for (size_t m = 0; m < members.size(); ++m)
            line(llvm::formatv(
                "gpuc::Accumulator {0}Lanes[{1}]; for (int lane = 0; lane < "
                "{1}; ++lane) {0}Lanes[lane] = {2};",
                accs[m], kCpuLanes,
                isa<ReduceMaxOp>(reductions[members[m]]) ? "-INFINITY" : "0"));
          if (failed(cpuRowNest(CpuLine::Lanes, pass)))
            return failure();
          for (size_t m = 0; m < members.size(); ++m) {
            open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                               kCpuLanes));
            accumulate(m, accs[m] + "Lanes[lane]");
            close();
          }
          return success();
        };
        if (column) {
          if (failed(cpuColumnNest(pass, "lane")))
            return failure();
        } else if (cpuLines ? failed(splitByTarget(portable, cpu,
                                                   /*onlyIfDivides=*/false))
                            : failed(portable())) {
          return failure();
        }
        for (size_t m = 0; m < members.size() && !column; ++m)
          line(llvm::formatv(isa<ReduceMaxOp>(reductions[members[m]])
                                 ? "{0} = gpuc::blockReduceMax({0});"
                                 : "{0} = gpuc::blockReduceSum({0});",
                             accs[m]));
        if (splits > 1) {
          // This launch's reductions: store the chunk's partials and stop.
          open(llvm::formatv("if (phase == {0})", level));
          for (size_t m = 0; m < members.size(); ++m)
            line(llvm::formatv(
                "if (threadIdx.x == 0) partials[{0} + part] = {1};", slot(m),
                accs[m]));
          line("return;");
          close();
          close();
        }
        for (size_t m = 0; m < members.size(); ++m) {
          Operation *reduce = reductions[members[m]];
          Value result = reduce->getResult(0);
          std::string type = registerCType(elementOf(result)).str();
          std::string acc = column ? accs[m] + "Lanes[lane]" : accs[m];
          std::string value = rounded(
              elementOf(result),
              isa<ReduceMeanOp>(reduce)
                  ? llvm::formatv("({0})({1} / {2}.0)", type, acc, rowLength)
                        .str()
                  : llvm::formatv("({0}){1}", type, acc).str());
          std::string reg = fresh("red");
          if (column) {
            // One per row of the block, read in the rows' later lane loops.
            line(llvm::formatv("{0} {1}[{2}];", type, reg, kCpuLanes));
            open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                               kCpuLanes));
            line(llvm::formatv("{0}[lane] = {1};", reg, value));
            close();
            reg += "[lane]";
          } else {
            line(llvm::formatv("const {0} {1} = {2};", type, reg, value));
          }
          rowValues[result.getAsOpaquePointer()] = reg;
        }
      }
      if (!perRow.empty() && column) {
        openRowLanes();
        if (failed(storeResults(perRow, "o")))
          return failure();
        close();
      } else if (!perRow.empty()) {
        open(splits > 1 ? llvm::formatv("if (phase == {0} && part == 0 && "
                                        "threadIdx.x == 0)",
                                        rowPhase)
                              .str()
                        : std::string("if (threadIdx.x == 0)"));
        if (failed(storeResults(perRow, "o")))
          return failure();
        close();
      }
      if (!perElement.empty()) {
        if (splits > 1)
          open(llvm::formatv("if (phase == {0})", elementPhase));
        auto pass = [&](StringRef) {
          return storeResults(perElement, fullIndex("r"));
        };
        auto portable = [&] { return portableRowLoop(pass); };
        if (column) {
          if (failed(cpuColumnNest(pass, "")))
            return failure();
        } else if (cpuLines
                       ? failed(splitByTarget(
                             portable,
                             [&] { return cpuRowNest(CpuLine::Simd, pass); },
                             /*onlyIfDivides=*/true))
                       : failed(portable())) {
          return failure();
        }
        if (splits > 1)
          close();
      }
      return success();
    };
    size_t mark = body.size();
    pushScope();
    if (failed(emitRows(/*column=*/false)))
      return failure();
    popScope();
    if (columns) {
      std::string portableText = body.substr(mark);
      body.resize(mark);
      line("#ifdef GPUC_CPU");
      pushScope();
      if (failed(emitRows(/*column=*/true)))
        return failure();
      popScope();
      line("#else");
      body += portableText;
      line("#endif");
      cpuGrid = rows / kCpuLanes;
    }
  }

  // The signature: inputs, then outputs (then a split row kernel's
  // workspace).
  std::string params, names, casts;
  unsigned arg = 0;
  for (auto [k, input] : llvm::enumerate(block.getArguments())) {
    StringRef type = storageCType(elementOf(input));
    if (type.empty())
      return fusion.emitOpError()
             << "reads " << input.getType()
             << ", which code generation cannot store (it stores f32, f16, "
                "bf16, i64, i32 and i1)";
    // Pointers that alias (an output written over this input) drop
    // __restrict__; every other pointer keeps it.
    bool aliased = llvm::is_contained(inPlace, (int64_t)k);
    params +=
        llvm::formatv("{0}const {1} *{2}in{3}", params.empty() ? "" : ", ",
                      type, aliased ? "" : "__restrict__ ", k);
    names += llvm::formatv("{0}in{1}", names.empty() ? "" : ", ", k);
    casts +=
        llvm::formatv("{0}(const {1} *)args[{2}]", arg ? ", " : "", type, arg);
    ++arg;
  }
  for (auto [k, output] : llvm::enumerate(yield.getValues())) {
    StringRef type = storageCType(elementOf(output));
    if (type.empty())
      return fusion.emitOpError()
             << "writes " << output.getType()
             << ", which code generation cannot store (it stores f32, "
                "f16, bf16, i64, i32 and i1)";
    params += llvm::formatv("{0}{1} *{2}out{3}", params.empty() ? "" : ", ",
                            type, inPlace[k] >= 0 ? "" : "__restrict__ ", k);
    names += llvm::formatv("{0}out{1}", names.empty() ? "" : ", ", k);
    casts += llvm::formatv("{0}({1} *)args[{2}]", arg ? ", " : "", type, arg);
    ++arg;
  }
  static_assert(kBlockThreads == 256, "__launch_bounds__ below says 256");
  // Index arithmetic is 32-bit when every index the kernel forms fits: the
  // host compiler vectorizes 32-bit division by a constant (AVX2 has no
  // 64-bit multiply-high) and a GPU emulates 64-bit division in software.
  // An elementwise block starts at blockIdx.x * tile; a row kernel's
  // partials are indexed by (reduction, row, chunk).
  int64_t largest =
      std::max(reductions.empty() ? kernel.grid * kPointwiseTile : kernel.grid,
               kernel.workspaceBytes / (int64_t)sizeof(double));
  fusion.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (isa<RankedTensorType>(v.getType()))
        largest = std::max(largest, getNumElements(shapeOf(v)));
  });
  for (Value v : block.getArguments())
    largest = std::max(largest, getNumElements(shapeOf(v)));
  body =
      llvm::formatv("  typedef {0} gidx;\n{1}",
                    largest + kPointwiseTile < (int64_t(1) << 31) ? "int32_t"
                                                                  : "int64_t",
                    body)
          .str();
  kernel.key = params + "\n" + body + "\n" + std::to_string(kernel.grid);
  if (kernel.launches == 1) {
    kernel.source = llvm::formatv("extern \"C\" __global__ void "
                                  "__launch_bounds__(256) {0}({1}) {{\n{2}}\n",
                                  name, params, body)
                        .str();
    kernel.cpuLauncher =
        llvm::formatv("extern \"C\" void gpuc_cpu_{0}(void *const *args) {{\n"
                      "  gpuc::cpuLaunch({1}LL, [&] {{ {0}({2}); });\n}\n",
                      name, cpuGrid ? cpuGrid : kernel.grid, casts)
            .str();
    return kernel;
  }
  // One body, instantiated per launch.
  params += ", void *workspace";
  names += ", workspace";
  casts += llvm::formatv(", args[{0}]", arg);
  kernel.source = llvm::formatv("template <int phase>\n__device__ "
                                "__forceinline__ void {0}_body({1}) {{\n{2}}\n",
                                name, params, body)
                      .str();
  for (int64_t phase = 0; phase < kernel.launches; ++phase) {
    std::string launch = kernel.launchName(phase);
    kernel.source += llvm::formatv("extern \"C\" __global__ void "
                                   "__launch_bounds__(256) {0}({1}) {{ "
                                   "{2}_body<{3}>({4}); }\n",
                                   launch, params, name, phase, names)
                         .str();
    kernel.cpuLauncher +=
        llvm::formatv("extern \"C\" void gpuc_cpu_{0}(void *const *args) {{\n"
                      "  gpuc::cpuLaunch({1}LL, [&] {{ {0}({2}); });\n}\n",
                      launch, kernel.grid, casts)
            .str();
  }
  return kernel;
}
} // namespace

FailureOr<EmittedKernel> mlir::gpuc::emitKernel(FusionOp fusion,
                                                StringRef name) {
  return Emitter(fusion).run(name);
}

int64_t mlir::gpuc::rowKernelSplits(int64_t rows, int64_t rowLength) {
  rows = std::max<int64_t>(rows, 1);
  if (rows >= kRowKernelBlocks)
    return 1;
  int64_t wanted = (kRowKernelBlocks + rows - 1) / rows;
  return std::max<int64_t>(1, std::min(wanted, rowLength / kRowChunkMin));
}

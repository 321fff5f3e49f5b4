//===- Emitter.h - the kernel emitter, shared by its parts --*- C++ -*-===//
//
// Values are computed "at an index": `at(v, idx)` emits the statements that
// compute element `idx` (a C++ expression of v's linear index) of `v` and
// returns the register that holds it. Kernel inputs are loads; ops inside the
// region translate the index to their operands' (broadcast, transpose,
// slice, gather, windows...) and combine the operands' registers. Results are
// memoized per (value, index) within a C++ scope, so a value read twice at
// the same position is computed once.
//
// The parts: the values of ops (Pointwise.cpp), concatenations
// (Concat.cpp), pooling windows (Windows.cpp), the CPU's loop forms
// (CpuLoops.cpp), the elementwise and row kernels (ElementwiseKernel.cpp;
// RowKernelPlan.cpp and RowKernel.cpp) and the kernel's function
// (KernelEmitter.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_CODEGEN_KERNEL_EMITTER_H
#define GPUC_CODEGEN_KERNEL_EMITTER_H

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
#include <optional>

namespace mlir::gpuc::kernel_emitter {

/// Whether every input of `c` is one of the kernel's inputs (so a read is
/// one load from the input that holds the element: concatOfArguments).
inline bool concatenatesKernelInputs(ConcatOp c) {
  return llvm::all_of(c.getInputs(),
                      [](Value in) { return isa<BlockArgument>(in); });
}

/// `pattern` with {0}, {1}, ... replaced by `args` ({{ is a brace): what
/// llvm::formatv does for plain strings, without parsing a format each
/// time, for the emitter's hottest helpers (the fusion pass emits every
/// candidate kernel).
inline std::string substitute(StringRef pattern, ArrayRef<StringRef> args) {
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
/// A CPU column block's lanes at most (4 KiB of f32 a row), the blocks a
/// column kernel keeps at least for the threads, and the bytes its lanes'
/// accumulators (double) may take (well inside a core's 32 or 48 KiB L1
/// data cache). Blocks of a kilobyte a row left each thread reading parts
/// of every row: ResNet-50's NHWC batch-norm gradients (512 channels) ran
/// 10-25 % slower than with whole rows.
constexpr int64_t kCpuMaxColumnLanes = 1024;
constexpr int64_t kCpuMinColumnBlocks = 16;
constexpr int64_t kCpuColumnAccumulatorBytes = 12 * 1024;
/// How far ahead, in bytes of f32 lanes, a CPU column block prefetches the
/// runs of rows it reads next.
constexpr int64_t kCpuColumnPrefetchBytes = 4096;
constexpr int64_t kCpuMinLine = 8;
/// Accumulators of a row reduction's lanes (CpuLine::Lanes): sixteen, so
/// that a sum in double (two or four vectors of lanes) has as many
/// independent add chains as the adder can overlap; with eight, a
/// cross-entropy's or a softmax's pass waited on the adds' latency.
constexpr int64_t kCpuReductionLanes = 16;
/// Elements of a line a row reduction's float sums add in float lanes
/// before adding those into its double accumulators (CpuLine::Lanes with
/// lane blocks): converting every element to double made a cross-entropy's
/// normalizer a quarter slower, and 64 float adds per lane keep the error
/// of a block within 64 ulp of its magnitude, the double sum beyond it.
constexpr int64_t kCpuLaneBlock = 1024;

/// A per-element value a row kernel computes once and keeps, between
/// passes, in the buffer of output `output` (see keptForLastPass).
struct KeptValue {
  Value value;
  int64_t output = -1;
};
/// A reduction that sums the squares of a value less its mean over the
/// same rows: `reductions[mean]` is that mean, of `value`.
struct CenteredSquares {
  size_t mean;
  Value value;
};

/// What a row kernel's passes are made of (Emitter::planRowKernel), which
/// its text (emitRowKernel) follows.
struct RowKernelPlan {
  /// The shape every reduction reduces, and its reduced axes' part.
  SmallVector<int64_t> full, rowShape;
  /// Rows (elements of the kept axes) and the elements of each.
  int64_t rows = 0, rowLength = 0;
  /// The results of one value a row and of the full shape; `firstPass`:
  /// the per-element results that read no reduction, stored by the first
  /// pass over the row.
  SmallVector<Value> perRow, perElement, firstPass;
  /// Adjacent axes both kept or both reduced, as one axis of the iteration
  /// (batch norm's [N, C, H, W] over {0, 2, 3} is [N, C, H*W] over {0, 2}).
  struct Run {
    bool reduced;
    int64_t size;
    SmallVector<int64_t> dims;
  };
  SmallVector<Run> runs;
  /// The runs' sizes: all of them, the kept ones and the reduced ones.
  SmallVector<int64_t> mergedFull, mergedKept, mergedRow;
  /// Whether the rows are adjacent elements, walked in columns.
  bool columns = false;
  /// The sums of centered squares taken in their mean's pass.
  DenseMap<Operation *, CenteredSquares> centered;
  /// Each reduction's level (the pass that computes it), and their count.
  SmallVector<int64_t> levelOf;
  int64_t levels = 0;
  /// Per reduction: the earlier reduction of one value whose accumulator
  /// it reads (a sum and a mean of one value), or -1.
  SmallVector<int64_t> sharedWith;
  /// Per reduction: its accumulator's slot (one per reduction that reads
  /// no other's) among a split kernel's partials and totals; the slots.
  SmallVector<int64_t> slotOf;
  int64_t accumulators = 0;
  /// The value the last level sums and the last pass reads again.
  KeptValue reused;
  /// The values later passes read back from their outputs.
  DenseMap<Value, int64_t> readBack;
  /// A GPU column block's rows, the elements of a row's chunk (splits >
  /// 1), a CPU column block's rows.
  int64_t gpuLanes = 0, chunk = 0, cpuLanes = 0;
  /// Whether a warp takes a row on the GPU; whether a launch after each
  /// level combines a split column kernel's partials.
  bool warpRows = false, combined = false;
  /// Whether the launch that combines a split column kernel's partials
  /// also writes its per-row results, no later launch having anything to
  /// do (one level, every per-element result stored by the first pass).
  bool finishInCombine = false;
  /// The launches that write the per-element and the per-row results.
  int64_t elementPhase = 0, rowPhase = 0;
};

/// `expr`, a float, rounded to `type` when that is f16 or bf16.
inline std::string rounded(Type type, const std::string &expr) {
  if (type.isF16())
    return "gpuc::roundF16(" + expr + ")";
  if (type.isBF16())
    return "gpuc::roundBF16(" + expr + ")";
  return expr;
}

inline Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }
inline bool isFloat(Value v) { return isa<FloatType>(elementOf(v)); }

inline SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

inline std::string literal(double value, Type type) {
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

/// Where a slice that is one stretch of its input starts in it: every
/// step is 1, and every axis after its first of more than one element is
/// whole. Its element at linear index i is then its
/// input's at i + the offset (a tied head's gradient, [50304, 768], sliced
/// to the embedding's 50,257 rows reads the same index). None otherwise.
inline std::optional<int64_t> contiguousSliceOffset(SliceOp s) {
  ArrayRef<int64_t> in = shapeOf(s.getInput());
  ArrayRef<int64_t> out = shapeOf(s.getResult());
  SmallVector<int64_t> strides = stridesOf(in);
  int64_t offset = 0;
  bool spanning = false;
  for (size_t d = 0; d < in.size(); ++d) {
    if (s.getStrides()[d] != 1 || (spanning && out[d] != in[d]))
      return std::nullopt;
    offset += s.getStarts()[d] * strides[d];
    spanning |= out[d] != 1;
  }
  return offset;
}

/// The window geometry shared by the pooling ops and their gradients.
struct Window {
  ArrayRef<int64_t> kernel, strides, pads;
  bool countIncludePad = false;
  /// The tensors' row and column axes: 2 and 3 in NCHW, 1 and 2 channels
  /// last.
  int64_t rowAxis = 2, columnAxis = 3;
};

/// A pooling op's window.
Window windowOf(Operation *op);
/// The max_pool2d (or max_pool2d_argmax) beside `op` in its kernel: the
/// other half of the same scan, or null.
Operation *maxPoolTwin(Operation *op);
/// The axes a reduction reduces.
SmallVector<int64_t> reducedAxes(Operation *reduce);

/// A float input whose every use reaches the kernel's results only through
/// one operand of selects on one condition computed from indices alone (the
/// scores under a causal mask compared from iotas): where the selects take
/// their other operand, its element need not be read.
struct LoadGuard {
  Value condition;
  /// Whether the element is read where the condition holds (the selects'
  /// true operand), or where it does not.
  bool whenTrue;
};

class Emitter {
public:
  explicit Emitter(FusionOp fusion) : fusion(fusion) {}
  FailureOr<EmittedKernel> run(StringRef name);
  /// Reads the module's and the fusion's settings (bytes in flight, column
  /// lanes, staging, what writes over what) and where loads are guarded.
  LogicalResult configure();

private:
  // The two kinds of kernel (ElementwiseKernel.cpp, RowKernel.cpp), then
  // the function around their body (KernelEmitter.cpp).
  LogicalResult emitElementwise(EmittedKernel &kernel);
  LogicalResult emitRowKernel(ArrayRef<Operation *> reductions,
                              EmittedKernel &kernel, int64_t &cpuGrid);
  /// A row kernel that stages its row (in shared memory or registers) also
  /// as `_s0`, which reads it from memory in every pass.
  LogicalResult addUnstagedAlternative(ArrayRef<Operation *> reductions,
                                       EmittedKernel &kernel);
  /// A row kernel's plan (RowKernelPlan.cpp). It sets the kernel's grid,
  /// launches, workspace and alternatives, `splits` and the staging, and
  /// `cpuGrid` for warp rows.
  FailureOr<RowKernelPlan> planRowKernel(ArrayRef<Operation *> reductions,
                                         EmittedKernel &kernel,
                                         int64_t &cpuGrid);
  /// The value a row kernel's last level of reductions sums and its only
  /// per-element result reads again, when that value calls a
  /// transcendental function and can be kept in the result's buffer (f32,
  /// and the result reads the operand it overwrites only through it); no
  /// value otherwise.
  KeptValue keptForLastPass(ArrayRef<Operation *> reductions,
                            ArrayRef<int64_t> levelOf, int64_t levels,
                            ArrayRef<Value> perElement);
  /// The per-element results of a row kernel that its passes after the
  /// first read back from their outputs (by output index) instead of
  /// computing them again: a value the first pass stores anyway
  /// (`firstPass`), when computing it reads more bytes an element than
  /// loading it; and a value written over an operand that no later pass
  /// reads otherwise, which moves from `perElement` to `firstPass` (a
  /// residual block's ReLU-masked gradient, stored for the skip connection
  /// and needed again by its batch norm's last pass). Both hold the value
  /// exactly: a 16-bit value is rounded to its type where computed.
  DenseMap<Value, int64_t> storedForLaterPasses(
      ArrayRef<Operation *> reductions, ArrayRef<int64_t> levelOf,
      const KeptValue &reused, function_ref<bool(Value)> beforeReductions,
      SmallVector<Value> &firstPass, SmallVector<Value> &perElement);
  /// The inputs a GPU block of a row kernel stages in shared memory, each
  /// at its byte offset, and their bytes in all (up to rowStageBytes): the
  /// inputs of full rows that the first pass reads at each element and a
  /// later pass (`later`, computed where the first pass stored `readBack`)
  /// reads there again, floats unguarded, in the order the first pass
  /// reads them.
  DenseMap<Value, int64_t>
  stagedRowInputs(ArrayRef<Value> firstPass, ArrayRef<Value> later,
                  const DenseMap<Value, int64_t> &readBack, int64_t rowLength,
                  bool inRegisters, int64_t &bytes);
  /// A row_groups: the one-block counting sort of the device header.
  FailureOr<EmittedKernel> emitRowGroups(RowGroupsOp groups, StringRef name);
  /// An attention or its gradient: the fused kernels of the device header
  /// (AttentionKernel.cpp).
  FailureOr<EmittedKernel> emitAttention(Operation *op, StringRef name);
  FailureOr<EmittedKernel> assemble(StringRef name, EmittedKernel kernel,
                                    int64_t cpuGrid,
                                    ArrayRef<Operation *> reductions);

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
  /// Declares a register holding element `idx` of the kernel argument
  /// `pointer`, which holds `v`'s elements.
  std::string load(Value v, const std::string &pointer,
                   const std::string &idx) {
    if (elementOf(v).isInteger(1))
      return define(v, "gpuc::loadBool(" + pointer + ", " + idx + ")",
                    /*exact=*/true);
    return define(v, pointer + "[" + idx + "]", /*exact=*/true);
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
    /// vectorized along the line kCpuReductionLanes elements at a time,
    /// `emitBody`
    /// receiving the lane register ("lane"): a reduction adds element k of
    /// a group to its accumulator k, so the sum's order is fixed by the
    /// text, not by the vectorizer;
    Lanes,
    /// in order, element by element (the body vectorizes across something
    /// else: a column reduction's rows).
    Plain,
  };
  /// `boundsDivisor` divides both `begin` and `end` (1 when nothing is
  /// known): lines that are all whole and a multiple of kCpuReductionLanes
  /// long need no loop for a last, partial group of lanes.
  /// What a CpuLine::Lanes loop emits around its groups of lanes, for
  /// accumulators the host compiler keeps in registers: before and after
  /// each group (whose body stores each lane's value in an array, folded
  /// into the accumulators after it), and, when given, before and after
  /// each block of kCpuLaneBlock elements of a line longer than one.
  struct LaneHooks {
    function_ref<void()> beginGroup, endGroup;
    function_ref<void()> beginBlock = nullptr, endBlock = nullptr;
  };
  LogicalResult cpuLoopNest(const std::string &flat, const std::string &begin,
                            const std::string &end, int64_t boundsDivisor,
                            ArrayRef<int64_t> shape, CpuLine mode,
                            function_ref<LogicalResult(StringRef)> emitBody,
                            const LaneHooks *hooks = nullptr);
  /// Set while a Lanes loop's body is emitted inside a whole group (not
  /// for a line's last, partial group), and inside a block.
  bool inLaneGroup = false, inLaneBlock = false;
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
  /// The memo's key of the input selected at `coordinate` (per concat).
  static std::string concatInputKey(const std::string &coordinate) {
    return "concat input at " + coordinate;
  }
  std::string windowCount(const std::string &top, const std::string &left,
                          const Window &w, ArrayRef<int64_t> in);
  FailureOr<std::string> poolBackward(Operation *op, Value v,
                                      const std::string &idx);
  /// Stores `values` at `idx` (an elementwise kernel's, or a row kernel's
  /// per-element or per-row values): loads first, then arithmetic, then
  /// stores.
  LogicalResult storeResults(ValueRange values, const std::string &idx);
  /// Keeps the loads of `values` at `indices` (loaded already) ahead of
  /// the arithmetic in the GPU's text: each float register is copied and
  /// passed through one empty `asm volatile` as an input and output, which
  /// the CUDA compiler may not move the loads below, and the copies stand
  /// for the values from here on. Without it, NVVM placed each load beside
  /// its first use, after the division before it, whose slow path is a
  /// branch that ptxas does not hoist a load over. A no-op on the CPU and
  /// under the emulator.
  void pinLoads(ArrayRef<Value> values, ArrayRef<std::string> indices);
  static constexpr StringLiteral kPinnedSuffix = "Issued";
  /// Loads the inputs `values` read at their own index (see
  /// inputsReadAtStoredIndex) at each of `indices`, and pins them when there
  /// are several indices (a GPU thread's batch).
  LogicalResult loadAhead(ValueRange values, ArrayRef<std::string> indices);
  /// Whether storeResults loads every input it reads at the stored index,
  /// then computes every value, then stores them; otherwise it computes and
  /// stores one value after the other (fewer registers live: see
  /// emitElementwise), the operands results overwrite in place loaded first.
  bool loadsFirst = true;
  /// kGpuBytesInFlight, or the module's gpuc.gpu_bytes_in_flight; 0: one
  /// element at a time and no loads first (the order before batching).
  int64_t bytesInFlight = kGpuBytesInFlight;
  /// The most lanes of a GPU column block: kBlockThreads, or the module's
  /// gpuc.gpu_column_lanes.
  int64_t mostColumnLanes = kBlockThreads;
  /// The most bytes of a row a GPU block of a row kernel stages in shared
  /// memory: kGpuRowStageBytes, or the module's gpuc.gpu_row_stage_bytes.
  int64_t rowStageBytes = kGpuRowStageBytes;
  /// A row kernel's inputs staged in shared memory (stagedRowInputs), each
  /// with its byte offset in the block's staged row.
  DenseMap<Value, int64_t> stagedInputs;
  /// In the GPU's text of a row kernel's pass over staged rows: the
  /// position in the row of each element index the pass visits, where
  /// `at` reads a staged input from shared memory.
  std::map<std::string, std::string> stagedPositions;
  /// Set while the GPU's text of a pass over staged rows is emitted.
  bool stagingText = false;
  /// Whether the staged rows are a warp's, in its lanes' registers
  /// (rowIn<N>[], every 32nd element a lane) rather than shared memory.
  bool stagedInRegisters = false;
  /// Values of a warp's row that its first pass stores and later passes
  /// read back, kept in the lanes' registers too (rowOut<k>[], by output).
  DenseMap<Value, int64_t> keptInRegisters;
  /// In an unrolled pass over rows staged in registers: the place of each
  /// row coordinate's element in its lane's arrays ("step * 8 + 3").
  std::map<std::string, std::string> registerPositions;
  /// Where the element at row coordinate `r` is staged: its place in the
  /// lanes' arrays, or in the shared row (r itself).
  std::string stagedPosition(const std::string &r) const {
    auto it = registerPositions.find(r);
    return it == registerPositions.end() ? r : it->second;
  }
  /// kGpuWarpRowRegisters, or the module's gpuc.gpu_warp_row_registers.
  int64_t warpRowRegisters = kGpuWarpRowRegisters;
  /// A segment of an elementwise kernel with fewer than 1/kSmallSegmentShare
  /// of its blocks does not load first.
  static constexpr int64_t kSmallSegmentShare = 16;
  /// The same at each of `indices`, where each store is under its `guard`
  /// (a C++ condition; empty: none).
  LogicalResult storeResults(ValueRange values, ArrayRef<std::string> indices,
                             ArrayRef<std::string> guards);
  /// The kernel inputs `values` read at their own index (through pointwise
  /// ops and reshapes), in the order they are first read.
  SmallVector<Value> inputsReadAtStoredIndex(ValueRange values);
  /// How many of its elements a GPU thread loads together when it computes
  /// `values` at each: a power of two, up to kGpuBytesInFlight of inputs,
  /// kMaxElementsInFlight, and the `perThread` elements the thread has.
  int64_t elementsInFlight(ValueRange values, int64_t perThread);
  static constexpr int64_t kMaxElementsInFlight = 8;
  /// Per result: the operand it overwrites in place (gpuc.in_place), or -1.
  SmallVector<int64_t> inPlace;
  /// The kernel's inputs that have a LoadGuard.
  DenseMap<Value, LoadGuard> loadGuards;
  /// Finds loadGuards for the kernel's inputs.
  void findLoadGuards();
  /// Whether loads skip the elements their guards discard: in the GPU's
  /// text only, where a warp whose lanes all skip issues no memory
  /// transaction (a causal softmax's rows then read half their scores); on
  /// the CPU a conditional load would keep the loop from vectorizing.
  bool guardLoads = false;
  /// Sets guardLoads while the GPU's text of a loop is emitted.
  struct GpuText {
    explicit GpuText(Emitter &e) : emitter(e), saved(e.guardLoads) {
      e.guardLoads = true;
    }
    ~GpuText() { emitter.guardLoads = saved; }
    Emitter &emitter;
    bool saved;
  };
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
  /// Values `at` loads from their output (by index) instead of computing:
  /// storedForLaterPasses's, in a row kernel's passes after the first.
  DenseMap<Value, int64_t> storedOutputs;
  std::map<CoordKey, SmallVector<std::string>> coordMemo;
  std::vector<std::vector<CoordKey>> coordScopes{1};
};

} // namespace mlir::gpuc::kernel_emitter

#endif // GPUC_CODEGEN_KERNEL_EMITTER_H

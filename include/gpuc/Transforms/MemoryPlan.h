//===- MemoryPlan.h - liveness and packing of a step's buffers --*- C++ -*-===//
//
// What gpuc-plan-memory, gpuc-verify-memory-plan and gpuc-remat share: the
// buffers of a kernel-formed function (one per kernel or library-call result,
// aliases and in-place results folded into the buffer they reuse), their
// lifetimes in program order, the liveness lower bound, and the packing of
// buffers into one arena.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_MEMORYPLAN_H
#define GPUC_TRANSFORMS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>

namespace mlir::gpuc {
class FusionOp;

/// Arena offsets are multiples of this many bytes (a cache line; what
/// vector loads and cuBLAS want).
constexpr int64_t kArenaAlignment = 64;

inline int64_t alignedBytes(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// The value whose buffer `v` views (through reshapes, which are aliases).
Value aliasRoot(Value v);

/// Whether `func` is a step program the plan applies to: its body holds
/// only fusions, library calls, aliases, constants and the return.
bool isPlannable(func::FuncOp func);

/// Whether result `result` of `fusion` may be written over operand `input`:
/// the kernel reads the operand only at the index it writes the result at
/// (every op reached from the operand is pointwise over the same number of
/// elements, and in a row kernel that is one value per row), and both hold
/// the same bytes. The kernel loads such an operand before it stores
/// anything at that index.
bool canOverwrite(FusionOp fusion, unsigned input, unsigned result);

/// canOverwrite for many pairs of one kernel: its reductions are scanned
/// once, where canOverwrite scans the body for each pair (a merged
/// optimizer kernel is asked about hundreds of pairs, in every plan remat
/// estimates).
class OverwriteRule {
public:
  explicit OverwriteRule(FusionOp fusion);
  bool allows(unsigned input, unsigned result) const;

private:
  // (An op handle's accessors are not const.)
  mutable FusionOp fusion;
  /// Each reduction of the body: the elements of its result and of its
  /// reduced operand.
  SmallVector<std::pair<int64_t, int64_t>> reductions;
  /// By operand: whether the kernel reads it only at the index where it
  /// writes a result of its size.
  mutable DenseMap<unsigned, bool> readOnlyAtItsIndex;

  bool readsOnlyAtItsIndex(BlockArgument arg) const;
};

/// The OverwriteRule of each kernel of one function, kept across the plans
/// of it that remat estimates (thousands, where the kernels' bodies do not
/// change). Whoever erases a kernel while it is kept must forget it first:
/// a new op may take its address.
class OverwriteRules {
public:
  OverwriteRules() = default;
  // A copy starts empty (a pass holding one is copied when cloned).
  OverwriteRules(const OverwriteRules &) {}
  OverwriteRules &operator=(const OverwriteRules &) {
    rules.clear();
    return *this;
  }

  const OverwriteRule &of(FusionOp fusion);
  void forget(Operation *op) { rules.erase(op); }

private:
  DenseMap<Operation *, std::unique_ptr<OverwriteRule>> rules;
};

/// One buffer of the plan: a kernel or library-call result, its aliases,
/// and the results written in place over it.
struct LiveBuffer {
  /// The result that first holds the bytes.
  Value root;
  /// Exact bytes (the slot's size); packing rounds up to the alignment.
  int64_t bytes = 0;
  /// Positions (index of the op in the function body) of the definition
  /// and of the last read; a buffer returned by the function lives until
  /// the return.
  unsigned start = 0, end = 0;
  /// An update written in place into this parameter: not in the arena.
  FlatSymbolRefAttr param;
};

/// The buffers of a plannable function. In-place results (the function's
/// `gpuc.in_place` attributes, or `inPlace` when given) join the buffer of
/// the operand they overwrite.
struct StepLiveness {
  SmallVector<Operation *> ops;
  SmallVector<LiveBuffer> buffers;
  /// The buffer holding each kernel/library result and alias.
  DenseMap<Value, unsigned> bufferOf;
  /// The last position reading each argument (directly or via an alias).
  DenseMap<Value, unsigned> lastArgUse;
  /// The position of the last op the "loss" output depends on (the end of
  /// the forward pass); -1 when the function returns no loss.
  int forwardEnd = -1;

  /// The aligned bytes of the arena buffers live at each position (defined
  /// there or earlier, read there or later).
  SmallVector<int64_t> liveBytes() const;
  /// The aligned bytes of the arena buffers defined at each position.
  SmallVector<int64_t> bornBytes() const;
  /// The maximum over positions of the aligned bytes live there: no plan
  /// can use less.
  int64_t lowerBound() const;
  /// Aligned bytes of the arena buffers live across the end of the forward
  /// pass (activations kept for backward), the loss itself excluded.
  int64_t keptForBackward() const;
};

/// Chooses the in-place writes of `func` in program order and records them
/// as `gpuc.in_place` on the fusions that have any: an update goes into its
/// parameter when the old value is read nowhere later (a kernel that
/// computes it without reading the old value gets that parameter as an
/// operand its body never reads, so the write stays an operand overwrite);
/// a result takes the buffer of an operand that dies in its kernel
/// (canOverwrite). `rules`, when given, keeps each kernel's OverwriteRule
/// for later calls.
void chooseInPlace(func::FuncOp func, OverwriteRules *rules = nullptr);

/// What gpuc-plan-memory would make of `func` now.
struct PlanEstimate {
  int64_t peak = 0, lowerBound = 0, keptForBackward = 0;
};
/// Plans `func` (in-place choices recorded as gpuc.in_place when `inPlace`,
/// no slots) and returns the arena peak, the lower bound and the bytes
/// kept for backward.
PlanEstimate estimatePlan(func::FuncOp func, bool inPlace = true,
                          OverwriteRules *rules = nullptr);

/// estimatePlan without the packing, which costs the most: `peak` is left
/// at -1, and `lowerBound` is what any packing can at best reach.
PlanEstimate estimateLiveness(func::FuncOp func,
                              OverwriteRules *rules = nullptr);

/// Builds the liveness of `func` from its `gpuc.in_place` attributes.
StepLiveness computeLiveness(func::FuncOp func);

/// Chooses `func`'s in-place writes afresh (none when `!inPlace`), records
/// them, and builds its liveness: what estimatePlan packs.
StepLiveness planLiveness(func::FuncOp func, bool inPlace = true,
                          OverwriteRules *rules = nullptr);

/// Offsets for the arena buffers of `liveness` (parameter slots get -1):
/// several greedy orders (by size, by lifetime, by size × lifetime, program
/// order) each place every buffer at the lowest offset free over its
/// lifetime; the order with the smallest peak wins. Returns that peak.
int64_t packArena(const StepLiveness &liveness,
                  SmallVectorImpl<int64_t> &offsets);

/// Checks the plan recorded in `func` (gpuc.slots, gpuc.in_place,
/// gpuc.memory): every result has a slot of its size; in-place writes are
/// legal; arena slots lie below the peak; and no two buffers whose
/// lifetimes overlap share a byte. Diagnostics name the ops.
LogicalResult verifyMemoryPlan(func::FuncOp func);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_MEMORYPLAN_H

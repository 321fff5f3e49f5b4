//===- RecomputeReads.cpp - compute a read tensor from what a kernel reads ===//
//
// A kernel that loads a tensor which another kernel computed in a few cheap
// operations from tensors the first kernel loads anyway can compute it
// instead: the load is gone and nothing else changes. The producer still
// stores the tensor where other ops need it (a ReLU's output is the next
// convolution's input, kept for that convolution's filter gradient), so
// gpuc-fuse, which recomputes a result only in place of storing it, leaves
// these reads alone. Batch norm's backward after a ReLU is the case that
// pays: it read the ReLU's output for its mask beside the convolution's
// output, in each of its two passes over the rows, where the ReLU's input is
// that output normalized with the stored mean and reciprocal deviation,
// scaled and shifted: 5 of 7 tensor passes remain (ResNet-50's 32 such batch
// norms).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/FusionRewrites.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCRECOMPUTEREADS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// How a producer computes one of its results from values outside it: the
/// ops of its body on the way (`ops`) and the inner values where the way
/// stops (`leaves`), each standing for a value outside (`outer`): an input
/// of the producer or another of its results.
struct Computation {
  Value root;
  SetVector<Operation *> ops;
  SetVector<Value> leaves;
  DenseMap<Value, Value> outer;
};

/// How `producer` computes its result `index` in cheap ops, or nothing when
/// it does not (a reduction on the way that it does not store, a costly
/// op, a broadcast of a value computed on the way).
std::optional<Computation> computationOf(FusionOp producer, unsigned index) {
  auto yield = cast<YieldOp>(producer.getBodyBlock().getTerminator());
  auto outside = [&](Value inner) -> Value {
    if (auto arg = dyn_cast<BlockArgument>(inner))
      return producer.getOperand(arg.getArgNumber());
    for (auto [k, v] : llvm::enumerate(yield.getValues()))
      if (k != index && v == inner)
        return producer.getResult(k);
    return nullptr;
  };
  Value root = yield.getOperand(index);
  if (outside(root))
    return std::nullopt;
  std::optional<CheapComputation> cheap =
      cheapComputationOf(root, [&](Value v) { return outside(v) != nullptr; });
  if (!cheap)
    return std::nullopt;
  Computation c;
  c.root = root;
  c.ops = std::move(cheap->ops);
  c.leaves = std::move(cheap->leaves);
  for (Value leaf : c.leaves)
    c.outer[leaf] = outside(leaf);
  return c;
}

/// The block argument of `reader` that stands for `outer`, if it reads it.
BlockArgument argumentFor(FusionOp reader, Value outer) {
  for (auto [input, arg] :
       llvm::zip(reader.getInputs(), reader.getBodyBlock().getArguments()))
    if (input == outer)
      return arg;
  return nullptr;
}

/// Whether every use of `arg` reads it element by element, at the index of
/// the element computed (no window, gather or broadcast).
bool readElementwise(BlockArgument arg) {
  return llvm::all_of(arg.getUsers(), [&](Operation *user) {
    return isPointwise(user) && llvm::all_of(user->getResults(), [&](Value r) {
             return getNumElements(shapeOf(r)) == getNumElements(shapeOf(arg));
           });
  });
}

/// Whether `reader` loads, element by element, every tensor that `c` needs
/// at the size of `read` (smaller ones are per-row values and biases, loaded
/// once a row or column).
bool readsEveryLeaf(FusionOp reader, Value read, const Computation &c) {
  int64_t n = getNumElements(shapeOf(read));
  return llvm::all_of(c.leaves, [&](Value leaf) {
    if (getNumElements(shapeOf(leaf)) < n)
      return true;
    BlockArgument arg = argumentFor(reader, c.outer.lookup(leaf));
    return arg && llvm::any_of(arg.getUsers(), [&](Operation *user) {
             return isPointwise(user);
           });
  });
}

/// `reader` again, at its place, computing `read` (a result of `producer`)
/// as `c` says instead of loading it; null (nothing changed) when the kernel
/// emitter has no schedule for it.
FusionOp recomputeIn(FusionOp reader, Value read, FusionOp producer,
                     const Computation &c) {
  FusionOp copy = recomputeInputInFusion(
      reader, read, producer, c.ops, c.leaves.getArrayRef(), c.root,
      [&](Value leaf) { return c.outer.lookup(leaf); });

  // The computation and the reader often share their first steps (the
  // normalized input that batch norm's gradient multiplies by).
  IRRewriter rewriter(copy.getContext());
  DominanceInfo dominance(copy);
  eliminateCommonSubExpressions(rewriter, dominance, copy);

  ScopedDiagnosticHandler quiet(copy.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(emitKernel(copy, "check"))) {
    copy.erase();
    return nullptr;
  }
  return copy;
}

/// Rewrites `reader` to compute, rather than load, each input it can; returns
/// the kernel that replaces it (itself when nothing changed).
FusionOp recomputeReads(FusionOp reader) {
  for (bool again = true; again;) {
    again = false;
    for (auto [read, arg] :
         llvm::zip(reader.getInputs(), reader.getBodyBlock().getArguments())) {
      auto producer = read.getDefiningOp<FusionOp>();
      if (!producer || producer->getBlock() != reader->getBlock() ||
          !readElementwise(arg))
        continue;
      unsigned index = cast<OpResult>(read).getResultNumber();
      std::optional<Computation> c = computationOf(producer, index);
      if (!c || !readsEveryLeaf(reader, read, *c))
        continue;
      FusionOp copy = recomputeIn(reader, read, producer, *c);
      if (!copy)
        continue;
      reader.replaceAllUsesWith(copy.getResults());
      reader.erase();
      reader = copy;
      // Where every reader computes it now, nothing stores it (gpuc-fuse
      // sinks such results already; a reader it could not is one here).
      if (producer->use_empty())
        producer.erase();
      else if (read.use_empty())
        dropFusionResult(producer, index);
      again = true;
      break;
    }
  }
  return reader;
}

struct RecomputeReads : gpuc::impl::GpucRecomputeReadsBase<RecomputeReads> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      // Producers come before their readers, and a dropped result replaces
      // its producer only: the walk goes on from each reader's replacement.
      for (Operation *op = &func.getBody().front().front(); op;
           op = op->getNextNode())
        if (auto fusion = dyn_cast<FusionOp>(op))
          op = recomputeReads(fusion);
    });
  }
};
} // namespace

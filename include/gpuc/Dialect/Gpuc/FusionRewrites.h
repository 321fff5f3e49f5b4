//===- FusionRewrites.h - kernels rebuilt around a result -----*- C++ -*-===//
//
// The rewrites of a gpuc.fusion that the passes after kernel forming share:
// a kernel keeping only some of its results, and a kernel computing one of
// its inputs from what another kernel computes it from instead of loading
// it.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_FUSIONREWRITES_H
#define GPUC_DIALECT_GPUC_FUSIONREWRITES_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gpuc {

/// A new fusion at `builder`'s point computing only the given results of
/// `fusion` (in that order), with only the ops and inputs they need.
FusionOp cloneFusionResults(OpBuilder &builder, FusionOp fusion,
                            ArrayRef<unsigned> results);

/// Replaces `fusion` by a fusion without its result `index` (which nothing
/// reads any more), nor the ops and inputs only that result needed.
void dropFusionResult(FusionOp fusion, unsigned index);

/// Clones `fusion`'s body at `inner` with `mapping` (which maps its block
/// arguments) and returns the clones of the values it yields.
SmallVector<Value> inlineBody(OpBuilder &inner, FusionOp fusion,
                              IRMapping &mapping);

/// A new fusion before `reader`, with its results, that computes its input
/// `read` where it loaded it: `ops`, ops of `producer`'s body (cloned in
/// the body's order), compute `root`, the inner value `read` stands for,
/// from `leaves`, each of which the new fusion reads as the value
/// `outer(leaf)` outside (an input of its own unless `reader` reads that
/// value already). `reader` stays as it is: the caller replaces it, or
/// erases the new fusion.
FusionOp recomputeInputInFusion(FusionOp reader, Value read, FusionOp producer,
                                const SetVector<Operation *> &ops,
                                ArrayRef<Value> leaves, Value root,
                                function_ref<Value(Value)> outer);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_FUSIONREWRITES_H

//===- OpKinds.h - how the step program treats each op ----------*- C++ -*-===//
//
// Kernel formation, fusion and codegen must agree on which ops are library
// calls, which are mere aliases of a buffer, which constants live inside a
// kernel, and which ops a generated kernel computes. This is that agreement.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_OPKINDS_H
#define GPUC_DIALECT_GPUC_OPKINDS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"

#include <limits>
#include <optional>

namespace mlir::gpuc {

/// GEMMs and convolutions: calls into BLAS/oneDNN (CPU) or cuBLASLt/cuDNN.
bool isLibraryCall(Operation *op);

/// Ops whose result is their operand's buffer viewed differently (reshape).
bool isAlias(Operation *op);

/// A constant whose elements are all equal: kernels use it as a literal
/// instead of reading a buffer.
bool isInlinableConstant(Value value);

/// Ops computed element by element from the same position of their operands
/// (after explicit broadcasting), dropout included: its mask is a function
/// of the element's index.
bool isPointwise(Operation *op);

/// Whether a kernel computes `op` so cheaply that computing it again where
/// it reads it costs less than a load: negations, absolute values, ReLU,
/// sums, differences, products, minima and maxima, comparisons, selects,
/// casts, broadcasts and constants; no exponential, division, square root
/// or random mask.
bool isCheapToRecompute(Operation *op);

/// How a kernel computes a value in cheap ops from values it reads: the ops
/// on the way and the leaves where the way stops.
struct CheapComputation {
  SetVector<Operation *> ops;
  SetVector<Value> leaves;
};

/// How `root`, a value inside a kernel, is computed in cheap ops
/// (isCheapToRecompute) from leaves: block arguments and the values
/// `isLeaf` names (not `root` itself), with at most `maxOps` ops besides
/// broadcasts and constants. A broadcast may only expand a leaf or a splat
/// constant: expanding a computed value would compute it once an element.
/// Nothing when another op is on the way.
std::optional<CheapComputation>
cheapComputationOf(Value root, function_ref<bool(Value)> isLeaf,
                   int64_t maxOps = std::numeric_limits<int64_t>::max());

/// reduce_sum, reduce_max, reduce_mean.
bool isReduction(Operation *op);

/// Ops that a generated kernel computes (outside any fusion so far): every
/// gpuc op except parameters, constants, aliases, library calls and
/// fusions themselves.
bool needsKernel(Operation *op);

/// Whether the kernel `fusion` (a gpuc.fusion) addresses memory by integers
/// it loads: a gather's or scatter's indices, a segment sum's offsets and
/// order, max pooling's stored indices, or values computed from them. Such
/// a kernel cannot run on operands no step has written yet (they could take
/// it out of bounds), and its loads after those of the integers wait for
/// them.
bool addressesByLoadedIntegers(Operation *fusion);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_OPKINDS_H

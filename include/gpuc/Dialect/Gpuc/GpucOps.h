//===- GpucOps.h - operations of the gpuc dialect ---------------*- C++ -*-===//
#ifndef GPUC_DIALECT_GPUC_GPUCOPS_H
#define GPUC_DIALECT_GPUC_GPUCOPS_H

#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <array>

#include "gpuc/Dialect/Gpuc/GpucEnums.h.inc"
#include "gpuc/Dialect/Gpuc/GpucInterfaces.h.inc"

#define GET_OP_CLASSES
#include "gpuc/Dialect/Gpuc/GpucOps.h.inc"

namespace mlir::gpuc {
/// The shape of a ranked tensor value (every gpuc tensor has one).
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// A rank-4 attention tensor (query, key, value, result or a gradient of
/// one) as gpuc.attention reads it, [B, H, T, D]: its type's shape, or,
/// under the op's `bthd`, its [B, T, H, D] storage with T and H swapped.
SmallVector<int64_t, 4> attentionShape(Value tensor, bool bthd);

/// The element strides of such a tensor's batch, head and row as stored
/// (its width is contiguous).
std::array<int64_t, 3> attentionStrides(Value tensor, bool bthd);

/// An operand that is a window of the columns of a wider stored tensor:
/// `slice(stored)` taking columns [offset, offset + width) of its last
/// dimension and the others whole, read as it is or reshaped to split
/// those columns (`reshape(slice(stored))`, the leading dimensions kept).
/// A library call or a kernel can read it in place, each row `stored`'s
/// last dimension apart.
struct ColumnWindow {
  Value stored;
  int64_t offset;
  /// What the window's columns split into (a product of the width).
  SmallVector<int64_t> shape;
  /// Elements in a stored row.
  int64_t rowWidth() const;
};
std::optional<ColumnWindow> columnWindow(Value operand);

/// A [B, T, H, D] (bthd) attention operand that is a window of the rows of
/// a wider stored tensor: `reshape(slice(stored))`, the slice taking
/// columns [offset, offset + H * D) of the last dimension of stored
/// [B, T, width] whole otherwise, the reshape splitting them into heads.
/// A fused query-key-value projection's query, key and value are three
/// such windows, which the fused attention kernel reads in place.
struct AttentionRowWindow {
  Value stored;
  /// The first column, the stored rows' width and a head's (D).
  int64_t offset, width, headWidth;
  /// The operand's batch, head and row strides within `stored`.
  std::array<int64_t, 3> strides() const;
};
std::optional<AttentionRowWindow> attentionRowWindow(Value operand);

/// A [B, T, H, D] (bthd) attention gradient stored as a row window of a
/// wider tensor: its only reader merges the heads into [B, T, C] rows, read
/// only by a concat along the last dimension, whose columns it fills from
/// the window's offset (a fused projection's gradient, `stored` the
/// concat).
std::optional<AttentionRowWindow> attentionGradientWindow(Value gradient);

/// The concat that holds every one of `gradients` (an attention gradient's
/// results) as such a row window, and nothing else; null if there is none.
ConcatOp joinedAttentionGradients(ValueRange gradients);

/// Elements in each of the `ranks` shards of a tensor of `elements`
/// (gpuc.reduce_scatter, gpuc.all_gather, gpuc.rank_shard): ceil(n/ranks).
int64_t shardElements(int64_t elements, int64_t ranks);

/// The bucket number of a collective op (all-reduce, reduce-scatter,
/// all-gather), by which the step program waits for it; none for others.
std::optional<int64_t> collectiveBucket(Operation *op);

/// `l p r`, as gpuc.compare decides it (folds, the interpreter, masks).
template <typename T>
bool holdsComparison(ComparePredicate p, const T &l, const T &r) {
  switch (p) {
  case ComparePredicate::eq:
    return l == r;
  case ComparePredicate::ne:
    return l != r;
  case ComparePredicate::lt:
    return l < r;
  case ComparePredicate::le:
    return l <= r;
  case ComparePredicate::gt:
    return l > r;
  case ComparePredicate::ge:
    return l >= r;
  }
  return false;
}
} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_GPUCOPS_H

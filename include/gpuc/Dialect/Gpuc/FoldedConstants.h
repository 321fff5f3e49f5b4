//===- FoldedConstants.h - the constants folds make -------------*- C++ -*-===//
//
// Folders and the importer's folds at import share one budget and one way
// of moving a constant's elements, which reads and writes them as stored
// (bytes, or one byte a boolean) rather than one Attribute an element: a
// causal mask over a batch at a context of 1,024 is 16M elements.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_FOLDEDCONSTANTS_H
#define GPUC_DIALECT_GPUC_FOLDEDCONSTANTS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::gpuc {

/// The most elements a folded constant of this element type may have:
/// 2^20, or 2^28 booleans (a mask, stored a bit an element: 32 MiB).
/// Larger values stay ops, computed at run time.
int64_t foldedElementsLimit(Type elementType);

/// Whether a constant of `type` is within foldedElementsLimit.
bool withinFoldLimit(ShapedType type);

/// Row-major strides of a shape (the last dimension's is 1).
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape);

/// A constant of `resultType` whose element at each multi-index is the
/// element of `source` at the linear index `sourceIndexOf(index)`: every
/// fold that moves elements (transpose, broadcast, slice, gather) is this.
/// Null past the limit or where an index falls outside `source`.
DenseElementsAttr
moveElements(DenseElementsAttr source, RankedTensorType resultType,
             function_ref<int64_t(ArrayRef<int64_t>)> sourceIndexOf);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_FOLDEDCONSTANTS_H

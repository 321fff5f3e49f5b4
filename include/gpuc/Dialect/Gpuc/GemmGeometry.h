//===- GemmGeometry.h - a matmul as one library GEMM call -------*- C++ -*-===//
//
// What a BLAS-style library needs to compute a `gpuc.matmul` in place:
// row-major matrices with leading dimensions, a strided batch and, for a
// batch whose entries are not one stride apart (attention's heads inside a
// token's row), an outer loop of such calls. The verifier uses it to accept
// only layouts the libraries can read, `gpuc-fold-layouts` to decide what
// folds, and the step program to write the call.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_GEMMGEOMETRY_H
#define GPUC_DIALECT_GPUC_GEMMGEOMETRY_H

#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

namespace mlir::gpuc {

class MatmulOp;

/// C = op(A) op(B), row-major, with A [m,k] (or [k,m] when transA), B [k,n]
/// (or [n,k]) and C [m,n] at leading dimensions lda, ldb, ldc; `batch` such
/// products `stride*` elements apart, repeated `calls` times
/// `callStride*` elements apart.
struct GemmGeometry {
  /// The result's shape as stored.
  Shape result;
  int64_t m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  int64_t calls = 1, callStrideA = 0, callStrideB = 0, callStrideC = 0;
  /// Where A's, B's and C's first elements lie in their buffers (a
  /// window's first column; a band's first row and column).
  int64_t offsetA = 0, offsetB = 0, offsetC = 0;
};

/// An operand read as a window of its stored rows (`#gpuc.columns`): the
/// last `dims` dimensions of the shape the product reads lie in one stored
/// row of `width` elements, from column `offset` on. With `dims` 0 the
/// operand is read as stored.
struct GemmWindow {
  int64_t offset = 0, dims = 0, width = 0;
};

/// The geometry of a product of `lhs` and `rhs` (their shapes as read:
/// stored, or their windows', `*Window`) read through their layouts
/// (`*Perm`, empty when as stored) and flags, stored through `resultPerm`;
/// fails, through `emitError`, when the shapes disagree or the layouts
/// cannot be read by a GEMM: no contiguous matrix dimension, or a batch of
/// more than two strided levels.
FailureOr<GemmGeometry>
inferGemmGeometry(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                  bool transposeLhs, bool transposeRhs,
                  ArrayRef<int64_t> lhsPerm, ArrayRef<int64_t> rhsPerm,
                  ArrayRef<int64_t> resultPerm, EmitErrorFn emitError,
                  GemmWindow lhsWindow = {}, GemmWindow rhsWindow = {});

/// An operand stored as `stored` and read through `window` (none: as
/// stored): the shape the product reads, and the window as the geometry
/// takes it.
SmallVector<int64_t> windowedShape(ArrayRef<int64_t> stored,
                                   ColumnsAttr window);
GemmWindow gemmWindow(ArrayRef<int64_t> stored, ColumnsAttr window);

/// The geometry of a verified matmul.
GemmGeometry gemmGeometry(MatmulOp op);

/// The library calls of a verified matmul: its geometry, or, for a product
/// cut into `bands` with a triangle, one call for each band of the result's
/// rows, reduced to the columns (result triangle) or the terms (lhs
/// triangle) that some row of the band needs.
SmallVector<GemmGeometry> gemmCalls(MatmulOp op);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_GEMMGEOMETRY_H

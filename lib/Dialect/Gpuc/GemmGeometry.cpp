//===- GemmGeometry.cpp - a matmul as one library GEMM call ---------------===//

#include "gpuc/Dialect/Gpuc/GemmGeometry.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// A dimension as the product reads it: its size and its element stride in
/// each of the three tensors' storage (A, B, C).
struct Strided {
  int64_t size;
  int64_t stride[3];
};

/// Row-major strides of an operand's shape as read, viewed through
/// `perm`: within a window's dimensions compact, and the dimension outside
/// them a stored row's width apart.
SmallVector<int64_t> viewStrides(ArrayRef<int64_t> stored,
                                 ArrayRef<int64_t> perm,
                                 GemmWindow window = {}) {
  int64_t rank = stored.size();
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    strides[i] = window.dims && i + 1 == rank - window.dims
                     ? window.width
                     : strides[i + 1] * stored[i + 1];
  if (perm.empty())
    return strides;
  SmallVector<int64_t> viewed;
  for (int64_t p : perm)
    viewed.push_back(strides[p]);
  return viewed;
}

SmallVector<int64_t> viewShape(ArrayRef<int64_t> stored,
                               ArrayRef<int64_t> perm) {
  if (perm.empty())
    return SmallVector<int64_t>(stored);
  SmallVector<int64_t> viewed;
  for (int64_t p : perm)
    viewed.push_back(stored[p]);
  return viewed;
}

/// A matrix [rows, cols] whose elements are `rowStride` and `colStride`
/// apart, as a row-major matrix a GEMM reads: the stored matrix is the
/// view itself (colStride 1) or its transpose (rowStride 1). A dimension
/// of size 1 has any stride it needs.
bool asRowMajor(int64_t rows, int64_t cols, int64_t rowStride,
                int64_t colStride, bool &transposed, int64_t &ld) {
  if (cols == 1)
    colStride = 1;
  else if (rows == 1)
    rowStride = 1;
  if (colStride == 1 && (rows == 1 || rowStride >= cols)) {
    transposed = false;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rowStride;
    return true;
  }
  if (rowStride == 1 && (cols == 1 || colStride >= rows)) {
    transposed = true;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : colStride;
    return true;
  }
  return false;
}
} // namespace

FailureOr<GemmGeometry> mlir::gpuc::inferGemmGeometry(
    ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs, bool transposeLhs,
    bool transposeRhs, ArrayRef<int64_t> lhsPerm, ArrayRef<int64_t> rhsPerm,
    ArrayRef<int64_t> resultPerm, EmitErrorFn emitError, GemmWindow lhsWindow,
    GemmWindow rhsWindow) {
  // Each layout must be a permutation of its tensor's dimensions.
  for (auto [perm, rank] :
       {std::pair{lhsPerm, lhs.size()}, std::pair{rhsPerm, rhs.size()},
        std::pair{resultPerm, lhs.size()}})
    if (!perm.empty() && failed(inferTransposeShape(
                             SmallVector<int64_t>(rank, 1), perm, emitError)))
      return failure();
  SmallVector<int64_t> a = viewShape(lhs, lhsPerm), b = viewShape(rhs, rhsPerm);
  FailureOr<Shape> product =
      inferMatmulShape(a, b, transposeLhs, transposeRhs, emitError);
  if (failed(product))
    return failure();
  // The result's storage, and its strides as the product writes it.
  Shape stored = *product;
  if (!resultPerm.empty())
    for (auto [i, p] : llvm::enumerate(resultPerm))
      stored[i] = (*product)[p];
  size_t r = product->size();
  SmallVector<int64_t> inverse(r);
  for (size_t i = 0; i < r; ++i)
    inverse[resultPerm.empty() ? i : resultPerm[i]] = i;
  SmallVector<int64_t> strideA = viewStrides(lhs, lhsPerm, lhsWindow),
                       strideB = viewStrides(rhs, rhsPerm, rhsWindow),
                       strideC = viewStrides(stored, inverse);

  GemmGeometry g;
  g.result = stored;
  g.offsetA = lhsWindow.offset;
  g.offsetB = rhsWindow.offset;
  g.m = (*product)[r - 2];
  g.n = (*product)[r - 1];
  g.k = transposeLhs ? a[r - 2] : a[r - 1];
  // The operands may be stored transposed (the flag flips); the result is
  // written as C itself, so its rows must be contiguous.
  bool flipA, flipB, flipC;
  if (!asRowMajor(a[r - 2], a[r - 1], strideA[r - 2], strideA[r - 1], flipA,
                  g.lda) ||
      !asRowMajor(b[r - 2], b[r - 1], strideB[r - 2], strideB[r - 1], flipB,
                  g.ldb) ||
      !asRowMajor(g.m, g.n, strideC[r - 2], strideC[r - 1], flipC, g.ldc) ||
      flipC)
    return emitError() << "layouts leave no matrix dimension contiguous";
  g.transA = transposeLhs != flipA;
  g.transB = transposeRhs != flipB;

  // The batch: dimensions of size 1 drop out, and neighbours one stride
  // apart in all three tensors merge into one level.
  SmallVector<Strided> levels;
  for (size_t i = 0; i + 2 < r; ++i) {
    if ((*product)[i] == 1)
      continue;
    Strided d{(*product)[i], {strideA[i], strideB[i], strideC[i]}};
    if (!levels.empty()) {
      Strided &outer = levels.back();
      bool merges = true;
      for (int t = 0; t < 3; ++t)
        merges &= outer.stride[t] == d.stride[t] * d.size;
      if (merges) {
        outer.size *= d.size;
        for (int t = 0; t < 3; ++t)
          outer.stride[t] = d.stride[t];
        continue;
      }
    }
    levels.push_back(d);
  }
  if (levels.size() > 2)
    return emitError() << "layouts leave " << levels.size()
                       << " batch levels; a GEMM call takes at most two";
  if (!levels.empty()) {
    const Strided &inner = levels.back();
    g.batch = inner.size;
    g.strideA = inner.stride[0];
    g.strideB = inner.stride[1];
    g.strideC = inner.stride[2];
  }
  if (levels.size() == 2) {
    const Strided &outer = levels.front();
    g.calls = outer.size;
    g.callStrideA = outer.stride[0];
    g.callStrideB = outer.stride[1];
    g.callStrideC = outer.stride[2];
  }
  return g;
}

SmallVector<int64_t> mlir::gpuc::windowedShape(ArrayRef<int64_t> stored,
                                               ColumnsAttr window) {
  SmallVector<int64_t> shape(stored);
  if (window && !shape.empty()) {
    shape.pop_back();
    llvm::append_range(shape, window.getShape());
  }
  return shape;
}

GemmWindow mlir::gpuc::gemmWindow(ArrayRef<int64_t> stored,
                                  ColumnsAttr window) {
  if (!window || stored.empty())
    return {};
  return {window.getOffset(), (int64_t)window.getShape().size(), stored.back()};
}

GemmGeometry mlir::gpuc::gemmGeometry(MatmulOp op) {
  FailureOr<GemmGeometry> g = inferGemmGeometry(
      op.readShape(0), op.readShape(1), op.getTransposeLhs(),
      op.getTransposeRhs(), op.getLhsPerm(), op.getRhsPerm(),
      op.getResultPerm(), [&] { return op.emitOpError(); },
      gemmWindow(shapeOf(op.getLhs()), op.getLhsWindowAttr()),
      gemmWindow(shapeOf(op.getRhs()), op.getRhsWindowAttr()));
  assert(succeeded(g) && "gemmGeometry of a matmul that does not verify");
  return *g;
}

SmallVector<GemmGeometry> mlir::gpuc::gemmCalls(MatmulOp op) {
  GemmGeometry whole = gemmGeometry(op);
  std::optional<ComparePredicate> lhsTriangle = op.getLhsTriangle(),
                                  resultTriangle = op.getResultTriangle();
  std::optional<int64_t> bands = op.getBands();
  if (!bands || (!lhsTriangle && !resultTriangle))
    return {whole};
  // The triangle's matrix is square and stored as it is read (the verifier
  // says so), so its rows and columns are the product's as the flags say.
  SmallVector<GemmGeometry> calls;
  for (int64_t band = 0; band < *bands; ++band) {
    int64_t first = whole.m * band / *bands,
            end = whole.m * (band + 1) / *bands;
    if (first == end)
      continue;
    // The band's columns [c0, c1) and terms [k0, k1).
    int64_t c0 = 0, c1 = whole.n, k0 = 0, k1 = whole.k;
    if (resultTriangle) {
      // Row r needs columns c with !(c P r).
      if (*resultTriangle == ComparePredicate::gt)
        c1 = std::min(whole.n, end);
      else
        c0 = first;
    } else if (!whole.transA) {
      // A [m, k] is zero at (r, l) where l P r.
      if (*lhsTriangle == ComparePredicate::gt)
        k1 = std::min(whole.k, end);
      else
        k0 = first;
    } else {
      // A stored [k, m] is zero at (l, r) where r P l.
      if (*lhsTriangle == ComparePredicate::gt)
        k0 = first;
      else
        k1 = std::min(whole.k, end);
    }
    GemmGeometry g = whole;
    g.m = end - first;
    g.n = c1 - c0;
    g.k = k1 - k0;
    g.offsetA += whole.transA ? k0 * whole.lda + first : first * whole.lda + k0;
    g.offsetB += whole.transB ? c0 * whole.ldb + k0 : k0 * whole.ldb + c0;
    g.offsetC += first * whole.ldc + c0;
    calls.push_back(g);
  }
  return calls;
}

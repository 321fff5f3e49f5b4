//===- AttentionGemms.cpp - attention as GEMMs around row kernels ---------===//
//
// gpuc-decompose's `gemm` lowering of gpuc.attention and its gradient:
// batched GEMMs around one row kernel each way, the weights kept from
// forward to backward. A causal mask's GEMMs come in bands that skip its
// triangle.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/AttentionGemms.h"
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/TriangularMask.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// Where a mask is `key P query`, that comparison of the scores' indices.
Value triangleMask(ExprBuilder &B, ComparePredicate keyVsQuery,
                   ArrayRef<int64_t> shape) {
  auto indexType = RankedTensorType::get(shape, B.b.getI64Type());
  int64_t rank = shape.size();
  Value query = IotaOp::create(B.b, B.loc, indexType, rank - 2);
  Value key = IotaOp::create(B.b, B.loc, indexType, rank - 1);
  return B.cmp(keyVsQuery, key, query);
}

/// An attention's mask broadcast to the scores' `shape`, or null where it
/// has none. A triangular one is compared from the query and key indices,
/// so the row kernel reads no mask (and the host compiler vectorizes it: a
/// bool load keeps its loop scalar); so is the op's mask_triangle, which
/// the flash lowering sets, combined with what its operand excludes (a
/// padding mask).
template <typename OpTy>
Value wideAttentionMask(ExprBuilder &B, OpTy op, ArrayRef<int64_t> shape) {
  Value mask = op.getMask();
  Value wide;
  if (mask) {
    std::optional<TriangularMask> triangle = matchTriangularMask(mask);
    if (triangle) {
      triangle->recordOn();
      wide = triangleMask(B, triangle->keyVsQuery, shape);
    } else {
      wide = B.expand(mask, shape);
    }
  }
  std::optional<ComparePredicate> marked = op.getMaskTriangle();
  if (!marked)
    return wide;
  Value triangle = triangleMask(B, *marked, shape);
  if (!wide)
    return triangle;
  // Excluded where either excludes: the keeping bits and'ed, the excluding
  // ones or'ed.
  auto bools = cast<RankedTensorType>(wide.getType());
  Value constant = ConstantOp::create(
      B.b, B.loc, DenseElementsAttr::get(bools, !op.getMaskKeeps()));
  return op.getMaskKeeps()
             ? SelectOp::create(B.b, B.loc, bools, triangle, wide, constant)
                   .getResult()
             : SelectOp::create(B.b, B.loc, bools, triangle, constant, wide)
                   .getResult();
}

/// A fill at or below which an excluded score weighs nothing in f32: its
/// weight exp(fill - max) is 0 in f32 (below e^-104) unless every kept
/// score of its row is below fill + 104: below -999,999,896 at -1e9, the
/// fill of `masked_fill(mask, -1e9)`.
constexpr double kFillWeighingNothing = -1e9;

/// The comparison `key P query` of the scores an attention's GEMMs may
/// skip: where its mask excludes exactly a strict triangle of square
/// scores (a causal mask, which keeps every row's own key, so no row is
/// left without one) whose fill weighs nothing. Its weights and their
/// gradient are then zero there, which the lowering makes exact.
template <typename OpTy>
std::optional<ComparePredicate> skippableTriangle(OpTy op) {
  if (TensorBuilder::shapeOf(op.getQuery())[2] !=
          TensorBuilder::shapeOf(op.getKey())[2] ||
      op.getFill().convertToDouble() > kFillWeighingNothing)
    return std::nullopt;
  std::optional<ComparePredicate> mask = op.getMaskTriangle();
  if (mask && op.getMask())
    return std::nullopt; // and a padding mask beside it
  if (!mask && op.getMask())
    if (std::optional<TriangularMask> t = matchTriangularMask(op.getMask()))
      mask = t->keyVsQuery;
  if (!mask)
    return std::nullopt;
  // A mask that keeps scores excludes where it is false.
  ComparePredicate excluded = *mask;
  if (op.getMaskKeeps())
    switch (*mask) {
    case ComparePredicate::le:
      excluded = ComparePredicate::gt;
      break;
    case ComparePredicate::ge:
      excluded = ComparePredicate::lt;
      break;
    default:
      return std::nullopt;
    }
  if (excluded != ComparePredicate::gt && excluded != ComparePredicate::lt)
    return std::nullopt;
  return excluded;
}

/// The GEMMs' bands for a skippable triangle: about `bandRows` rows each,
/// at most 16, none where fewer than 2 would do.
struct Bands {
  std::optional<ComparePredicate> triangle;
  int64_t count = 0;

  template <typename OpTy> static Bands of(OpTy op, int64_t bandRows) {
    std::optional<ComparePredicate> triangle = skippableTriangle(op);
    int64_t rows = TensorBuilder::shapeOf(op.getQuery())[2];
    if (!triangle || bandRows < 1 || rows / bandRows < 2)
      return {};
    return {triangle, std::min<int64_t>(16, rows / bandRows)};
  }
  explicit operator bool() const { return count > 1; }

  /// Marks `product` as skipping the triangle of its lhs or result.
  Value onLhs(Value product) const { return mark(product, true); }
  Value onResult(Value product) const { return mark(product, false); }
  Value mark(Value product, bool lhs) const {
    if (!*this)
      return product;
    auto mm = product.getDefiningOp<MatmulOp>();
    auto attr = ComparePredicateAttr::get(mm.getContext(), *triangle);
    if (lhs)
      mm.setLhsTriangleAttr(attr);
    else
      mm.setResultTriangleAttr(attr);
    mm.setBandsAttr(Builder(mm.getContext()).getI64IntegerAttr(count));
    return product;
  }
};

/// `x` (shaped like the scores) with zeros in the bands' triangle.
Value zeroInTriangle(ExprBuilder &B, const Bands &bands, Value x) {
  if (!bands)
    return x;
  Value excluded = triangleMask(B, *bands.triangle, TensorBuilder::shapeOf(x));
  return B.select(excluded, B.splat(x, 0.0), x);
}

/// Grouped-query attention's keys or values `x` ([B, Hk, T, D]) with each
/// head repeated for the query heads that read it ([B, heads, T, D]): the
/// GEMMs take one head of each operand per product.
Value expandedHeads(ExprBuilder &B, Value x, int64_t heads) {
  ArrayRef<int64_t> s = TensorBuilder::shapeOf(x);
  if (s[1] == heads)
    return x;
  int64_t groups = heads / s[1];
  Value single = B.reshape(B.loc, x, {s[0], s[1], 1, s[2], s[3]});
  Value repeated = B.expand(single, {s[0], s[1], groups, s[2], s[3]});
  return B.reshape(B.loc, repeated, {s[0], heads, s[2], s[3]});
}

/// The gradient of expandedHeads: `dx` ([B, H, T, D]) summed over each
/// key head's group of query heads, to `like`'s shape.
Value groupSum(ExprBuilder &B, Value dx, Value like) {
  ArrayRef<int64_t> d = TensorBuilder::shapeOf(dx),
                    s = TensorBuilder::shapeOf(like);
  if (d[1] == s[1])
    return dx;
  Value grouped = B.reshape(B.loc, dx, {s[0], s[1], d[1] / s[1], s[2], s[3]});
  return B.sum(grouped, {2}, /*keepDims=*/false);
}

/// The masked, scaled scores of an attention, in f32: `scale * Q K^T`, and
/// `fill` where the mask excludes a score.
template <typename OpTy>
Value attentionScores(ExprBuilder &B, OpTy op, const Bands &bands) {
  ArrayRef<int64_t> q = TensorBuilder::shapeOf(op.getQuery()),
                    k = TensorBuilder::shapeOf(op.getKey());
  auto scoresType = RankedTensorType::get(
      {q[0], q[1], q[2], k[2]}, getElementTypeOrSelf(op.getQuery().getType()));
  Value qk = bands.onResult(
      MatmulOp::create(B.b, B.loc, scoresType, op.getQuery(),
                       expandedHeads(B, op.getKey(), q[1]), false, true));
  Value z =
      B.scale(B.castTo(qk, B.b.getF32Type()), op.getScale().convertToDouble());
  if (Value wide = wideAttentionMask(B, op, TensorBuilder::shapeOf(z))) {
    Value fill = B.splat(z, op.getFill().convertToDouble());
    z = op.getMaskKeeps() ? B.select(wide, z, fill) : B.select(wide, fill, z);
  }
  return z;
}

/// The weights' dropout (the same mask in forward and backward), or `p`.
template <typename OpTy>
Value attentionDropout(ExprBuilder &B, OpTy op, Value p) {
  if (!op.getRngKey())
    return p;
  return DropoutOp::create(B.b, B.loc, p.getType(), p, op.getRngKey(),
                           op.getDropoutAttr(), op.getStream());
}

/// Whether `grad` is the gradient autodiff built for `forward`: the same
/// operands and score rules, reading its result and row statistics.
bool isGradientOf(AttentionGradOp grad, AttentionOp forward) {
  return grad.getQuery() == forward.getQuery() &&
         grad.getKey() == forward.getKey() &&
         grad.getValue() == forward.getValue() &&
         grad.getMask() == forward.getMask() &&
         grad.getMaskTriangleAttr() == forward.getMaskTriangleAttr() &&
         grad.getRngKey() == forward.getRngKey() &&
         grad.getResult() == forward.getResult() &&
         grad.getLogsumexp() == forward.getLogsumexp() &&
         grad.getScaleAttr() == forward.getScaleAttr() &&
         grad.getFillAttr() == forward.getFillAttr() &&
         grad.getMaskKeeps() == forward.getMaskKeeps() &&
         grad.getDropoutAttr() == forward.getDropoutAttr() &&
         grad.getStream() == forward.getStream();
}

/// The gradient's GEMMs and elementwise ops, from the weights `p` (before
/// dropout; zero in the bands' triangle): dV = P^T dO, dP = dO V^T, dS = P
/// (dP - rowsum(P dP)), dQ = dS K, dK = dS^T Q.
void lowerAttentionGrad(PatternRewriter &rewriter, AttentionGradOp op, Value p,
                        const Bands &bands) {
  ExprBuilder B(rewriter, op.getLoc());
  Location loc = op.getLoc();
  Type element = getElementTypeOrSelf(op.getResult().getType());
  Type f32 = rewriter.getF32Type();
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(p);
  auto scoresType = RankedTensorType::get(shape, element);
  Value dout = op.getResultGrad();
  int64_t heads = shape[1];
  Value key = expandedHeads(B, op.getKey(), heads);
  Value value = expandedHeads(B, op.getValue(), heads);
  Value dv = bands.onLhs(MatmulOp::create(
      rewriter, loc, value.getType(),
      B.castTo(attentionDropout(B, op, p), element), dout, true, false));
  // (The bands leave dP's triangle unwritten.)
  Value dweights = zeroInTriangle(
      B, bands,
      attentionDropout(
          B, op,
          B.castTo(bands.onResult(MatmulOp::create(rewriter, loc, scoresType,
                                                   dout, value, false, true)),
                   f32)));
  // rowsum(P dP) (= rowsum(dO O)): the weights and their gradient are at
  // hand in this row kernel, where dO O would keep O for backward.
  Value rowDot = B.sum(B.mul(p, dweights), {3}, true);
  Value ds = B.mul(p, B.sub(dweights, B.expand(rowDot, shape)));
  // A finite fill gives excluded scores a weight, but no gradient reaches
  // them through the select; with -inf their weight is 0 already.
  if (Value wide = op.getFill().convertToDouble() != -INFINITY
                       ? wideAttentionMask(B, op, shape)
                       : Value()) {
    ds = op.getMaskKeeps() ? B.where(wide, ds)
                           : B.select(wide, B.splat(ds, 0.0), ds);
  }
  ds = B.castTo(B.scale(ds, op.getScale().convertToDouble()), element);
  Value dq = bands.onLhs(MatmulOp::create(
      rewriter, loc, op.getQuery().getType(), ds, key, false, false));
  Value dk = bands.onLhs(MatmulOp::create(rewriter, loc, key.getType(), ds,
                                          op.getQuery(), true, false));
  rewriter.replaceOp(
      op, {dq, groupSum(B, dk, op.getKey()), groupSum(B, dv, op.getValue())});
}

/// A pattern whose causal GEMMs come in bands of about `bandRows` rows.
template <typename OpTy> struct BandedPattern : OpRewritePattern<OpTy> {
  BandedPattern(MLIRContext *context, int64_t bandRows)
      : OpRewritePattern<OpTy>(context), bandRows(bandRows) {}
  int64_t bandRows;
};

/// The GEMM lowering of attention: Q K^T, one row kernel for the mask, the
/// softmax and the row statistic, and the GEMM with V. Its gradient, when
/// autodiff built one, is lowered with it and reads the same weights: they
/// are kept from forward to backward, as the exported chain kept them (the
/// flash lowering keeps none).
///
/// A causal mask's products skip what lies wholly in its triangle: each
/// GEMM is cut into bands of about `bandRows` rows (`gpuc.matmul`'s
/// `bands`), and a band computes only the scores, or sums only the terms,
/// its rows keep (44 % of the products fewer at 8 bands, 47 % at 16).
struct DecomposeAttention : BandedPattern<AttentionOp> {
  using BandedPattern::BandedPattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Type element = getElementTypeOrSelf(op.getResult().getType());
    Bands bands = Bands::of(op, bandRows);
    Value z = attentionScores(B, op, bands);
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(z);
    Value max = B.max(z, {3}, true);
    Value e = B.exp(B.sub(z, B.expand(max, shape)));
    Value sum = B.sum(e, {3}, true);
    Value weights = zeroInTriangle(B, bands, B.div(e, B.expand(sum, shape)));
    Value lse = B.reshape(B.loc, B.add(max, B.log(sum)),
                          TensorBuilder::shapeOf(op.getLogsumexp()));
    Value out = bands.onLhs(MatmulOp::create(
        rewriter, op.getLoc(), op.getResult().getType(),
        B.castTo(attentionDropout(B, op, weights), element),
        expandedHeads(B, op.getValue(), shape[1]), false, false));
    SmallVector<AttentionGradOp> grads;
    for (Operation *user : op.getResult().getUsers())
      if (auto grad = dyn_cast<AttentionGradOp>(user);
          grad && isGradientOf(grad, op) && !llvm::is_contained(grads, grad))
        grads.push_back(grad);
    rewriter.replaceOp(op, {out, lse});
    for (AttentionGradOp grad : grads) {
      rewriter.setInsertionPoint(grad);
      lowerAttentionGrad(rewriter, grad, weights, bands);
    }
    return success();
  }
};

/// A gradient whose forward is not beside it (or not a gpuc.attention any
/// more): the weights recomputed from Q K^T and the row statistic in one
/// elementwise pass, never kept from forward.
struct DecomposeAttentionGrad : BandedPattern<AttentionGradOp> {
  using BandedPattern::BandedPattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (auto forward = op.getResult().getDefiningOp<AttentionOp>();
        forward && isGradientOf(op, forward))
      return failure();
    ExprBuilder B(rewriter, op.getLoc());
    ArrayRef<int64_t> q = TensorBuilder::shapeOf(op.getQuery());
    Bands bands = Bands::of(op, bandRows);
    Value z = attentionScores(B, op, bands);
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(z);
    Value lse = B.expand(
        B.reshape(B.loc, op.getLogsumexp(), {q[0], q[1], q[2], 1}), shape);
    lowerAttentionGrad(rewriter, op,
                       zeroInTriangle(B, bands, B.exp(B.sub(z, lse))), bands);
    return success();
  }
};

} // namespace

void mlir::gpuc::populateAttentionGemmPatterns(RewritePatternSet &patterns,
                                               int64_t bandRows) {
  patterns.add<DecomposeAttention, DecomposeAttentionGrad>(
      patterns.getContext(), bandRows);
}

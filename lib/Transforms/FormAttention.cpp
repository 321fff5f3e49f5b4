//===- FormAttention.cpp - scaled dot-product attention as one op ---------===//
//
// Exporters spell attention as a chain of a GEMM, a scale, a mask, a softmax,
// perhaps a dropout, and a second GEMM. As that chain, backward keeps the
// [B, H, Tq, Tk] weights and codegen can only run it as GEMMs around row
// kernels. As one gpuc.attention, the gradient recomputes the weights from
// per-row statistics, and gpuc-decompose picks the lowering (GEMMs, or a
// fused kernel that never stores a weight).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Constants.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFORMATTENTION
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// The mask of the scores `v`: a select with a constant fill, or the
/// addition of a constant of zeros and -inf.
struct Mask {
  Value cond;             // i1, as the select reads it (maybe a broadcast)
  DenseElementsAttr bias; // or the additive constant
  double fill = -INFINITY;
  bool keeps = false;
};

Value stripMask(Value v, std::optional<Mask> &mask) {
  Operation *def = v.getDefiningOp();
  if (!def || !def->hasOneUse())
    return v;
  if (auto select = dyn_cast<SelectOp>(def)) {
    if (std::optional<double> fill = splatOf(select.getOnTrue())) {
      mask = Mask{select.getCond(), nullptr, *fill, false};
      return select.getOnFalse();
    }
    if (std::optional<double> fill = splatOf(select.getOnFalse())) {
      mask = Mask{select.getCond(), nullptr, *fill, true};
      return select.getOnTrue();
    }
    return v;
  }
  if (auto add = dyn_cast<AddOp>(def)) {
    for (int side = 0; side < 2; ++side) {
      DenseElementsAttr c = constantOf(def->getOperand(side));
      if (!c || !isa<FloatType>(c.getElementType()))
        continue;
      bool zerosAndMinusInf =
          llvm::all_of(c.getValues<APFloat>(), [](const APFloat &x) {
            return x.isZero() || (x.isInfinity() && x.isNegative());
          });
      if (!zerosAndMinusInf)
        continue;
      if (!c.isSplat() || c.getSplatValue<APFloat>().isInfinity())
        mask = Mask{Value(), c, -INFINITY, false};
      return def->getOperand(1 - side);
    }
  }
  return v;
}

/// `v` with leading 1s up to rank 4 (a reshape, which costs nothing).
Value toRank4(TensorBuilder &tb, Location loc, Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() == 4)
    return v;
  SmallVector<int64_t> wide(4 - shape.size(), 1);
  wide.append(shape.begin(), shape.end());
  return tb.reshape(loc, v, wide);
}

/// The last two dimensions of `v` swapped.
Value swapLastTwo(PatternRewriter &rewriter, Location loc, Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  SmallVector<int64_t> perm, swapped(shape);
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    perm.push_back(d);
  std::swap(perm[shape.size() - 1], perm[shape.size() - 2]);
  std::swap(swapped[shape.size() - 1], swapped[shape.size() - 2]);
  return TransposeOp::create(
      rewriter, loc,
      RankedTensorType::get(swapped, getElementTypeOrSelf(v.getType())), v,
      perm);
}

/// A constant mask at its smallest shape that broadcasts to it: each
/// dimension along which every slice is the same becomes 1 (canonicalize
/// folds a broadcast of a padding mask into a constant of the scores'
/// size; the kernels read the small one through zero strides).
Value shrinkConstantMask(PatternRewriter &rewriter, Location loc, Value mask) {
  auto constant = mask.getDefiningOp<ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements)
    return mask;
  SmallVector<int64_t> shape(elements.getType().getShape());
  SmallVector<bool> bits(elements.getValues<bool>());
  bool shrunk = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    int64_t inner = 1;
    for (size_t e = d + 1; e < shape.size(); ++e)
      inner *= shape[e];
    int64_t outer = (int64_t)bits.size() / (shape[d] * inner);
    bool uniform = true;
    for (int64_t o = 0; o < outer && uniform; ++o)
      for (int64_t i = 0; i < shape[d] && uniform; ++i)
        for (int64_t r = 0; r < inner && uniform; ++r)
          uniform = bits[(o * shape[d] + i) * inner + r] ==
                    bits[o * shape[d] * inner + r];
    if (!uniform)
      continue;
    SmallVector<bool> kept;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < inner; ++r)
        kept.push_back(bits[o * shape[d] * inner + r]);
    bits = std::move(kept);
    shape[d] = 1;
    shrunk = true;
  }
  if (!shrunk)
    return mask;
  auto type = RankedTensorType::get(shape, rewriter.getI1Type());
  return ConstantOp::create(rewriter, loc, type,
                            DenseElementsAttr::get(type, bits));
}

/// Rooted at the GEMM of the weights with the values.
struct FormAttentionPattern : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp pv,
                                PatternRewriter &rewriter) const override {
    int64_t rank = shapeOf(pv.getResult()).size();
    if ((rank != 3 && rank != 4) || pv.getTransposeLhs())
      return failure();
    Value weights = pv.getLhs();
    DropoutOp dropout = weights.getDefiningOp<DropoutOp>();
    if (dropout) {
      if (!dropout->hasOneUse())
        return failure();
      weights = dropout.getInput();
    }
    auto softmax = weights.getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxis() != rank - 1 || !softmax->hasOneUse())
      return failure();

    // scores = after * mask(before * Q K^T)
    double after = 1.0, before = 1.0;
    std::optional<Mask> mask;
    Value scores = stripScale(softmax.getInput(), after);
    scores = stripMask(scores, mask);
    scores = stripScale(scores, before);
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk || !qk->hasOneUse())
      return failure();
    double scale = after * before;
    // PyTorch's export of scaled_dot_product_attention scales Q and K^T.
    Value q = stripScale(qk.getLhs(), scale);
    Value k = stripScale(qk.getRhs(), scale);
    if (mask) {
      if (mask->fill == -INFINITY ? !(after > 0) : false)
        return failure();
      mask->fill *= after;
      if (std::isnan(mask->fill) || mask->fill == INFINITY)
        return failure();
    }
    if (!std::isfinite(scale))
      return failure();

    Location loc = pv.getLoc();
    TensorBuilder tb(rewriter);
    rewriter.setInsertionPoint(pv);
    if (qk.getTransposeLhs())
      q = swapLastTwo(rewriter, loc, q);
    if (!qk.getTransposeRhs())
      k = swapLastTwo(rewriter, loc, k);
    Value v = pv.getRhs();
    if (pv.getTransposeRhs())
      v = swapLastTwo(rewriter, loc, v);
    q = toRank4(tb, loc, q);
    k = toRank4(tb, loc, k);
    v = toRank4(tb, loc, v);

    Value maskValue;
    if (mask && mask->cond) {
      maskValue = mask->cond;
      if (auto b = maskValue.getDefiningOp<BroadcastOp>())
        maskValue = b.getInput();
      maskValue =
          toRank4(tb, loc, shrinkConstantMask(rewriter, loc, maskValue));
    } else if (mask) {
      // The additive constant as a boolean: true where it is -inf.
      SmallVector<bool> bits;
      for (const APFloat &x : mask->bias.getValues<APFloat>())
        bits.push_back(x.isInfinity());
      auto type = RankedTensorType::get(mask->bias.getType().getShape(),
                                        rewriter.getI1Type());
      maskValue =
          toRank4(tb, loc,
                  shrinkConstantMask(
                      rewriter, loc,
                      ConstantOp::create(rewriter, loc, type,
                                         DenseElementsAttr::get(type, bits))));
    }

    ArrayRef<int64_t> qs = shapeOf(q), vs = shapeOf(v);
    Type element = getElementTypeOrSelf(pv.getType());
    auto resultType =
        RankedTensorType::get({qs[0], qs[1], qs[2], vs[3]}, element);
    auto lseType =
        RankedTensorType::get(qs.take_front(3), rewriter.getF32Type());
    auto attention = AttentionOp::create(
        rewriter, loc, resultType, lseType, q, k, v, maskValue,
        dropout ? dropout.getRngKey() : Value(),
        rewriter.getF64FloatAttr(scale),
        rewriter.getF64FloatAttr(mask ? mask->fill : -INFINITY),
        mask && mask->keeps ? rewriter.getUnitAttr() : UnitAttr(),
        ComparePredicateAttr(),
        rewriter.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble()
                                         : 0.0),
        rewriter.getI64IntegerAttr(dropout ? dropout.getStream() : 0));
    Value result = attention.getResult();
    if (rank == 3)
      result = tb.reshape(loc, result, shapeOf(pv.getResult()));
    rewriter.replaceOp(pv, result);
    return success();
  }
};

struct FormAttention : gpuc::impl::GpucFormAttentionBase<FormAttention> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FormAttentionPattern>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};
} // namespace

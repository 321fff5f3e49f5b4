//===- Decompose.cpp - composite ops as core ops --------------------------===//
//
// After autodiff has used the composites' hand-written gradients, fusion and
// codegen only need to understand reductions and elementwise core ops. Each
// composite is rewritten with the same ExprBuilder formulas its gradient uses.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCDECOMPOSE
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// `x - max(x)` along `axis`, the stable start of softmax and log_softmax.
Value shiftByMax(ExprBuilder &B, Value x, int64_t axis) {
  return B.sub(x, B.expand(B.max(x, {axis}, true), TensorBuilder::shapeOf(x)));
}

/// log_softmax(x) along `axis` = z - log(sum(exp(z))), z = x - max(x).
Value logSoftmax(ExprBuilder &B, Value x, int64_t axis) {
  Value z = shiftByMax(B, x, axis);
  Value logSum = B.log(B.sum(B.exp(z), {axis}, true));
  return B.sub(z, B.expand(logSum, TensorBuilder::shapeOf(x)));
}

/// Combines per-sample losses (shaped like the labels) as `reduction` says;
/// `weights` (or null) marks the samples that count.
Value reduceLoss(ExprBuilder &B, Value losses, Value weights,
                 Reduction reduction) {
  if (reduction == Reduction::none)
    return losses;
  SmallVector<int64_t> all =
      axisRange(0, TensorBuilder::shapeOf(losses).size());
  Value total = B.sum(losses, all, false);
  if (reduction == Reduction::sum)
    return total;
  Value count =
      weights ? B.sum(weights, all, false)
              : B.splat(total,
                        (double)getNumElements(TensorBuilder::shapeOf(losses)));
  return B.div(total, count);
}

/// cross_entropy and nll_loss: -logp[label] over the class axis. From
/// logits, that is (max - x[label]) + log(sum(exp(x - max))): the labelled
/// logit is picked from the logits themselves, a sum independent of the
/// maximum, so a row kernel finds both in one pass over the row and the
/// normalizer in a second (where -sum(onehot * log_softmax(x)) needs a
/// third, after the normalizer).
template <typename OpTy>
Value classLoss(PatternRewriter &rewriter, OpTy op, bool fromLogits) {
  ExprBuilder B(rewriter, op.getLoc());
  Value input = op.getInput(), labels = op.getLabels();
  Value picked = B.sum(B.mul(input, B.oneHot(input, labels)), {1}, false);
  Value losses;
  if (!fromLogits) {
    losses = B.neg(picked);
  } else {
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(input);
    ArrayRef<int64_t> perSample = TensorBuilder::shapeOf(labels);
    Value max = B.max(input, {1}, true);
    Value shifted = B.sub(input, B.expand(max, shape));
    Value logSum = B.log(B.sum(B.exp(shifted), {1}, true));
    losses = B.add(B.sub(B.reshape(B.loc, max, perSample), picked),
                   B.reshape(B.loc, logSum, perSample));
  }
  Value weights;
  if (std::optional<int64_t> ignore = op.getIgnoreIndex()) {
    weights = B.castTo(B.cmp(ComparePredicate::ne, labels,
                             B.splatLike(B.loc, labels, *ignore)),
                       getElementTypeOrSelf(input.getType()));
    losses = B.mul(losses, weights);
  }
  return reduceLoss(B, losses, weights, op.getReduction());
}

struct DecomposeSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    int64_t axis = op.getAxis();
    Value e = B.exp(shiftByMax(B, op.getInput(), axis));
    Value sum = B.expand(B.sum(e, {axis}, true), TensorBuilder::shapeOf(e));
    rewriter.replaceOp(op, B.div(e, sum));
    return success();
  }
};

struct DecomposeLogSoftmax : OpRewritePattern<LogSoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LogSoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    rewriter.replaceOp(op, logSoftmax(B, op.getInput(), op.getAxis()));
    return success();
  }
};

struct DecomposeLayerNorm : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Value x = op.getInput();
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
    Normalized n = normalize(B, x, axisRange(op.getAxis(), shape.size()),
                             op.getEpsilon().convertToDouble());
    Value y = B.add(B.mul(n.xhat, B.expand(op.getScale(), shape)),
                    B.expand(op.getBias(), shape));
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct DecomposeBatchNormTrain : OpRewritePattern<BatchNormTrainOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchNormTrainOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Value x = op.getInput();
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
    int64_t rank = shape.size();
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 2; i < rank; ++i)
      axes.push_back(i);
    int64_t count = getNumElements(shape) / shape[1];
    double epsilon = op.getEpsilon().convertToDouble();
    double momentum = op.getMomentum().convertToDouble();

    Value mean = B.mean(x, axes);
    Value centered = B.sub(x, B.expand(mean, shape));
    Value var = B.mean(B.mul(centered, centered), axes);
    Value rstd = B.rsqrt(B.add(var, B.splat(var, epsilon)));
    auto perChannel = [&](Value v) {
      return B.expand(B.channelView(v, rank), shape);
    };
    Value y = B.add(B.mul(B.mul(centered, B.expand(rstd, shape)),
                          perChannel(op.getScale())),
                    perChannel(op.getBias()));

    // running * momentum + statistic * (1 - momentum), per channel.
    ArrayRef<int64_t> channels = TensorBuilder::shapeOf(op.getRunningMean());
    auto blend = [&](Value running, Value statistic, double statisticScale) {
      Value stat = B.reshape(B.loc, statistic, channels);
      return B.add(B.scale(running, momentum),
                   B.scale(stat, (1.0 - momentum) * statisticScale));
    };
    double varScale = op.getUnbiasedRunningVar() && count > 1
                          ? (double)count / (double)(count - 1)
                          : 1.0;
    rewriter.replaceOp(op, {y, blend(op.getRunningMean(), mean, 1.0),
                            blend(op.getRunningVar(), var, varScale)});
    return success();
  }
};

/// cross_entropy (from logits) and nll_loss (from log-probabilities).
template <typename OpTy, bool FromLogits>
struct DecomposeClassLoss : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, classLoss(rewriter, op, FromLogits));
    return success();
  }
};

struct DecomposeMseLoss : OpRewritePattern<MseLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MseLossOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Value d = B.sub(op.getInput(), op.getTarget());
    rewriter.replaceOp(op,
                       reduceLoss(B, B.mul(d, d), Value(), op.getReduction()));
    return success();
  }
};

/// scatter_add (an embedding's gradient) as a grouping of the positions by
/// the row they name (row_groups: a counting sort, once per step) and a sum
/// per row over its own group (segment_sum). The work is in proportion to
/// the positions times the row's width, plus one write of each result row:
/// the masked sum this replaces compared every row with every index, which
/// for a 50k-token vocabulary was most of a language model's step. Each
/// element adds its group in increasing position, the same sum on every
/// run.
struct DecomposeScatterAdd : OpRewritePattern<ScatterAddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScatterAddOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(op.getResult());
    int64_t axis = op.getAxis(), rows = shape[axis];
    int64_t n = getNumElements(TensorBuilder::shapeOf(op.getIndices()));
    Type i32 = rewriter.getI32Type();
    Value ids = B.reshape(B.loc, op.getIndices(), {n});
    auto groups = RowGroupsOp::create(
        rewriter, op.getLoc(), RankedTensorType::get({rows + 1}, i32),
        RankedTensorType::get({n}, i32), ids, rows);
    SmallVector<int64_t> positions(shape);
    positions[axis] = n;
    Value updates = B.reshape(B.loc, op.getUpdates(), positions);
    rewriter.replaceOpWithNewOp<SegmentSumOp>(op, op.getType(), updates,
                                              groups.getOffsets(),
                                              groups.getOrder(), axis);
    return success();
  }
};

/// The masked, scaled scores of an attention, in f32: `scale * Q K^T`, and
/// `fill` where the mask excludes a score.
template <typename OpTy> Value attentionScores(ExprBuilder &B, OpTy op) {
  ArrayRef<int64_t> q = TensorBuilder::shapeOf(op.getQuery()),
                    k = TensorBuilder::shapeOf(op.getKey());
  auto scoresType = RankedTensorType::get(
      {q[0], q[1], q[2], k[2]}, getElementTypeOrSelf(op.getQuery().getType()));
  Value qk = MatmulOp::create(B.b, B.loc, scoresType, op.getQuery(),
                              op.getKey(), false, true);
  Value z =
      B.scale(B.castTo(qk, B.b.getF32Type()), op.getScale().convertToDouble());
  if (Value mask = op.getMask()) {
    Value wide = B.expand(mask, TensorBuilder::shapeOf(z));
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
/// dropout): dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)),
/// dQ = dS K, dK = dS^T Q.
void lowerAttentionGrad(PatternRewriter &rewriter, AttentionGradOp op,
                        Value p) {
  ExprBuilder B(rewriter, op.getLoc());
  Location loc = op.getLoc();
  Type element = getElementTypeOrSelf(op.getResult().getType());
  Type f32 = rewriter.getF32Type();
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(p);
  auto scoresType = RankedTensorType::get(shape, element);
  Value dout = op.getResultGrad();
  Value dv = MatmulOp::create(rewriter, loc, op.getValue().getType(),
                              B.castTo(attentionDropout(B, op, p), element),
                              dout, true, false);
  Value dweights = attentionDropout(
      B, op,
      B.castTo(MatmulOp::create(rewriter, loc, scoresType, dout, op.getValue(),
                                false, true),
               f32));
  // rowsum(P dP) (= rowsum(dO O)): the weights and their gradient are at
  // hand in this row kernel, where dO O would keep O for backward.
  Value rowDot = B.sum(B.mul(p, dweights), {3}, true);
  Value ds = B.mul(p, B.sub(dweights, B.expand(rowDot, shape)));
  // A finite fill gives excluded scores a weight, but no gradient reaches
  // them through the select; with -inf their weight is 0 already.
  if (Value mask = op.getMask();
      mask && op.getFill().convertToDouble() != -INFINITY) {
    Value wide = B.expand(mask, shape);
    ds = op.getMaskKeeps() ? B.where(wide, ds)
                           : B.select(wide, B.splat(ds, 0.0), ds);
  }
  ds = B.castTo(B.scale(ds, op.getScale().convertToDouble()), element);
  Value dq = MatmulOp::create(rewriter, loc, op.getQuery().getType(), ds,
                              op.getKey(), false, false);
  Value dk = MatmulOp::create(rewriter, loc, op.getKey().getType(), ds,
                              op.getQuery(), true, false);
  rewriter.replaceOp(op, {dq, dk, dv});
}

/// The GEMM lowering of attention: Q K^T, one row kernel for the mask, the
/// softmax and the row statistic, and the GEMM with V. Its gradient, when
/// autodiff built one, is lowered with it and reads the same weights: they
/// are kept from forward to backward, as the exported chain kept them (the
/// flash lowering keeps none).
struct DecomposeAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Type element = getElementTypeOrSelf(op.getResult().getType());
    Value z = attentionScores(B, op);
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(z);
    Value max = B.max(z, {3}, true);
    Value e = B.exp(B.sub(z, B.expand(max, shape)));
    Value sum = B.sum(e, {3}, true);
    Value weights = B.div(e, B.expand(sum, shape));
    Value lse = B.reshape(B.loc, B.add(max, B.log(sum)),
                          TensorBuilder::shapeOf(op.getLogsumexp()));
    Value out =
        MatmulOp::create(rewriter, op.getLoc(), op.getResult().getType(),
                         B.castTo(attentionDropout(B, op, weights), element),
                         op.getValue(), false, false);
    SmallVector<AttentionGradOp> grads;
    for (Operation *user : op.getResult().getUsers())
      if (auto grad = dyn_cast<AttentionGradOp>(user);
          grad && isGradientOf(grad, op) && !llvm::is_contained(grads, grad))
        grads.push_back(grad);
    rewriter.replaceOp(op, {out, lse});
    for (AttentionGradOp grad : grads) {
      rewriter.setInsertionPoint(grad);
      lowerAttentionGrad(rewriter, grad, weights);
    }
    return success();
  }
};

/// A gradient whose forward is not beside it (or not a gpuc.attention any
/// more): the weights recomputed from Q K^T and the row statistic in one
/// elementwise pass, never kept from forward.
struct DecomposeAttentionGrad : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &rewriter) const override {
    if (auto forward = op.getResult().getDefiningOp<AttentionOp>();
        forward && isGradientOf(op, forward))
      return failure();
    ExprBuilder B(rewriter, op.getLoc());
    ArrayRef<int64_t> q = TensorBuilder::shapeOf(op.getQuery());
    Value z = attentionScores(B, op);
    ArrayRef<int64_t> shape = TensorBuilder::shapeOf(z);
    Value lse = B.expand(
        B.reshape(B.loc, op.getLogsumexp(), {q[0], q[1], q[2], 1}), shape);
    lowerAttentionGrad(rewriter, op, B.exp(B.sub(z, lse)));
    return success();
  }
};

struct Decompose : gpuc::impl::GpucDecomposeBase<Decompose> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeSoftmax, DecomposeLogSoftmax, DecomposeLayerNorm,
                 DecomposeBatchNormTrain,
                 DecomposeClassLoss<CrossEntropyOp, /*FromLogits=*/true>,
                 DecomposeClassLoss<NllLossOp, /*FromLogits=*/false>,
                 DecomposeMseLoss, DecomposeScatterAdd>(&getContext());
    if (attention == "gemm") {
      // Layouts are folded after this pass, into the GEMMs it builds.
      WalkResult folded = getOperation().walk([](Operation *op) {
        auto forward = dyn_cast<AttentionOp>(op);
        auto grad = dyn_cast<AttentionGradOp>(op);
        if ((forward && forward.getBthd()) || (grad && grad.getBthd())) {
          op->emitOpError() << "has the bthd layout; the gemm lowering runs "
                               "before gpuc-fold-layouts";
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (folded.wasInterrupted())
        return signalPassFailure();
      patterns.add<DecomposeAttention, DecomposeAttentionGrad>(&getContext());
    } else if (attention != "flash") {
      getOperation().emitError() << "unknown attention lowering '" << attention
                                 << "'; the lowerings are gemm and flash";
      return signalPassFailure();
    }
    GreedyRewriteConfig config;
    // Only the composites change; folding the whole module is canonicalize's
    // job, and keeping other ops as they are keeps dumps comparable.
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};
} // namespace

//===- Decompose.cpp - composite ops as core ops --------------------------===//
//
// After autodiff has used the composites' hand-written gradients, fusion and
// codegen only need to understand reductions and elementwise core ops. Each
// composite is rewritten with the same ExprBuilder formulas its gradient uses.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/AttentionGemms.h"
#include "gpuc/Transforms/Passes.h"
#include "gpuc/Transforms/TriangularMask.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

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

    // (Synchronized over the ranks: the global batch's statistics.)
    bool overRanks = op.getSyncRanks();
    Value mean = batchMeans(B, {x}, axes, overRanks).means[0];
    Value centered = B.sub(x, B.expand(mean, shape));
    BatchMeans squares =
        batchMeans(B, {B.mul(centered, centered)}, axes, overRanks);
    Value var = squares.means[0];
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
    Value runningVarStat = var;
    if (overRanks && op.getUnbiasedRunningVar()) {
      // The global count n is known when the step runs: n / (n - 1).
      Value n = squares.count;
      Value unbias = B.div(n, B.sub(n, B.splat(n, 1.0)));
      runningVarStat =
          B.mul(var, B.expand(unbias, TensorBuilder::shapeOf(var)));
      varScale = 1.0;
    }
    rewriter.replaceOp(op,
                       {y, blend(op.getRunningMean(), mean, 1.0),
                        blend(op.getRunningVar(), runningVarStat, varScale)});
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

/// Rows of `x` [N, ...] from r0 to r1: x itself when that is all of it.
Value rowSlice(ExprBuilder &B, Value x, int64_t r0, int64_t r1) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  if (r0 == 0 && r1 == shape[0])
    return x;
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts[0] = r0;
  limits[0] = r1;
  SmallVector<int64_t> sliced(shape);
  sliced[0] = r1 - r0;
  return SliceOp::create(
      B.b, B.loc,
      RankedTensorType::get(sliced, getElementTypeOrSelf(x.getType())), x,
      starts, limits, strides);
}

/// Rows per chunk of a linear cross-entropy over `rows` x `classes`
/// logits: `requested`, else those whose logits take about `chunkBytes` (a
/// multiple of 64 rows, at least 64, so the GEMMs stay large), but at most
/// 16 chunks: each chunk is steps and a kernel of its own in the plan, and
/// a long context's 16k rows in 32 MiB chunks would be 128 of them. The
/// rows are then spread evenly: over the fewest chunks (up to 16) that
/// divide them into equal multiples of 64 rows, or else as evenly as
/// multiples of 64 allow (no short last chunk).
int64_t linearLossChunkRows(int64_t rows, int64_t classes, int64_t elementBytes,
                            int64_t requested, int64_t chunkBytes) {
  if (requested > 0)
    return std::min(requested, rows);
  constexpr int64_t kMaxChunks = 16;
  auto roundUp64 = [](int64_t n) { return (n + 63) / 64 * 64; };
  int64_t fit = chunkBytes / std::max<int64_t>(1, classes * elementBytes);
  int64_t chunk = std::max<int64_t>(64, fit / 64 * 64);
  chunk = std::max(chunk, roundUp64((rows + kMaxChunks - 1) / kMaxChunks));
  int64_t chunks = (rows + chunk - 1) / chunk;
  for (int64_t n = chunks; n <= std::max(chunks, kMaxChunks); ++n)
    if (rows % n == 0 && (rows / n) % 64 == 0)
      return rows / n;
  return std::min(rows, roundUp64((rows + chunks - 1) / chunks));
}

/// Whether `grad` is the gradient of `forward`'s very head and loss, and
/// computed before anything reads `forward`'s loss.
bool sameHead(LinearCrossEntropyOp forward, LinearCrossEntropyGradOp grad) {
  return grad.getInput() == forward.getInput() &&
         grad.getWeight() == forward.getWeight() &&
         grad.getLabels() == forward.getLabels() &&
         grad.getBias() == forward.getBias() &&
         grad.getReduction() == forward.getReduction() &&
         grad.getIgnoreIndex() == forward.getIgnoreIndex() &&
         grad.getResult().getType() == forward.getResult().getType() &&
         grad->getBlock() == forward->getBlock() &&
         llvm::all_of(forward->getUsers(), [&](Operation *reader) {
           return grad->isBeforeInBlock(reader);
         });
}

/// linear_cross_entropy without its gradient: the logits, then the loss.
struct DecomposeLinearCrossEntropy : OpRewritePattern<LinearCrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearCrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    // The gradient op of the same head computes the loss as well.
    for (Operation *user : op.getInput().getUsers())
      if (auto grad = dyn_cast<LinearCrossEntropyGradOp>(user);
          grad && sameHead(op, grad)) {
        rewriter.replaceOp(op, grad.getResult());
        return success();
      }
    ExprBuilder B(rewriter, op.getLoc());
    Value logits = linearLogits(B, op.getInput(), op.getWeight(), op.getBias());
    Value loss = CrossEntropyOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get({}, getElementTypeOrSelf(logits.getType())),
        logits, op.getLabels(), op.getReductionAttr(), op.getIgnoreIndexAttr());
    rewriter.replaceOp(op, B.castTo(loss, getElementTypeOrSelf(op.getType())));
    return success();
  }

  /// The logits as the loss reads them: the GEMM's, stored in the
  /// operands' type, then widened to `statisticsType(x)` and biased there
  /// (a 16-bit bias add would round them twice).
  static Value linearLogits(ExprBuilder &B, Value x, Value w, Value bias) {
    int64_t rows = TensorBuilder::shapeOf(x)[0],
            classes = TensorBuilder::shapeOf(w)[0];
    auto type = RankedTensorType::get({rows, classes},
                                      getElementTypeOrSelf(x.getType()));
    Type stats = statisticsType(x);
    Value z =
        B.castTo(MatmulOp::create(B.b, B.loc, type, x, w, false, true), stats);
    return bias ? B.add(z, B.expand(B.castTo(bias, stats), {rows, classes}))
                : z;
  }

  /// The type a head's softmax and loss compute in: f32 for 16-bit logits
  /// (as autocast's cross-entropy), the operands' own otherwise.
  static Type statisticsType(Value x) {
    Type element = getElementTypeOrSelf(x.getType());
    return element.getIntOrFloatBitWidth() < 32
               ? Type(Float32Type::get(x.getContext()))
               : element;
  }
};

/// A language model's head as its chunked lowerings run it: over a weight
/// (and bias) padded with zero rows to `padded` classes, a chunk of rows
/// at a time.
struct ChunkedHead {
  /// Classes padded to a multiple of `padClasses` (0: never), from a
  /// vocabulary of at least this many: below it the head's GEMMs are small.
  static constexpr int64_t kPadMinClasses = 1024;

  ChunkedHead(PatternRewriter &rewriter, Location loc, Value x, Value w,
              Value bias, int64_t padClasses, int64_t chunkRows,
              int64_t chunkBytes)
      : weight(w), bias(bias) {
    element = getElementTypeOrSelf(x.getType());
    // 16-bit logits (and their gradient, which the GEMMs read) are stored
    // in 16 bits; the softmax, the loss and the weight's gradient summed
    // over the chunks are f32.
    stats = DecomposeLinearCrossEntropy::statisticsType(x);
    rows = TensorBuilder::shapeOf(x)[0];
    classes = TensorBuilder::shapeOf(w)[0];
    features = TensorBuilder::shapeOf(x)[1];
    // A vocabulary that is not a multiple of the GPU's GEMM tiles (GPT-2's
    // 50,257) runs the head's GEMMs over zero rows of the weight up to one
    // (50,304), the padded classes' logits set to -inf: their exponentials
    // are exactly 0, so the loss and the real classes' gradients are those
    // of the unpadded head, and the padded rows' gradients, 0, are cut off
    // once per step.
    padded = classes;
    if (padClasses > 0 && classes >= kPadMinClasses && classes % padClasses)
      padded = (classes + padClasses - 1) / padClasses * padClasses;
    if (padded != classes) {
      weight = PadOp::create(
          rewriter, loc, RankedTensorType::get({padded, features}, element), w,
          ArrayRef<int64_t>{0, 0}, ArrayRef<int64_t>{padded - classes, 0},
          rewriter.getF64FloatAttr(0.0));
      if (bias)
        this->bias = PadOp::create(
            rewriter, loc, RankedTensorType::get({padded}, element), bias,
            ArrayRef<int64_t>{0}, ArrayRef<int64_t>{padded - classes},
            rewriter.getF64FloatAttr(0.0));
    }
    chunk =
        linearLossChunkRows(rows, padded, element.getIntOrFloatBitWidth() / 8,
                            chunkRows, chunkBytes);
  }

  /// One chunk's logits `z` (the padded classes -inf), their row maxima
  /// and exponentials, the rows' sums of those, the labels' one-hot rows
  /// and each row's loss (unweighted, every row counted).
  struct Chunk {
    Value z, oneHot, max, e, sum, losses;
  };
  Chunk logits(ExprBuilder &B, Value xc, Value yc) const {
    int64_t n = TensorBuilder::shapeOf(xc)[0];
    Chunk c;
    c.z = DecomposeLinearCrossEntropy::linearLogits(B, xc, weight, bias);
    // The labelled logit is picked by a product with the one-hot row,
    // before the padded ones are -inf (-inf times 0 is NaN).
    Value unmasked = c.z;
    if (padded != classes) {
      Value column = IotaOp::create(
          B.b, B.loc, RankedTensorType::get({n, padded}, B.b.getI64Type()), 1);
      c.z = B.select(
          B.cmp(ComparePredicate::lt, column, B.splat(column, (double)classes)),
          c.z, B.splat(c.z, -INFINITY));
    }
    c.oneHot = B.oneHot(c.z, yc);
    c.max = B.max(c.z, {1}, true);
    c.e = B.exp(B.sub(c.z, B.expand(c.max, {n, padded})));
    c.sum = B.sum(c.e, {1}, true);
    Value picked = B.sum(B.mul(unmasked, c.oneHot), {1}, false);
    c.losses = B.add(B.sub(B.reshape(B.loc, c.max, {n}), picked),
                     B.reshape(B.loc, B.log(c.sum), {n}));
    return c;
  }

  /// 1 where a label is not `ignore`, else 0, in the statistics' type.
  Value counted(ExprBuilder &B, Value labels, int64_t ignore) const {
    return B.castTo(
        B.cmp(ComparePredicate::ne, labels, B.splatLike(B.loc, labels, ignore)),
        stats);
  }

  /// What --report shows of `op`'s function: the head's logits, and a
  /// chunk's (`padded` classes as the GEMMs run them, from `classes`).
  void recordChunks(Operation *op) const {
    auto func = op->getParentOfType<func::FuncOp>();
    if (!func)
      return;
    Builder b(op->getContext());
    SmallVector<Attribute> records;
    if (auto old =
            func->getAttrOfType<ArrayAttr>(GpucDialect::kChunkedLossesAttrName))
      llvm::append_range(records, old.getValue());
    std::string logitsType;
    llvm::raw_string_ostream(logitsType) << element;
    SmallVector<NamedAttribute> record = {
        b.getNamedAttr("rows", b.getI64IntegerAttr(rows)),
        b.getNamedAttr("classes", b.getI64IntegerAttr(padded)),
        b.getNamedAttr("chunk_rows", b.getI64IntegerAttr(chunk)),
        b.getNamedAttr(
            "element_bytes",
            b.getI64IntegerAttr(element.getIntOrFloatBitWidth() / 8)),
        b.getNamedAttr("logits", b.getStringAttr(logitsType))};
    if (padded != classes)
      record.push_back(
          b.getNamedAttr("padded_from", b.getI64IntegerAttr(classes)));
    records.push_back(b.getDictionaryAttr(record));
    func->setAttr(GpucDialect::kChunkedLossesAttrName, b.getArrayAttr(records));
  }

  Value weight, bias;
  Type element, stats;
  int64_t rows, classes, features, padded, chunk;
};

/// A pattern lowering a head op (input, weight, optional bias) over the
/// chunks and padded vocabulary gpuc-decompose's options ask for.
template <typename OpTy> struct ChunkedHeadPattern : OpRewritePattern<OpTy> {
  ChunkedHeadPattern(MLIRContext *context, int64_t chunkRows,
                     int64_t chunkBytes, int64_t padClasses)
      : OpRewritePattern<OpTy>(context), chunkRows(chunkRows),
        chunkBytes(chunkBytes), padClasses(padClasses) {}

  ChunkedHead headOf(PatternRewriter &rewriter, OpTy op) const {
    return ChunkedHead(rewriter, op.getLoc(), op.getInput(), op.getWeight(),
                       op.getBias(), padClasses, chunkRows, chunkBytes);
  }

  int64_t chunkRows, chunkBytes, padClasses;
};

/// The loss and gradients of a linear cross-entropy, a chunk of rows at a
/// time: the chunk's logits exist only until its gradient is taken, so the
/// step never holds all [N, V] logits. Each chunk writes its rows of the
/// input's gradient into their part of the result (a concat the memory
/// plan assembles in place) and adds its share of the weight's gradient to
/// the sum so far (a GEMM accumulating over it).
struct DecomposeLinearCrossEntropyGrad
    : ChunkedHeadPattern<LinearCrossEntropyGradOp> {
  using ChunkedHeadPattern::ChunkedHeadPattern;

  LogicalResult matchAndRewrite(LinearCrossEntropyGradOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Value x = op.getInput(), labels = op.getLabels();
    ChunkedHead head = headOf(rewriter, op);
    bool bias = bool(op.getBias());
    Type element = head.element, stats = head.stats;
    int64_t rows = head.rows, classes = head.classes, padded = head.padded,
            features = head.features;
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    // The weight of each counted row's gradient: the loss's gradient, over
    // the count of counted rows for a mean.
    Value scalarWeight = B.castTo(op.getResultGrad(), stats), count;
    if (op.getReduction() == Reduction::mean) {
      count = ignore ? B.sum(head.counted(B, labels, *ignore), {0}, false)
                     : B.splat(scalarWeight, (double)rows);
      scalarWeight = B.div(scalarWeight, count);
    }
    Value total, weightGrad, biasGrad;
    SmallVector<Value> inputGrads;
    for (int64_t r0 = 0; r0 < rows; r0 += head.chunk) {
      int64_t r1 = std::min(rows, r0 + head.chunk), n = r1 - r0;
      Value xc = rowSlice(B, x, r0, r1), yc = rowSlice(B, labels, r0, r1);
      ChunkedHead::Chunk c = head.logits(B, xc, yc);
      Value losses = c.losses;
      Value rowWeight = B.expand(scalarWeight, {n});
      if (ignore) {
        Value valid = head.counted(B, yc, *ignore);
        losses = B.mul(losses, valid);
        rowWeight = B.mul(rowWeight, valid);
      }
      Value partial = B.sum(losses, {0}, false);
      total = total ? B.add(total, partial) : partial;
      // The softmax is each exponential times its row's reciprocal: divided,
      // every logit of the gradient's pass paid a division, that pass's
      // costliest operation on either device.
      Value dz =
          B.mul(B.sub(B.mul(c.e, B.expand(B.reciprocal(c.sum), {n, padded})),
                      c.oneHot),
                B.expand(B.reshape(B.loc, rowWeight, {n, 1}), {n, padded}));
      Value dzStored = B.castTo(dz, element);
      inputGrads.push_back(MatmulOp::create(
          rewriter, op.getLoc(), RankedTensorType::get({n, features}, element),
          dzStored, head.weight));
      weightGrad =
          MatmulOp::create(rewriter, op.getLoc(),
                           RankedTensorType::get({padded, features}, stats),
                           dzStored, xc, weightGrad, /*bias=*/Value(),
                           /*transpose_lhs=*/true,
                           /*transpose_rhs=*/false, /*lhs_perm=*/{},
                           /*rhs_perm=*/{}, /*result_perm=*/{},
                           /*lhs_window=*/nullptr, /*rhs_window=*/nullptr,
                           /*lhs_triangle=*/nullptr,
                           /*result_triangle=*/nullptr, /*bands=*/nullptr);
      if (bias) {
        // From the stored gradient, as the GEMMs read it.
        Value partialBias = B.sum(B.castTo(dzStored, stats), {0}, false);
        biasGrad = biasGrad ? B.add(biasGrad, partialBias) : partialBias;
      }
    }
    if (padded != classes) {
      weightGrad = SliceOp::create(
          rewriter, op.getLoc(),
          RankedTensorType::get({classes, features}, stats), weightGrad,
          ArrayRef<int64_t>{0, 0}, ArrayRef<int64_t>{classes, features},
          ArrayRef<int64_t>{1, 1});
      if (bias)
        biasGrad = SliceOp::create(
            rewriter, op.getLoc(), RankedTensorType::get({classes}, stats),
            biasGrad, ArrayRef<int64_t>{0}, ArrayRef<int64_t>{classes},
            ArrayRef<int64_t>{1});
    }
    weightGrad = B.castTo(weightGrad, element);
    if (bias)
      biasGrad = B.castTo(biasGrad, element);
    head.recordChunks(op);
    Value loss = B.castTo(count ? B.div(total, count) : total,
                          getElementTypeOrSelf(op.getResult().getType()));
    Value inputGrad = inputGrads.size() == 1
                          ? inputGrads[0]
                          : ConcatOp::create(rewriter, op.getLoc(), x.getType(),
                                             inputGrads, 0)
                                .getResult();
    SmallVector<Value> results{loss, inputGrad, weightGrad};
    if (bias)
      results.push_back(biasGrad);
    // The forward op of the same head reads this loss (whichever of the two
    // the driver reaches first).
    for (Operation *user : llvm::make_early_inc_range(x.getUsers()))
      if (auto forward = dyn_cast<LinearCrossEntropyOp>(user);
          forward && sameHead(forward, op))
        rewriter.replaceOp(forward, loss);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// A language model's held-out scores, a chunk of rows at a time as its
/// gradient runs: each chunk's rows' losses and hits (their first largest
/// logit is the label's) are written into their part of two [N] vectors (a
/// concat the memory plan assembles in place), each summed once at the end.
struct DecomposeLinearTokenScores : ChunkedHeadPattern<LinearTokenScoresOp> {
  using ChunkedHeadPattern::ChunkedHeadPattern;

  LogicalResult matchAndRewrite(LinearTokenScoresOp op,
                                PatternRewriter &rewriter) const override {
    ExprBuilder B(rewriter, op.getLoc());
    Value x = op.getInput(), labels = op.getLabels();
    ChunkedHead head = headOf(rewriter, op);
    std::optional<int64_t> ignore = op.getIgnoreIndex();
    SmallVector<Value> losses, hits;
    for (int64_t r0 = 0; r0 < head.rows; r0 += head.chunk) {
      int64_t r1 = std::min(head.rows, r0 + head.chunk), n = r1 - r0;
      Value xc = rowSlice(B, x, r0, r1), yc = rowSlice(B, labels, r0, r1);
      ChunkedHead::Chunk c = head.logits(B, xc, yc);
      // The first column holding the row's largest logit, as the largest
      // of the negated columns that hold it (a float holds every column
      // index exactly).
      auto shape = RankedTensorType::get({n, head.padded}, B.b.getI64Type());
      Value negated = B.neg(B.castTo(
          IotaOp::create(rewriter, op.getLoc(), shape, 1), head.stats));
      Value atMax =
          B.cmp(ComparePredicate::eq, c.z, B.expand(c.max, {n, head.padded}));
      Value first = B.max(
          B.select(atMax, negated, B.splat(negated, -(double)head.padded)), {1},
          false);
      Value hit = B.castTo(
          B.cmp(ComparePredicate::eq, B.neg(first), B.castTo(yc, head.stats)),
          head.stats);
      Value loss = c.losses;
      if (ignore) {
        Value valid = head.counted(B, yc, *ignore);
        loss = B.mul(loss, valid);
        hit = B.mul(hit, valid);
      }
      losses.push_back(loss);
      hits.push_back(hit);
    }
    head.recordChunks(op);
    auto rowsOf = [&](ArrayRef<Value> parts) -> Value {
      if (parts.size() == 1)
        return parts[0];
      return ConcatOp::create(rewriter, op.getLoc(),
                              RankedTensorType::get({head.rows}, head.stats),
                              parts, 0);
    };
    Type result = getElementTypeOrSelf(op.getLossSum().getType());
    rewriter.replaceOp(op, {B.castTo(B.sum(rowsOf(losses), {0}, false), result),
                            B.castTo(B.sum(rowsOf(hits), {0}, false), result)});
    return success();
  }
};

struct Decompose : gpuc::impl::GpucDecomposeBase<Decompose> {
  using Base::Base;

  /// The flash lowering keeps the attention ops; a causal mask among them
  /// becomes their mask_triangle, and the operand goes: the fused kernels
  /// compare indices (and skip the tiles it excludes whole), so the kernel
  /// that computed it (nanoGPT compares each layer's tril buffer) and the
  /// buffer it filled are gone. The buffer's values stay checked at load
  /// (recordOn). A causal mask combined with another (Hugging Face's
  /// padding mask) keeps the other as the operand, without its broadcast
  /// over the queries: the kernels still skip the tiles the triangle
  /// excludes, and read the other for the rest.
  void markTriangularMasks() {
    auto mark = [](auto op) {
      if (!op.getMask() || op.getMaskTriangle())
        return;
      std::optional<TriangularMask> triangle =
          matchTriangularMask(op.getMask());
      Value other;
      if (!triangle) {
        if (std::optional<TriangleAndMask> combined =
                matchTriangleAndMask(op.getMask(), op.getMaskKeeps())) {
          triangle = combined->triangle;
          other = combined->other;
        }
      }
      if (!triangle || triangle->keyVsQuery == ComparePredicate::eq ||
          triangle->keyVsQuery == ComparePredicate::ne)
        return;
      triangle->recordOn();
      op.setMaskTriangleAttr(
          ComparePredicateAttr::get(op.getContext(), triangle->keyVsQuery));
      if (other)
        op.getMaskMutable().assign(other);
      else
        op.getMaskMutable().clear();
    };
    getOperation().walk([&](AttentionOp op) { mark(op); });
    getOperation().walk([&](AttentionGradOp op) { mark(op); });
  }

  /// The fused backward recomputes a row's weights from its logsumexp,
  /// stored in f32: for a row whose mask excludes every key, `fill +
  /// log(keys)`, which keeps none of log(keys)'s digits once the fill is
  /// far below zero (Hugging Face fills with the lowest float). Such a
  /// row's gradients are then wrong: said, not left silent, once for each
  /// such fill (the step, eval and forward functions hold the same
  /// attentions).
  void warnOfLostRowWeights() {
    constexpr double kFillLosingWeights = -1e5;
    SmallVector<double> said;
    getOperation().walk([&](AttentionOp op) {
      double fill = op.getFill().convertToDouble();
      if ((!op.getMask() && !op.getMaskTriangle()) || std::isinf(fill) ||
          fill > kFillLosingWeights || llvm::is_contained(said, fill))
        return;
      // A causal mask keeps every row's own key (unless a padding mask
      // read beside it excludes it).
      if (std::optional<ComparePredicate> triangle = op.getMaskTriangle();
          triangle && !op.getMask()) {
        bool strict = *triangle == ComparePredicate::gt ||
                      *triangle == ComparePredicate::lt;
        if (strict != op.getMaskKeeps())
          return;
      }
      op.emitWarning()
          << "masks scores with a fill of " << fill
          << ": under the flash lowering a query row whose mask excludes "
             "every key gets wrong gradients (its weights are recomputed "
             "from fill + log(keys) in f32, which rounds log(keys) away); "
             "the gemm lowering (gpuc compile --attention gemm), or a fill "
             "of -inf, computes them as softmax does";
      said.push_back(fill);
    });
  }

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeSoftmax, DecomposeLogSoftmax, DecomposeLayerNorm,
                 DecomposeBatchNormTrain,
                 DecomposeClassLoss<CrossEntropyOp, /*FromLogits=*/true>,
                 DecomposeClassLoss<NllLossOp, /*FromLogits=*/false>,
                 DecomposeMseLoss, DecomposeScatterAdd,
                 DecomposeLinearCrossEntropy>(&getContext());
    if (lossChunkRows < 0) {
      getOperation().emitError()
          << "loss-chunk-rows " << (int64_t)lossChunkRows << " is negative";
      return signalPassFailure();
    }
    if (padClasses < 0) {
      getOperation().emitError()
          << "pad-classes " << (int64_t)padClasses << " is negative";
      return signalPassFailure();
    }
    if (lossChunkBytes < 1) {
      getOperation().emitError()
          << "loss-chunk-bytes " << (int64_t)lossChunkBytes
          << " is not a positive size";
      return signalPassFailure();
    }
    patterns.add<DecomposeLinearCrossEntropyGrad, DecomposeLinearTokenScores>(
        &getContext(), lossChunkRows, lossChunkBytes, padClasses);
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
      if (triangleBandRows < 0) {
        getOperation().emitError()
            << "triangle-band-rows " << (int64_t)triangleBandRows
            << " is negative";
        return signalPassFailure();
      }
      populateAttentionGemmPatterns(patterns, triangleBandRows);
    } else if (attention == "flash") {
      markTriangularMasks();
      warnOfLostRowWeights();
    } else {
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

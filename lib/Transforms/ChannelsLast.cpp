//===- ChannelsLast.cpp - convolutions over NHWC tensors ------------------===//
//
// Tensor cores multiply a convolution as a GEMM over its channels, so cuDNN
// reads NHWC tensors as they are and NCHW ones only after reordering them
// (for bf16, a kernel of its own around every convolution, and its bf16
// NCHW algorithms are few). This pass makes every convolution and its two
// gradients channels last: the op reads transposes of its NCHW (OIHW)
// operands and its result is transposed back. The transposes then sink
// through the layout-blind ops after them (elementwise ops, reductions,
// broadcasts, concatenations), each becoming that op over its operands'
// NHWC forms, until one meets the transpose into the next convolution and
// the two cancel; pooling windows and their gradients take the channels-last
// form too. What is left moves the model's input in, the filters and their
// gradients (small), and the activations around an op that knows only NCHW.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCCHANNELSLAST
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Shape inversePermutation(ArrayRef<int64_t> perm) {
  Shape inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return inverse;
}

/// `transpose(v, perm)`, folded where it can be (a constant, a transpose).
Value transposed(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  RankedTensorType type = tensorType(v);
  return b.createOrFold<TransposeOp>(
      loc, type.clone(permuteShape(type.getShape(), perm)), v, perm);
}

/// Replaces a convolution (or gradient) of NCHW tensors and an OIHW filter
/// by the channels-last one between transposes. Both operands and the
/// result take the same permutation in either of the three ops.
template <typename ConvOp> void holdChannelsLast(ConvOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value lhs = transposed(b, loc, op->getOperand(0), kToChannelsLast);
  Value rhs = transposed(b, loc, op->getOperand(1), kToChannelsLast);
  RankedTensorType type = tensorType(op.getResult());
  auto conv = ConvOp::create(
      b, loc, type.clone(permuteShape(type.getShape(), kToChannelsLast)), lhs,
      rhs, op.getStrides(), op.getPads(), op.getDilations(), op.getGroups(),
      /*channels_last=*/true);
  op.getResult().replaceAllUsesWith(
      transposed(b, loc, conv.getResult(), kToChannelsFirst));
  op.erase();
}

/// The pass moves only its own transposes: back to NCHW (sinking) and, for
/// what is cheap, into NHWC (hoisting). Others (attention's head splits,
/// which gpuc-fold-layouts folds into GEMMs) stay where they are.
bool toChannelsFirst(ArrayRef<int64_t> perm) {
  return perm == ArrayRef<int64_t>(kToChannelsFirst);
}
bool convolutionLayout(ArrayRef<int64_t> perm) {
  return toChannelsFirst(perm) || perm == ArrayRef<int64_t>(kToChannelsLast);
}

/// `op` again over `operands`, which hold its operands permuted by
/// `resultPerm` (a transpose's perm): its single result is permuted alike.
Operation *cloneInLayout(PatternRewriter &rewriter, Operation *op,
                         ValueRange operands, ArrayRef<int64_t> resultPerm) {
  Operation *moved = rewriter.clone(*op);
  moved->setOperands(operands);
  RankedTensorType type = tensorType(op->getResult(0));
  moved->getResult(0).setType(
      type.clone(permuteShape(type.getShape(), resultPerm)));
  return moved;
}

bool isElementwise(Operation *op) {
  return op && op->hasTrait<OpTrait::Elementwise>() &&
         op->getNumResults() == 1 && op->getNumOperands() > 0 &&
         op->getNumRegions() == 0;
}

/// Whether `v` costs little to hold in another layout: a constant that
/// folds transposed, a broadcast (its smaller input is transposed), or an
/// elementwise op of such values (a gradient that starts as a broadcast,
/// scaled): kernels recompute those from the small tensors anyway.
bool cheapToTranspose(Value v, int depth = 0) {
  Operation *op = v.getDefiningOp();
  if (auto constant = dyn_cast_if_present<ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    return dense && (dense.isSplat() || dense.getNumElements() <= 4096);
  }
  if (isa_and_present<BroadcastOp>(op))
    return true;
  return depth < 4 && isElementwise(op) &&
         llvm::all_of(op->getOperands(), [&](Value operand) {
           return cheapToTranspose(operand, depth + 1);
         });
}

/// elementwise(transpose(x, p), ...) -> transpose(elementwise(x, ...), p),
/// when every other operand is a transpose by the same p or cheap to hold
/// un-transposed: no full-size transpose is added, one moves later.
struct SinkThroughElementwise : RewritePattern {
  SinkThroughElementwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isElementwise(op))
      return failure();
    // A transpose of a cheap value moves up instead
    // (HoistThroughCheapElementwise); one of them here would undo that.
    ArrayRef<int64_t> perm;
    for (Value operand : op->getOperands())
      if (auto t = operand.getDefiningOp<TransposeOp>();
          t && toChannelsFirst(t.getPerm()) &&
          !cheapToTranspose(t.getInput())) {
        perm = t.getPerm();
        break;
      }
    if (perm.empty())
      return failure();
    auto samePerm = [&](Value operand) {
      auto t = operand.getDefiningOp<TransposeOp>();
      return t && t.getPerm() == perm;
    };
    // Decided before anything is built: a failed match leaves no op behind.
    if (!llvm::all_of(op->getOperands(), [&](Value operand) {
          return samePerm(operand) || cheapToTranspose(operand);
        }))
      return failure();
    Shape inverse = inversePermutation(perm);
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(
          samePerm(operand)
              ? operand.getDefiningOp<TransposeOp>().getInput()
              : transposed(rewriter, op->getLoc(), operand, inverse));
    Operation *moved = cloneInLayout(rewriter, op, operands, inverse);
    rewriter.replaceOp(
        op, transposed(rewriter, op->getLoc(), moved->getResult(0), perm));
    return success();
  }
};

/// reduce(transpose(x, p), axes) -> the reduction of x over the axes they
/// are in x, its result transposed as the kept axes were.
template <typename ReduceOp>
struct SinkThroughReduction : OpRewritePattern<ReduceOp> {
  using OpRewritePattern<ReduceOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().template getDefiningOp<TransposeOp>();
    if (!t || !toChannelsFirst(t.getPerm()))
      return failure();
    ArrayRef<int64_t> perm = t.getPerm();
    Shape axes;
    for (int64_t a : op.getAxes())
      axes.push_back(perm[a]);
    llvm::sort(axes);
    bool keepDims = op.getKeepDims();
    Value x = t.getInput();
    Shape shape = inferReduceShape(tensorType(x).getShape(), axes, keepDims);
    auto reduced = ReduceOp::create(rewriter, op.getLoc(),
                                    tensorType(op.getResult()).clone(shape), x,
                                    axes, keepDims);
    // The result's axes, as the reduction of x holds them: all of x's with
    // keep_dims, else those it keeps, in x's order.
    Shape resultPerm;
    if (keepDims) {
      resultPerm.assign(perm.begin(), perm.end());
    } else {
      Shape kept;
      for (int64_t p : perm)
        if (!llvm::is_contained(axes, p))
          kept.push_back(p);
      Shape order(kept);
      llvm::sort(order);
      for (int64_t k : kept)
        resultPerm.push_back(llvm::find(order, k) - order.begin());
    }
    rewriter.replaceOp(
        op, transposed(rewriter, op.getLoc(), reduced.getResult(), resultPerm));
    return success();
  }
};

/// concat(transpose(x, p), transpose(y, p), ...) -> transpose(concat(x, y,
/// ...), p), along the axis that axis is in x.
struct SinkThroughConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> perm;
    SmallVector<Value> inputs;
    for (Value input : op.getInputs()) {
      auto t = input.getDefiningOp<TransposeOp>();
      if (!t || (!perm.empty() && t.getPerm() != perm))
        return failure();
      perm = t.getPerm();
      inputs.push_back(t.getInput());
    }
    if (!toChannelsFirst(perm))
      return failure();
    RankedTensorType type = tensorType(op.getResult());
    Shape inverse = inversePermutation(perm);
    auto concat =
        ConcatOp::create(rewriter, op.getLoc(),
                         type.clone(permuteShape(type.getShape(), inverse)),
                         inputs, perm[op.getAxis()]);
    rewriter.replaceOp(
        op, transposed(rewriter, op.getLoc(), concat.getResult(), perm));
    return success();
  }
};

/// slice(transpose(x, p)) -> transpose(slice'(x), p), slice' taking each
/// axis's starts, limits and strides where that axis is in x. A
/// concatenation's gradient is slices of the gradient of its result:
/// DenseNet's, without this, were each transposed to NCHW, sliced, and
/// transposed back into the next convolution (363 transposes a step).
struct SinkThroughSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<TransposeOp>();
    if (!t || !toChannelsFirst(t.getPerm()))
      return failure();
    ArrayRef<int64_t> perm = t.getPerm();
    Shape inverse = inversePermutation(perm);
    RankedTensorType type = tensorType(op.getResult());
    auto slice =
        SliceOp::create(rewriter, op.getLoc(),
                        type.clone(permuteShape(type.getShape(), inverse)),
                        t.getInput(), permuteShape(op.getStarts(), inverse),
                        permuteShape(op.getLimits(), inverse),
                        permuteShape(op.getStrides(), inverse));
    rewriter.replaceOp(
        op, transposed(rewriter, op.getLoc(), slice.getResult(), perm));
    return success();
  }
};

/// A pooling window (or its gradient) over NCHW views of NHWC tensors
/// becomes the channels-last one: pool(transpose(x, to NCHW)) ->
/// transpose(pool'(x), to NCHW).
struct SinkThroughWindows : RewritePattern {
  SinkThroughWindows(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  static std::optional<bool> channelsLast(Operation *op) {
    return llvm::TypeSwitch<Operation *, std::optional<bool>>(op)
        .Case<MaxPool2DOp, MaxPool2DArgmaxOp, MaxPool2DBackwardOp, AvgPool2DOp,
              AvgPool2DBackwardOp>(
            [](auto p) -> std::optional<bool> { return p.getChannelsLast(); })
        .Default([](Operation *) { return std::nullopt; });
  }

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    std::optional<bool> last = channelsLast(op);
    if (!last || *last)
      return failure();
    // A window's gradient is as large as the forward window's input, and
    // what reads it (a batch norm's or ReLU's gradient, the convolution's)
    // holds NHWC values: its smaller incoming gradient is transposed
    // instead, however it was computed (a flatten's NCHW gradient from the
    // classifier).
    bool backward = isa<MaxPool2DBackwardOp, AvgPool2DBackwardOp>(op);
    auto fromChannelsLast = [](Value operand) {
      auto t = operand.getDefiningOp<TransposeOp>();
      return t && t.getPerm() == ArrayRef<int64_t>(kToChannelsFirst) &&
             !cheapToTranspose(t.getInput());
    };
    // Decided before anything is built: a failed match leaves no op behind.
    bool moves = llvm::any_of(op->getOperands(), fromChannelsLast);
    if (!backward &&
        (!moves || !llvm::all_of(op->getOperands(), [&](Value operand) {
          return fromChannelsLast(operand) || cheapToTranspose(operand);
        })))
      return failure();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(
          fromChannelsLast(operand)
              ? operand.getDefiningOp<TransposeOp>().getInput()
              : transposed(rewriter, op->getLoc(), operand, kToChannelsLast));
    Operation *moved = cloneInLayout(rewriter, op, operands, kToChannelsLast);
    llvm::TypeSwitch<Operation *>(moved)
        .Case<MaxPool2DOp, MaxPool2DArgmaxOp, MaxPool2DBackwardOp, AvgPool2DOp,
              AvgPool2DBackwardOp>([](auto p) { p.setChannelsLast(true); });
    rewriter.replaceOp(op, transposed(rewriter, op->getLoc(),
                                      moved->getResult(0), kToChannelsFirst));
    return success();
  }
};

/// transpose(broadcast(s), p) -> broadcast(transpose(s', p)), s' being s
/// with the broadcast's leading 1s: the transpose moves the small tensor.
struct TransposeBroadcastInput : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto broadcast = op.getInput().getDefiningOp<BroadcastOp>();
    if (!broadcast || !convolutionLayout(op.getPerm()))
      return failure();
    Value s = broadcast.getInput();
    RankedTensorType sType = tensorType(s);
    int64_t rank = op.getPerm().size();
    if (sType.getRank() < rank) {
      Shape padded(rank - sType.getRank(), 1);
      llvm::append_range(padded, sType.getShape());
      s = rewriter.createOrFold<ReshapeOp>(op.getLoc(), sType.clone(padded), s);
    }
    Value moved = transposed(rewriter, op.getLoc(), s, op.getPerm());
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), moved);
    return success();
  }
};

/// transpose(elementwise(a, b, ...), p) -> elementwise(transpose(a, p),
/// transpose(b, p), ...) when every operand is cheap to transpose: the
/// transpose moves up to the broadcasts and constants.
struct HoistThroughCheapElementwise : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    Operation *producer = op.getInput().getDefiningOp();
    if (!convolutionLayout(op.getPerm()) || !isElementwise(producer) ||
        !cheapToTranspose(op.getInput()) ||
        isa<BroadcastOp, ConstantOp>(producer))
      return failure();
    SmallVector<Value> operands;
    for (Value operand : producer->getOperands())
      operands.push_back(
          transposed(rewriter, op.getLoc(), operand, op.getPerm()));
    rewriter.replaceOp(op,
                       cloneInLayout(rewriter, producer, operands, op.getPerm())
                           ->getResults());
    return success();
  }
};

/// A transpose that only moves axes of size 1 keeps the elements in order:
/// it is a reshape, which no kernel copies.
struct UnitTransposeToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> shape = tensorType(op.getInput()).getShape();
    int64_t last = -1;
    for (int64_t p : op.getPerm()) {
      if (shape[p] == 1)
        continue;
      if (p < last)
        return failure();
      last = p;
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getInput());
    return success();
  }
};

struct GpucChannelsLast : gpuc::impl::GpucChannelsLastBase<GpucChannelsLast> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> convolutions;
    getOperation().walk([&](Operation *op) {
      if (auto c = dyn_cast<Conv2DOp>(op); c && !c.getChannelsLast())
        convolutions.push_back(op);
      if (auto c = dyn_cast<Conv2DBackwardInputOp>(op);
          c && !c.getChannelsLast())
        convolutions.push_back(op);
      if (auto c = dyn_cast<Conv2DBackwardFilterOp>(op);
          c && !c.getChannelsLast())
        convolutions.push_back(op);
    });
    // Without a convolution nothing holds NHWC values to meet: windows
    // alone keep their layout.
    if (convolutions.empty())
      return;
    auto grouped = [](Operation *op) {
      if (auto c = dyn_cast<Conv2DOp>(op))
        return c.getGroups() > 1;
      if (auto c = dyn_cast<Conv2DBackwardInputOp>(op))
        return c.getGroups() > 1;
      return cast<Conv2DBackwardFilterOp>(op).getGroups() > 1;
    };
    if (groupedOnly && llvm::none_of(convolutions, grouped))
      return;
    for (Operation *op : convolutions) {
      if (auto c = dyn_cast<Conv2DOp>(op))
        holdChannelsLast(c);
      else if (auto c = dyn_cast<Conv2DBackwardInputOp>(op))
        holdChannelsLast(c);
      else
        holdChannelsLast(cast<Conv2DBackwardFilterOp>(op));
    }
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<SinkThroughElementwise, SinkThroughReduction<ReduceSumOp>,
                 SinkThroughReduction<ReduceMaxOp>,
                 SinkThroughReduction<ReduceMeanOp>, SinkThroughConcat,
                 SinkThroughSlice, SinkThroughWindows, TransposeBroadcastInput,
                 HoistThroughCheapElementwise, UnitTransposeToReshape>(context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

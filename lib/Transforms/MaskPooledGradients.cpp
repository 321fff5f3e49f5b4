//===- MaskPooledGradients.cpp - a ReLU's mask on max pooling's side ------===//
//
// A ReLU before max pooling (ResNet's stem, most small CNNs) has a gradient
// mask after the pooling's gradient: select(x > 0, max_pool2d_backward(
// argmax(x), dy), 0), which reads x, the ReLU's output, in backward, so the
// step keeps it from forward: ResNet's largest activation. The pooling's
// gradient routes each window's value to the position of the window's
// maximum, where x is the pooled value, so x > 0 there exactly when the
// pooled value is (as for any comparison with a constant), and where
// nothing is routed the gradient is 0 either way: max_pool2d_backward(
// argmax(x), select(max_pool2d(x) > 0, dy, 0)) is the same gradient, bit
// for bit, and reads the pooled tensor, which the next layer keeps anyway
// (a quarter of x or less). x then dies with the pooling.
//
// Not under memory-first fusion: there the pooling reads the ReLU computed
// (x is never stored) and batch norm's backward computes the mask from the
// normalized input it reads anyway, where the pooled tensor would be one
// more to keep until then.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Constants.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCMASKPOOLEDGRADIENTS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// select(x OP c, max_pool2d_backward(argmax(x), dy), 0) as
/// max_pool2d_backward(argmax(x), select(max_pool2d(x) OP c, dy, 0)).
struct MaskBeforeMaxPoolGradient : OpRewritePattern<SelectOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SelectOp select,
                                PatternRewriter &rewriter) const override {
    auto compare = select.getCond().getDefiningOp<CompareOp>();
    auto backward = select.getOnTrue().getDefiningOp<MaxPool2DBackwardOp>();
    if (!compare || !backward || !backward->hasOneUse())
      return failure();
    DenseElementsAttr threshold = constantOf(compare.getRhs());
    DenseElementsAttr otherwise = constantOf(select.getOnFalse());
    std::optional<double> otherwiseValue = splatOf(select.getOnFalse());
    if (!threshold || !threshold.isSplat() || !otherwiseValue ||
        *otherwiseValue != 0.0)
      return failure();
    Value x = compare.getLhs();
    auto argmax = backward.getIndices().getDefiningOp<MaxPool2DArgmaxOp>();
    if (!argmax || argmax.getInput() != x)
      return failure();
    auto gradType = cast<RankedTensorType>(backward.getGradOutput().getType());
    if (gradType.getElementType() != getElementTypeOrSelf(select.getType()))
      return failure();
    // The pooled maximum, which the forward computed beside its positions.
    MaxPool2DOp pooled;
    for (Operation *user : x.getUsers()) {
      auto pool = dyn_cast<MaxPool2DOp>(user);
      if (pool && pool->getBlock() == select->getBlock() &&
          pool->isBeforeInBlock(select) &&
          pool.getKernel() == argmax.getKernel() &&
          pool.getStrides() == argmax.getStrides() &&
          pool.getPads() == argmax.getPads() &&
          pool.getChannelsLast() == argmax.getChannelsLast() &&
          pool.getType() == gradType)
        pooled = pool;
    }
    if (!pooled)
      return failure();
    Location loc = select.getLoc();
    Value zero =
        ConstantOp::create(rewriter, loc, otherwise.resizeSplat(gradType));
    Value kept = CompareOp::create(
        rewriter, loc, compare.getPredicate(), pooled.getResult(),
        ConstantOp::create(rewriter, loc, threshold.resizeSplat(gradType)));
    Value masked =
        SelectOp::create(rewriter, loc, kept, backward.getGradOutput(), zero);
    rewriter.replaceOpWithNewOp<MaxPool2DBackwardOp>(
        select, backward.getType(), argmax, masked, backward.getKernel(),
        backward.getStrides(), backward.getPads(), backward.getChannelsLast());
    return success();
  }
};

struct MaskPooledGradients
    : gpuc::impl::GpucMaskPooledGradientsBase<MaskPooledGradients> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MaskBeforeMaxPoolGradient>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

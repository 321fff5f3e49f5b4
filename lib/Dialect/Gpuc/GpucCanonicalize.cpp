//===- GpucCanonicalize.cpp - rewrites the canonicalizer applies ----------===//
//
// Rewrites that replace ops by others (folds, which only replace an op by a
// value, are in GpucFold.cpp).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// add(pad(a), pad(b)) where both pads fill with zero, agree on every axis
/// but one, and place a and b side by side along it: pad(concat(a, b)),
/// whose pad vanishes when a and b cover the axis. Autodiff sums the
/// gradients of a split's slices (a fused QKV projection's q, k and v) as
/// pads of each: two such rewrites make them one concatenation, which a
/// kernel reads with one load per element instead of three masked ones.
struct SumOfAdjacentPadsIsConcat : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto first = add.getLhs().getDefiningOp<PadOp>();
    auto second = add.getRhs().getDefiningOp<PadOp>();
    if (!first || !second || first == second || !first->hasOneUse() ||
        !second->hasOneUse())
      return failure();
    if (first.getValue().convertToDouble() != 0.0 ||
        second.getValue().convertToDouble() != 0.0)
      return failure();
    ArrayRef<int64_t> lowA = first.getLow(), highA = first.getHigh();
    ArrayRef<int64_t> lowB = second.getLow(), highB = second.getHigh();
    auto typeA = cast<RankedTensorType>(first.getInput().getType());
    auto typeB = cast<RankedTensorType>(second.getInput().getType());
    int64_t axis = -1;
    for (size_t d = 0; d < lowA.size(); ++d) {
      if (lowA[d] == lowB[d] && highA[d] == highB[d])
        continue;
      if (axis >= 0)
        return failure();
      axis = d;
    }
    if (axis < 0 ||
        llvm::any_of(llvm::concat<const int64_t>(lowA, highA, lowB, highB),
                     [](int64_t p) { return p < 0; }))
      return failure();
    // Order the two along the axis; they must touch.
    if (lowB[axis] < lowA[axis]) {
      std::swap(first, second);
      std::swap(lowA, lowB);
      std::swap(highA, highB);
      std::swap(typeA, typeB);
    }
    if (lowA[axis] + typeA.getDimSize(axis) != lowB[axis])
      return failure();
    SmallVector<int64_t> joined(typeA.getShape());
    joined[axis] += typeB.getDimSize(axis);
    // A side that is already a concatenation along the axis (of the
    // slices summed before) contributes its inputs: one concatenation of
    // all the slices.
    SmallVector<Value> inputs;
    for (Value side : {first.getInput(), second.getInput()}) {
      auto inner = side.getDefiningOp<ConcatOp>();
      if (inner && inner.getAxis() == axis && inner->hasOneUse())
        llvm::append_range(inputs, inner.getInputs());
      else
        inputs.push_back(side);
    }
    Value concat = ConcatOp::create(rewriter, add.getLoc(), typeA.clone(joined),
                                    inputs, axis);
    SmallVector<int64_t> low(lowA), high(highA);
    high[axis] = highB[axis];
    if (llvm::all_of(llvm::concat<const int64_t>(low, high),
                     [](int64_t p) { return p == 0; })) {
      rewriter.replaceOp(add, concat);
      return success();
    }
    rewriter.replaceOpWithNewOp<PadOp>(add, add.getType(), concat, low, high,
                                       first.getValueAttr());
    return success();
  }
};

} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<SumOfAdjacentPadsIsConcat>(context);
}

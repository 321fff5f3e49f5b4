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

/// transpose(reshape(x)) where the transpose keeps its leading dimensions
/// in place and the reshape changes only those: reshape(transpose(x)),
/// permuting x's trailing dimensions. PyTorch's export of
/// scaled_dot_product_attention transposes K as [B*H, T, D] between two
/// reshapes of [B, H, T, D]; with the reshapes adjacent they fold, and
/// the two transposes cancel.
struct TransposeBeforeLeadingReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    auto reshape = transpose.getInput().getDefiningOp<ReshapeOp>();
    if (!reshape)
      return failure();
    ArrayRef<int64_t> perm = transpose.getPerm();
    int64_t rank = perm.size(), kept = 0;
    while (kept < rank && perm[kept] == kept)
      ++kept;
    int64_t moved = rank - kept;
    ArrayRef<int64_t> from =
        cast<RankedTensorType>(reshape.getInput().getType()).getShape();
    ArrayRef<int64_t> to = cast<RankedTensorType>(reshape.getType()).getShape();
    int64_t fromRank = from.size();
    if (kept == 0 || moved < 2 || fromRank < moved ||
        from.take_back(moved) != to.take_back(moved))
      return failure();
    SmallVector<int64_t> newPerm, newShape;
    for (int64_t d = 0; d < fromRank - moved; ++d) {
      newPerm.push_back(d);
      newShape.push_back(from[d]);
    }
    for (int64_t d = kept; d < rank; ++d) {
      int64_t source = fromRank - moved + (perm[d] - kept);
      newPerm.push_back(source);
      newShape.push_back(from[source]);
    }
    Location loc = transpose.getLoc();
    auto permuted = TransposeOp::create(
        rewriter, loc,
        RankedTensorType::get(newShape, transpose.getType().getElementType()),
        reshape.getInput(), newPerm);
    rewriter.replaceOpWithNewOp<ReshapeOp>(transpose, transpose.getType(),
                                           permuted);
    return success();
  }
};

/// reduce(reshape(x)) where the reshape only merges runs of x's
/// dimensions: a reduction of x over the runs of the reduced dimensions,
/// then a reshape to the result where the kept ones were merged. Hugging
/// Face's Conv1D sums its bias gradient over [B*T, C], a reshape of the
/// [B, T, C] gradient the layer norm's weight gradient sums over [B, T]:
/// reading one tensor, the two sums join one column kernel. A cast between
/// them (mixed precision sums a 16-bit gradient in f32) moves onto x, where
/// CSE makes it the cast the other sum reads.
template <typename ReduceOpTy>
struct ReduceOverMergedDims : OpRewritePattern<ReduceOpTy> {
  using OpRewritePattern<ReduceOpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOpTy reduce,
                                PatternRewriter &rewriter) const override {
    auto converted = reduce.getInput().template getDefiningOp<CastOp>();
    auto reshape = (converted ? converted.getInput() : reduce.getInput())
                       .template getDefiningOp<ReshapeOp>();
    if (!reshape)
      return failure();
    ArrayRef<int64_t> from =
        cast<RankedTensorType>(reshape.getInput().getType()).getShape();
    ArrayRef<int64_t> to = cast<RankedTensorType>(reshape.getType()).getShape();
    // runs[j]: the first of x's dimensions that merge into dimension j
    // (each run at least one dimension long; x's trailing 1s join the last).
    SmallVector<int64_t> runs;
    int64_t i = 0, fromRank = from.size();
    for (int64_t size : to) {
      if (i == fromRank)
        return failure();
      runs.push_back(i);
      int64_t product = from[i++];
      while (product < size && i < fromRank)
        product *= from[i++];
      if (product != size)
        return failure();
    }
    while (i < fromRank && from[i] == 1)
      ++i;
    if (i != fromRank || runs.empty())
      return failure();
    runs.push_back(fromRank);
    SmallVector<int64_t> axes;
    for (int64_t axis : reduce.getAxes())
      for (int64_t d = runs[axis]; d < runs[axis + 1]; ++d)
        axes.push_back(d);
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < fromRank; ++d) {
      bool reduced = llvm::is_contained(axes, d);
      if (!reduced || reduce.getKeepDims())
        shape.push_back(reduced ? 1 : from[d]);
    }
    auto resultType = cast<RankedTensorType>(reduce.getType());
    auto type = RankedTensorType::get(shape, resultType.getElementType());
    Value input = reshape.getInput();
    if (converted)
      input =
          CastOp::create(rewriter, converted.getLoc(),
                         cast<RankedTensorType>(input.getType())
                             .clone(getElementTypeOrSelf(converted.getType())),
                         input);
    Value reduced = ReduceOpTy::create(rewriter, reduce.getLoc(), type, input,
                                       axes, reduce.getKeepDims());
    if (type == resultType)
      rewriter.replaceOp(reduce, reduced);
    else
      rewriter.replaceOpWithNewOp<ReshapeOp>(reduce, resultType, reduced);
    return success();
  }
};

/// gather(x, [s, s+1, ..., s+n-1]) along an axis: the slice of x from s to
/// s+n there (x itself where that is all of it). A model's positions
/// (`wpe(arange(T))`) are such a gather; as a slice no kernel copies the
/// table's rows, and its gradient is a pad where a scatter's was a sum
/// over groups of rows.
struct GatherOfRangeIsSlice : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather,
                                PatternRewriter &rewriter) const override {
    auto constant = gather.getIndices().getDefiningOp<ConstantOp>();
    auto indices = constant
                       ? dyn_cast<DenseIntElementsAttr>(constant.getValue())
                       : nullptr;
    if (!indices || indices.getType().getRank() != 1 || indices.empty())
      return failure();
    auto dataType = cast<RankedTensorType>(gather.getData().getType());
    int64_t axis = gather.getAxis(), extent = dataType.getDimSize(axis);
    int64_t first = 0, n = indices.getNumElements(), at = 0;
    for (APInt value : indices.getValues<APInt>()) {
      int64_t i = value.getSExtValue();
      if (i < -extent || i >= extent)
        return failure(); // Left for the run-time check to report.
      i = i < 0 ? i + extent : i;
      if (at == 0)
        first = i;
      else if (i != first + at)
        return failure();
      ++at;
    }
    if (first == 0 && n == extent) {
      rewriter.replaceOp(gather, gather.getData());
      return success();
    }
    int64_t rank = dataType.getRank();
    SmallVector<int64_t> starts(rank, 0), limits(dataType.getShape()),
        strides(rank, 1);
    starts[axis] = first;
    limits[axis] = first + n;
    rewriter.replaceOpWithNewOp<SliceOp>(
        gather, gather.getType(), gather.getData(), starts, limits, strides);
    return success();
  }
};

} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<TransposeBeforeLeadingReshape>(context);
}

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<GatherOfRangeIsSlice>(context);
}

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<SumOfAdjacentPadsIsConcat>(context);
}

void ReduceSumOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ReduceOverMergedDims<ReduceSumOp>>(context);
}

void ReduceMaxOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ReduceOverMergedDims<ReduceMaxOp>>(context);
}

void ReduceMeanOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<ReduceOverMergedDims<ReduceMeanOp>>(context);
}

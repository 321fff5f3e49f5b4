//===- ExprBuilder.h - compact tensor arithmetic for rewrites ---*- C++ -*-===//
//
// Gradient rules and the decomposition of composite ops both write tensor
// formulas out of core ops; this builder keeps those formulas readable and is
// the one place that knows how a mean, a one-hot or a normalization is spelled
// in core ops.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_EXPRBUILDER_H
#define GPUC_DIALECT_GPUC_EXPRBUILDER_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"

namespace mlir::gpuc {

/// Elementwise arithmetic on same-typed tensors at one location.
class ExprBuilder : public TensorBuilder {
public:
  ExprBuilder(OpBuilder &b, Location loc) : TensorBuilder(b), b(b), loc(loc) {}

  Value add(Value x, Value y) {
    return AddOp::create(b, loc, x.getType(), x, y);
  }
  Value sub(Value x, Value y) {
    return SubOp::create(b, loc, x.getType(), x, y);
  }
  Value mul(Value x, Value y) {
    return MulOp::create(b, loc, x.getType(), x, y);
  }
  Value div(Value x, Value y) {
    return DivOp::create(b, loc, x.getType(), x, y);
  }
  Value neg(Value x) { return NegOp::create(b, loc, x.getType(), x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x.getType(), x); }
  Value log(Value x) { return LogOp::create(b, loc, x.getType(), x); }
  Value rsqrt(Value x) { return RsqrtOp::create(b, loc, x.getType(), x); }
  Value reciprocal(Value x) {
    return ReciprocalOp::create(b, loc, x.getType(), x);
  }
  Value abs(Value x) { return AbsOp::create(b, loc, x.getType(), x); }
  Value relu(Value x) { return ReluOp::create(b, loc, x.getType(), x); }
  /// Elementwise minimum and maximum of two tensors of one shape.
  Value minimum(Value x, Value y) {
    return MinOp::create(b, loc, x.getType(), x, y);
  }
  Value maximum(Value x, Value y) {
    return MaxOp::create(b, loc, x.getType(), x, y);
  }
  Value scale(Value x, double c) { return mul(x, splat(x, c)); }
  Value splat(Value like, double c) { return splatLike(loc, like, c); }
  Value cmp(ComparePredicate p, Value x, Value y) {
    return CompareOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value t, Value f) {
    return SelectOp::create(b, loc, t.getType(), c, t, f);
  }
  /// `g` where `c` holds, zero elsewhere.
  Value where(Value c, Value g) { return select(c, g, splat(g, 0.0)); }
  /// `x` converted to `elementType` (itself when it has that type).
  Value castTo(Value x, Type elementType) {
    if (typeOf(x).getElementType() == elementType)
      return x;
    return CastOp::create(b, loc,
                          RankedTensorType::get(shapeOf(x), elementType), x);
  }
  Value sum(Value x, ArrayRef<int64_t> axes, bool keepDims) {
    if (axes.empty())
      return x;
    Shape shape = inferReduceShape(shapeOf(x), axes, keepDims);
    return ReduceSumOp::create(b, loc, withShape(x, shape), x, axes, keepDims);
  }
  Value max(Value x, ArrayRef<int64_t> axes, bool keepDims) {
    if (axes.empty())
      return x;
    Shape shape = inferReduceShape(shapeOf(x), axes, keepDims);
    return ReduceMaxOp::create(b, loc, withShape(x, shape), x, axes, keepDims);
  }
  /// The keep-dims mean over `axes`.
  Value mean(Value x, ArrayRef<int64_t> axes) {
    Shape shape = inferReduceShape(shapeOf(x), axes, /*keepDims=*/true);
    return ReduceMeanOp::create(b, loc, withShape(x, shape), x, axes, true);
  }
  /// Broadcasts `v`, a keep-dims reduction result, back to `shape`.
  Value expand(Value v, ArrayRef<int64_t> shape) {
    return broadcastTo(loc, v, shape);
  }
  /// Sums `g` (shaped like a broadcast's result) back to `shape`, the shape of
  /// the broadcast's input.
  Value sumToShape(Value g, ArrayRef<int64_t> shape);
  /// A per-channel vector (shape [C]) viewed so that it broadcasts along axis
  /// 1 of a rank-`rank` tensor.
  Value channelView(Value v, int64_t rank);
  /// One-hot of `labels` along axis 1 of `input`'s shape, as `input`'s type.
  Value oneHot(Value input, Value labels);

  OpBuilder &b;
  Location loc;
};

/// `[begin, end)` as axes.
SmallVector<int64_t> axisRange(int64_t begin, int64_t end);

/// Keep-dims means over `axes` of each of `xs` (one shape). With
/// `overRanks`, over every rank's batch: the sums and the count are summed
/// over the ranks in one gpuc.all_reduce, and `count` is that global count
/// (a scalar f32; null otherwise).
struct BatchMeans {
  SmallVector<Value> means;
  Value count;
};
BatchMeans batchMeans(ExprBuilder &B, ArrayRef<Value> xs,
                      ArrayRef<int64_t> axes, bool overRanks);

/// The bucket number for a new collective (gpuc.all_reduce,
/// reduce_scatter, all_gather) in the function holding `block`: one past
/// the largest there.
int64_t nextCollectiveNumber(Block *block);

/// `x` normalized over `axes` with the population variance, and the
/// reciprocal standard deviation broadcast to `x`'s shape (`overRanks`:
/// with the statistics of every rank's batch).
struct Normalized {
  Value xhat, rstd;
};
Normalized normalize(ExprBuilder &B, Value x, ArrayRef<int64_t> axes,
                     double epsilon, bool overRanks = false);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_EXPRBUILDER_H

//===- ExprBuilder.cpp - compact tensor arithmetic for rewrites -----------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <numeric>

using namespace mlir;
using namespace mlir::gpuc;

Value ExprBuilder::sumToShape(Value g, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> full = shapeOf(g);
  int64_t lead = full.size() - shape.size();
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < (int64_t)full.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && full[i] != 1))
      axes.push_back(i);
  return reshape(loc, sum(g, axes, /*keepDims=*/false), shape);
}

Value ExprBuilder::channelView(Value v, int64_t rank) {
  Shape shape(rank, 1);
  shape[1] = shapeOf(v)[0];
  return reshape(loc, v, shape);
}

Value ExprBuilder::oneHot(Value input, Value labels) {
  ArrayRef<int64_t> inputShape = shapeOf(input);
  Shape withClass(shapeOf(labels));
  withClass.insert(withClass.begin() + 1, 1);
  Value expanded = expand(reshape(loc, labels, withClass), inputShape);
  Value classes = IotaOp::create(b, loc, expanded.getType(), 1);
  return castTo(cmp(ComparePredicate::eq, classes, expanded),
                getElementTypeOrSelf(input.getType()));
}

SmallVector<int64_t> mlir::gpuc::axisRange(int64_t begin, int64_t end) {
  SmallVector<int64_t> r(end - begin);
  std::iota(r.begin(), r.end(), begin);
  return r;
}

int64_t mlir::gpuc::nextCollectiveNumber(Block *block) {
  Operation *func = block->getParentOp();
  while (func && !isa<func::FuncOp>(func))
    func = func->getParentOp();
  int64_t next = 0;
  if (func)
    func->walk([&](Operation *op) {
      if (std::optional<int64_t> bucket = collectiveBucket(op))
        next = std::max(next, *bucket + 1);
    });
  return next;
}

BatchMeans mlir::gpuc::batchMeans(ExprBuilder &B, ArrayRef<Value> xs,
                                  ArrayRef<int64_t> axes, bool overRanks) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(xs.front());
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= shape[axis];
  BatchMeans result;
  if (!overRanks) {
    for (Value x : xs)
      result.means.push_back(B.mean(x, axes));
    return result;
  }
  Type f32 = Float32Type::get(B.b.getContext());
  result.count = B.scalar(B.loc, f32, (double)count);
  SmallVector<Value> sums;
  for (Value x : xs)
    sums.push_back(B.sum(x, axes, /*keepDims=*/true));
  sums.push_back(result.count);
  auto reduce = AllReduceOp::create(B.b, B.loc, sums,
                                    nextCollectiveNumber(B.b.getBlock()));
  result.count = reduce.getResult(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    Value sum = reduce.getResult(i);
    result.means.push_back(B.div(sum, B.expand(result.count, B.shapeOf(sum))));
  }
  return result;
}

Normalized mlir::gpuc::normalize(ExprBuilder &B, Value x,
                                 ArrayRef<int64_t> axes, double epsilon,
                                 bool overRanks) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  Value centered =
      B.sub(x, B.expand(batchMeans(B, {x}, axes, overRanks).means[0], shape));
  Value var =
      batchMeans(B, {B.mul(centered, centered)}, axes, overRanks).means[0];
  Value rstd = B.expand(B.rsqrt(B.add(var, B.splat(var, epsilon))), shape);
  return {B.mul(centered, rstd), rstd};
}

//===- ExprBuilder.cpp - compact tensor arithmetic for rewrites -----------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"

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

Normalized mlir::gpuc::normalize(ExprBuilder &B, Value x,
                                 ArrayRef<int64_t> axes, double epsilon) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  Value centered = B.sub(x, B.expand(B.mean(x, axes), shape));
  Value var = B.mean(B.mul(centered, centered), axes);
  Value rstd = B.expand(B.rsqrt(B.add(var, B.splat(var, epsilon))), shape);
  return {B.mul(centered, rstd), rstd};
}

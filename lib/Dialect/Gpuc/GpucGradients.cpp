//===- GpucGradients.cpp - the reverse-mode gradient rule of every op -----===//
//
// Each differentiable op builds the gradients of its operands out of core
// ops (or the backward library ops of conv and pooling). Composite ops have
// hand-written rules that recompute cheap statistics instead of differentiating
// through their decomposition, which keeps them numerically stable.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::gpuc;

static bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// Defines the rule of a unary op as `dx = f(g, x, y)`.
#define GPUC_UNARY_GRADIENT(OpTy, expr)                                        \
  LogicalResult OpTy::buildGradients(                                          \
      OpBuilder &builder, ArrayRef<Value> resultGrads, ArrayRef<bool> wanted,  \
      SmallVectorImpl<Value> &operandGrads) {                                  \
    operandGrads.assign(1, Value());                                           \
    Value g = resultGrads[0], x = getInput(), y = getResult();                 \
    (void)x;                                                                   \
    (void)y;                                                                   \
    if (!g || !wanted[0] || !isFloatTensor(x))                                 \
      return success();                                                        \
    ExprBuilder B(builder, getLoc());                                          \
    operandGrads[0] = (expr);                                                  \
    return success();                                                          \
  }

GPUC_UNARY_GRADIENT(NegOp, B.neg(g))
GPUC_UNARY_GRADIENT(
    AbsOp,
    B.add(B.where(B.cmp(ComparePredicate::gt, x, B.splat(x, 0)), g),
          B.where(B.cmp(ComparePredicate::lt, x, B.splat(x, 0)), B.neg(g))))
GPUC_UNARY_GRADIENT(ExpOp, B.mul(g, y))
GPUC_UNARY_GRADIENT(LogOp, B.div(g, x))
GPUC_UNARY_GRADIENT(SqrtOp, B.div(B.scale(g, 0.5), y))
GPUC_UNARY_GRADIENT(RsqrtOp, B.mul(B.scale(g, -0.5), B.mul(y, B.mul(y, y))))
GPUC_UNARY_GRADIENT(ReciprocalOp, B.neg(B.mul(g, B.mul(y, y))))
GPUC_UNARY_GRADIENT(TanhOp, B.mul(g, B.sub(B.splat(y, 1), B.mul(y, y))))
GPUC_UNARY_GRADIENT(CosOp, B.neg(B.mul(g, SinOp::create(builder, getLoc(),
                                                        x.getType(), x))))
GPUC_UNARY_GRADIENT(SinOp,
                    B.mul(g, CosOp::create(builder, getLoc(), x.getType(), x)))
GPUC_UNARY_GRADIENT(ErfOp, B.mul(B.scale(g, 2.0 / std::sqrt(M_PI)),
                                 B.exp(B.neg(B.mul(x, x)))))
GPUC_UNARY_GRADIENT(SigmoidOp, B.mul(g, B.mul(y, B.sub(B.splat(y, 1), y))))
// From the result, as PyTorch's threshold_backward does: y > 0 exactly where
// x > 0, and backward then needs only y, which pooling's gradient usually
// keeps anyway, instead of both.
GPUC_UNARY_GRADIENT(ReluOp,
                    B.where(B.cmp(ComparePredicate::gt, y, B.splat(y, 0)), g))
#undef GPUC_UNARY_GRADIENT

LogicalResult GeluOp::buildGradients(OpBuilder &builder,
                                     ArrayRef<Value> resultGrads,
                                     ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value g = resultGrads[0], x = getInput();
  if (!g || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  Value one = B.splat(x, 1.0);
  Value derivative;
  if (getTanh()) {
    // u = sqrt(2/pi) (x + c x^3); y = x/2 (1 + tanh u)
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Value x2 = B.mul(x, x);
    Value u = B.scale(B.add(x, B.scale(B.mul(x2, x), c)), k);
    Value t = TanhOp::create(builder, getLoc(), x.getType(), u);
    Value du = B.scale(B.add(one, B.scale(x2, 3 * c)), k);
    derivative =
        B.add(B.scale(B.add(one, t), 0.5),
              B.mul(B.scale(x, 0.5), B.mul(B.sub(one, B.mul(t, t)), du)));
  } else {
    // Phi(x) + x phi(x)
    Value cdf = B.scale(B.add(one, ErfOp::create(builder, getLoc(), x.getType(),
                                                 B.scale(x, M_SQRT1_2))),
                        0.5);
    Value pdf =
        B.scale(B.exp(B.scale(B.mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
    derivative = B.add(cdf, B.mul(x, pdf));
  }
  operandGrads[0] = B.mul(g, derivative);
  return success();
}

//===----------------------------------------------------------------------===//
// Binary, select, cast
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !isFloatTensor(getLhs()))
    return success();
  operandGrads[0] = wanted[0] ? resultGrads[0] : Value();
  operandGrads[1] = wanted[1] ? resultGrads[0] : Value();
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getLhs()))
    return success();
  ExprBuilder B(builder, getLoc());
  if (wanted[0])
    operandGrads[0] = g;
  if (wanted[1])
    operandGrads[1] = B.neg(g);
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getLhs()))
    return success();
  ExprBuilder B(builder, getLoc());
  if (wanted[0])
    operandGrads[0] = B.mul(g, getRhs());
  if (wanted[1])
    operandGrads[1] = B.mul(g, getLhs());
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getLhs()))
    return success();
  ExprBuilder B(builder, getLoc());
  Value gOverRhs = B.div(g, getRhs());
  if (wanted[0])
    operandGrads[0] = gOverRhs;
  if (wanted[1])
    operandGrads[1] = B.neg(B.mul(gOverRhs, getResult()));
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getLhs()))
    return success();
  ExprBuilder B(builder, getLoc());
  Value a = getLhs(), e = getRhs();
  if (wanted[0]) {
    Value powMinusOne = PowOp::create(builder, getLoc(), a.getType(), a,
                                      B.sub(e, B.splat(e, 1.0)));
    operandGrads[0] = B.mul(g, B.mul(e, powMinusOne));
  }
  if (wanted[1])
    operandGrads[1] =
        B.mul(g, B.mul(getResult(),
                       LogOp::create(builder, getLoc(), a.getType(), a)));
  return success();
}

/// max/min: the gradient goes to the winner; a tie splits it in half, as in
/// PyTorch.
template <typename OpTy>
static LogicalResult
extremumGradient(OpTy op, OpBuilder &builder, ArrayRef<Value> resultGrads,
                 ArrayRef<bool> wanted, SmallVectorImpl<Value> &operandGrads,
                 ComparePredicate lhsWins) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(op.getLhs()))
    return success();
  ExprBuilder B(builder, op.getLoc());
  Value a = op.getLhs(), c = op.getRhs();
  Value half = B.where(B.cmp(ComparePredicate::eq, a, c), B.scale(g, 0.5));
  if (wanted[0])
    operandGrads[0] = B.add(B.where(B.cmp(lhsWins, a, c), g), half);
  if (wanted[1])
    operandGrads[1] = B.add(B.where(B.cmp(lhsWins, c, a), g), half);
  return success();
}

LogicalResult MaxOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  return extremumGradient(*this, builder, resultGrads, wanted, operandGrads,
                          ComparePredicate::gt);
}

LogicalResult MinOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  return extremumGradient(*this, builder, resultGrads, wanted, operandGrads,
                          ComparePredicate::lt);
}

LogicalResult SelectOp::buildGradients(OpBuilder &builder,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(3, Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getOnTrue()))
    return success();
  ExprBuilder B(builder, getLoc());
  Value zero = B.splat(g, 0.0);
  if (wanted[1])
    operandGrads[1] = B.select(getCond(), g, zero);
  if (wanted[2])
    operandGrads[2] = B.select(getCond(), zero, g);
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &builder,
                                     ArrayRef<Value> resultGrads,
                                     ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value g = resultGrads[0];
  if (!g || !wanted[0] || !isFloatTensor(getInput()) ||
      !isFloatTensor(getResult()))
    return success();
  ExprBuilder B(builder, getLoc());
  operandGrads[0] = B.castTo(g, getElementTypeOrSelf(getInput().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The reduction result (or its gradient) broadcast back to the input shape.
template <typename OpTy>
static Value expandReduced(ExprBuilder &B, OpTy op, Value v) {
  ArrayRef<int64_t> input = TensorBuilder::shapeOf(op.getInput());
  Shape kept = inferReduceShape(input, op.getAxes(), /*keepDims=*/true);
  return B.expand(B.reshape(B.loc, v, kept), input);
}

LogicalResult
ReduceSumOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ExprBuilder B(builder, getLoc());
  operandGrads[0] = expandReduced(B, *this, resultGrads[0]);
  return success();
}

LogicalResult
ReduceMeanOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                             ArrayRef<bool> wanted,
                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  ArrayRef<int64_t> input = TensorBuilder::shapeOf(getInput());
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= input[axis];
  operandGrads[0] =
      B.scale(expandReduced(B, *this, resultGrads[0]), 1.0 / count);
  return success();
}

LogicalResult
ReduceMaxOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value x = getInput();
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(x))
    return success();
  ExprBuilder B(builder, getLoc());
  // Ties share the gradient evenly, as PyTorch's amax does.
  Value isMax = B.castTo(
      B.cmp(ComparePredicate::eq, x, expandReduced(B, *this, getResult())),
      getElementTypeOrSelf(x.getType()));
  Value ties = B.expand(B.sum(isMax, getAxes(), /*keepDims=*/true),
                        TensorBuilder::shapeOf(x));
  operandGrads[0] =
      B.div(B.mul(expandReduced(B, *this, resultGrads[0]), isMax), ties);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &builder,
                                        ArrayRef<Value> resultGrads,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ExprBuilder B(builder, getLoc());
  operandGrads[0] =
      B.reshape(getLoc(), resultGrads[0], TensorBuilder::shapeOf(getInput()));
  return success();
}

LogicalResult
TransposeOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  operandGrads[0] = TransposeOp::create(builder, getLoc(), getInput().getType(),
                                        resultGrads[0], inverse);
  return success();
}

LogicalResult
BroadcastOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ExprBuilder B(builder, getLoc());
  operandGrads[0] =
      B.sumToShape(resultGrads[0], TensorBuilder::shapeOf(getInput()));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &builder,
                                      ArrayRef<Value> resultGrads,
                                      ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ArrayRef<int64_t> input = TensorBuilder::shapeOf(getInput());
  ArrayRef<int64_t> result = TensorBuilder::shapeOf(getResult());
  Location loc = getLoc();
  auto like = [&](ArrayRef<int64_t> shape) {
    return cast<RankedTensorType>(getInput().getType()).clone(shape);
  };
  // The gradient is the result's gradient padded with zeros back to the
  // input. An axis of stride s splits into [q, s] (q = ceil(n / s)): its
  // elements start + i * s are row start / s + i, column start % s, so the
  // gradient pads rows and columns there, merges them (q * s elements) and
  // drops what lies past the input (PatchMerging's x[..., 0::2, 1::2, :]).
  SmallVector<int64_t> split, low, high, merged;
  bool strided = false;
  for (auto [d, n] : llvm::enumerate(input)) {
    int64_t stride = getStrides()[d], start = getStarts()[d], count = result[d];
    if (stride == 1) {
      split.push_back(count);
      low.push_back(start);
      high.push_back(n - start - count);
      merged.push_back(n);
      continue;
    }
    strided = true;
    int64_t rows = (n + stride - 1) / stride;
    split.append({count, 1});
    low.append({start / stride, start % stride});
    high.append({rows - start / stride - count, stride - start % stride - 1});
    merged.push_back(rows * stride);
  }
  if (!strided) {
    operandGrads[0] =
        PadOp::create(builder, loc, getInput().getType(), resultGrads[0], low,
                      high, builder.getF64FloatAttr(0.0));
    return success();
  }
  Value g = ReshapeOp::create(builder, loc, like(split), resultGrads[0]);
  SmallVector<int64_t> padded;
  for (auto [i, size] : llvm::enumerate(split))
    padded.push_back(low[i] + size + high[i]);
  g = PadOp::create(builder, loc, like(padded), g, low, high,
                    builder.getF64FloatAttr(0.0));
  g = ReshapeOp::create(builder, loc, like(merged), g);
  if (ArrayRef<int64_t>(merged) != input) {
    SmallVector<int64_t> zeros(input.size(), 0), ones(input.size(), 1);
    g = SliceOp::create(builder, loc, getInput().getType(), g, zeros, input,
                        ones);
  }
  operandGrads[0] = g;
  return success();
}

LogicalResult PadOp::buildGradients(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getInput()))
    return success();
  ArrayRef<int64_t> input = TensorBuilder::shapeOf(getInput());
  SmallVector<int64_t> starts, limits, strides(input.size(), 1);
  for (auto [i, dim] : llvm::enumerate(input)) {
    if (getLow()[i] < 0 || getHigh()[i] < 0)
      return emitOpError() << "the gradient of a cropping (negative) pad is "
                              "not supported yet";
    starts.push_back(getLow()[i]);
    limits.push_back(getLow()[i] + dim);
  }
  operandGrads[0] = SliceOp::create(builder, getLoc(), getInput().getType(),
                                    resultGrads[0], starts, limits, strides);
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &builder,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getInputs().size(), Value());
  Value g = resultGrads[0];
  if (!g || !isFloatTensor(getResult()))
    return success();
  ArrayRef<int64_t> full = TensorBuilder::shapeOf(g);
  int64_t offset = 0, axis = getAxis();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = TensorBuilder::shapeOf(input)[axis];
    if (wanted[i]) {
      SmallVector<int64_t> starts(full.size(), 0), limits(full),
          strides(full.size(), 1);
      starts[axis] = offset;
      limits[axis] = offset + size;
      operandGrads[i] = SliceOp::create(builder, getLoc(), input.getType(), g,
                                        starts, limits, strides);
    }
    offset += size;
  }
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &builder,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !wanted[0] || !isFloatTensor(getData()))
    return success();
  operandGrads[0] =
      ScatterAddOp::create(builder, getLoc(), getData().getType(),
                           resultGrads[0], getIndices(), getAxis());
  return success();
}

LogicalResult
ScatterAddOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                             ArrayRef<bool> wanted,
                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  operandGrads[0] = GatherOp::create(builder, getLoc(), getUpdates().getType(),
                                     resultGrads[0], getIndices(), getAxis());
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and windows
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &builder,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getNumOperands(), Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  if (getAcc() && wanted[2])
    operandGrads[2] = g;
  // Layouts and epilogues are set after differentiation, where the
  // transposes and sums they fold are known to be the step's last word.
  if (hasLayouts())
    return emitOpError() << "has layouts (lhs_perm, rhs_perm, result_perm or a "
                            "window); "
                            "differentiate before gpuc-fold-layouts";
  if (getBias())
    return emitOpError() << "has a bias epilogue; differentiate before "
                            "gpuc-gemm-epilogues";
  Value a = getLhs(), b = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // An f32 product of 16-bit operands: the gradient's products take the
  // operands' type.
  if (Type element = getElementTypeOrSelf(a.getType());
      getElementTypeOrSelf(g.getType()) != element)
    g = CastOp::create(
        builder, getLoc(),
        RankedTensorType::get(cast<RankedTensorType>(g.getType()).getShape(),
                              element),
        g);
  auto matmul = [&](Value x, Value y, bool tx, bool ty, Type type) -> Value {
    return MatmulOp::create(builder, getLoc(), type, x, y, tx, ty);
  };
  // With C = op(A) op(B): dop(A) = G op(B)^T and dop(B) = op(A)^T G, written
  // so that the stored operands are used without explicit transposes.
  if (wanted[0])
    operandGrads[0] = !ta ? matmul(g, b, false, !tb, a.getType())
                          : (tb ? matmul(b, g, true, true, a.getType())
                                : matmul(b, g, false, true, a.getType()));
  if (wanted[1])
    operandGrads[1] = !tb ? matmul(a, g, !ta, false, b.getType())
                          : (ta ? matmul(g, a, true, true, b.getType())
                                : matmul(g, a, true, false, b.getType()));
  return success();
}

LogicalResult Conv2DOp::buildGradients(OpBuilder &builder,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  if (wanted[0])
    operandGrads[0] = Conv2DBackwardInputOp::create(
        builder, getLoc(), getInput().getType(), g, getFilter(), getStrides(),
        getPads(), getDilations(), getGroups(), getChannelsLast());
  if (wanted[1])
    operandGrads[1] = Conv2DBackwardFilterOp::create(
        builder, getLoc(), getFilter().getType(), getInput(), g, getStrides(),
        getPads(), getDilations(), getGroups(), getChannelsLast());
  return success();
}

/// Linear in each operand: the result is the adjoint of conv2d(., filter)
/// applied to grad_output, so grad_output's gradient is that convolution of
/// the result's gradient, and the filter's pairs the result's gradient (as
/// the convolution's input) with grad_output (as its output gradient).
LogicalResult Conv2DBackwardInputOp::buildGradients(
    OpBuilder &builder, ArrayRef<Value> resultGrads, ArrayRef<bool> wanted,
    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  if (wanted[0])
    operandGrads[0] =
        Conv2DOp::create(builder, getLoc(), getGradOutput().getType(), g,
                         getFilter(), getStrides(), getPads(), getDilations(),
                         getGroups(), getChannelsLast());
  if (wanted[1])
    operandGrads[1] = Conv2DBackwardFilterOp::create(
        builder, getLoc(), getFilter().getType(), g, getGradOutput(),
        getStrides(), getPads(), getDilations(), getGroups(),
        getChannelsLast());
  return success();
}

LogicalResult
MaxPool2DOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  // Where each window's maximum is, computed right after the pooling: the
  // gradient then keeps 1 byte per output instead of the whole input.
  Value indices;
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(*this);
    ArrayRef<int64_t> kernel = getKernel();
    Type indexType = kernel[0] * kernel[1] <= 127 ? builder.getIntegerType(8)
                                                  : builder.getIntegerType(32);
    indices = MaxPool2DArgmaxOp::create(
        builder, getLoc(),
        RankedTensorType::get(
            cast<RankedTensorType>(getResult().getType()).getShape(),
            indexType),
        getInput(), getKernel(), getStrides(), getPads(), getChannelsLast());
  }
  operandGrads[0] = MaxPool2DBackwardOp::create(
      builder, getLoc(), getInput().getType(), indices, resultGrads[0],
      getKernel(), getStrides(), getPads(), getChannelsLast());
  return success();
}

LogicalResult
AvgPool2DOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  operandGrads[0] = AvgPool2DBackwardOp::create(
      builder, getLoc(), getInput().getType(), resultGrads[0], getKernel(),
      getStrides(), getPads(), getCountIncludePad(), getChannelsLast());
  return success();
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradients(OpBuilder &builder,
                                        ArrayRef<Value> resultGrads,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value g = resultGrads[0], y = getResult();
  if (!g || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  // dx = y (g - sum(g y))
  Value dot = B.expand(B.sum(B.mul(g, y), {getAxis()}, true),
                       TensorBuilder::shapeOf(y));
  operandGrads[0] = B.mul(y, B.sub(g, dot));
  return success();
}

LogicalResult
LogSoftmaxOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                             ArrayRef<bool> wanted,
                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value g = resultGrads[0], y = getResult();
  if (!g || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  // dx = g - softmax(x) sum(g)
  Value total =
      B.expand(B.sum(g, {getAxis()}, true), TensorBuilder::shapeOf(y));
  operandGrads[0] = B.sub(g, B.mul(B.exp(y), total));
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &builder,
                                        ArrayRef<Value> resultGrads,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  // Dropout is linear in its input with a mask that depends only on the key
  // and the stream, so its gradient is the same dropout of the gradient.
  operandGrads[0] =
      DropoutOp::create(builder, getLoc(), getType(), resultGrads[0],
                        getRngKey(), getRatio(), getStream());
  return success();
}

LogicalResult
AttentionOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getNumOperands(), Value());
  if (resultGrads[1])
    return emitOpError() << "the loss reads the attention's logsumexp; only "
                            "its result is differentiable";
  Value g = resultGrads[0];
  if (!g || !(wanted[0] || wanted[1] || wanted[2]))
    return success();
  if (getBthd())
    return emitOpError() << "has the bthd layout; differentiate before "
                            "gpuc-fold-layouts";
  // One op for the three gradients: both lowerings recompute the weights
  // from the scores and the row statistics instead of keeping them.
  auto grad = AttentionGradOp::create(
      builder, getLoc(),
      TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      getQuery(), getKey(), getValue(), getResult(), getLogsumexp(), g,
      getMask(), getRngKey(), getScaleAttr(), getFillAttr(), getMaskKeepsAttr(),
      getMaskTriangleAttr(), getDropoutAttr(), getStreamAttr());
  for (unsigned i = 0; i < 3; ++i)
    if (wanted[i])
      operandGrads[i] = grad->getResult(i);
  return success();
}

namespace {
/// A normalization's input gradient from `dxhat`, the gradient of x̂:
/// rstd·(dxhat − x̂·mean(dxhat·x̂) − mean(dxhat)), times `factor` (null:
/// none), which must be constant along `axes` (batch norm's γ, taken out of
/// its dxhat: see BatchNormTrainOp). x̂'s term is subtracted first: the two
/// batch norms of a residual block's shortcut share their dxhat, and a
/// difference of dxhat alone would be one value for both, which the fusion
/// would then keep in memory between their kernels. rstd·factor is taken
/// first: one factor a channel, which a kernel's thread working down a
/// column takes once.
Value normalizationInputGrad(ExprBuilder &B, const Normalized &n, Value dxhat,
                             ArrayRef<int64_t> axes, bool overRanks = false,
                             Value factor = {}) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(dxhat);
  SmallVector<Value> means =
      batchMeans(B, {dxhat, B.mul(dxhat, n.xhat)}, axes, overRanks).means;
  Value residual = B.sub(B.sub(dxhat, B.mul(n.xhat, B.expand(means[1], shape))),
                         B.expand(means[0], shape));
  return B.mul(factor ? B.mul(n.rstd, factor) : n.rstd, residual);
}
} // namespace

LogicalResult
LayerNormOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                            ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(3, Value());
  Value g = resultGrads[0], x = getInput();
  if (!g)
    return success();
  ExprBuilder B(builder, getLoc());
  int64_t rank = TensorBuilder::shapeOf(x).size();
  SmallVector<int64_t> normAxes = axisRange(getAxis(), rank);
  SmallVector<int64_t> leadAxes = axisRange(0, getAxis());
  Normalized n = normalize(B, x, normAxes, getEpsilon().convertToDouble());
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  if (wanted[0])
    operandGrads[0] = normalizationInputGrad(
        B, n, B.mul(g, B.expand(getScale(), shape)), normAxes);
  if (wanted[1])
    operandGrads[1] = B.sum(B.mul(g, n.xhat), leadAxes, false);
  if (wanted[2])
    operandGrads[2] = B.sum(g, leadAxes, false);
  return success();
}

LogicalResult BatchNormTrainOp::buildGradients(
    OpBuilder &builder, ArrayRef<Value> resultGrads, ArrayRef<bool> wanted,
    SmallVectorImpl<Value> &operandGrads) {
  // The running statistics are state, not part of the loss: only the
  // normalized result carries a gradient.
  operandGrads.assign(5, Value());
  Value g = resultGrads[0], x = getInput();
  if (!g)
    return success();
  ExprBuilder B(builder, getLoc());
  int64_t rank = TensorBuilder::shapeOf(x).size();
  SmallVector<int64_t> axes = {0};
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  // Synchronized over the ranks, the statistics and the means of the
  // gradient terms are the global batch's; the scale and bias gradients
  // stay this rank's sums (data parallelism sums those).
  bool overRanks = getSyncRanks();
  Normalized n =
      normalize(B, x, axes, getEpsilon().convertToDouble(), overRanks);
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  // The scale is one number a channel, constant along the summed axes, so
  // the input gradient's means of g·γ and g·γ·x̂ are γ times the means of g
  // and g·x̂, whose sums are the bias and scale gradients: a row kernel
  // reduces two values a channel (a sum and a mean of one value share their
  // accumulator) where layer norm's formula would take four. The means stay
  // batchMeans' (reduce_mean, rounded once from the double sum): a mean
  // taken from the rounded sum is off by up to twice as much, and an input
  // gradient whose channel sums should cancel then sums to that error times
  // the count (a CNN's batch-norm bias moved 1.6e-3 from float64 PyTorch's
  // in 20 SGD steps, 4e-7 with the mean rounded once).
  if (wanted[0])
    operandGrads[0] = normalizationInputGrad(
        B, n, g, axes, overRanks,
        B.expand(B.channelView(getScale(), rank), shape));
  if (wanted[1])
    operandGrads[1] = B.sum(B.mul(g, n.xhat), axes, /*keepDims=*/false);
  if (wanted[2])
    operandGrads[2] = B.sum(g, axes, /*keepDims=*/false);
  return success();
}

/// The per-sample weight of a class loss's gradient (shaped like the labels):
/// the incoming gradient, divided by the count of counted samples for `mean`,
/// zero where the label is `ignore_index`.
template <typename OpTy>
static Value classLossSampleWeight(ExprBuilder &B, OpTy op, Value g) {
  Value labels = op.getLabels();
  ArrayRef<int64_t> labelShape = TensorBuilder::shapeOf(labels);
  Type floatType = getElementTypeOrSelf(op.getInput().getType());
  Value valid;
  if (std::optional<int64_t> ignore = op.getIgnoreIndex())
    valid = B.castTo(B.cmp(ComparePredicate::ne, labels,
                           B.splatLike(B.loc, labels, *ignore)),
                     floatType);
  Value weight = op.getReduction() == Reduction::none
                     ? g
                     : B.broadcastTo(B.loc, g, labelShape);
  if (op.getReduction() == Reduction::mean) {
    Value count;
    if (valid) {
      SmallVector<int64_t> all = axisRange(0, labelShape.size());
      count = B.broadcastTo(B.loc, B.sum(valid, all, false), labelShape);
    } else {
      count = B.splat(weight, (double)getNumElements(labelShape));
    }
    weight = B.div(weight, count);
  }
  if (valid)
    weight = B.mul(weight, valid);
  // View it along the class axis of the input.
  Shape withClass(labelShape);
  withClass.insert(withClass.begin() + 1, 1);
  return B.expand(B.reshape(B.loc, weight, withClass),
                  TensorBuilder::shapeOf(op.getInput()));
}

LogicalResult
CrossEntropyOp::buildGradients(OpBuilder &builder, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> wanted,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  Value x = getInput();
  Value probs = SoftmaxOp::create(builder, getLoc(), x.getType(), x, 1);
  operandGrads[0] = B.mul(B.sub(probs, B.oneHot(getInput(), getLabels())),
                          classLossSampleWeight(B, *this, resultGrads[0]));
  return success();
}

LogicalResult LinearCrossEntropyOp::buildGradients(
    OpBuilder &builder, ArrayRef<Value> resultGrads, ArrayRef<bool> wanted,
    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getNumOperands(), Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  // One op for the loss and every gradient: its lowering computes each row
  // chunk's logits once, for both.
  SmallVector<Type> types{getResult().getType(), getInput().getType(),
                          getWeight().getType()};
  if (getBias())
    types.push_back(getBias().getType());
  auto grad = LinearCrossEntropyGradOp::create(
      builder, getLoc(), types, getInput(), getWeight(), getLabels(), g,
      getBias(), getReductionAttr(), getIgnoreIndexAttr());
  if (wanted[0])
    operandGrads[0] = grad.getInputGrad();
  if (wanted[1])
    operandGrads[1] = grad.getWeightGrad();
  if (getBias() && wanted[3])
    operandGrads[3] = grad.getBiasGrad();
  return success();
}

LogicalResult NllLossOp::buildGradients(OpBuilder &builder,
                                        ArrayRef<Value> resultGrads,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  if (!resultGrads[0] || !wanted[0])
    return success();
  ExprBuilder B(builder, getLoc());
  operandGrads[0] =
      B.neg(B.mul(B.oneHot(getInput(), getLabels()),
                  classLossSampleWeight(B, *this, resultGrads[0])));
  return success();
}

LogicalResult MseLossOp::buildGradients(OpBuilder &builder,
                                        ArrayRef<Value> resultGrads,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  ExprBuilder B(builder, getLoc());
  Value x = getInput();
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  Value weight =
      getReduction() == Reduction::none ? g : B.broadcastTo(getLoc(), g, shape);
  double factor = 2.0;
  if (getReduction() == Reduction::mean)
    factor /= getNumElements(shape);
  Value d = B.mul(B.scale(B.sub(x, getTarget()), factor), weight);
  if (wanted[0])
    operandGrads[0] = d;
  if (wanted[1])
    operandGrads[1] = B.neg(d);
  return success();
}

//===- Elementwise.cpp - ONNX arithmetic, comparisons and activations -----===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

LogicalResult OnnxImporter::importIdentity(Node &node) {
  setOutput(node, 0, node.in(0));
  return success();
}

LogicalResult OnnxImporter::importPow(Node &node) {
  Value base = node.in(0), exponent = node.in(1);
  if (typeOf(exponent).getElementType() != typeOf(base).getElementType())
    exponent = builder.createOrFold<CastOp>(
        node.loc,
        RankedTensorType::get(shapeOf(exponent), typeOf(base).getElementType()),
        exponent);
  auto operands = broadcastAll(node, {base, exponent});
  if (failed(operands))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<PowOp>(node.loc, (*operands)[0].getType(),
                                        (*operands)[0], (*operands)[1]));
  return success();
}

LogicalResult OnnxImporter::importWhere(Node &node) {
  auto operands = broadcastAll(node, node.inputs);
  if (failed(operands))
    return failure();
  Value onTrue = (*operands)[1];
  setOutput(node, 0,
            builder.createOrFold<SelectOp>(node.loc, onTrue.getType(),
                                           (*operands)[0], onTrue,
                                           (*operands)[2]));
  return success();
}

LogicalResult OnnxImporter::importCast(Node &node) {
  FailureOr<Type> to =
      convertElementType(node.getInt("to", 0), [&] { return nodeError(node); });
  if (failed(to))
    return failure();
  Value x = node.in(0);
  setOutput(node, 0,
            builder.createOrFold<CastOp>(
                node.loc, RankedTensorType::get(shapeOf(x), *to), x));
  return success();
}

/// A cast to the element type of the second input.
LogicalResult OnnxImporter::importCastLike(Node &node) {
  Value x = node.in(0);
  Type to = cast<RankedTensorType>(node.in(1).getType()).getElementType();
  setOutput(node, 0,
            builder.createOrFold<CastOp>(
                node.loc, RankedTensorType::get(shapeOf(x), to), x));
  return success();
}

/// x != x: true exactly where x is NaN.
LogicalResult OnnxImporter::importIsNaN(Node &node) {
  Value x = node.in(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "IsNaN takes a floating-point tensor";
  setOutput(
      node, 0,
      builder.createOrFold<CompareOp>(node.loc, ComparePredicate::ne, x, x));
  return success();
}

/// Max(lo, min(hi, x)) elementwise, for scalars lo and hi. (One op per
/// statement here and below: the order of a call's argument evaluation
/// would otherwise decide the order of ops in the IR.)
Value clamp(ExprBuilder &B, Value x, double lo, double hi) {
  Value upper = B.splat(x, hi);
  Value below = B.minimum(x, upper);
  Value lower = B.splat(x, lo);
  return B.maximum(below, lower);
}

/// log(1 + exp(x)), as relu(x) + log(1 + exp(-|x|)): exp never overflows.
Value softplus(ExprBuilder &B, Value x) {
  Value magnitude = B.abs(x);
  Value decay = B.exp(B.neg(magnitude));
  Value one = B.splat(x, 1.0);
  Value tail = B.log(B.add(one, decay));
  Value relu = B.relu(x);
  return B.add(relu, tail);
}

/// alpha * (exp(x) - 1).
Value expm1Scaled(ExprBuilder &B, Value x, double alpha) {
  Value e = B.exp(x);
  Value one = B.splat(x, 1.0);
  return B.scale(B.sub(e, one), alpha);
}

LogicalResult OnnxImporter::importActivation(Node &node) {
  Value x = node.in(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "takes a floating-point input, not "
                           << typeOf(x).getElementType();
  ExprBuilder B(builder, node.loc);
  StringRef op = node.proto.op_type();
  auto compareWith = [&](ComparePredicate predicate, double c) {
    Value constant = B.splat(x, c);
    return B.cmp(predicate, x, constant);
  };
  Value y;
  if (op == "LeakyRelu") {
    Value negative = compareWith(ComparePredicate::lt, 0.0);
    Value scaled = B.scale(x, node.getFloat("alpha", 0.01));
    y = B.select(negative, scaled, x);
  } else if (op == "Elu") {
    Value negative = compareWith(ComparePredicate::lt, 0.0);
    Value e = expm1Scaled(B, x, node.getFloat("alpha", 1.0));
    y = B.select(negative, e, x);
  } else if (op == "Selu") {
    double alpha = node.getFloat("alpha", 1.67326319217681884765625);
    double gamma = node.getFloat("gamma", 1.05070102214813232421875);
    Value positive = compareWith(ComparePredicate::gt, 0.0);
    Value e = expm1Scaled(B, x, alpha);
    y = B.scale(B.select(positive, x, e), gamma);
  } else if (op == "Celu") {
    double alpha = node.getFloat("alpha", 1.0);
    if (alpha == 0)
      return nodeError(node) << "alpha must not be 0";
    Value e = expm1Scaled(B, B.scale(x, 1.0 / alpha), alpha);
    Value zero = B.splat(x, 0.0);
    Value negativePart = B.minimum(e, zero);
    Value relu = B.relu(x);
    y = B.add(relu, negativePart);
  } else if (op == "ThresholdedRelu") {
    Value above =
        compareWith(ComparePredicate::gt, node.getFloat("alpha", 1.0));
    y = B.where(above, x);
  } else if (op == "HardSigmoid") {
    Value scaled = B.scale(x, node.getFloat("alpha", 0.2));
    Value beta = B.splat(x, node.getFloat("beta", 0.5));
    y = clamp(B, B.add(scaled, beta), 0.0, 1.0);
  } else if (op == "HardSwish") {
    Value scaled = B.scale(x, 1.0 / 6.0);
    Value half = B.splat(x, 0.5);
    Value gate = clamp(B, B.add(scaled, half), 0.0, 1.0);
    y = B.mul(x, gate);
  } else if (op == "Softplus") {
    y = softplus(B, x);
  } else if (op == "Softsign") {
    Value magnitude = B.abs(x);
    Value one = B.splat(x, 1.0);
    y = B.div(x, B.add(one, magnitude));
  } else {
    return nodeError(node) << "is not an activation the importer composes";
  }
  setOutput(node, 0, y);
  return success();
}

LogicalResult OnnxImporter::importClip(Node &node) {
  Value x = node.in(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "takes a floating-point input, not "
                           << typeOf(x).getElementType();
  Value y = x;
  // Opset 6: attributes; 11 on: optional scalar inputs.
  auto bound = [&](unsigned input, StringRef attr) -> FailureOr<Value> {
    if (opset < 11) {
      if (!node.attr(attr))
        return Value();
      return splatLike(node.loc, x, node.getFloat(attr, 0.0));
    }
    Value v = node.in(input);
    if (!v)
      return Value();
    if (!shapeOf(v).empty() && getNumElements(shapeOf(v)) != 1)
      return nodeError(node) << attr << " (input " << input
                             << ") must be a scalar, not " << typeOf(v);
    if (typeOf(v).getElementType() != typeOf(x).getElementType())
      return nodeError(node) << attr << " has element type "
                             << typeOf(v).getElementType() << ", not the "
                             << "input's " << typeOf(x).getElementType();
    return broadcastTo(node.loc, reshape(node.loc, v, {}), shapeOf(x));
  };
  FailureOr<Value> lo = bound(1, "min"), hi = bound(2, "max");
  if (failed(lo) || failed(hi))
    return failure();
  if (*lo)
    y = builder.createOrFold<MaxOp>(node.loc, y.getType(), y, *lo);
  if (*hi)
    y = builder.createOrFold<MinOp>(node.loc, y.getType(), y, *hi);
  setOutput(node, 0, y);
  return success();
}

LogicalResult OnnxImporter::importPRelu(Node &node) {
  Value x = node.in(0), slope = node.in(1);
  if (!isa<FloatType>(typeOf(x).getElementType()) ||
      typeOf(slope).getElementType() != typeOf(x).getElementType())
    return nodeError(node) << "takes floating-point x and slope of one type";
  // The slope broadcasts to x (unidirectionally).
  FailureOr<Shape> shape = inferBroadcastShape(shapeOf(x), shapeOf(slope),
                                               [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  if (*shape != shapeOf(x))
    return nodeError(node) << "slope " << typeOf(slope)
                           << " does not broadcast to x " << typeOf(x);
  ExprBuilder B(builder, node.loc);
  Value zero = B.splat(x, 0.0);
  Value negative = B.cmp(ComparePredicate::lt, x, zero);
  Value slopes = broadcastTo(node.loc, slope, *shape);
  Value scaled = B.mul(slopes, x);
  setOutput(node, 0, B.select(negative, scaled, x));
  return success();
}

} // namespace mlir::gpuc::onnx_import

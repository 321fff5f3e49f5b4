//===- TensorBuilder.cpp - op-building helpers shared by the frontends ----===//
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::gpuc;

Value TensorBuilder::scalar(Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(type, FloatAttr::get(elementType, value)));
}

Value TensorBuilder::splatLike(Location loc, Value like, double value) {
  RankedTensorType type = typeOf(like);
  Type et = type.getElementType();
  Attribute element = isa<FloatType>(et)
                          ? Attribute(FloatAttr::get(et, value))
                          : Attribute(IntegerAttr::get(et, (int64_t)value));
  return ConstantOp::create(builder, loc,
                            DenseElementsAttr::get(type, element));
}

Value TensorBuilder::broadcastTo(Location loc, Value v,
                                 ArrayRef<int64_t> shape) {
  if (shapeOf(v) == shape)
    return v;
  return builder.createOrFold<BroadcastOp>(loc, withShape(v, shape), v);
}

Value TensorBuilder::reshape(Location loc, Value v, ArrayRef<int64_t> shape) {
  if (shapeOf(v) == shape)
    return v;
  return builder.createOrFold<ReshapeOp>(loc, withShape(v, shape), v);
}

FailureOr<SmallVector<Value>>
TensorBuilder::broadcastAll(Location loc, ArrayRef<Value> operands,
                            EmitErrorFn emitError) {
  Shape shape;
  for (Value v : operands) {
    FailureOr<Shape> joined = inferBroadcastShape(shape, shapeOf(v), emitError);
    if (failed(joined))
      return failure();
    shape = *joined;
  }
  SmallVector<Value> result;
  for (Value v : operands)
    result.push_back(broadcastTo(loc, v, shape));
  return result;
}

ParameterOp mlir::gpuc::createParameter(OpBuilder &builder, Location loc,
                                        StringRef name, RankedTensorType type,
                                        ArrayRef<char> bytes, bool trainable) {
  auto blob =
      HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignof(uint64_t));
  auto initial = DenseResourceElementsAttr::get(type, name, std::move(blob));
  return ParameterOp::create(builder, loc, name, type, initial, trainable);
}

//===- TensorBuilder.h - op-building helpers shared by the frontends ------===//
//
// Both frontends build gpuc ops the same way: numpy broadcasting made explicit,
// reshapes and constants created through createOrFold so that constant shape
// arithmetic folds as it is built.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FRONTEND_TENSORBUILDER_H
#define GPUC_FRONTEND_TENSORBUILDER_H

#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::gpuc {

class TensorBuilder {
public:
  explicit TensorBuilder(OpBuilder &builder) : builder(builder) {}

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  static ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
  static RankedTensorType withShape(Value v, ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, typeOf(v).getElementType());
  }

  /// A scalar (rank-0) constant of a float element type.
  Value scalar(Location loc, Type elementType, double value);
  /// A constant shaped like `like`, every element `value`.
  Value splatLike(Location loc, Value like, double value);
  Value broadcastTo(Location loc, Value v, ArrayRef<int64_t> shape);
  Value reshape(Location loc, Value v, ArrayRef<int64_t> shape);
  /// Broadcasts all operands to their common numpy shape.
  FailureOr<SmallVector<Value>>
  broadcastAll(Location loc, ArrayRef<Value> operands, EmitErrorFn emitError);

private:
  OpBuilder &builder;
};

class ParameterOp;

/// Declares `gpuc.parameter @name` at the builder's position with `bytes`
/// (MLIR's dense layout) as its initial value, stored as a resource blob so
/// large weights are not uniqued into the context.
ParameterOp createParameter(OpBuilder &builder, Location loc, StringRef name,
                            RankedTensorType type, ArrayRef<char> bytes,
                            bool trainable);

} // namespace mlir::gpuc

#endif // GPUC_FRONTEND_TENSORBUILDER_H

//===- OpKinds.cpp - how the step program treats each op ------------------===//
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"

using namespace mlir;
using namespace mlir::gpuc;

bool mlir::gpuc::isLibraryCall(Operation *op) {
  return isa<MatmulOp, Conv2DOp, Conv2DBackwardInputOp, Conv2DBackwardFilterOp,
             AllReduceOp, ReduceScatterOp, AllGatherOp, RankShardOp>(op);
}

bool mlir::gpuc::isAlias(Operation *op) { return isa<ReshapeOp>(op); }

bool mlir::gpuc::isInlinableConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  return elements && elements.isSplat();
}

bool mlir::gpuc::isPointwise(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() || isa<DropoutOp>(op);
}

bool mlir::gpuc::isReduction(Operation *op) {
  return isa<ReduceSumOp, ReduceMaxOp, ReduceMeanOp>(op);
}

bool mlir::gpuc::needsKernel(Operation *op) {
  if (!isa<GpucDialect>(op->getDialect()) ||
      !isa<func::FuncOp>(op->getParentOp()))
    return false;
  return !isa<ParameterOp, ConstantOp, FusionOp, YieldOp>(op) &&
         !isLibraryCall(op) && !isAlias(op);
}

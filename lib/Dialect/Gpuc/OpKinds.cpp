//===- OpKinds.cpp - how the step program treats each op ------------------===//
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallPtrSet.h"

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

bool mlir::gpuc::isCheapToRecompute(Operation *op) {
  return isa<NegOp, AbsOp, ReluOp, AddOp, SubOp, MulOp, MaxOp, MinOp, CompareOp,
             SelectOp, CastOp, BroadcastOp, ConstantOp>(op);
}

std::optional<CheapComputation>
mlir::gpuc::cheapComputationOf(Value root, function_ref<bool(Value)> isLeaf,
                               int64_t maxOps) {
  CheapComputation c;
  int64_t counted = 0;
  SmallVector<Value> worklist{root};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || (v != root && isLeaf(v))) {
      c.leaves.insert(v);
      continue;
    }
    if (!isCheapToRecompute(def))
      return std::nullopt;
    if (auto broadcast = dyn_cast<BroadcastOp>(def)) {
      Value in = broadcast.getInput();
      if (in.getDefiningOp() && !isLeaf(in) && !isInlinableConstant(in))
        return std::nullopt;
    }
    if (!c.ops.insert(def))
      continue;
    if (!isa<BroadcastOp, ConstantOp>(def) && ++counted > maxOps)
      return std::nullopt;
    llvm::append_range(worklist, def->getOperands());
  }
  return c;
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

bool mlir::gpuc::addressesByLoadedIntegers(Operation *fusion) {
  SmallVector<Value> addresses;
  fusion->walk([&](Operation *op) {
    if (auto gather = dyn_cast<GatherOp>(op))
      addresses.push_back(gather.getIndices());
    else if (auto scatter = dyn_cast<ScatterAddOp>(op))
      addresses.push_back(scatter.getIndices());
    else if (auto segments = dyn_cast<SegmentSumOp>(op))
      addresses.append({segments.getOffsets(), segments.getOrder()});
    else if (auto groups = dyn_cast<RowGroupsOp>(op))
      addresses.push_back(groups.getIndices());
    else if (auto pooled = dyn_cast<MaxPool2DBackwardOp>(op))
      addresses.push_back(pooled.getIndices());
  });
  // (An optimizer's step count or an attention's random key only enters
  // arithmetic: what matters is an address computed from a loaded value.)
  llvm::SmallPtrSet<Value, 16> seen;
  while (!addresses.empty()) {
    Value address = addresses.pop_back_val();
    if (!seen.insert(address).second)
      continue;
    if (isa<BlockArgument>(address))
      return true;
    if (Operation *def = address.getDefiningOp())
      llvm::append_range(addresses, def->getOperands());
  }
  return false;
}

//===- Cost.cpp - bytes and FLOPs of ops and kernels ----------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/GemmGeometry.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/TypeUtilities.h"

#include <optional>

using namespace mlir;
using namespace mlir::gpuc;

static int64_t elementsOf(Value v) {
  return getNumElements(cast<RankedTensorType>(v.getType()).getShape());
}

int64_t mlir::gpuc::elementBytes(Type type) {
  return type.isInteger(1) ? 1 : type.getIntOrFloatBitWidth() / 8;
}

int64_t mlir::gpuc::tensorBytes(Value value) {
  return elementsOf(value) *
         elementBytes(getElementTypeOrSelf(value.getType()));
}

/// The bytes `use`'s op reads of its operand where it reads only what it
/// takes (a slice's window, a gather's rows of its table), or nothing.
static std::optional<int64_t> takenBytes(OpOperand &use) {
  Operation *user = use.getOwner();
  auto gather = dyn_cast<GatherOp>(user);
  if (!isa<SliceOp>(user) && !(gather && &use == &gather.getDataMutable()))
    return std::nullopt;
  return elementsOf(user->getResult(0)) *
         elementBytes(getElementTypeOrSelf(use.get().getType()));
}

int64_t mlir::gpuc::kernelInputBytes(Value input, Value arg) {
  int64_t whole = tensorBytes(input), taken = 0;
  for (OpOperand &use : arg.getUses()) {
    std::optional<int64_t> bytes = takenBytes(use);
    if (!bytes)
      return whole;
    taken += *bytes;
  }
  return std::min(whole, taken);
}

int64_t mlir::gpuc::flopsOf(Operation *op) {
  if (auto mm = dyn_cast<MatmulOp>(op))
    return 2 * elementsOf(mm.getResult()) * gemmGeometry(mm).k;
  auto convFlops = [](Value out, Value filter) {
    ArrayRef<int64_t> w = cast<RankedTensorType>(filter.getType()).getShape();
    return 2 * elementsOf(out) * w[1] * w[2] * w[3];
  };
  if (auto c = dyn_cast<Conv2DOp>(op))
    return convFlops(c.getResult(), c.getFilter());
  if (auto c = dyn_cast<Conv2DBackwardInputOp>(op))
    return convFlops(c.getGradOutput(), c.getFilter());
  if (auto c = dyn_cast<Conv2DBackwardFilterOp>(op))
    return convFlops(c.getGradOutput(), c.getResult());
  // The fused attention's products (excluded scores skip theirs; this is
  // the unmasked count): forward Q K^T and P V; backward Q K^T again, then
  // dO V^T, P^T dO, dS K and dS^T Q.
  auto attentionFlops = [](Value q, Value k, Value v, bool bthd,
                           int64_t products) {
    SmallVector<int64_t, 4> qs = attentionShape(q, bthd);
    int64_t scores = qs[0] * qs[1] * qs[2] * attentionShape(k, bthd)[2];
    int64_t dv = attentionShape(v, bthd)[3];
    return 2 * scores * (products == 2 ? qs[3] + dv : 3 * qs[3] + 2 * dv);
  };
  if (auto a = dyn_cast<AttentionOp>(op))
    return attentionFlops(a.getQuery(), a.getKey(), a.getValue(), a.getBthd(),
                          2);
  if (auto a = dyn_cast<AttentionGradOp>(op))
    return attentionFlops(a.getQuery(), a.getKey(), a.getValue(), a.getBthd(),
                          5);
  if (isReduction(op))
    return elementsOf(op->getOperand(0));
  if (auto p = dyn_cast<MaxPool2DOp>(op))
    return elementsOf(p.getResult()) * p.getKernel()[0] * p.getKernel()[1];
  if (auto p = dyn_cast<AvgPool2DOp>(op))
    return elementsOf(p.getResult()) * p.getKernel()[0] * p.getKernel()[1];
  if (auto p = dyn_cast<MaxPool2DArgmaxOp>(op))
    return elementsOf(p.getResult()) * p.getKernel()[0] * p.getKernel()[1];
  if (auto p = dyn_cast<MaxPool2DBackwardOp>(op))
    return elementsOf(p.getResult());
  if (auto p = dyn_cast<AvgPool2DBackwardOp>(op))
    return elementsOf(p.getGradOutput()) * p.getKernel()[0] * p.getKernel()[1];
  if (auto s = dyn_cast<ScatterAddOp>(op))
    return elementsOf(s.getUpdates());
  if (auto s = dyn_cast<SegmentSumOp>(op))
    return elementsOf(s.getUpdates());
  if (isPointwise(op))
    return elementsOf(op->getResult(0));
  return 0; // data movement
}

nlohmann::json mlir::gpuc::unfusedCost(func::FuncOp func) {
  int64_t ops = 0, library = 0, bytes = 0, flops = 0;
  for (Operation &op : func.getBody().front()) {
    if (isa<ConstantOp, func::ReturnOp>(op) || isAlias(&op))
      continue;
    ++ops;
    flops += flopsOf(&op);
    if (isLibraryCall(&op)) {
      ++library;
      continue;
    }
    for (OpOperand &operand : op.getOpOperands())
      if (!isInlinableConstant(operand.get()))
        bytes += std::min(tensorBytes(operand.get()),
                          takenBytes(operand).value_or(INT64_MAX));
    for (Value result : op.getResults())
      bytes += tensorBytes(result);
  }
  return {{"ops", ops},
          {"library_calls", library},
          {"bytes_non_gemm", bytes},
          {"flops", flops}};
}

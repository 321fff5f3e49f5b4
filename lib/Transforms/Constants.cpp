//===- Constants.cpp - the constants pattern passes match on --------------===//
#include "gpuc/Transforms/Constants.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

using namespace mlir;
using namespace mlir::gpuc;

DenseElementsAttr mlir::gpuc::constantOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (isa<BroadcastOp, ReshapeOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    if (auto c = dyn_cast<ConstantOp>(def))
      return dyn_cast<DenseElementsAttr>(c.getValue());
    break;
  }
  return nullptr;
}

std::optional<double> mlir::gpuc::splatOf(Value v) {
  DenseElementsAttr c = constantOf(v);
  if (!c || !c.isSplat() || c.getNumElements() == 0)
    return std::nullopt;
  Type element = c.getElementType();
  if (isa<FloatType>(element))
    return c.getSplatValue<APFloat>().convertToDouble();
  if (element.isInteger(1))
    return c.getSplatValue<bool>() ? 1.0 : 0.0;
  if (element.isInteger())
    return (double)c.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

Value mlir::gpuc::stripScale(Value v, double &scale) {
  Operation *def = v.getDefiningOp();
  if (!def || !isa<MulOp, DivOp>(def) || !def->hasOneUse())
    return v;
  Value lhs = def->getOperand(0), rhs = def->getOperand(1);
  if (isa<DivOp>(def)) {
    std::optional<double> c = splatOf(rhs);
    if (!c || *c == 0.0)
      return v;
    scale /= *c;
    return lhs;
  }
  if (std::optional<double> c = splatOf(rhs)) {
    scale *= *c;
    return lhs;
  }
  if (std::optional<double> c = splatOf(lhs)) {
    scale *= *c;
    return rhs;
  }
  return v;
}

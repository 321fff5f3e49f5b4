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

std::optional<double> mlir::gpuc::scaleOf(Value v, Value &base) {
  Operation *def = v.getDefiningOp();
  if (!def || !isa<MulOp, DivOp>(def))
    return std::nullopt;
  Value lhs = def->getOperand(0), rhs = def->getOperand(1);
  if (std::optional<double> c = splatOf(rhs)) {
    if (isa<DivOp>(def) && *c == 0.0)
      return std::nullopt;
    base = lhs;
    return isa<DivOp>(def) ? 1.0 / *c : *c;
  }
  if (std::optional<double> c = splatOf(lhs); c && isa<MulOp>(def)) {
    base = rhs;
    return c;
  }
  return std::nullopt;
}

Value mlir::gpuc::stripScale(Value v, double &scale) {
  Value base;
  std::optional<double> c;
  if (!v.hasOneUse() || !(c = scaleOf(v, base)))
    return v;
  scale *= *c;
  return base;
}

//===- Signature.cpp - the roles of step arguments and results ------------===//
#include "gpuc/Dialect/Gpuc/Signature.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace mlir::gpuc;

std::optional<unsigned> mlir::gpuc::findArgument(func::FuncOp func,
                                                 StringRef attrName,
                                                 Attribute value) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (Attribute a = func.getArgAttr(i, attrName))
      if (!value || a == value)
        return i;
  return std::nullopt;
}

std::optional<unsigned>
mlir::gpuc::findResult(func::FuncOp func, StringRef attrName, Attribute value) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (Attribute a = func.getResultAttr(i, attrName))
      if (!value || a == value)
        return i;
  return std::nullopt;
}

ParameterOp mlir::gpuc::getArgumentParameter(func::FuncOp func,
                                             unsigned index) {
  auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
      index, GpucDialect::kParamAttrName);
  if (!ref)
    return {};
  return SymbolTable::lookupNearestSymbolFrom<ParameterOp>(func, ref.getAttr());
}

ParameterOp mlir::gpuc::findLossScaleParameter(ModuleOp module) {
  for (auto p : module.getOps<ParameterOp>())
    if (p->hasAttr(GpucDialect::kLossScaleAttrName))
      return p;
  return {};
}

BlockArgument mlir::gpuc::appendArgument(func::FuncOp func, Type type,
                                         NamedAttribute role, Location loc) {
  unsigned index = func.getNumArguments();
  DictionaryAttr attrs = DictionaryAttr::get(func.getContext(), {role});
  (void)func.insertArgument(index, type, attrs, loc);
  return func.getArgument(index);
}

void mlir::gpuc::appendResults(func::FuncOp func, ArrayRef<Value> values,
                               ArrayRef<NamedAttribute> roles) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> attrs;
  func.getAllResultAttrs(attrs);
  SmallVector<Value> operands(ret.getOperands());
  for (auto [v, role] : llvm::zip(values, roles)) {
    operands.push_back(v);
    attrs.push_back(DictionaryAttr::get(func.getContext(), {role}));
  }
  ret->setOperands(operands);
  func.setFunctionType(FunctionType::get(func.getContext(),
                                         func.getArgumentTypes(),
                                         ValueRange(operands).getTypes()));
  func.setAllResultAttrs(attrs);
}

void mlir::gpuc::eraseResults(func::FuncOp func, ArrayRef<unsigned> indices) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::BitVector erase(func.getNumResults());
  for (unsigned i : indices)
    erase.set(i);
  (void)func.eraseResults(erase);
  ret->eraseOperands(erase);
}

void mlir::gpuc::eraseDeadOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (op.use_empty() && isPure(&op) && !op.hasTrait<OpTrait::IsTerminator>())
      op.erase();
}

std::string mlir::gpuc::describeArgument(func::FuncOp func, unsigned index) {
  if (auto s =
          func.getArgAttrOfType<StringAttr>(index, GpucDialect::kInputAttrName))
    return s.str();
  if (auto s =
          func.getArgAttrOfType<StringAttr>(index, GpucDialect::kHyperAttrName))
    return s.str();
  if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
          index, GpucDialect::kParamAttrName))
    return ref.getValue().str();
  if (func.getArgAttr(index, GpucDialect::kRngAttrName))
    return "rng";
  return "arg" + std::to_string(index);
}

std::string mlir::gpuc::describeResult(func::FuncOp func, unsigned index) {
  if (auto s = func.getResultAttrOfType<StringAttr>(
          index, GpucDialect::kOutputAttrName))
    return s.str();
  if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
          index, GpucDialect::kUpdateAttrName))
    return ref.getValue().str();
  if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
          index, GpucDialect::kGradAttrName))
    return "grad." + ref.getValue().str();
  return "result" + std::to_string(index);
}

BlockArgument mlir::gpuc::hyperArgument(func::FuncOp func, StringRef name,
                                        double defaultValue, Location loc) {
  Builder builder(func.getContext());
  StringAttr nameAttr = builder.getStringAttr(name);
  if (auto i = findArgument(func, GpucDialect::kHyperAttrName, nameAttr))
    return func.getArgument(*i);
  BlockArgument arg = appendArgument(
      func, RankedTensorType::get({}, builder.getF32Type()),
      builder.getNamedAttr(GpucDialect::kHyperAttrName, nameAttr), loc);
  func.setArgAttr(arg.getArgNumber(), GpucDialect::kDefaultAttrName,
                  builder.getF64FloatAttr(defaultValue));
  return arg;
}

BlockArgument mlir::gpuc::optimizerStateArgument(func::FuncOp func,
                                                 StringRef name,
                                                 RankedTensorType type,
                                                 Location loc) {
  auto module = func->getParentOfType<ModuleOp>();
  auto param = module.lookupSymbol<ParameterOp>(name);
  if (!param) {
    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPoint(func);
    Attribute zero =
        isa<FloatType>(type.getElementType())
            ? Attribute(FloatAttr::get(type.getElementType(), 0))
            : Attribute(IntegerAttr::get(type.getElementType(), 0));
    param = ParameterOp::create(builder, loc, name, type,
                                DenseElementsAttr::get(type, zero),
                                /*trainable=*/false);
    param->setAttr(GpucDialect::kOptimizerStateAttrName, builder.getUnitAttr());
  }
  auto ref = FlatSymbolRefAttr::get(param);
  if (auto i = findArgument(func, GpucDialect::kParamAttrName, ref))
    return func.getArgument(*i);
  Builder builder(func.getContext());
  return appendArgument(
      func, type, builder.getNamedAttr(GpucDialect::kParamAttrName, ref), loc);
}

//===- GpucDialect.cpp - the gpuc dialect and its attribute checks --------===//
#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gpuc;

#include "gpuc/Dialect/Gpuc/GpucOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "gpuc/Dialect/Gpuc/GpucAttributes.cpp.inc"

void GpucDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "gpuc/Dialect/Gpuc/GpucOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "gpuc/Dialect/Gpuc/GpucAttributes.cpp.inc"
      >();
}

LogicalResult SlotAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t offset, int64_t bytes,
                               FlatSymbolRefAttr param) {
  if (bytes <= 0)
    return emitError() << "a slot holds a positive number of bytes, not "
                       << bytes;
  if (param && offset != -1)
    return emitError() << "a slot in parameter " << param
                       << " has no arena offset";
  if (!param && (offset < 0 || offset % 64 != 0))
    return emitError() << "an arena slot's offset is a multiple of 64 bytes, "
                          "not "
                       << offset;
  return success();
}

LogicalResult ColumnsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t offset, ArrayRef<int64_t> shape) {
  if (offset < 0)
    return emitError() << "a column window starts at column 0 or later, not "
                       << offset;
  if (shape.empty() || llvm::any_of(shape, [](int64_t d) { return d < 1; }))
    return emitError() << "a column window's shape has dimensions of at "
                          "least 1, not ["
                       << shape << "]";
  return success();
}

int64_t ColumnsAttr::getWidth() const {
  int64_t width = 1;
  for (int64_t d : getShape())
    width *= d;
  return width;
}

Operation *GpucDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

/// Checks that `attr` names a gpuc.parameter of the module holding `op` whose
/// type is `type`.
static LogicalResult verifyParameterRef(Operation *op, Attribute attr,
                                        Type type, StringRef what) {
  auto ref = dyn_cast<FlatSymbolRefAttr>(attr);
  if (!ref)
    return op->emitError()
           << "'" << what << "' must be a symbol reference to a gpuc.parameter";
  auto module = op->getParentOfType<ModuleOp>();
  auto param = module ? SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
                            module, ref.getAttr())
                      : ParameterOp();
  if (!param)
    return op->emitError() << "'" << what << "' refers to " << ref
                           << ", which is not a gpuc.parameter of this module";
  if (param.getType() != type)
    return op->emitError() << "'" << what << "' " << ref << " has type "
                           << param.getType() << " but the value has type "
                           << type;
  return success();
}

LogicalResult GpucDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func)
    return op->emitError() << "'" << attr.getName()
                           << "' is only meaningful on func.func arguments";
  Type type = func.getArgument(argIndex).getType();
  if (attr.getName() == kParamAttrName)
    return verifyParameterRef(op, attr.getValue(), type, kParamAttrName);
  if (attr.getName() == kInputAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kInputAttrName << "' must be a string";
    return success();
  }
  if (attr.getName() == kRngAttrName) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!isa<UnitAttr>(attr.getValue()) || !tensor ||
        tensor.getShape() != ArrayRef<int64_t>{2} ||
        !tensor.getElementType().isInteger(64))
      return op->emitError() << "'" << kRngAttrName
                             << "' is a unit attribute on a tensor<2xi64> "
                                "argument";
    return success();
  }
  if (attr.getName() == kHyperAttrName || attr.getName() == kDefaultAttrName) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() != 0 ||
        !isa<FloatType>(tensor.getElementType()))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' belongs on a scalar float argument";
    if (attr.getName() == kHyperAttrName && !isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kHyperAttrName << "' must be a string";
    if (attr.getName() == kDefaultAttrName && !isa<FloatAttr>(attr.getValue()))
      return op->emitError() << "'" << kDefaultAttrName << "' must be a float";
    return success();
  }
  return op->emitError() << "unknown gpuc argument attribute '"
                         << attr.getName() << "'";
}

LogicalResult GpucDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto func = dyn_cast<func::FuncOp>(op);
  if (!func)
    return op->emitError() << "'" << attr.getName()
                           << "' is only meaningful on func.func results";
  Type type = func.getResultTypes()[resultIndex];
  // With the optimizer state sharded over N ranks (gpuc-data-parallel's
  // shard_ranks), a gradient is this rank's shard of the parameter's.
  if (attr.getName() == kGradAttrName) {
    auto record = func->getAttrOfType<DictionaryAttr>(kDataParallelAttrName);
    auto ranks = record ? record.getAs<IntegerAttr>("shard_ranks") : nullptr;
    auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    auto module = func->getParentOfType<ModuleOp>();
    auto param = ranks && ref && module
                     ? module.lookupSymbol<ParameterOp>(ref.getAttr())
                     : ParameterOp();
    if (param && ranks.getInt() > 0) {
      auto whole = cast<RankedTensorType>(param.getType());
      auto shard = RankedTensorType::get(
          {shardElements(whole.getNumElements(), ranks.getInt())},
          whole.getElementType());
      if (type == shard)
        return success();
    }
  }
  if (attr.getName() == kUpdateAttrName || attr.getName() == kGradAttrName)
    return verifyParameterRef(op, attr.getValue(), type,
                              attr.getName().getValue());
  if (attr.getName() == kOutputAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kOutputAttrName << "' must be a string";
    return success();
  }
  return op->emitError() << "unknown gpuc result attribute '" << attr.getName()
                         << "'";
}

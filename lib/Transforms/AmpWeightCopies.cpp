//===- AmpWeightCopies.cpp - persistent 16-bit copies of the weights ------===//
//
// After gpuc-amp a GEMM reads `cast(p)`, a 16-bit copy of the f32 master
// weight made by a kernel of its own every step (read 4 bytes, write 2 per
// weight). Here the copy becomes persistent state written by the optimizer's
// update (one more output of the fused update kernel: 2 bytes per weight,
// no extra launch), and every function reads it instead of casting.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"
#include "gpuc/Interpreter/Interpreter.h"
#include "gpuc/Transforms/Passes.h"
#include "gpuc/runtime/device/Float16.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"

#include <cstring>

#define DEBUG_TYPE "gpuc-amp-weight-copies"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCAMPWEIGHTCOPIES
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct AmpWeightCopies
    : mlir::gpuc::impl::GpucAmpWeightCopiesBase<AmpWeightCopies> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      funcs.push_back(func);
    for (auto param : llvm::to_vector(module.getOps<ParameterOp>())) {
      if (!param.getTrainable())
        continue;
      if (failed(copyParameter(module, param, funcs)))
        return signalPassFailure();
    }
  }

  /// The 16-bit casts of `param`'s argument in `func`.
  static SmallVector<CastOp> narrowingCasts(func::FuncOp func,
                                            ParameterOp param) {
    SmallVector<CastOp> casts;
    std::optional<unsigned> arg = findArgument(
        func, GpucDialect::kParamAttrName, FlatSymbolRefAttr::get(param));
    if (!arg)
      return casts;
    for (Operation *user : func.getArgument(*arg).getUsers())
      if (auto cast = dyn_cast<CastOp>(user))
        if (auto to = dyn_cast<FloatType>(cast.getType().getElementType());
            to && to.getWidth() == 16)
          casts.push_back(cast);
    // In program order (use lists are not), so diagnostics are stable.
    llvm::sort(casts, [](CastOp a, CastOp b) { return a->isBeforeInBlock(b); });
    return casts;
  }

  LogicalResult copyParameter(ModuleOp module, ParameterOp param,
                              ArrayRef<func::FuncOp> funcs) {
    Type low;
    for (func::FuncOp func : funcs)
      for (CastOp cast : narrowingCasts(func, param)) {
        Type to = cast.getType().getElementType();
        if (low && low != to)
          return cast.emitOpError()
                 << "casts @" << param.getSymName()
                 << " to two 16-bit types; one weight copy serves one";
        low = to;
      }
    if (!low)
      return success();
    ParameterOp copy = createCopy(module, param, low);
    if (!copy)
      return failure();
    auto copyRef = FlatSymbolRefAttr::get(copy);
    auto paramRef = FlatSymbolRefAttr::get(param);
    for (func::FuncOp func : funcs) {
      OpBuilder builder(func.getContext());
      // Readers: the copy instead of a cast of the master. The writer has
      // the copy as an argument too, read or not (another function may
      // read it alone: a bias the eval function's GEMM adds), so that the
      // plan writes its update in place.
      SmallVector<CastOp> casts = narrowingCasts(func, param);
      std::optional<unsigned> update =
          findResult(func, GpucDialect::kUpdateAttrName, paramRef);
      if (!casts.empty() || update) {
        Value arg = appendArgument(
            func, copy.getType(),
            builder.getNamedAttr(GpucDialect::kParamAttrName, copyRef),
            copy.getLoc());
        for (CastOp cast : casts) {
          cast.replaceAllUsesWith(arg);
          cast.erase();
        }
      }
      // The writer: the update of the master also writes its copy.
      if (!update)
        continue;
      Operation *ret = func.getBody().front().getTerminator();
      builder.setInsertionPoint(ret);
      Value updated = ret->getOperand(*update);
      Value narrowed =
          CastOp::create(builder, updated.getLoc(), copy.getType(), updated);
      appendResults(
          func, {narrowed},
          {builder.getNamedAttr(GpucDialect::kUpdateAttrName, copyRef)});
    }
    return success();
  }

  /// `@P.f16` (or `.bf16`): state holding `@P`'s initial value rounded.
  ParameterOp createCopy(ModuleOp module, ParameterOp param, Type low) {
    std::string name =
        (param.getSymName() + (low.isF16() ? ".f16" : ".bf16")).str();
    if (module.lookupSymbol(name)) {
      param.emitOpError() << "needs a 16-bit copy named @" << name
                          << ", which the module already has";
      return {};
    }
    auto type = RankedTensorType::get(param.getTensorType().getShape(), low);
    // The rounded bits, written straight into the attribute's buffer: a
    // language model's 124M weights made a vector of APFloats (32 bytes
    // each) and took most of a compile, and of every batch --max-batch-for
    // plans.
    std::vector<uint16_t> bits;
    ElementsAttr initial = param.getInitialValue();
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(param);
    auto makeCopy = [&](ElementsAttr value) {
      auto copy = ParameterOp::create(builder, param.getLoc(), name, type,
                                      value, /*trainable=*/false);
      copy->setAttr(GpucDialect::kOptimizerStateAttrName,
                    builder.getUnitAttr());
      return copy;
    };
    // A dump's elided weights (no values) give an elided copy: the passes
    // after this one need only its type.
    if (isElided(initial))
      return makeCopy(DenseResourceElementsAttr::get(
          type, cast<DenseResourceElementsAttr>(initial).getRawHandle()));
    // Rounded as a kernel rounds a store (to nearest even; a NaN stays a
    // quiet NaN), the type chosen once per tensor, not per element.
    auto narrowAll = [&](auto values) {
      bits.resize(values.size());
      if (low.isBF16())
        llvm::transform(values, bits.begin(), [](float f) {
          return (uint16_t)::gpuc::floatToBFloat16Bits(f);
        });
      else
        llvm::transform(values, bits.begin(), [](float f) {
          return (uint16_t)::gpuc::floatToHalfBits(f);
        });
    };
    if (std::optional<ArrayRef<float>> floats = storedFloats(initial))
      narrowAll(*floats);
    else
      narrowAll(ArrayRef<double>(HostTensor::fromAttr(initial).data));
    return makeCopy(DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                             bits.size() * sizeof(uint16_t))));
  }
};
} // namespace

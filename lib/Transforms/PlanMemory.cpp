//===- PlanMemory.cpp - arena offsets and in-place writes for each buffer -===//
//
// The static memory plan: after this pass every kernel and library-call
// result of a step knows where it lives (an arena offset, or the parameter
// it updates in place), and the function knows its arena's peak and the
// liveness lower bound. The step program only serializes it.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Transforms/MemoryPlan.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCPLANMEMORY
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct PlanMemory : gpuc::impl::GpucPlanMemoryBase<PlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!isPlannable(func))
        continue;
      if (failed(plan(func)))
        return signalPassFailure();
    }
  }

  LogicalResult plan(func::FuncOp func) {
    MLIRContext *context = func.getContext();
    func.walk([](Operation *op) {
      op->removeAttr(GpucDialect::kSlotsAttrName);
      op->removeAttr(GpucDialect::kInPlaceAttrName);
    });
    if (inPlace)
      chooseInPlace(func);

    StepLiveness live = computeLiveness(func);
    SmallVector<int64_t> offsets;
    int64_t peak = packArena(live, offsets);
    for (Operation *op : live.ops) {
      if (!isa<FusionOp>(op) && !isLibraryCall(op))
        continue;
      SmallVector<Attribute> slots;
      for (Value result : op->getResults()) {
        unsigned b = live.bufferOf.lookup(result);
        const LiveBuffer &buffer = live.buffers[b];
        slots.push_back(
            buffer.param
                ? SlotAttr::get(context, -1, tensorBytes(result), buffer.param)
                : SlotAttr::get(context, offsets[b], tensorBytes(result),
                                FlatSymbolRefAttr()));
      }
      op->setAttr(GpucDialect::kSlotsAttrName, ArrayAttr::get(context, slots));
    }
    Builder b(context);
    func->setAttr(
        GpucDialect::kMemoryAttrName,
        b.getDictionaryAttr({
            b.getNamedAttr("arena_peak", b.getI64IntegerAttr(peak)),
            b.getNamedAttr("lower_bound",
                           b.getI64IntegerAttr(live.lowerBound())),
            b.getNamedAttr("kept_for_backward",
                           b.getI64IntegerAttr(live.keptForBackward())),
            b.getNamedAttr("forward_end", b.getI64IntegerAttr(live.forwardEnd)),
        }));
    if (failed(verifyMemoryPlan(func)))
      return func.emitError() << "gpuc-plan-memory made a plan that does not "
                                 "verify (a bug in gpuc; please report it)";
    return success();
  }
};
} // namespace

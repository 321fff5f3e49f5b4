//===- VerifyMemoryPlan.cpp - check a recorded memory plan ----------------===//
//
// gpuc-plan-memory checks its own plan before it returns; this pass runs the
// same check on any module that carries one (a hand-edited plan, a plan
// after later passes), so a plan that would let two live buffers share
// bytes never reaches code generation.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/MemoryPlan.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCVERIFYMEMORYPLAN
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct VerifyMemoryPlan
    : gpuc::impl::GpucVerifyMemoryPlanBase<VerifyMemoryPlan> {
  void runOnOperation() override {
    bool ok = true;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(GpucDialect::kMemoryAttrName))
        ok &= succeeded(verifyMemoryPlan(func));
    if (!ok)
      signalPassFailure();
  }
};
} // namespace

//===- SyncBatchNorm.cpp - batch norm over every rank's batch -------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCSYNCBATCHNORM
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct SyncBatchNorm : gpuc::impl::GpucSyncBatchNormBase<SyncBatchNorm> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      getOperation().emitError()
          << "gpuc-sync-batch-norm: the module has no @forward";
      return signalPassFailure();
    }
    forward.walk([](BatchNormTrainOp op) { op.setSyncRanks(true); });
  }
};
} // namespace

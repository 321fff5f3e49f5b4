//===- InitAll.cpp - register gpuc's dialects and passes ------------------===//
#include "gpuc/InitAll.h"
#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::gpuc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<mlir::gpuc::GpucDialect, mlir::func::FuncDialect>();
}

void mlir::gpuc::registerAllPasses() {
  mlir::registerTransformsPasses();
  mlir::gpuc::registerGpucPasses();
}

//===- gpuc-opt.cpp - mlir-opt for the gpuc dialect and passes ------------===//
#include "gpuc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::gpuc::registerAllDialects(registry);
  mlir::gpuc::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "gpuc optimizer driver\n", registry));
}

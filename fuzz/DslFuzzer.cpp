//===- DslFuzzer.cpp - the model DSL's parser
//------------------------------===//
#include "FuzzInput.h"
#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "gpuc/Frontend/DslParser.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *c = new mlir::MLIRContext();
    c->loadDialect<mlir::gpuc::GpucDialect, mlir::func::FuncDialect>();
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
    return c;
  }();
  std::string path = gpuc::fuzz::writeInput("model.gdsl", data, size);
  llvm::SourceMgr sourceMgr;
  mlir::gpuc::DslOptions options;
  options.batch = 2;
  mlir::gpuc::parseDslFile(path, context, sourceMgr, options);
  return 0;
}

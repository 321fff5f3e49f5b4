//===- DslFuzzer.cpp - the model DSL's parser -----------------------------===//
#include "FuzzInput.h"
#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "gpuc/Frontend/DslParser.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context per input, as the ONNX target has: a shared one interns every
  // name, type and constant of every input for good, which ran a 600 s run
  // out of memory (2 GB after 17,245 inputs; each alone needs 40 MB).
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.loadDialect<mlir::gpuc::GpucDialect, mlir::func::FuncDialect>();
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
  std::string path = gpuc::fuzz::writeInput("model.gdsl", data, size);
  llvm::SourceMgr sourceMgr;
  mlir::gpuc::DslOptions options;
  options.batch = 2;
  // Parameters up to 1M elements exercise every initializer; drawing the
  // 2^30 the DSL allows takes longer than an input's time limit here.
  options.maxInitializedElements = int64_t(1) << 20;
  mlir::gpuc::parseDslFile(path, &context, sourceMgr, options);
  return 0;
}

//===- OnnxFuzzer.cpp - the ONNX importer ---------------------------------===//
//
// Inputs starting with '<' are ONNX's text format (.onnxtxt), others binary
// protobuf (.onnx). The importer runs with --batch 2, as gpuc import would;
// its diagnostics are discarded (an error is a fine answer, a crash is not).
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "gpuc/Frontend/OnnxImporter.h"
#include "gpuc/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    mlir::gpuc::registerAllDialects(*r);
    return r;
  }();
  bool text = size > 0 && data[0] == '<';
  std::string path =
      gpuc::fuzz::writeInput(text ? "model.onnxtxt" : "model.onnx", data, size);
  // A context per input: the importer interns every name and constant it
  // reads, which would otherwise grow without bound across inputs.
  mlir::MLIRContext context(*registry);
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
  mlir::gpuc::OnnxImportOptions options;
  options.batch = 2;
  mlir::gpuc::importOnnxFile(path, &context, options);
  return 0;
}

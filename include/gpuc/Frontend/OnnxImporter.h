//===- OnnxImporter.h - ONNX models into the gpuc dialect -------*- C++ -*-===//
#ifndef GPUC_FRONTEND_ONNXIMPORTER_H
#define GPUC_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gpuc {

struct OnnxImportOptions {
  /// Binds dimension 0 of every graph input whose first dimension is
  /// symbolic, and that symbol wherever else it appears.
  std::optional<int64_t> batch;
  /// Full static shapes for named inputs; they take precedence over `batch`.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Graph inputs replaced by constants (serialized onnx TensorProtos), for
  /// models whose shape arguments are inputs (the ONNX node tests).
  std::map<std::string, std::string> constantInputs;
  /// When set, receives the path of every external data file the model's
  /// initializers name (what besides the model decides the import).
  std::vector<std::string> *externalFiles = nullptr;
};

/// Imports an ONNX model (binary protobuf, or ONNX text syntax when the file
/// ends in .onnxtxt or starts with '<') into a module holding
/// `func.func @forward` and one `gpuc.parameter` per initializer. Runs the ONNX
/// checker and shape inference first. Every problem is reported as an MLIR
/// diagnostic naming the file, the node, its op type and opset; returns null
/// then.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxFile(llvm::StringRef path, mlir::MLIRContext *context,
               const OnnxImportOptions &options);

/// The ONNX op types the importer supports, sorted.
std::vector<std::string> getSupportedOnnxOps();

} // namespace mlir::gpuc

#endif // GPUC_FRONTEND_ONNXIMPORTER_H

//===- ArtifactOnnx.h - the ONNX model an artifact carries ------*- C++ -*-===//
//
// An artifact keeps the ONNX model it was compiled from, for
// `train --export-onnx`, which writes the trained weights back into it. The
// weights are in init.safetensors already, so the model's copy points into
// that file (ONNX external data, which safetensors' little-endian bytes
// are) instead of holding them a second time.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FRONTEND_ARTIFACTONNX_H
#define GPUC_FRONTEND_ARTIFACTONNX_H

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::gpuc {

/// Where an artifact file holds a tensor's bytes.
struct StoredTensor {
  std::string file; // relative to the artifact
  uint64_t offset = 0;
  const std::vector<char> *bytes = nullptr;
};

class ArtifactOnnx {
public:
  ArtifactOnnx();
  ~ArtifactOnnx();

  /// Reads the model at `path` (already imported, so known to be valid).
  bool load(const std::string &path, std::string &error);
  /// The names of its initializers of element type FLOAT.
  std::set<std::string> floatInitializers() const;
  /// Writes the model to `outPath`: a FLOAT initializer whose values are
  /// `stored[name].bytes` becomes external data at that place; one in
  /// `withheld` keeps its name, type and shape but no values; external data
  /// of any other initializer is read in, so the copy stands on its own.
  bool write(const std::string &outPath,
             const std::map<std::string, StoredTensor> &stored,
             const std::set<std::string> &withheld, std::string &error);

private:
  std::string path;
  std::unique_ptr<onnx::ModelProto> model;
};

} // namespace mlir::gpuc

#endif // GPUC_FRONTEND_ARTIFACTONNX_H

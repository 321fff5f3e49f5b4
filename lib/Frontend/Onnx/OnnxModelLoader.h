//===- OnnxModelLoader.h - read, bind, check and infer ONNX models --------===//
//
// The part of the importer that calls into libonnx, which reports errors with
// C++ exceptions; it is compiled with -fexceptions and turns every exception
// into a plain message.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_LIB_FRONTEND_ONNXMODELLOADER_H
#define GPUC_LIB_FRONTEND_ONNXMODELLOADER_H

#include "gpuc/Frontend/OnnxImporter.h"

#include "onnx/onnx_pb.h"

#include <string>

namespace mlir::gpuc {

/// Reads the model at `path`, binds its symbolic input dimensions, substitutes
/// constant inputs, runs the ONNX checker and strict shape inference. On
/// failure returns false and sets `error`.
bool loadOnnxModel(const std::string &path, const OnnxImportOptions &options,
                   onnx::ModelProto &model, std::string &error);

/// Rewrites a model written for a newer ONNX (IR version above 8, opsets 18
/// and later) into the IR-8, opset-17 form the linked ONNX checks and
/// infers, where that form means the same; refuses a model exported by
/// PyTorch's dynamo exporter that its optimizer changed for inference. On
/// failure returns false and sets `error`, naming the node.
bool lowerNewerOnnx(onnx::ModelProto &model, std::string &error);

/// The model metadata lowerNewerOnnx adds for tied parameters of a dynamo
/// export: lines "ALIAS KEPT", each the name under which the exported
/// program also lists the initializer KEPT.
inline constexpr const char *kTiedParametersKey = "gpuc.tied_parameters";

/// The model metadata lowerNewerOnnx adds for the buffers of a dynamo
/// export that are initializers: lines "NAME saved" or "NAME unsaved" (a
/// buffer registered with persistent=False, in no state_dict).
inline constexpr const char *kBuffersKey = "gpuc.buffers";

/// Whether every node of the default domain is an op gpuc imports; else
/// false, with `error` the importer's message naming the node.
bool checkSupportedOps(const onnx::ModelProto &model, std::string &error);

/// Where a tensor's external data lives: a regular file inside the model's
/// directory, and the bytes of it to read.
struct ExternalData {
  std::string file;
  int64_t offset = 0, length = 0;
};
/// Resolves `tensor`'s external data against `modelDir` the one way both
/// the ONNX checker's run and the importer use: the location must be a
/// relative path without '..' that stays inside the directory once links
/// are followed, name a regular file, and offset/length (whole numbers)
/// must lie within it. False with `error` naming the tensor otherwise.
bool resolveExternalData(const onnx::TensorProto &tensor,
                         const std::string &modelDir, ExternalData &data,
                         std::string &error);

/// The version of the schema an op of `opset` resolves to, or -1 if ONNX does
/// not know the op.
int getOnnxSinceVersion(const std::string &opType, int opset);

} // namespace mlir::gpuc

#endif // GPUC_LIB_FRONTEND_ONNXMODELLOADER_H

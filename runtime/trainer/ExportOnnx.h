//===- ExportOnnx.h - trained weights written into the ONNX model ---------===//
#ifndef GPUC_TRAINER_EXPORTONNX_H
#define GPUC_TRAINER_EXPORTONNX_H

#include <string>

namespace gpuc::trainer {

class CompiledStep;

/// The file --export-onnx writes: it replaces a regular file only. A
/// symbolic link is followed (the link stays, its file gets the model); a
/// device, FIFO or directory is refused rather than renamed over. Checked
/// before training too, so a bad path costs no run.
std::string exportTarget(const std::string &path);

/// Writes the compiled step's trained float32 parameters into the initializers
/// of `dir`/model.onnx and saves it as `path` (atomically).
void exportOnnx(CompiledStep &s, const std::string &dir,
                const std::string &path);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_EXPORTONNX_H

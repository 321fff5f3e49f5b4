//===- Artifact.h - gpuc compile's back end: the trainer artifact ---------===//
//
// Writes into the output directory: plan.json (buffers, arena, steps),
// kernels.cu (every kernel, one source for both targets), init.safetensors
// (initial parameters, optimizer state, constants), model.onnx (for
// --export-onnx; its weights point into init.safetensors),
// kernels.sm_XX.cubin/.ptx (CUDA target: NVRTC and ptxas), and kernels.cpu.o
// linked with the runtime's trainer into `train` (CPU target). Compiled
// objects, cubins and trainers are cached by what made them; whole artifacts
// too (ArtifactCache.h).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TARGET_ARTIFACT_H
#define GPUC_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlir::gpuc {

struct ArtifactOptions {
  std::string outputDir;
  std::string modelPath;
  bool cpu = true, cuda = false;
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  /// One whole NVRTC compile per architecture instead of one PTX per family
  /// assembled by ptxas (to compare their cubins).
  bool nvrtcWhole = false;
  /// NVRTC compiles kernels.cu as one program, not cut into programs
  /// (NvrtcParts.cpp; to compare their PTX).
  bool nvrtcOneProgram = false;
  std::string cxx;
  /// Host compiler processes run in parallel (at most; small models use
  /// fewer).
  unsigned jobs = 1;
  /// Where compiled kernel objects are kept by the hash of what produced
  /// them ("": no cache).
  std::string cacheDir;
  /// What the trainer needs to know about the model (its data input, labels,
  /// the output it evaluates).
  nlohmann::json trainer;
  std::string dumpDir;
  /// Print the per-kernel report (report.json is always written).
  bool report = false;
  /// --memory-picture: where to write the SVG of the arena ("": none).
  std::string memoryPicture;
  /// unfusedCost() of @train_step before kernels were formed.
  nlohmann::json unfused;
  /// Mixed precision: {"storage": fp32|fp16|bf16, "loss_scale": mode}.
  nlohmann::json precision = nlohmann::json::object();
  /// --time: where the back end's phases nest (a disabled scope times
  /// nothing).
  TimingScope timing;
  /// --no-weights: the model's weights are left out of the artifact (its
  /// trainer needs --init).
  bool noWeights = false;
  /// --tf32: the GPU computes F32 GEMMs and convolutions on TF32 tensor
  /// cores (plan.json "tf32").
  bool tf32 = false;
  /// --f32-gemms=bf16: the GPU's F32 GEMMs round their operands to bf16 on
  /// tensor cores (plan.json "f32_gemms": "bf16"); convolutions follow
  /// tf32.
  bool f32GemmsBf16 = false;
  /// --data-parallel: the trainer joins several ranks (the MPI plugin
  /// travels with it).
  bool dataParallel = false;
  /// --ranks N --link L: the report estimates the data-parallel step on N
  /// GPUs joined by L (0: no estimate).
  int64_t estimateRanks = 0;
  std::string estimateLink = "nvlink";
  /// The line writeArtifact printed ("gpuc compile: wrote ...").
  std::string summary;
};

/// `gpuc compile`'s back end: the step program, kernels, trainer. Sets
/// `summary` to the line it prints.
int writeArtifact(ModuleOp module, ArtifactOptions &options);

/// The files of an artifact writeArtifact writes into `outputDir` with
/// `options` (names relative to it), build.log included.
std::vector<std::string> artifactFiles(const ArtifactOptions &options);

/// Hex SHA-256 of every runtime header a kernel source can include.
const std::string &runtimeHeadersDigest();

/// What identifies a compiler (the host's, or ptxas) in a cache key: its
/// resolved path and what `--version` prints; "" when it cannot run.
/// `scratch` is a file it may write and removes.
std::string compilerIdentity(const std::string &cxx,
                             const std::string &scratch);

} // namespace mlir::gpuc

#endif // GPUC_TARGET_ARTIFACT_H

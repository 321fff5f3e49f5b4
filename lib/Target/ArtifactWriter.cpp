//===- ArtifactWriter.cpp - gpuc compile's back end -----------------------===//
//
// The step program, then the artifact's files: plan.json, kernels.cu,
// init.safetensors, model.onnx and the report (writeStepFiles), the CPU
// kernels and the trainer (HostBuild) beside the cubins (buildCudaKernels).
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include "gpuc/Target/MemoryReport.h"
#include "gpuc/runtime/Safetensors.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace mlir::gpuc {
namespace {

/// Every persistent buffer starts zeroed on every device, so all-zero
/// initial values (optimizer moments, momentum buffers, the step counter)
/// are left out: an Adam artifact's init.safetensors is then the size of
/// its parameters, not three times it.
bool writeInitialTensors(StepProgram &program, const std::string &dir) {
  std::vector<::gpuc::NamedTensor> tensors;
  for (InitialTensor &t : program.initialTensors) {
    if (std::all_of(t.bytes.begin(), t.bytes.end(),
                    [](char c) { return c == 0; }))
      continue;
    tensors.push_back({t.name, t.dtype, t.shape, std::move(t.bytes)});
  }
  std::string error;
  if (!::gpuc::writeSafetensors(dir + "/init.safetensors", tensors, {},
                                error)) {
    llvm::errs() << "gpuc compile: " << error << "\n";
    return false;
  }
  return true;
}

/// plan.json, kernels.cu (also into --dump-dir), init.safetensors,
/// model.onnx, report.json and the memory picture.
bool writeStepFiles(StepProgram &program, const ArtifactOptions &options) {
  const std::string &dir = options.outputDir;
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::errs() << "gpuc compile: cannot create " << dir << ": "
                 << ec.message() << "\n";
    return false;
  }
  program.plan["trainer"] = options.trainer;
  program.plan["targets"] = nlohmann::json::array();
  if (options.cpu)
    program.plan["targets"].push_back("cpu");
  if (options.cuda)
    program.plan["targets"].push_back("cuda");
  program.plan["model"] = llvm::sys::path::filename(options.modelPath).str();
  if (!writeFile(dir + "/plan.json", program.plan.dump(1)) ||
      !writeFile(dir + "/kernels.cu", program.kernelSource))
    return false;
  if (!options.dumpDir.empty() &&
      (!writeFile(options.dumpDir + "/kernels.cu", program.kernelSource) ||
       !writeFile(options.dumpDir + "/plan.json", program.plan.dump(1))))
    return false;
  if (!writeInitialTensors(program, dir))
    return false;
  if (StringRef(options.modelPath).ends_with(".onnx")) {
    llvm::sys::fs::remove(dir + "/model.onnx");
    if (std::error_code ec =
            llvm::sys::fs::copy_file(options.modelPath, dir + "/model.onnx")) {
      llvm::errs() << "gpuc compile: cannot copy the model: " << ec.message()
                   << "\n";
      return false;
    }
  }
  if (!writeKernelReport(program.plan, options))
    return false;
  return options.memoryPicture.empty() ||
         writeFile(options.memoryPicture, memoryPicture(program.plan));
}

} // namespace

int writeArtifact(ModuleOp module, ArtifactOptions &options) {
  TimingScope phase = options.timing.nest("step program, kernel source");
  FailureOr<StepProgram> program = buildStepProgram(module);
  if (failed(program))
    return 1;
  phase.stop();
  phase = options.timing.nest("plan.json, init.safetensors, report");
  if (!writeStepFiles(*program, options))
    return 1;
  phase.stop();
  HostBuild host(*program, options);
  if (!host.start())
    return 1;
  bool cubinsFromCache = false;
  if (options.cuda &&
      !buildCudaKernels(program->kernelSource, options, cubinsFromCache))
    return 1;
  if (!host.finish())
    return 1;
  const std::string &dir = options.outputDir;
  llvm::raw_string_ostream summary(options.summary);
  summary << "gpuc compile: wrote " << dir << " ("
          << program->plan["kernels"].size() << " kernels, "
          << program->plan["functions"]["train_step"]["steps"].size()
          << " steps per training step, arena "
          << program->plan["arena_bytes"].get<int64_t>() / (1 << 20) << " MiB";
  if (options.cuda)
    summary << "; cubin+PTX for " << llvm::join(options.archs, ", ");
  summary << "; trainer " << dir << "/train";
  if (host.fromCache())
    summary << ", CPU kernels from the cache";
  if (cubinsFromCache)
    summary << ", cubins from the cache";
  summary << ")\n";
  llvm::outs() << options.summary;
  return 0;
}

std::vector<std::string> artifactFiles(const ArtifactOptions &options) {
  std::vector<std::string> files = {"plan.json",  "report.json",
                                    "kernels.cu", "init.safetensors",
                                    "build.log",  "train"};
  if (StringRef(options.modelPath).ends_with(".onnx"))
    files.push_back("model.onnx");
  if (options.cpu)
    files.push_back("kernels.cpu.o");
  if (options.cuda) {
#ifdef GPUC_CUDA_PLUGIN_LIB
    files.push_back("libgpuc_cuda.so");
#endif
    for (const std::string &arch : options.archs) {
      files.push_back("kernels." + arch + ".cubin");
      files.push_back("kernels." + arch + ".ptx");
    }
  }
  return files;
}

} // namespace mlir::gpuc

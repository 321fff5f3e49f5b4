//===- ArtifactWriter.cpp - gpuc compile's back end -----------------------===//
//
// The step program, then the artifact's files: plan.json, kernels.cu,
// init.safetensors, model.onnx (its weights in init.safetensors) and the
// report (writeStepFiles), the CPU kernels and the trainer (HostBuild)
// beside the cubins (buildCudaKernels).
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include "gpuc/Frontend/ArtifactOnnx.h"
#include "gpuc/Target/MemoryReport.h"
#include "gpuc/runtime/Safetensors.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;

namespace mlir::gpuc {
namespace {

/// init.safetensors and model.onnx. Every persistent buffer starts zeroed
/// on every device, so all-zero initial values (optimizer moments,
/// momentum buffers, the step counter) are left out: an Adam artifact's
/// init.safetensors is then the size of its parameters, not three times
/// it. model.onnx points into init.safetensors for the weights (ONNX
/// external data), so they are stored once. With --no-weights the model's
/// weights (its parameters, and its buffers that are ONNX initializers) are
/// in neither file: `train --init` gives them.
bool writeWeights(StepProgram &program, const ArtifactOptions &options) {
  const std::string &dir = options.outputDir;
  bool fromOnnx = StringRef(options.modelPath).ends_with(".onnx");
  ArtifactOnnx onnx;
  std::string error;
  if (fromOnnx && !onnx.load(options.modelPath, error)) {
    llvm::errs() << "gpuc compile: " << error << "\n";
    return false;
  }
  std::set<std::string> withheld;
  if (options.noWeights) {
    std::set<std::string> initializers;
    if (fromOnnx)
      initializers = onnx.floatInitializers();
    for (const nlohmann::json &b : program.plan["buffers"]) {
      std::string name = b["name"], kind = b["kind"];
      // A buffer no state_dict holds (persistent=False) stays: no --init
      // file could give it.
      if (!b.value("saved", true))
        continue;
      if (b["dtype"] == "F32" &&
          (kind == "param" || (kind == "state" && initializers.count(name))))
        withheld.insert(name);
    }
    // Mixed precision's 16-bit copies of the weights (P.f16, P.bf16): the
    // trainer rounds them from what --init gives.
    for (const nlohmann::json &b : program.plan["buffers"]) {
      StringRef name = b["name"].get_ref<const std::string &>();
      for (StringRef suffix : {".f16", ".bf16"})
        if (name.ends_with(suffix) &&
            withheld.count(name.drop_back(suffix.size()).str()))
          withheld.insert(name.str());
    }
    program.plan["trainer"]["weights_withheld"] =
        std::vector<std::string>(withheld.begin(), withheld.end());
  }
  std::vector<::gpuc::NamedTensor> tensors;
  for (const InitialTensor &t : program.initialTensors) {
    if (withheld.count(t.name) || t.allZero())
      continue;
    tensors.push_back({t.name, t.dtype, t.shape, t.bytes()});
  }
  std::vector<uint64_t> offsets;
  if (!::gpuc::writeSafetensors(dir + "/init.safetensors", tensors, {}, error,
                                &offsets)) {
    llvm::errs() << "gpuc compile: " << error << "\n";
    return false;
  }
  if (!fromOnnx)
    return true;
  std::map<std::string, StoredTensor> stored;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].dtype == "F32")
      stored[tensors[i].name] = {"init.safetensors", offsets[i],
                                 &tensors[i].data};
  if (!onnx.write(dir + "/model.onnx", stored, withheld, error)) {
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
  if (options.tf32)
    program.plan["tf32"] = true;
  if (options.f32GemmsBf16)
    program.plan["f32_gemms"] = "bf16";
  if (!writeWeights(program, options))
    return false;
  if (!writeFile(dir + "/plan.json", program.plan.dump(1)) ||
      !writeFile(dir + "/kernels.cu", program.kernelSource))
    return false;
  if (!options.dumpDir.empty() &&
      (!writeFile(options.dumpDir + "/kernels.cu", program.kernelSource) ||
       !writeFile(options.dumpDir + "/plan.json", program.plan.dump(1))))
    return false;
  if (!writeKernelReport(program.plan, options))
    return false;
  return options.memoryPicture.empty() ||
         writeFile(options.memoryPicture, memoryPicture(program.plan));
}

/// A data-parallel trainer opens the MPI plugin from its own directory.
bool installCollectives(const nlohmann::json &plan, const std::string &dir) {
  if (!plan.contains("data_parallel"))
    return true;
#ifdef GPUC_MPI_PLUGIN_LIB
  return installPlugin(GPUC_MPI_PLUGIN_LIB, dir, "libgpuc_mpi.so");
#else
  llvm::errs() << "gpuc compile: warning: this gpuc was built without MPI "
                  "(libopenmpi-dev was missing at configure time): the "
                  "trainer runs as one process but cannot join several "
                  "ranks\n";
  return true;
#endif
}

} // namespace

int writeArtifact(ModuleOp module, ArtifactOptions &options) {
  TimingScope phase = options.timing.nest("step program, kernel source");
  FailureOr<StepProgram> program = buildStepProgram(module);
  if (failed(program))
    return 1;
  phase.stop();
  phase = options.timing.nest("plan.json, init.safetensors, report");
  if (!writeStepFiles(*program, options) ||
      !installCollectives(program->plan, options.outputDir))
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
#ifdef GPUC_MPI_PLUGIN_LIB
  if (options.dataParallel)
    files.push_back("libgpuc_mpi.so");
#endif
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

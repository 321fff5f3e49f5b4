//===- Nvrtc.cpp - compile kernels.cu for NVIDIA GPUs without one ---------===//
//
// NVRTC compiles to cubin and PTX on the CPU: the CUDA target is built and
// checked on machines with no GPU. Builds without the CUDA toolkit report
// that the CUDA target is unavailable instead.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Nvrtc.h"

#include "llvm/Support/FileSystem.h"

#include <cstdlib>

#ifdef GPUC_HAVE_NVRTC
#include <nvrtc.h>
#endif

using namespace mlir::gpuc;

#ifdef GPUC_HAVE_NVRTC
bool mlir::gpuc::nvrtcAvailable() { return true; }

std::vector<int> mlir::gpuc::nvrtcSupportedArchs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0)
    return {};
  std::vector<int> archs(count);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS)
    return {};
  return archs;
}

std::string mlir::gpuc::nvrtcIdentity() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor) +
         " -std=c++17 -default-device";
}

/// Compiles `source` for `arch` (sm_XX or compute_XX) into `program`; on
/// failure destroys it and sets `error` to NVRTC's log.
static bool runNvrtc(const std::string &source, const std::string &arch,
                     const std::string &runtimeIncludeDir,
                     nvrtcProgram &program, std::string &error) {
  if (nvrtcCreateProgram(&program, source.c_str(), "kernels.cu", 0, nullptr,
                         nullptr) != NVRTC_SUCCESS) {
    error = "nvrtcCreateProgram failed";
    return false;
  }
  std::string archOption = "--gpu-architecture=" + arch;
  std::string include = "-I" + runtimeIncludeDir;
  const char *options[] = {archOption.c_str(), include.c_str(), "-std=c++17",
                           "-default-device"};
  nvrtcResult result = nvrtcCompileProgram(program, 4, options);
  if (result == NVRTC_SUCCESS)
    return true;
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    nvrtcGetProgramLog(program, log.data());
  error = std::string(nvrtcGetErrorString(result)) + "\n" + log;
  nvrtcDestroyProgram(&program);
  return false;
}

static std::string programPtx(nvrtcProgram program) {
  size_t size = 0;
  nvrtcGetPTXSize(program, &size);
  std::string ptx(size, '\0');
  nvrtcGetPTX(program, ptx.data());
  if (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  return ptx;
}

bool mlir::gpuc::compileToPtx(const std::string &source,
                              const std::string &virtualArch,
                              const std::string &runtimeIncludeDir,
                              std::string &ptx, std::string &error) {
  nvrtcProgram program;
  if (!runNvrtc(source, virtualArch, runtimeIncludeDir, program, error))
    return false;
  ptx = programPtx(program);
  nvrtcDestroyProgram(&program);
  return true;
}

bool mlir::gpuc::compileWithNvrtc(const std::string &source,
                                  const std::string &arch,
                                  const std::string &runtimeIncludeDir,
                                  GpuBinary &binary, std::string &error) {
  nvrtcProgram program;
  if (!runNvrtc(source, arch, runtimeIncludeDir, program, error))
    return false;
  size_t size = 0;
  nvrtcGetCUBINSize(program, &size);
  binary.cubin.resize(size);
  nvrtcGetCUBIN(program, binary.cubin.data());
  binary.ptx = programPtx(program);
  binary.arch = arch;
  nvrtcDestroyProgram(&program);
  return true;
}

std::string mlir::gpuc::ptxasPath() {
#ifdef GPUC_PTXAS_PATH
  // A toolkit moved since the build leaves one NVRTC compile per
  // architecture.
  if (llvm::sys::fs::can_execute(GPUC_PTXAS_PATH))
    return GPUC_PTXAS_PATH;
#endif
  return "";
}
#else
bool mlir::gpuc::nvrtcAvailable() { return false; }

std::string mlir::gpuc::ptxasPath() { return ""; }

bool mlir::gpuc::compileToPtx(const std::string &, const std::string &,
                              const std::string &, std::string &,
                              std::string &error) {
  error = "this gpuc was built without the CUDA toolkit (NVRTC not found at "
          "configure time); install it under /usr/local/cuda and rebuild";
  return false;
}

std::vector<int> mlir::gpuc::nvrtcSupportedArchs() { return {}; }

std::string mlir::gpuc::nvrtcIdentity() { return "no nvrtc"; }

bool mlir::gpuc::compileWithNvrtc(const std::string &, const std::string &,
                                  const std::string &, GpuBinary &,
                                  std::string &error) {
  error = "this gpuc was built without the CUDA toolkit (NVRTC not found at "
          "configure time); install it under /usr/local/cuda and rebuild";
  return false;
}
#endif

std::vector<PtxFamily>
mlir::gpuc::groupByPtxFamily(const std::vector<std::string> &archs,
                             bool assemble) {
  // The first architecture whose kernels.cu text serves every later one:
  // Float16.h's `__CUDA_ARCH__ >= 800` is the headers' only test of it.
  constexpr int kSharedFrom = 80;
  std::vector<PtxFamily> families;
  PtxFamily shared;
  int sharedLowest = 0;
  for (const std::string &arch : archs) {
    int number = std::atoi(arch.c_str() + 3); // sm_XX
    if (assemble && number >= kSharedFrom) {
      if (shared.archs.empty() || number < sharedLowest)
        sharedLowest = number;
      shared.archs.push_back(arch);
    } else {
      families.push_back({"compute_" + arch.substr(3), {arch}});
    }
  }
  if (!shared.archs.empty()) {
    shared.virtualArch = "compute_" + std::to_string(sharedLowest);
    families.push_back(std::move(shared));
  }
  return families;
}

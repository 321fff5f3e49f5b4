//===- Nvrtc.cpp - compile kernels.cu for NVIDIA GPUs without one ---------===//
//
// NVRTC compiles to cubin and PTX on the CPU: the CUDA target is built and
// checked on machines with no GPU. Builds without the CUDA toolkit report
// that the CUDA target is unavailable instead.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Nvrtc.h"

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

bool mlir::gpuc::compileWithNvrtc(const std::string &source,
                                  const std::string &arch,
                                  const std::string &runtimeIncludeDir,
                                  GpuBinary &binary, std::string &error) {
  nvrtcProgram program;
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
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    nvrtcGetProgramLog(program, log.data());
  if (result != NVRTC_SUCCESS) {
    error = std::string(nvrtcGetErrorString(result)) + "\n" + log;
    nvrtcDestroyProgram(&program);
    return false;
  }
  size_t size = 0;
  nvrtcGetCUBINSize(program, &size);
  binary.cubin.resize(size);
  nvrtcGetCUBIN(program, binary.cubin.data());
  nvrtcGetPTXSize(program, &size);
  binary.ptx.resize(size);
  nvrtcGetPTX(program, binary.ptx.data());
  if (!binary.ptx.empty() && binary.ptx.back() == '\0')
    binary.ptx.pop_back();
  binary.arch = arch;
  nvrtcDestroyProgram(&program);
  return true;
}
#else
bool mlir::gpuc::nvrtcAvailable() { return false; }

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

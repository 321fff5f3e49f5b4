//===- Nvrtc.h - compile kernels.cu for NVIDIA GPUs without one -*- C++ -*-===//
#ifndef GPUC_CODEGEN_NVRTC_H
#define GPUC_CODEGEN_NVRTC_H

#include <string>
#include <vector>

namespace mlir::gpuc {

struct GpuBinary {
  std::string arch; // sm_80, sm_90
  std::string cubin;
  std::string ptx;
};

/// Whether this build of gpuc can call NVRTC (found at configure time).
bool nvrtcAvailable();

/// The real architectures this NVRTC compiles for (75 for sm_75, ...);
/// empty without NVRTC.
std::vector<int> nvrtcSupportedArchs();

/// NVRTC's version and the options compileWithNvrtc passes: what besides
/// the source and its headers decides the cubin (a cache key's part).
std::string nvrtcIdentity();

/// Compiles `source` (kernels.cu) for `arch` with NVRTC, the runtime's
/// include directory on the path. On failure, `error` holds NVRTC's log.
bool compileWithNvrtc(const std::string &source, const std::string &arch,
                      const std::string &runtimeIncludeDir, GpuBinary &binary,
                      std::string &error);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_NVRTC_H

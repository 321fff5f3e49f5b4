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

/// The ptxas of the toolkit NVRTC came from (found at configure time), or
/// "" without one: with it, kernels.cu is compiled once to PTX for a family
/// of architectures and assembled for each by ptxas, as `nvcc -gencode
/// arch=compute_80,code=[sm_80,sm_90]` does, instead of one whole NVRTC
/// compile per architecture.
std::string ptxasPath();

/// Architectures for which kernels.cu is one text, compiled to PTX once for
/// the lowest of them (`virtualArch`, compute_80) and assembled for each.
struct PtxFamily {
  std::string virtualArch;
  std::vector<std::string> archs;
};

/// Groups `archs` (sm_XX, in the order given) into PTX families: when
/// `assemble` (with ptxas), sm_80 and later form one (the runtime's device
/// headers test __CUDA_ARCH__ against 800 only; test/Codegen/ptx-families.test
/// checks that) and each earlier architecture its own; else each its own.
std::vector<PtxFamily> groupByPtxFamily(const std::vector<std::string> &archs,
                                        bool assemble);

/// Compiles `source` (kernels.cu) to PTX for `virtualArch` (compute_XX)
/// with NVRTC. On failure, `error` holds NVRTC's log.
bool compileToPtx(const std::string &source, const std::string &virtualArch,
                  const std::string &runtimeIncludeDir, std::string &ptx,
                  std::string &error);

/// kernels.cu cut between its entry points into programs of about equal
/// cost (consecutive runs of entries, each program with everything they
/// share; how many depends on the source alone, so the PTX does too):
/// NVRTC compiles them on threads of their own, and mergePartsPtx makes
/// their PTX one module. One program (the source itself) for a small
/// source.
std::vector<std::string> splitKernelSource(const std::string &source);

/// The PTX module of the whole source from its parts' PTX, in the parts'
/// order: declarations once, shared variables NVVM demoted into a part's
/// only user where the whole module has others, block labels numbered by
/// the merged functions. False with `error` where a part's PTX is not in
/// the form NVRTC writes.
bool mergePartsPtx(const std::vector<std::string> &ptxs, std::string &merged,
                   std::string &error);

/// Compiles `source` (kernels.cu) for `arch` with NVRTC, the runtime's
/// include directory on the path. On failure, `error` holds NVRTC's log.
bool compileWithNvrtc(const std::string &source, const std::string &arch,
                      const std::string &runtimeIncludeDir, GpuBinary &binary,
                      std::string &error);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_NVRTC_H

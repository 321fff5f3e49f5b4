//===- KernelEmitter.h - a gpuc.fusion as one CUDA C++ kernel ---*- C++ -*-===//
#ifndef GPUC_CODEGEN_KERNELEMITTER_H
#define GPUC_CODEGEN_KERNELEMITTER_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include <string>

namespace mlir::gpuc {

/// One generated kernel: `extern "C" __global__ void <name>(inputs...,
/// outputs...)`, launched with `grid` blocks of `blockThreads` threads.
struct EmittedKernel {
  std::string name;
  std::string source;
  int64_t grid = 1;
  /// Host-side launcher text for the CPU target (casts the argument array
  /// and runs the blocks through gpuc::cpuLaunch).
  std::string cpuLauncher;
};

/// Emits the body of `fusion` as one kernel. The kernel's shape follows what
/// the region computes: elementwise over its results' shape (each block owns
/// a tile of `kPointwiseTile` elements), or, with one reduction, one block per
/// element of the reduction's result (pointwise producers are computed while
/// reading, pointwise consumers after the block reduction). Fails, with a
/// diagnostic on the fusion, for a region it has no schedule for.
FailureOr<EmittedKernel> emitKernel(FusionOp fusion, StringRef name);

/// Elements a block of a pointwise kernel owns.
constexpr int64_t kPointwiseTile = 2048;

/// The C type a tensor element is stored as, or "" when codegen cannot store
/// it yet (f16/bf16 arrive with mixed precision).
StringRef storageCType(Type elementType);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_KERNELEMITTER_H

//===- HostCuda.h - the CUDA driver, cuBLASLt and cuDNN on the host -------===//
//
// What CudaDevice calls of the CUDA driver, cuBLASLt and cuDNN, run on the
// CPU, so that the CUDA device (its plan resolution, graph capture and
// replay, streams and events, the library algorithms' timing and cache,
// kernel alternatives, persistent memory) runs and is tested where there
// is no GPU. libgpuc_cuda_host.so is CudaDevice linked against these
// instead of the NVIDIA libraries; a trainer takes it with
// GPUC_CUDA_PLUGIN. It is a test double, not an emulator of the hardware:
//
// - Device memory is host memory; a copy or a launch outside the
//   allocations fails as an illegal address.
// - Work on a stream runs in its order when something waits for it (a
//   synchronization, an event the host or another stream waits on), never
//   earlier: work on two streams that the program did not order runs in
//   whichever order a wait asks for, so a missing wait reads stale values
//   rather than the right ones by luck.
// - Kernels are the trainer's own host-compiled ones (`gpuc_cpu_kernels`,
//   which the trainer exports when built with -rdynamic); under
//   -DGPUC_EMULATE_GPU they are the GPU's text, run with the GPU's grid.
// - GEMMs and convolutions are plain loops in f32.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H
#define GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H

#include <cuda.h>

#include <cstddef>
#include <functional>

namespace gpuc::host_cuda {

/// Queues `work` on `stream` (into its graph while it is captured). Work
/// that fails returns an error, which the stream's next synchronization
/// reports, as an asynchronous error on a GPU does.
CUresult enqueue(CUstream stream, std::function<CUresult()> work);

/// Whether [address, address + bytes) lies inside one device allocation.
bool isDeviceRange(const void *address, size_t bytes);

} // namespace gpuc::host_cuda

#endif // GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H

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
//   earlier: a read of device memory that does not wait for the stream
//   writing it reads stale values, not the right ones by luck.
// - Kernels are the trainer's own host-compiled ones (`gpuc_cpu_kernels`,
//   which the trainer exports when built with -rdynamic). Built with
//   -DGPUC_HOST_CUDA they are the GPU's text on the emulated GPU, with
//   the GPU's grid, alternative entry points included.
// - GEMMs and convolutions are plain loops summing in double.
// - Event times are the host's, plus a second for each launch
//   GPUC_HOST_CUDA_SLOW slows (HostDriver.cpp).
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

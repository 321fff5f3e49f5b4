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
//   earlier, and before the host waits for a stream the other streams'
//   work runs as far as it can: a read of device memory, by the host or by
//   a kernel, that does not wait for the stream writing it reads stale
//   values, not the right ones by luck.
// - Kernels are the trainer's own host-compiled ones (`gpuc_cpu_kernels`,
//   which the trainer exports when built with -rdynamic). Built with
//   -DGPUC_HOST_CUDA they are the GPU's text on the emulated GPU, with
//   the GPU's grid, alternative entry points included.
// - GEMMs and convolutions are plain loops summing in double.
// - Event times are the host's, plus a second for each launch
//   GPUC_HOST_CUDA_SLOW slows (HostDriver.cpp) and for each call of the
//   cuDNN attention stand-in unless it slows the kernels
//   (HostDnnAttention.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H
#define GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H

#include "gpuc/runtime/device/Float16.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpuc::host_cuda {

/// Queues `work` on `stream` (into its graph while it is captured). Work
/// that fails returns an error, which the stream's next synchronization
/// reports, as an asynchronous error on a GPU does.
CUresult enqueue(CUstream stream, std::function<CUresult()> work);

/// Makes the events see a second more than the host's time: what a
/// slowed launch or call adds where it runs.
void countSecondMore();

/// Whether [address, address + bytes) lies inside one device allocation.
bool isDeviceRange(const void *address, size_t bytes);

/// The element types cuBLASLt's and cuDNN's calls take here, whatever
/// each library calls them.
enum class Element { F32, F16, BF16 };

inline int64_t elementBytes(Element type) {
  return type == Element::F32 ? 4 : 2;
}

/// Element i of `base`, widened to f32.
inline float loadElement(const void *base, int64_t i, Element type) {
  switch (type) {
  case Element::F16:
    return halfBitsToFloat(((const unsigned short *)base)[i]);
  case Element::BF16:
    return bfloat16BitsToFloat(((const unsigned short *)base)[i]);
  default:
    return ((const float *)base)[i];
  }
}

/// Stores `value` as element i of `base`, rounded to nearest even.
inline void storeElement(void *base, int64_t i, Element type, float value) {
  switch (type) {
  case Element::F16:
    ((unsigned short *)base)[i] = floatToHalfBits(value);
    break;
  case Element::BF16:
    ((unsigned short *)base)[i] = floatToBFloat16Bits(value);
    break;
  default:
    ((float *)base)[i] = value;
  }
}

} // namespace gpuc::host_cuda

#endif // GPUC_RUNTIME_CUDA_HOST_HOSTCUDA_H

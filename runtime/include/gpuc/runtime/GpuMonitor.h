//===- GpuMonitor.h - a GPU's utilization, memory and power -----*- C++ -*-===//
//
// Sampled through NVML (libnvidia-ml.so.1, what nvidia-smi reads), opened
// at run time as the CUDA plugin is: the trainer links nothing of NVIDIA's,
// and a machine without the driver simply has no monitor.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_GPUMONITOR_H
#define GPUC_RUNTIME_GPUMONITOR_H

#include <memory>
#include <string>

namespace gpuc {

/// One reading of a GPU. A figure the GPU does not report is negative.
struct GpuSample {
  /// Percent of NVML's last sample period in which a kernel ran.
  double utilization = -1;
  double memoryUsedMiB = -1, memoryTotalMiB = -1;
  double powerW = -1;
};

class GpuMonitor {
public:
  /// NVML's view of the GPU at PCI bus id `busId` (as CUDA names it,
  /// "0000:65:00.0"), from `library`; null, with `why` saying what is
  /// missing, when NVML cannot be loaded or does not know that GPU.
  static std::unique_ptr<GpuMonitor>
  open(const std::string &busId, std::string &why,
       const std::string &library = "libnvidia-ml.so.1");
  ~GpuMonitor();
  /// The GPU now; false (with `error`) when NVML fails to answer.
  bool sample(GpuSample &out, std::string &error);

  struct Api;

private:
  GpuMonitor() = default;
  void *handle = nullptr;
  std::unique_ptr<Api> api;
  void *device = nullptr;
};

} // namespace gpuc

#endif // GPUC_RUNTIME_GPUMONITOR_H

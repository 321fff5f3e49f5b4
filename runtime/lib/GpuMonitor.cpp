//===- GpuMonitor.cpp - NVML, loaded at run time --------------------------===//
//
// The few NVML entry points the monitor calls, declared by their C ABI
// (NVML's header is not part of the CUDA toolkit here): every one returns
// an nvmlReturn_t, 0 on success.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/GpuMonitor.h"

#include <dlfcn.h>

namespace gpuc {

namespace {
struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
} // namespace

struct GpuMonitor::Api {
  int (*init)();
  int (*shutdown)();
  const char *(*errorString)(int);
  int (*byBusId)(const char *, void **);
  int (*utilization)(void *, NvmlUtilization *);
  int (*memory)(void *, NvmlMemory *);
  int (*power)(void *, unsigned int *);
};

std::unique_ptr<GpuMonitor> GpuMonitor::open(const std::string &busId,
                                             std::string &why,
                                             const std::string &library) {
  std::unique_ptr<GpuMonitor> monitor(new GpuMonitor());
  monitor->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!monitor->handle) {
    why = library + " cannot be loaded (it comes with the NVIDIA driver)";
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  bool found = true;
  auto symbol = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(monitor->handle, name));
    if (!fn && found) {
      why = library + " has no " + name + " (not NVML, or too old)";
      found = false;
    }
  };
  symbol(api->init, "nvmlInit_v2");
  symbol(api->shutdown, "nvmlShutdown");
  symbol(api->errorString, "nvmlErrorString");
  symbol(api->byBusId, "nvmlDeviceGetHandleByPciBusId_v2");
  symbol(api->utilization, "nvmlDeviceGetUtilizationRates");
  symbol(api->memory, "nvmlDeviceGetMemoryInfo");
  symbol(api->power, "nvmlDeviceGetPowerUsage");
  if (!found)
    return nullptr;
  if (int r = api->init()) {
    why = std::string("NVML did not start: ") + api->errorString(r);
    return nullptr;
  }
  if (int r = api->byBusId(busId.c_str(), &monitor->device)) {
    why = "NVML does not know the GPU at " + busId + ": " + api->errorString(r);
    api->shutdown();
    return nullptr;
  }
  monitor->api = std::move(api);
  return monitor;
}

GpuMonitor::~GpuMonitor() {
  if (api)
    api->shutdown();
  if (handle)
    dlclose(handle);
}

bool GpuMonitor::sample(GpuSample &out, std::string &error) {
  out = GpuSample();
  NvmlUtilization utilization{};
  if (int r = api->utilization(device, &utilization)) {
    error = std::string("NVML: ") + api->errorString(r);
    return false;
  }
  out.utilization = utilization.gpu;
  NvmlMemory memory{};
  if (api->memory(device, &memory) == 0) {
    out.memoryUsedMiB = memory.used / 1048576.0;
    out.memoryTotalMiB = memory.total / 1048576.0;
  }
  // Power is not reported by every board (NVML_ERROR_NOT_SUPPORTED).
  unsigned int milliwatts = 0;
  if (api->power(device, &milliwatts) == 0)
    out.powerW = milliwatts / 1000.0;
  return true;
}

} // namespace gpuc

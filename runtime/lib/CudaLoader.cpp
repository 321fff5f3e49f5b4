//===- CudaLoader.cpp - find and load the CUDA device plugin --------------===//
//
// The trainer links no CUDA library: the CUDA device lives in
// libgpuc_cuda.so, which links the driver, cuBLASLt and cuDNN, and is opened
// here only when the trainer is asked for (or defaults to) the GPU. On a
// machine without the NVIDIA driver the dlopen fails on libcuda.so.1, which
// is told apart from a missing plugin or missing CUDA libraries.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Executor.h"

#include <cstdlib>
#include <dlfcn.h>
#include <sys/stat.h>

namespace gpuc {

static bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::unique_ptr<Device> loadCudaDevice(const Plan &plan,
                                       const std::string &artifactDir,
                                       const CudaOptions &options,
                                       std::string &error) {
  std::string plugin = artifactDir + "/libgpuc_cuda.so";
  if (const char *env = getenv("GPUC_CUDA_PLUGIN"))
    plugin = env;
  if (!exists(plugin)) {
    error = plugin +
            " is missing: this artifact has no CUDA device (compile with "
            "gpuc compile --target cuda|all, from a gpuc built with the CUDA "
            "toolkit)";
    return nullptr;
  }
  // The handle stays open for the life of the process: the device's code
  // lives in it.
  void *handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string why = dlerror();
    if (why.find("libcuda.so") != std::string::npos)
      error = "no NVIDIA driver on this machine (libcuda.so.1 cannot be "
              "loaded)";
    else if (why.find("libcublas") != std::string::npos ||
             why.find("libcudnn") != std::string::npos ||
             why.find("libcudart") != std::string::npos)
      error = "the CUDA libraries the GPU device needs cannot be loaded (" +
              why +
              "); install cuBLAS and cuDNN for CUDA 13 or add their folder "
              "to LD_LIBRARY_PATH";
    else
      error = "cannot load the CUDA device " + plugin + ": " + why;
    return nullptr;
  }
  auto create = reinterpret_cast<CreateCudaDeviceFn>(
      dlsym(handle, kCreateCudaDeviceSymbol));
  if (!create) {
    error = plugin + " has no " + kCreateCudaDeviceSymbol +
            " (a plugin from another gpuc version?); recompile the model";
    return nullptr;
  }
  return std::unique_ptr<Device>(create(plan, artifactDir, options, error));
}

} // namespace gpuc

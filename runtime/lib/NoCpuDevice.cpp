//===- NoCpuDevice.cpp - the CPU device of a GPU-only trainer -------------===//
//
// `gpuc compile --target cuda` links this instead of the CPU device: such a
// trainer has no CPU kernels, and so needs neither OpenMP nor oneDNN (what
// lets it travel to a GPU machine without them).
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Executor.h"

namespace gpuc {

std::unique_ptr<Device> createCpuDevice(const Plan &, const CpuKernel *, bool,
                                        std::string &error) {
  error = "this trainer was compiled for the GPU only (gpuc compile --target "
          "cuda) and has no CPU kernels; recompile with --target all to "
          "train on the CPU";
  return nullptr;
}

} // namespace gpuc

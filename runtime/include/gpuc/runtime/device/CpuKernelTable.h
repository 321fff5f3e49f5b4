//===- CpuKernelTable.h - how the CPU runtime finds generated kernels -----===//
#ifndef GPUC_RUNTIME_DEVICE_CPUKERNELTABLE_H
#define GPUC_RUNTIME_DEVICE_CPUKERNELTABLE_H

namespace gpuc {
/// An entry of the table kernels.cu exports on the CPU target
/// (`gpuc_cpu_kernels`, ended by a null name): the runtime finds a plan's
/// kernels by name here.
struct CpuKernel {
  const char *name;
  void (*launch)(void *const *args);
  /// How many pointers `args` holds (inputs, outputs, then a split
  /// kernel's workspace).
  int arguments;
};
} // namespace gpuc

extern "C" const gpuc::CpuKernel gpuc_cpu_kernels[];

#endif // GPUC_RUNTIME_DEVICE_CPUKERNELTABLE_H

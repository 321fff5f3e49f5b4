//===- CpuShim.h - CUDA builtins for the CPU target -----------------------===//
//
// A block is one CPU thread (blockDim is the constant 1, so a block's
// strided loop is a plain loop the host compiler vectorizes); the blocks of
// a launch are an OpenMP parallel loop. Included by Kernel.h under GPUC_CPU.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_CPUSHIM_H
#define GPUC_RUNTIME_DEVICE_CPUSHIM_H

#include <cstdint>

#include "gpuc/runtime/device/CpuKernelTable.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace gpuc {
struct CpuDim3 {
  int64_t x, y, z;
};
/// The block this CPU thread is running.
inline thread_local CpuDim3 cpuBlockIdx = {0, 0, 0};
inline thread_local CpuDim3 cpuGridDim = {1, 1, 1};
constexpr CpuDim3 cpuThreadIdx = {0, 0, 0};
constexpr CpuDim3 cpuBlockDim = {1, 1, 1};

/// Runs `block` for every block index of a grid of `grid` blocks (the
/// GPU's grid and the kernel's name are for EmulatedGpu.h's launch).
template <typename Block>
void cpuLaunch(int64_t grid, int64_t /*gpuGrid*/, const char * /*kernel*/,
               Block block) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < grid; ++b) {
    cpuBlockIdx.x = b;
    cpuGridDim.x = grid;
    block();
  }
}
} // namespace gpuc

/// Precedes a generated elementwise loop: its iterations are independent (a
/// result written over an operand reads it only at the element it writes,
/// which the memory plan's verifier checks), so the host compiler may
/// vectorize it without proving that the in-place pointers do not overlap.
#define GPUC_INDEPENDENT_ITERATIONS _Pragma("omp simd")

namespace gpuc {
/// A row reduction's 16 accumulators (the emitter's kCpuReductionLanes) as
/// one vector value, which the host compiler keeps in registers across a
/// loop; an array of lanes stays in memory. Lanes are read and written
/// one at a time by subscript where a line ends in a partial group.
template <typename T> struct CpuLanesOf {
  typedef T type __attribute__((vector_size(16 * sizeof(T))));
};
template <typename T> using CpuLanes = typename CpuLanesOf<T>::type;
/// A group's 16 values, stored lane by lane by a vectorized loop.
template <typename T> inline CpuLanes<T> cpuLoadLanes(const T *group) {
  CpuLanes<T> lanes;
  __builtin_memcpy(&lanes, group, sizeof(lanes));
  return lanes;
}
/// Lane by lane, `x` where it is greater than `acc` or NaN (a maximum
/// that propagates NaN), as the scalar maximum does.
inline CpuLanes<float> cpuLanesMax(CpuLanes<float> acc, CpuLanes<float> x) {
  return ((x > acc) | (x != x)) ? x : acc;
}
inline CpuLanes<double> cpuWidenLanes(CpuLanes<float> lanes) {
  return __builtin_convertvector(lanes, CpuLanes<double>);
}
} // namespace gpuc

#define blockIdx (::gpuc::cpuBlockIdx)
#define gridDim (::gpuc::cpuGridDim)
#define threadIdx (::gpuc::cpuThreadIdx)
#define blockDim (::gpuc::cpuBlockDim)

// The C math functions generated kernels call, declared here rather than
// taken from <cmath>, whose parse is most of a small translation unit's
// compile (each unit of a parallel host compile parses this header).
extern "C" {
float expf(float) noexcept;
float logf(float) noexcept;
float sqrtf(float) noexcept;
float tanhf(float) noexcept;
float erff(float) noexcept;
float cosf(float) noexcept;
float sinf(float) noexcept;
float powf(float, float) noexcept;
float fabsf(float) noexcept;
double pow(double, double) noexcept;
}
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
#ifdef GPUC_CPU_VECTOR_MATH
// glibc's libmvec has 8-lane versions of these (within 4 ulp, against the
// scalar functions' 1): declared as SIMD functions, a vectorized loop calls
// them once per 8 elements. glibc declares them so only under -ffast-math,
// which generated code does not use (it would reorder the reductions).
extern "C" {
__attribute__((__simd__("notinbranch"))) float expf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float logf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float erff(float) noexcept;
__attribute__((__simd__("notinbranch"))) float tanhf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float cosf(float) noexcept;
__attribute__((__simd__("notinbranch"))) float sinf(float) noexcept;
}
#endif

#endif // GPUC_RUNTIME_DEVICE_CPUSHIM_H

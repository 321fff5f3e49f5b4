//===- Kernel.h - what generated kernels include, on GPU and CPU ----------===//
//
// kernels.cu starts with `#include "gpuc/runtime/device/Kernel.h"`. Under
// NVRTC it is CUDA; compiled by the host compiler (GPUC_CPU), CpuShim.h first
// defines the CUDA builtins for one thread per block and OpenMP launches the
// blocks (and under GPUC_EMULATE_GPU, EmulatedGpu.h runs the CUDA text on
// the CPU, for tests). Generated code uses only what is declared here: no raw
// __syncthreads or shuffles, so both targets share every kernel's text,
// except the loops over elements: under GPUC_CPU a kernel walks the lines
// of its shape (no index division per element, reductions in lanes) where
// the GPU's threads stride over a flat range.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_KERNEL_H
#define GPUC_RUNTIME_DEVICE_KERNEL_H

// A trainer for the CUDA device on a host CUDA (runtime/cuda/host, tests):
// the emulated GPU, with the kernels' alternative entry points.
#if defined(GPUC_HOST_CUDA) && !defined(GPUC_EMULATE_GPU)
#define GPUC_EMULATE_GPU
#endif

#ifdef GPUC_EMULATE_GPU
// The GPU's text of every kernel, run by the emulator (tests).
#undef GPUC_CPU
#include "gpuc/runtime/device/EmulatedGpu.h"
#elif defined(GPUC_CPU)
#include "gpuc/runtime/device/CpuShim.h"
#else
typedef long long int64_t;
typedef int int32_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define GPUC_INDEPENDENT_ITERATIONS
// Compiled by NVRTC for a GPU: what only a real GPU's compiler takes (the
// empty asm statements that keep a batch of loads ahead of its arithmetic).
#define GPUC_NVRTC
#endif

#include "gpuc/runtime/Philox.h"
#include "gpuc/runtime/device/Float16.h"
#ifndef GPUC_CPU
// The GPU's text (and the emulator's): row kernels stage rows with it.
#include "gpuc/runtime/device/AsyncCopy.h"
#endif

namespace gpuc {

// The headers' namespace-scope constants are `inline`: NVVM names a
// constant of internal linkage after its program's first entry point, and
// kernels.cu compiles as several programs whose PTX is merged
// (lib/Codegen/NvrtcParts.cpp), so each must have one name in all.

/// Threads per block of every generated kernel on the GPU.
inline constexpr int kBlockThreads = 256;

#ifdef GPUC_CPU
/// One thread per block: a block's partial result is already the result.
/// The CPU accumulates reductions in double: its single thread adds every
/// element in sequence, where the GPU's tree over 256 threads keeps the
/// float error small.
typedef double Accumulator;
__device__ __forceinline__ Accumulator blockReduceSum(Accumulator v) {
  return v;
}
__device__ __forceinline__ Accumulator blockReduceMax(Accumulator v) {
  return v;
}
/// A warp per row (short rows): on the CPU the block is the row and its
/// one thread the row's only lane.
inline constexpr int kWarpStride = 1;
inline int64_t warpRow() { return blockIdx.x; }
inline int warpLane() { return 0; }
inline Accumulator warpReduceSum(Accumulator v) { return v; }
inline Accumulator warpReduceMax(Accumulator v) { return v; }
#else
typedef float Accumulator;
/// Reduces `v` over the block. Lanes past the last warp's partial take
/// `identity` (0 for sums, -inf for max): any other filler would be counted
/// again by a sum.
template <typename Op>
__device__ __forceinline__ float blockReduce(float v, Op op, float identity) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? partial[threadIdx.x] : identity;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x == 0)
    partial[0] = v;
  __syncthreads();
  v = partial[0];
  __syncthreads();
  return v;
}
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ __forceinline__ float blockReduceSum(float v) {
  return blockReduce(v, SumOp(), 0.0f);
}
__device__ __forceinline__ float blockReduceMax(float v) {
  return blockReduce(v, MaxOp(), -INFINITY);
}
/// A warp per row (short rows): the block's 8 warps are 8 consecutive rows
/// (the emitter's kWarpRowsPerBlock), each warp's lanes stride over its
/// row, and a butterfly of shuffles gives every lane the row's value (the
/// same tree on every run: replays are bit-identical).
inline constexpr int kWarpStride = 32;
__device__ __forceinline__ long long warpRow() {
  return (long long)blockIdx.x * (kBlockThreads / 32) + (threadIdx.x >> 5);
}
__device__ __forceinline__ int warpLane() { return threadIdx.x & 31; }
template <typename Op>
__device__ __forceinline__ float warpReduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warpReduceSum(float v) {
  return warpReduce(v, SumOp());
}
__device__ __forceinline__ float warpReduceMax(float v) {
  return warpReduce(v, MaxOp());
}
/// Rows of adjacent elements (a bias gradient's sum over the batch, a
/// channels-last batch norm's statistics) run in columns: a block's threads
/// are `Lanes` adjacent rows times columnSlices<Lanes>() slices of the
/// rows' elements, the column lane fastest. The emitter takes as many lanes
/// as divide the rows' axis, up to a whole block (256, 128, 64 or 32), so
/// that a block's loads at one element are a run of Lanes adjacent
/// elements, and a chunk of a column group is one stretch of memory when
/// the group is the whole axis; otherwise 8 (4-byte elements) or 16
/// (2-byte ones), whole 32-byte sectors. Narrow groups left each DRAM page
/// to 16 blocks reading 32 bytes of it at different times, and ResNet-50's
/// batch norms ran at a fifth of an H200's bandwidth.
template <int Lanes> __device__ __forceinline__ int columnLane() {
  return threadIdx.x % Lanes;
}
template <int Lanes> __device__ __forceinline__ int columnSlice() {
  return threadIdx.x / Lanes;
}
template <int Lanes> constexpr int columnSlices() {
  return kBlockThreads / Lanes;
}
/// Reduces `v` over the slices of the caller's column and gives it to
/// every thread of that column, in a fixed order (replays are
/// bit-identical). Slices of whole warps meet in shared memory, added in
/// slice order; narrower ones are first added within a warp by shuffles
/// (the lanes of a column are `Lanes` apart), then the eight warps' values
/// in warp order. Sums run in double (the emitter's choice for columns),
/// maxima in float.
template <int Lanes, typename T, typename Op>
__device__ __forceinline__ T columnReduce(T v, Op op) {
  static_assert(Lanes == 8 || Lanes == 16 ||
                    (Lanes % 32 == 0 && kBlockThreads % Lanes == 0),
                "a warp holds whole columns, or a column's slice whole warps");
  if constexpr (Lanes >= 32) {
    constexpr int slices = kBlockThreads / Lanes;
    if constexpr (slices == 1) {
      return v;
    } else {
      __shared__ T partial[slices][Lanes];
      int lane = columnLane<Lanes>();
      partial[columnSlice<Lanes>()][lane] = v;
      __syncthreads();
      v = partial[0][lane];
      for (int s = 1; s < slices; ++s)
        v = op(v, partial[s][lane]);
      // Every thread has read before a next reduction writes.
      __syncthreads();
      return v;
    }
  } else {
    __shared__ T partial[kBlockThreads / 32][Lanes];
    __shared__ T total[Lanes];
    for (int offset = 16; offset >= Lanes; offset >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane < Lanes)
      partial[warp][lane] = v;
    __syncthreads();
    if (threadIdx.x < Lanes) {
      T t = partial[0][threadIdx.x];
      for (int w = 1; w < kBlockThreads / 32; ++w)
        t = op(t, partial[w][threadIdx.x]);
      total[threadIdx.x] = t;
    }
    __syncthreads();
    v = total[columnLane<Lanes>()];
    // Every thread has read before a next reduction writes.
    __syncthreads();
    return v;
  }
}
struct SumOfDoubles {
  __device__ double operator()(double a, double b) const { return a + b; }
};
template <int Lanes>
__device__ __forceinline__ double columnReduceSum(double v) {
  return columnReduce<Lanes>(v, SumOfDoubles());
}
template <int Lanes> __device__ __forceinline__ float columnReduceMax(float v) {
  return columnReduce<Lanes>(v, MaxOp());
}
/// The most bytes of a row a block stages (what a GPU gives a block at
/// most, an H100's 227 KiB).
inline constexpr int kMostStagedRowBytes = 232448;
/// A row kernel's staged row: the block's dynamic shared memory (sized at
/// launch, the plan's "shared" bytes), from `byteOffset` on, as T. A block
/// per long row whose passes read the row again copies it here before its
/// first pass (stageRow) and every pass reads it from here: from memory,
/// each pass read it again, and the rows in flight (a thousand rows of
/// 100 KB: a GPT-2 head's bf16 logits over 50k classes) evicted each other
/// from L2 before the next pass came back to them.
template <typename T> __device__ __forceinline__ T *stagedRow(int byteOffset) {
#ifdef GPUC_EMULATE_GPU
  // One block runs on a host thread at a time (as __shared__ arrays do).
  alignas(16) static thread_local unsigned char bytes[kMostStagedRowBytes];
  return (T *)(bytes + byteOffset);
#else
  extern __shared__ __align__(16) unsigned char gpucStagedRows[];
  return (T *)(gpucStagedRows + byteOffset);
#endif
}
/// Starts copying `count` elements at `from` (a row of memory) to `to` (a
/// staged row) with the block's threads: 16 bytes a copy in flight
/// without a register (cp.async, sm_80 and later) where both ends allow
/// it, which keeps the whole row in flight at once; else element by
/// element. awaitStagedRows() then makes the rows visible to the block.
template <typename T>
__device__ __forceinline__ void stageRow(T *to, const T *from,
                                         long long count) {
#if defined(GPUC_EMULATE_GPU) ||                                               \
    (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
  if (((unsigned long long)from & 15) == 0 && (count * sizeof(T)) % 16 == 0) {
    const long long vectors = count * (long long)sizeof(T) / 16;
    for (long long e = threadIdx.x; e < vectors; e += blockDim.x)
      copyAsync<16>((char *)to + e * 16, (const char *)from + e * 16, true);
    return;
  }
#endif
  for (long long e = threadIdx.x; e < count; e += blockDim.x)
    to[e] = from[e];
}
__device__ __forceinline__ void awaitStagedRows() {
#if defined(GPUC_EMULATE_GPU) ||                                               \
    (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
  commitAsyncCopies();
  waitAsyncCopies<0>();
#endif
  __syncthreads();
}
#endif

/// max/min that propagate NaN, as the interpreter does (fmaxf would drop it).
__device__ __forceinline__ float maxNaN(float a, float b) {
  return (a != a || b != b) ? NAN : (a > b ? a : b);
}
__device__ __forceinline__ float minNaN(float a, float b) {
  return (a != a || b != b) ? NAN : (a < b ? a : b);
}
/// The combining launch of a split column kernel: a column's partials
/// (`splits` of them, one per chunk, consecutive) reduced in a fixed order.
/// On the GPU a warp takes a column (its lanes every 32nd partial, then a
/// butterfly, which leaves the total in every lane); on the CPU a block,
/// in chunk order. Every block of a later launch adding all of its columns'
/// partials again cost as much as the pass itself once a block held 256
/// columns of 1,024 chunks. Maxima propagate NaN, as the passes' do.
template <bool Max>
__device__ __forceinline__ double combineColumn(const double *partials,
                                                int64_t column, int splits) {
  auto op = [](double a, double b) {
    return !Max ? a + b : ((a != a || b != b) ? a + b : (a > b ? a : b));
  };
  double t = Max ? -(double)INFINITY : 0.0;
#ifdef GPUC_CPU
  for (int s = 0; s < splits; ++s)
    t = op(t, partials[column * splits + s]);
#else
  for (int s = warpLane(); s < splits; s += 32)
    t = op(t, partials[column * splits + s]);
  for (int offset = 16; offset > 0; offset >>= 1)
    t = op(t, __shfl_xor_sync(0xffffffffu, t, offset));
#endif
  return t;
}
/// The combining launch's first column here (a warp's on the GPU, a
/// block's on the CPU), the step to its next, and whether this thread
/// writes the column's results.
__device__ __forceinline__ int64_t firstCombinedColumn() {
#ifdef GPUC_CPU
  return blockIdx.x;
#else
  return warpRow();
#endif
}
__device__ __forceinline__ int64_t combinedColumnStep() {
#ifdef GPUC_CPU
  return gridDim.x;
#else
  return (int64_t)gridDim.x * (kBlockThreads / 32);
#endif
}
__device__ __forceinline__ bool writesCombinedColumn() {
  return warpLane() == 0;
}
/// `columns` columns' partials each combined (combineColumn) into
/// totals[column], which the later launches read, one load a column.
template <bool Max>
__device__ __forceinline__ void
combineColumnPartials(const double *partials, double *totals, int64_t columns,
                      int splits) {
  for (int64_t c = firstCombinedColumn(); c < columns;
       c += combinedColumnStep()) {
    double t = combineColumn<Max>(partials, c, splits);
    if (writesCombinedColumn())
      totals[c] = t;
  }
}
template <typename T> __device__ __forceinline__ T maxInt(T a, T b) {
  return a > b ? a : b;
}
template <typename T> __device__ __forceinline__ T minInt(T a, T b) {
  return a < b ? a : b;
}
/// Integer division as the interpreter defines it: truncating, 0 for /0.
template <typename T> __device__ __forceinline__ T divInt(T a, T b) {
  return b == 0 ? T(0) : a / b;
}
/// An index into an axis of `size`, negative counting from the end. Indices
/// outside the axis are clamped (the trainer checks its data before a step).
__device__ __forceinline__ int64_t wrapIndex(int64_t k, int64_t size) {
  k = k < 0 ? k + size : k;
  return k < 0 ? 0 : (k >= size ? size - 1 : k);
}

/// A reduction's running maximum after `x`: the larger, or NaN once either
/// is NaN (a row with a NaN has NaN for its maximum, as in the
/// interpreter). On the GPU one instruction (max.NaN, sm_80 and later),
/// where the comparisons and the select took three an element.
__device__ __forceinline__ float maxOrNan(float acc, float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(acc), "f"(x));
  return y;
#else
  return (x > acc || x != x) ? x : acc;
#endif
}

/// A column kernel's variance in the mean's pass (RowKernel.cpp): each
/// element adds the square of its distance from the row's shift (its first
/// element), in float: the distance is exact for an element within a
/// factor 2 of the shift, and the square rounds once. The row's sum of
/// squares about its mean is then that sum less n times the square of the
/// shifted mean, in double. Never below 0 (the sums round), NaN where an
/// element is. (In double, each element's conversion took the GPU's
/// double-precision unit as long as its memory took to read it.)
__device__ __forceinline__ float shiftedSquare(float x, float shift) {
  float d = x - shift;
  return d * d;
}
__device__ __forceinline__ double
centeredSquares(double shiftedSquares, double sum, double shift, double n) {
  double mean = sum / n - shift;
  double squares = shiftedSquares - n * mean * mean;
  return squares < 0.0 ? 0.0 : squares;
}

/// An integer as the kernel's index type, clamped to its range: compared
/// with an index (which the range holds), it gives the same result as in
/// 64 bits.
template <typename Index, typename T>
__device__ __forceinline__ Index narrowIndex(T x) {
  if (sizeof(Index) >= sizeof(T))
    return (Index)x;
  // Narrower than T: the index type is 32-bit (gidx is int32_t or int64_t).
  const T lowest = -2147483647 - 1, highest = 2147483647;
  return x < lowest ? (Index)lowest : (x > highest ? (Index)highest : (Index)x);
}

/// Element `i` of a bool tensor, read as its byte: the host compiler has no
/// vector type for a bool load, and a loop that reads a mask (attention's,
/// a dropout's) otherwise stays scalar, with every expf in it.
__device__ __forceinline__ bool loadBool(const bool *p, int64_t i) {
  return ((const unsigned char *)p)[i] != 0;
}

/// `c ? a : b` for floats, without a branch on the CPU: a data-dependent
/// select (a ReLU mask, max pooling's routing) mispredicts half the time
/// when the host compiler turns it into a jump, and a kernel that
/// recomputes one per element and pass then runs at a fraction of memory
/// speed. Exactly `a` or `b`, bit for bit, on both targets.
__device__ __forceinline__ float selectFloat(bool c, float a, float b) {
#ifdef GPUC_CPU
  unsigned int ia, ib, mask = 0u - (unsigned int)c;
  __builtin_memcpy(&ia, &a, 4);
  __builtin_memcpy(&ib, &b, 4);
  unsigned int bits = (ia & mask) | (ib & ~mask);
  float r;
  __builtin_memcpy(&r, &bits, 4);
  return r;
#else
  return c ? a : b;
#endif
}
#ifdef GPUC_CPU
/// The same for the CPU's double accumulators (a max pooling's running
/// maximum).
__device__ __forceinline__ double selectFloat(bool c, double a, double b) {
  unsigned long long ia, ib, mask = 0ull - (unsigned long long)c;
  __builtin_memcpy(&ia, &a, 8);
  __builtin_memcpy(&ib, &b, 8);
  unsigned long long bits = (ia & mask) | (ib & ~mask);
  double r;
  __builtin_memcpy(&r, &bits, 8);
  return r;
}
#endif

/// e^x. On the CPU, a polynomial the host compiler vectorizes to the
/// machine's widest lanes (within 2 ulp of expf): libmvec's expf had 8
/// lanes, called out of line, and computed every lane outside |x| <= 87.3
/// (a masked score's -inf) one at a time through the scalar expf; it was
/// most of a cross-entropy over a 50k vocabulary. Below -87 the result is
/// 0, where expf gives a subnormal of at most 1.7e-38 or 0; above 88.73 it
/// is +inf, and NaN stays NaN.
__device__ __forceinline__ float exponential(float x) {
#ifdef GPUC_CPU
  // Every choice is a select, never a branch, or the loop stays scalar.
  const bool vanishes = x < -87.0f;
  float clamped = selectFloat(vanishes, -87.0f, x);
  clamped = selectFloat(clamped > 89.0f, 89.0f, clamped);
  // x = n ln2 + r, |r| <= ln2 / 2: n rounded to nearest by the 1.5 * 2^23
  // shift, which leaves n in the low bits of the sum's mantissa (no float
  // to int conversion, undefined for NaN). Float16.h has floatBits.
  const float shifter = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + shifter;
  const int n = (int)(floatBits(shifted) - floatBits(shifter));
  const float nf = shifted - shifter;
  // ln2 in two parts, the first exact in few bits, so n * ln2High is exact.
  float r = __builtin_fmaf(nf, -0.693359375f, clamped);
  r = __builtin_fmaf(nf, 2.12194440e-4f, r);
  // e^r - 1 - r on |r| <= ln2 / 2, a minimax polynomial in r times r^2.
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  const float er = __builtin_fmaf(p, r * r, r) + 1.0f;
  // 2^n in two normal factors: n runs from -126 to 128.
  const int half = n >> 1;
  const float result = er * bitsFloat((unsigned)(half + 127) << 23) *
                       bitsFloat((unsigned)(n - half + 127) << 23);
  return selectFloat(vanishes, 0.0f, result);
#else
  return expf(x);
#endif
}

} // namespace gpuc

#include "gpuc/runtime/device/Attention.h"
#include "gpuc/runtime/device/GroupRows.h"

#endif // GPUC_RUNTIME_DEVICE_KERNEL_H

//===- Philox.h - the counter-based random numbers of a training step -----===//
//
// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11). The interpreter, the CPU kernels and the CUDA kernels include
// this one header, so a dropout mask is the same wherever it is computed, and
// the same step recomputes the same mask (rematerialization relies on it).
//
// Element `i` of the dropout with stream `s` in the step keyed (seed, step)
// takes word `i % 4` of Philox(counter = {lo(i/4), hi(i/4), s, lo(step)},
// key = {lo(seed), hi(seed) ^ hi(step)}).
//
// Data parallelism: the key's step word holds the step in its low 48 bits
// and the rank in its high 16. Rank r draws element i of a tensor of N
// elements as a single process draws element i + r * N of the global
// batch's tensor: the same sample's mask wherever the batch is the
// tensor's leading dimension, so N ranks repeat a single process's run.
//
// Plain C++ with no includes so that NVRTC compiles it unchanged.
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_PHILOX_H
#define GPUC_RUNTIME_PHILOX_H

#ifndef GPUC_HOST_DEVICE
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GPUC_HOST_DEVICE __host__ __device__
#else
#define GPUC_HOST_DEVICE
#endif
#endif

namespace gpuc {

typedef unsigned int philox_u32;
typedef unsigned long long philox_u64;

GPUC_HOST_DEVICE inline void philox4x32_10(const philox_u32 counter[4],
                                           const philox_u32 key[2],
                                           philox_u32 out[4]) {
  const philox_u32 kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  const philox_u32 kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  philox_u32 c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  philox_u32 k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    philox_u64 p0 = (philox_u64)kMul0 * c0;
    philox_u64 p1 = (philox_u64)kMul1 * c2;
    philox_u32 hi0 = (philox_u32)(p0 >> 32), lo0 = (philox_u32)p0;
    philox_u32 hi1 = (philox_u32)(p1 >> 32), lo1 = (philox_u32)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// A uniform float in [0, 1) with 24 random bits for element `index` of
/// random stream `stream` in the step keyed by (seed, step).
GPUC_HOST_DEVICE inline float philoxUniform(philox_u64 seed, philox_u64 step,
                                            philox_u64 stream,
                                            philox_u64 index) {
  philox_u64 block = index >> 2;
  philox_u32 counter[4] = {(philox_u32)block, (philox_u32)(block >> 32),
                           (philox_u32)stream, (philox_u32)step};
  philox_u32 key[2] = {(philox_u32)seed,
                       (philox_u32)(seed >> 32) ^ (philox_u32)(step >> 32)};
  philox_u32 out[4];
  philox4x32_10(counter, key, out);
  return (float)(out[index & 3] >> 8) * (1.0f / 16777216.0f);
}

/// Whether dropout keeps element `index` of a tensor of `elements`
/// (probability 1 - ratio) in the step keyed (seed, stepWord).
GPUC_HOST_DEVICE inline bool dropoutKeeps(philox_u64 seed, philox_u64 stepWord,
                                          philox_u64 stream, philox_u64 index,
                                          philox_u64 elements, float ratio) {
  philox_u64 rank = stepWord >> 48;
  return philoxUniform(seed, stepWord & 0xFFFFFFFFFFFFull, stream,
                       index + rank * elements) >= ratio;
}

} // namespace gpuc

#endif // GPUC_RUNTIME_PHILOX_H

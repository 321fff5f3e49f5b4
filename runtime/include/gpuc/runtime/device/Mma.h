//===- Mma.h - a warp's 16x8x16 tensor-core product -----------------------===//
//
// mma.sync.m16n8k16 with f16 or bf16 operands and f32 accumulators, the
// tensor-core instruction of sm_80 and later, for kernels that lay out
// their own fragments (the fused attention's). The fragments are the
// PTX ISA's: with g = lane / 4 and t = lane % 4, a lane holds
//   A (16 x 16, row-major): a[0] = (g, 2t..2t+1), a[1] = (g + 8, 2t..),
//     a[2] = (g, 2t + 8..), a[3] = (g + 8, 2t + 8..), two elements a word,
//     the lower column in the low half;
//   B (16 x 8, k x n): b[0] = (k 2t..2t+1, n g), b[1] = (k 2t + 8.., n g);
//   C (16 x 8, f32): c[0..1] = (g, 2t..2t+1), c[2..3] = (g + 8, 2t..).
// So a C fragment of scores is, two n-tiles side by side, an A fragment
// of the same rows: a kernel turns scores into weights in registers.
//
// On the GPU it is the instruction; under the emulator (EmulatedGpu.h) a
// warp-wide exchange of the lanes' fragments, then each lane's sums in k
// order. GPUC_HAVE_MMA says whether the text being compiled has it.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_MMA_H
#define GPUC_RUNTIME_DEVICE_MMA_H

#if defined(GPUC_EMULATE_GPU) ||                                               \
    (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define GPUC_HAVE_MMA 1
#endif

/// Unrolls the loop that follows on the GPU: a fragment array indexed by a
/// loop variable is otherwise kept in local memory, not registers.
#if defined(__CUDA_ARCH__)
#define GPUC_UNROLL _Pragma("unroll")
#else
#define GPUC_UNROLL
#endif

namespace gpuc {

/// The 16-bit bits of a stored element.
__device__ __forceinline__ unsigned short storedBits(const bf16 &x) {
  return x.bits;
}
/// (Bits already: a buffer of 16-bit values the kernels stored as bits.)
__device__ __forceinline__ unsigned short storedBits(unsigned short x) {
  return x;
}
__device__ __forceinline__ unsigned short storedBits(const f16 &x) {
#ifdef GPUC_HAVE_FLOAT16
  unsigned short u;
  __builtin_memcpy(&u, &x.value, 2);
  return u;
#else
  return x.bits;
#endif
}

/// The operand types of the instruction, and their rounding from f32.
template <typename T> struct MmaOperand {
  static constexpr bool kAvailable = false;
};
template <> struct MmaOperand<bf16> {
  static constexpr bool kAvailable = true;
  __device__ static unsigned short round(float f) {
    return floatToBFloat16Bits(f);
  }
  __device__ static float widen(unsigned short b) {
    return bfloat16BitsToFloat(b);
  }
};
template <> struct MmaOperand<f16> {
  static constexpr bool kAvailable = true;
  __device__ static unsigned short round(float f) { return floatToHalfBits(f); }
  __device__ static float widen(unsigned short b) { return halfBitsToFloat(b); }
};

/// Two f32 values rounded to T, `lo` in the low half: an A word.
template <typename T>
__device__ __forceinline__ unsigned mmaPack(float lo, float hi) {
  return (unsigned)MmaOperand<T>::round(lo) |
         ((unsigned)MmaOperand<T>::round(hi) << 16);
}

/// 16 bytes: 8 stored 16-bit elements, the lower-indexed in the low half
/// of each word.
struct alignas(16) MmaWords {
  unsigned x, y, z, w;
};
/// The 16 bytes at `p` (16-byte aligned), in one load on the GPU.
__device__ __forceinline__ MmaWords mmaLoadWords(const void *p) {
#if defined(GPUC_EMULATE_GPU) || !defined(__CUDA_ARCH__)
  MmaWords words;
  __builtin_memcpy(&words, p, sizeof words);
  return words;
#else
  uint4 v = *(const uint4 *)p;
  return {v.x, v.y, v.z, v.w};
#endif
}
__device__ __forceinline__ void mmaStoreWords(void *p, MmaWords words) {
#if defined(GPUC_EMULATE_GPU) || !defined(__CUDA_ARCH__)
  __builtin_memcpy(p, &words, sizeof words);
#else
  *(uint4 *)p = make_uint4(words.x, words.y, words.z, words.w);
#endif
}

#ifdef GPUC_HAVE_MMA
#ifndef GPUC_EMULATE_GPU
__device__ __forceinline__ void mmaInstruction(const bf16 *, float acc[4],
                                               const unsigned a[4],
                                               const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}
__device__ __forceinline__ void mmaInstruction(const f16 *, float acc[4],
                                               const unsigned a[4],
                                               const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}
#endif

/// Four 8 x 8 matrices of 16-bit elements from shared memory, as B
/// fragments (ldmatrix.x4): lane l gives the address of row l % 8 of
/// matrix l / 8 (8 adjacent elements, 16-byte aligned) and gets in r[j]
/// matrix j's elements (l / 4, 2 (l % 4)..+1), with `Trans` the transposed
/// (2 (l % 4)..+1, l / 4).
template <bool Trans>
__device__ __forceinline__ void mmaLoadMatrices(unsigned r[4],
                                                const unsigned short *row) {
#ifdef GPUC_EMULATE_GPU
  emulated::ldmatrix(r, row, Trans);
#else
  unsigned address = (unsigned)__cvta_generic_to_shared(row);
  if (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#endif
}

/// acc += A B for the caller's warp (every lane calls it, converged).
template <typename T>
__device__ __forceinline__ void mmaSync(float acc[4], const unsigned a[4],
                                        const unsigned b[2]) {
#ifdef GPUC_EMULATE_GPU
  emulated::mma16816(acc, a, b, MmaOperand<T>::widen);
#else
  mmaInstruction((const T *)nullptr, acc, a, b);
#endif
}
#endif

} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_MMA_H

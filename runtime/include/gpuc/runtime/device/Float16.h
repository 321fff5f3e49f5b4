//===- Float16.h - f16 and bf16 storage, on the GPU and the CPU ----------===//
//
// The 16-bit storage types of mixed precision. Kernels compute in f32
// registers: a load widens (exact), a store rounds to nearest even, as the
// interpreter's APFloat conversion does, with overflow to infinity and NaN
// kept a (quiet) NaN. On the host the conversions are the compiler's
// _Float16 or integer arithmetic on the bits (the CPU executor converts GEMM
// and convolution operands with them); on the GPU they are the cvt
// instructions, which round identically (NaN payloads aside). The layouts are
// those of IEEE binary16 and bfloat16, as __half, __nv_bfloat16, safetensors
// and cuBLASLt use.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_FLOAT16_H
#define GPUC_RUNTIME_DEVICE_FLOAT16_H

#ifndef __CUDACC_RTC__
#include <cstdint>
#include <cstring>
#endif

#ifndef __device__
#define __device__
#define GPUC_FLOAT16_UNDEF_DEVICE
#endif
#ifndef __host__
#define __host__
#define GPUC_FLOAT16_UNDEF_HOST
#endif

namespace gpuc {

__host__ __device__ inline unsigned int floatBits(float f) {
#ifdef __CUDACC_RTC__
  return __float_as_uint(f);
#else
  unsigned int u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
__host__ __device__ inline float bitsFloat(unsigned int u) {
#ifdef __CUDACC_RTC__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

#if defined(__FLT16_MAX__) && !defined(__CUDACC_RTC__)
// The host compiler's _Float16 (GCC 12+, Clang on x86-64 and AArch64):
// IEEE conversions, to nearest even, which it turns into F16C or
// AArch64 instructions where the target has them (the CPU kernels are
// built -march=native) and vectorizes better than the code below.
#define GPUC_HAVE_FLOAT16 1
inline unsigned short floatToHalfBits(float f) {
  _Float16 h = (_Float16)f;
  unsigned short u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float halfBitsToFloat(unsigned short u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return (float)h;
}
#else
/// IEEE binary16 bits of `f`, rounded to nearest even.
__host__ __device__ inline unsigned short floatToHalfBits(float f) {
#ifdef __CUDA_ARCH__
  // The GPU's conversion instruction rounds the same way in one step; the
  // integer code below made an H100's fp16 steps 40% slower than bf16.
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned int u = floatBits(f);
  unsigned int sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  unsigned int h;
  if (u >= 0x47800000u) {
    // 65536 and above, infinity, NaN (which stays a quiet NaN).
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {
    // Below 2^-14: a subnormal half. Adding 0.5 (2^-1) puts the value's
    // bits, rounded to nearest even by the float addition itself, in the
    // low mantissa bits, scaled by 2^24.
    float shifted = bitsFloat(u) + 0.5f;
    h = floatBits(shifted) - 0x3f000000u;
  } else {
    // A normal half: rebias the exponent and round the 13 dropped bits to
    // nearest even; a carry out of the mantissa bumps the exponent, up to
    // infinity for 65520 and above.
    unsigned int odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd; // (15 - 127) << 23, plus half an ulp minus one
    h = u >> 13;
  }
  return (unsigned short)(sign | h);
#endif
}

/// The value of IEEE binary16 bits `h` (exact).
__host__ __device__ inline float halfBitsToFloat(unsigned short h) {
#ifdef __CUDA_ARCH__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
  unsigned int em = h & 0x7fffu;
  if (em >= 0x7c00u)
    return bitsFloat(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
  if (em >= 0x0400u)
    return bitsFloat(sign | ((em << 13) + 0x38000000u));
  // Subnormal or zero: em * 2^-24 is exact in float.
  return bitsFloat(sign | floatBits((float)em * 5.9604644775390625e-8f));
#endif
}
#endif

/// bfloat16 bits of `f`, rounded to nearest even.
__host__ __device__ inline unsigned short floatToBFloat16Bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  unsigned int u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
#endif
}

/// The value of bfloat16 bits `b` (exact).
__host__ __device__ inline float bfloat16BitsToFloat(unsigned short b) {
  return bitsFloat((unsigned int)b << 16);
}

/// Storage types: a load converts to float, a store of a float rounds.
struct f16 {
#ifdef GPUC_HAVE_FLOAT16
  _Float16 value;
  operator float() const { return (float)value; }
  f16 &operator=(float f) {
    value = (_Float16)f;
    return *this;
  }
#else
  unsigned short bits;
  __host__ __device__ operator float() const { return halfBitsToFloat(bits); }
  __host__ __device__ f16 &operator=(float f) {
    bits = floatToHalfBits(f);
    return *this;
  }
#endif
};
struct bf16 {
  unsigned short bits;
  __host__ __device__ operator float() const {
    return bfloat16BitsToFloat(bits);
  }
  __host__ __device__ bf16 &operator=(float f) {
    bits = floatToBFloat16Bits(f);
    return *this;
  }
};

/// `f` rounded to the storage type and back: the value a register holds
/// for an f16 or bf16 result computed in f32.
__host__ __device__ inline float roundF16(float f) {
#ifdef GPUC_HAVE_FLOAT16
  return (float)(_Float16)f;
#else
  return halfBitsToFloat(floatToHalfBits(f));
#endif
}
__host__ __device__ inline float roundBF16(float f) {
  return bfloat16BitsToFloat(floatToBFloat16Bits(f));
}

} // namespace gpuc

#ifdef GPUC_FLOAT16_UNDEF_DEVICE
#undef __device__
#undef GPUC_FLOAT16_UNDEF_DEVICE
#endif
#ifdef GPUC_FLOAT16_UNDEF_HOST
#undef __host__
#undef GPUC_FLOAT16_UNDEF_HOST
#endif

#endif // GPUC_RUNTIME_DEVICE_FLOAT16_H

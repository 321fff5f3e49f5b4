//===- Float16Test.cpp - the kernels' f16/bf16 conversions ----------------===//
//
// Float16.h's bit arithmetic against LLVM's APFloat (the interpreter's
// conversion): every 16-bit pattern widens exactly, and narrowing rounds to
// nearest even with overflow to infinity, over the boundaries that matter
// (subnormals, the largest finite, ties) and a sweep of float bit patterns.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/device/Float16.h"

#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace {

uint16_t apfloatNarrow(float f, const llvm::fltSemantics &semantics) {
  llvm::APFloat v(f);
  bool losesInfo;
  v.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return (uint16_t)v.bitcastToAPInt().getZExtValue();
}

float apfloatWiden(uint16_t bits, const llvm::fltSemantics &semantics) {
  llvm::APFloat v(semantics, llvm::APInt(16, bits));
  bool losesInfo;
  v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return v.convertToFloat();
}

bool sameBits(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return gpuc::floatBits(a) == gpuc::floatBits(b);
}

TEST(Float16, EveryHalfWidensExactly) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    ASSERT_TRUE(sameBits(gpuc::halfBitsToFloat(bits),
                         apfloatWiden(bits, llvm::APFloat::IEEEhalf())))
        << "f16 bits " << bits;
    ASSERT_TRUE(sameBits(gpuc::bfloat16BitsToFloat(bits),
                         apfloatWiden(bits, llvm::APFloat::BFloat())))
        << "bf16 bits " << bits;
  }
}

void expectNarrowing(float f) {
  uint16_t half = gpuc::floatToHalfBits(f);
  uint16_t bf = gpuc::floatToBFloat16Bits(f);
  if (std::isnan(f)) {
    EXPECT_TRUE(std::isnan(gpuc::halfBitsToFloat(half)));
    EXPECT_TRUE(std::isnan(gpuc::bfloat16BitsToFloat(bf)));
    return;
  }
  EXPECT_EQ(half, apfloatNarrow(f, llvm::APFloat::IEEEhalf())) << f;
  EXPECT_EQ(bf, apfloatNarrow(f, llvm::APFloat::BFloat())) << f;
}

TEST(Float16, NarrowingRoundsToNearestEven) {
  const float cases[] = {
      0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e6f, -1e30f,
      INFINITY, -INFINITY, NAN,
      // Smallest normal and subnormal halves, and ties.
      6.103515625e-05f, 5.9604644775390625e-08f, 2.98023223876953125e-08f,
      8.940696716308594e-08f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
      1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1e-40f, 3.4028235e38f};
  for (float f : cases)
    expectNarrowing(f);
  // Every 4099th float bit pattern (covers all exponents and many
  // mantissas, both signs).
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 4099) {
    float f = gpuc::bitsFloat((uint32_t)bits);
    expectNarrowing(f);
    if (HasFailure())
      return;
  }
}

} // namespace

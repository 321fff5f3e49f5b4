//===- KernelMathTest.cpp - Kernel.h's helpers as the CPU kernels run them ===//
//
// Generated CPU kernels compute exp, index compares and mask loads through
// Kernel.h's helpers (so that their loops vectorize); each must give what
// the op means.
//
//===----------------------------------------------------------------------===//
#define GPUC_CPU
#include "gpuc/runtime/device/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

TEST(KernelMath, ExponentialIsWithinOneUlpOfExpf) {
  // Every 61st float from -87 to the overflow (2^31 of them in all), and
  // the ends.
  int checked = 0;
  for (float x = -87.0f; x < 88.8f;) {
    float want = expf(x), got = gpuc::exponential(x);
    if (std::isinf(want)) {
      EXPECT_TRUE(std::isinf(got)) << x;
    } else {
      float ulp = nextafterf(want, INFINITY) - want;
      ASSERT_LE(std::fabs((double)got - want), ulp) << x;
    }
    ++checked;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    bits = x < 0 ? (bits > 0x80000000u + 61 ? bits - 61 : 0) : bits + 61;
    std::memcpy(&x, &bits, 4);
  }
  EXPECT_GT(checked, 30000000);
  EXPECT_EQ(gpuc::exponential(0.0f), 1.0f);
  EXPECT_EQ(gpuc::exponential(1.0f), expf(1.0f));
}

TEST(KernelMath, ExponentialOfAMaskedScoreIsZero) {
  EXPECT_EQ(gpuc::exponential(-INFINITY), 0.0f);
  EXPECT_EQ(gpuc::exponential(-87.5f), 0.0f);
  EXPECT_EQ(gpuc::exponential(-1e30f), 0.0f);
  EXPECT_TRUE(std::isinf(gpuc::exponential(INFINITY)));
  EXPECT_TRUE(std::isinf(gpuc::exponential(100.0f)));
  EXPECT_TRUE(std::isnan(gpuc::exponential(NAN)));
}

TEST(KernelMath, NarrowIndexKeepsEveryComparisonWithAnIndex) {
  const int64_t values[] = {0,
                            5,
                            -1,
                            int64_t(1) << 31,
                            -(int64_t(1) << 31) - 1,
                            int64_t(1) << 40,
                            -(int64_t(1) << 40),
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()};
  // An index is below its extent, so at most 2^31 - 2 in 32 bits.
  const int32_t indices[] = {0, 1, 5, 1000, 2147483646};
  for (int64_t v : values)
    for (int32_t i : indices) {
      int32_t narrow = gpuc::narrowIndex<int32_t>(v);
      EXPECT_EQ(i == narrow, (int64_t)i == v) << i << " " << v;
      EXPECT_EQ(i < narrow, (int64_t)i < v) << i << " " << v;
      EXPECT_EQ(i > narrow, (int64_t)i > v) << i << " " << v;
    }
  EXPECT_EQ(gpuc::narrowIndex<int64_t>(int64_t(1) << 40), int64_t(1) << 40);
}

TEST(KernelMath, LoadBoolReadsTheByte) {
  bool mask[] = {true, false, false, true};
  EXPECT_TRUE(gpuc::loadBool(mask, 0));
  EXPECT_FALSE(gpuc::loadBool(mask, 1));
  EXPECT_FALSE(gpuc::loadBool(mask, 2));
  EXPECT_TRUE(gpuc::loadBool(mask, 3));
}

// A column kernel's variance in the mean's pass: the squares about the
// row's first element, less the shifted mean's square. Values of f32 near
// 10^6 with a spread of about 1 (a mean 10^6 times the spread) keep their
// variance to f32's precision, where squares about 0 cancel to nothing;
// a constant row has 0, and no row a negative variance; a NaN stays NaN.
TEST(KernelMath, CenteredSquaresKeepAVarianceFarFromZero) {
  std::vector<float> row;
  for (int i = 0; i < 100000; ++i)
    row.push_back(1.0e6f + (float)((i * 7919) % 1001) / 500.0f - 1.0f);
  auto variance = [&](float shift) {
    double sum = 0, squares = 0;
    for (float x : row) {
      sum += x;
      squares += gpuc::shiftedSquare(x, shift);
    }
    double n = (double)row.size();
    return gpuc::centeredSquares(squares, sum, shift, n) / n;
  };
  long double mean = 0, exact = 0;
  for (float x : row)
    mean += x;
  mean /= row.size();
  for (float x : row)
    exact += ((long double)x - mean) * ((long double)x - mean);
  exact /= row.size();
  ASSERT_GT(exact, 0.1L);
  EXPECT_NEAR(variance(row[0]) / (double)exact, 1.0, 1e-7);
  // (What the shift is for: about 0, the squares' rounding is the result.)
  EXPECT_GT(std::fabs(variance(0.0) / (double)exact - 1.0), 1e-3);

  row.assign(1000, 3.25f);
  EXPECT_EQ(variance(row[0]), 0.0);
  row.assign(1000, 0.1f);
  EXPECT_GE(variance(0.0), 0.0);
  row[500] = NAN;
  EXPECT_TRUE(std::isnan(variance(row[0])));
}

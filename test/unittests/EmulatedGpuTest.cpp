//===- EmulatedGpuTest.cpp - the GPU's semantics, as emulated -------------===//
//
// The emulator is what tests the GPU's text of generated kernels without a
// GPU (step-parity-emulated-gpu.test), so it must give a block's threads
// the GPU's guarantees and no more: a barrier orders shared memory, a
// shuffle exchanges registers within a warp, and a kernel that would hang
// or read a returned lane on a GPU stops with a message.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#define GPUC_EMULATE_GPU
#include "gpuc/runtime/device/Kernel.h"

namespace {

TEST(EmulatedGpu, BlockReductionGivesEveryThreadTheSum) {
  std::vector<float> out(3 * 256, -1.0f);
  gpuc::emulated::launch(3, 256, "sum", [&] {
    float v = gpuc::blockReduceSum((float)(threadIdx.x + 1 + blockIdx.x));
    out[blockIdx.x * 256 + threadIdx.x] = v;
  });
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 256; ++t)
      ASSERT_EQ(out[b * 256 + t], 256.0f * 257.0f / 2 + 256.0f * b)
          << b << " " << t;
}

TEST(EmulatedGpu, WarpRowsReduceTheirOwnLanes) {
  // 20 rows of 45: the second block's last four warps are past the rows
  // and return at once, as a generated warp-row kernel's do.
  const int rows = 12, length = 45;
  std::vector<float> in(rows * length), out(rows, -1.0f);
  for (int i = 0; i < rows * length; ++i)
    in[i] = (float)(i % 7) - 3.0f;
  gpuc::emulated::launch(2, 256, "rows", [&] {
    long long o = gpuc::warpRow();
    if (o >= rows)
      return;
    float sum = 0, max = -INFINITY;
    for (int r = gpuc::warpLane(); r < length; r += gpuc::kWarpStride) {
      sum += in[o * length + r];
      max = fmaxf(max, in[o * length + r]);
    }
    sum = gpuc::warpReduceSum(sum);
    max = gpuc::warpReduceMax(max);
    if (gpuc::warpLane() == 0)
      out[o] = sum + 1000.0f * max;
  });
  for (int o = 0; o < rows; ++o) {
    float sum = 0, max = -INFINITY;
    for (int r = 0; r < length; ++r) {
      sum += in[o * length + r];
      max = std::max(max, in[o * length + r]);
    }
    EXPECT_EQ(out[o], sum + 1000.0f * max) << o;
  }
}

TEST(EmulatedGpu, BarrierOrdersSharedMemory) {
  // Each thread reads its neighbour's slot after the barrier, then the
  // slots are written again: without the barriers some reads would see
  // the other round's values.
  std::vector<int> out(256);
  gpuc::emulated::launch(1, 256, "shared", [&] {
    __shared__ int slots[256];
    int t = threadIdx.x, total = 0;
    for (int round = 0; round < 3; ++round) {
      slots[t] = t * 10 + round;
      __syncthreads();
      total += slots[(t + 1) % 256];
      __syncthreads();
    }
    out[t] = total;
  });
  for (int t = 0; t < 256; ++t)
    EXPECT_EQ(out[t], 3 * ((t + 1) % 256) * 10 + 3) << t;
}

TEST(EmulatedGpu, MissingBarrierShowsInOneOrder) {
  // Each thread reads the slot its predecessor (or, the second time, its
  // successor) writes, with no barrier between: the first read is fresh in
  // blocks run first to last and stale in those run last to first, the
  // second the other way round. Either way some block sees the bug.
  std::vector<int> fresh(4, 0);
  gpuc::emulated::launch(4, 256, "race", [&] {
    __shared__ int slots[256];
    int t = threadIdx.x, tag = 10000 * ((int)blockIdx.x + 1);
    slots[t] = tag + t;
    int before = slots[(t + 255) % 256];
    __syncthreads();
    slots[t] = tag + 5000 + t;
    int after = slots[(t + 1) % 256];
    if (t == 128)
      fresh[blockIdx.x] = (before == tag + 127) + 2 * (after == tag + 5129);
  });
  // Block 0 (first to last) sees its predecessor's write, not its
  // successor's; block 1 (last to first) the reverse.
  EXPECT_EQ(fresh[0], 1);
  EXPECT_EQ(fresh[1], 2);
}

TEST(EmulatedGpuDeathTest, BarrierInDivergentCodeStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(gpuc::emulated::launch(1, 256, "divergent",
                                      [] {
                                        // Half of each warp shuffles, the
                                        // other half waits for the block.
                                        if (threadIdx.x % 32 < 16)
                                          gpuc::warpReduceSum(1.0f);
                                        else
                                          __syncthreads();
                                      }),
               "kernel divergent, block 0, thread .*: threads wait at "
               "different barriers or shuffles");
}

TEST(EmulatedGpuDeathTest, ShuffleWithReturnedLaneStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(gpuc::emulated::launch(1, 256, "partial",
                                      [] {
                                        if (threadIdx.x % 32 >= 16)
                                          return;
                                        gpuc::warpReduceSum(1.0f);
                                      }),
               "kernel partial, block 0, thread [0-9]+: a shuffle reads a "
               "lane that has returned");
}

TEST(EmulatedGpu, AsyncCopiesLandWhenTheirGroupIsWaitedFor) {
  // Each thread copies into its own slots: 16 bytes in group 0, 16 bytes
  // in group 1 (zeros in odd threads: nothing read), then 4 bytes it does
  // not commit. A slot keeps its old value until a wait covers its group.
  constexpr unsigned kOld = 0xdeadbeef;
  std::vector<unsigned> source(256 * 4);
  for (unsigned i = 0; i < source.size(); ++i)
    source[i] = i + 1;
  std::vector<unsigned> seen(256 * 7);
  gpuc::emulated::launch(1, 256, "copies", [&] {
    alignas(16) __shared__ unsigned slots[3][256 * 4];
    int t = threadIdx.x;
    for (int s = 0; s < 3; ++s)
      for (int w = 0; w < 4; ++w)
        slots[s][t * 4 + w] = kOld;
    gpuc::copyAsync<16>(&slots[0][t * 4], &source[t * 4], true);
    gpuc::commitAsyncCopies();
    gpuc::copyAsync<16>(&slots[1][t * 4], &source[t * 4], t % 2 == 0);
    gpuc::commitAsyncCopies();
    gpuc::copyAsync<4>(&slots[2][t * 4], &source[t * 4 + 3], true);
    unsigned *out = &seen[t * 7];
    out[0] = slots[0][t * 4];
    gpuc::waitAsyncCopies<1>();
    out[1] = slots[0][t * 4 + 3];
    out[2] = slots[1][t * 4];
    gpuc::waitAsyncCopies<0>();
    out[3] = slots[1][t * 4 + 3];
    out[4] = slots[2][t * 4];
    gpuc::commitAsyncCopies();
    gpuc::waitAsyncCopies<0>();
    out[5] = slots[2][t * 4];
    out[6] = slots[2][t * 4 + 1];
  });
  for (unsigned t = 0; t < 256; ++t) {
    const unsigned *out = &seen[t * 7];
    EXPECT_EQ(out[0], kOld) << t;             // before any wait
    EXPECT_EQ(out[1], t * 4 + 4) << t;        // group 0 waited for
    EXPECT_EQ(out[2], kOld) << t;             // group 1 still in flight
    EXPECT_EQ(out[3], t % 2 ? 0u : t * 4 + 4) // zeros where not valid
        << t;
    EXPECT_EQ(out[4], kOld) << t;      // not committed
    EXPECT_EQ(out[5], t * 4 + 4) << t; // committed and waited for
    EXPECT_EQ(out[6], kOld) << t;      // 4 bytes, no more
  }
}

TEST(EmulatedGpuDeathTest, ReturningWithCopiesInFlightStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<unsigned> source(4, 1);
  EXPECT_DEATH(gpuc::emulated::launch(1, 32, "unwaited",
                                      [&] {
                                        alignas(16) __shared__ unsigned slot[4];
                                        gpuc::copyAsync<16>(slot, source.data(),
                                                            true);
                                        gpuc::commitAsyncCopies();
                                      }),
               "kernel unwaited, block 0, thread .*: the thread returns "
               "with asynchronous copies it never waited for");
}

TEST(EmulatedGpu, MmaMultipliesThePtxFragments) {
  // Each warp of a block packs A (16 x 16), B (16 x 8) and C (16 x 8) as
  // the PTX ISA lays out mma.m16n8k16's fragments; small integers over 8
  // are exact in bf16 and their sums in f32, so D = A B + C is exact.
  const int warps = 8;
  auto a = [](int w, int r, int k) {
    return (float)((r * 3 + k * 5 + w) % 11 - 5) / 8;
  };
  auto b = [](int w, int k, int n) {
    return (float)((k * 7 + n + 2 * w) % 9 - 4) / 8;
  };
  auto c = [](int w, int r, int n) { return (float)(r - n + w); };
  std::vector<float> out(warps * 16 * 8, NAN);
  gpuc::emulated::launch(1, 256, "mma", [&] {
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4,
        t = lane % 4;
    auto bits = [](float f) { return (unsigned)gpuc::floatToBFloat16Bits(f); };
    unsigned fa[4], fb[2];
    for (int r = 0; r < 4; ++r) {
      int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
      fa[r] = bits(a(w, row, col)) | bits(a(w, row, col + 1)) << 16;
    }
    for (int r = 0; r < 2; ++r) {
      int k = 2 * t + r * 8;
      fb[r] = bits(b(w, k, g)) | bits(b(w, k + 1, g)) << 16;
    }
    float acc[4];
    for (int i = 0; i < 4; ++i)
      acc[i] = c(w, g + (i / 2) * 8, 2 * t + i % 2);
    gpuc::mmaSync<gpuc::bf16>(acc, fa, fb);
    for (int i = 0; i < 4; ++i)
      out[(w * 16 + g + (i / 2) * 8) * 8 + 2 * t + i % 2] = acc[i];
  });
  for (int w = 0; w < warps; ++w)
    for (int r = 0; r < 16; ++r)
      for (int n = 0; n < 8; ++n) {
        float want = c(w, r, n);
        for (int k = 0; k < 16; ++k)
          want += a(w, r, k) * b(w, k, n);
        EXPECT_EQ(out[(w * 16 + r) * 8 + n], want) << w << " " << r << " " << n;
      }
}

TEST(EmulatedGpu, LdmatrixGivesThePtxFragments) {
  // Four 8 x 8 matrices of distinct values, rows 24 elements apart in
  // shared memory; lane l gives row l % 8 of matrix l / 8.
  std::vector<unsigned> plain(32 * 4), transposed(32 * 4);
  auto value = [](int m, int r, int c) {
    return (unsigned)(m * 64 + r * 8 + c);
  };
  gpuc::emulated::launch(1, 32, "ldmatrix", [&] {
    alignas(16) __shared__ unsigned short tile[4 * 8 * 24];
    int l = threadIdx.x;
    for (int e = l; e < 4 * 8 * 8; e += 32)
      tile[(e / 64 * 8 + e / 8 % 8) * 24 + e % 8] =
          (unsigned short)value(e / 64, e / 8 % 8, e % 8);
    __syncthreads();
    const unsigned short *row = tile + (l / 8 * 8 + l % 8) * 24;
    gpuc::mmaLoadMatrices<false>(&plain[l * 4], row);
    gpuc::mmaLoadMatrices<true>(&transposed[l * 4], row);
  });
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < 4; ++m) {
      int g = l / 4, t = l % 4;
      EXPECT_EQ(plain[l * 4 + m], value(m, g, 2 * t) | value(m, g, 2 * t + 1)
                                                           << 16)
          << l << " " << m;
      EXPECT_EQ(transposed[l * 4 + m],
                value(m, 2 * t, g) | value(m, 2 * t + 1, g) << 16)
          << l << " " << m;
    }
}

TEST(EmulatedGpuDeathTest, MmaWithReturnedLaneStops) {
  EXPECT_DEATH(
      gpuc::emulated::launch(1, 32, "mma",
                             [&] {
                               if (threadIdx.x == 5)
                                 return;
                               unsigned fa[4] = {0, 0, 0, 0}, fb[2] = {0, 0};
                               float acc[4] = {0, 0, 0, 0};
                               gpuc::mmaSync<gpuc::bf16>(acc, fa, fb);
                             }),
      "kernel mma, block 0, thread .*: an mma in a warp with a lane "
      "that has returned");
}

// Every thread of a column gets its slices' sum and maximum, for each
// width of column a kernel takes: slices within a warp (8, 16 lanes), of
// one warp or several (32 to 128), or the whole block (256).
template <int Lanes> static void checkColumnReduce() {
  constexpr int slices = gpuc::columnSlices<Lanes>();
  std::vector<double> sums(2 * 256, -1.0);
  std::vector<float> maxima(2 * 256, -1.0f);
  auto value = [](int block, int lane, int slice) {
    return (double)(1000 * block + 37 * lane + ((slice * 5) % slices) + 1);
  };
  gpuc::emulated::launch(2, 256, "columns", [&] {
    int lane = gpuc::columnLane<Lanes>(), slice = gpuc::columnSlice<Lanes>();
    double v = value(blockIdx.x, lane, slice);
    double sum = gpuc::columnReduceSum<Lanes>(v);
    float max = gpuc::columnReduceMax<Lanes>((float)v);
    sums[blockIdx.x * 256 + threadIdx.x] = sum;
    maxima[blockIdx.x * 256 + threadIdx.x] = max;
  });
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 256; ++t) {
      int lane = t % Lanes;
      double sum = 0, max = 0;
      for (int s = 0; s < slices; ++s) {
        sum += value(b, lane, s);
        max = std::max(max, value(b, lane, s));
      }
      ASSERT_EQ(sums[b * 256 + t], sum) << Lanes << " lanes, " << b << " " << t;
      ASSERT_EQ(maxima[b * 256 + t], (float)max)
          << Lanes << " lanes, " << b << " " << t;
    }
}

TEST(EmulatedGpu, ColumnReduceGivesEachColumnItsSlices) {
  checkColumnReduce<8>();
  checkColumnReduce<16>();
  checkColumnReduce<32>();
  checkColumnReduce<64>();
  checkColumnReduce<128>();
  checkColumnReduce<256>();
}

// A split column kernel's combining launch: each column's total from its
// chunks' partials, in the same order on every run, with more columns
// than the grid has warps (a warp takes several) and more chunks than a
// warp has lanes; a NaN partial makes its column's maximum NaN.
TEST(EmulatedGpu, CombineColumnPartialsGivesEachColumnItsTotal) {
  const int columns = 70, splits = 45;
  std::vector<double> partials(columns * splits);
  for (int i = 0; i < columns * splits; ++i)
    partials[i] = (double)((i * 7919) % 1013) - 500.0;
  partials[3 * splits + 44] = NAN;
  for (bool max : {false, true}) {
    std::vector<double> totals(columns, -12345.0), again(columns, -12345.0);
    for (std::vector<double> *out : {&totals, &again})
      gpuc::emulated::launch(3, 256, "combine", [&] {
        if (max)
          gpuc::combineColumnPartials<true>(partials.data(), out->data(),
                                            columns, splits);
        else
          gpuc::combineColumnPartials<false>(partials.data(), out->data(),
                                             columns, splits);
      });
    for (int c = 0; c < columns; ++c) {
      double expected = max ? -INFINITY : 0.0;
      for (int s = 0; s < splits; ++s) {
        double p = partials[c * splits + s];
        expected = max ? (p != p ? p : std::max(expected, p)) : expected + p;
      }
      if (c == 3) {
        EXPECT_TRUE(std::isnan(totals[c])) << max;
        continue;
      }
      // Integers: every order of the sum gives them exactly.
      EXPECT_EQ(totals[c], expected) << (max ? "max " : "sum ") << c;
      EXPECT_EQ(totals[c], again[c]) << c;
    }
  }
}

} // namespace

//===- ColumnMajorGemmTest.cpp - gemm steps as cuBLASLt runs them --------===//
//
// The CUDA device hands cuBLASLt what columnMajorGemmOf computes from a plan's
// gemm step, and nothing else checks that translation without a GPU. Here a
// column-major call runs as cuBLASLt's documents define it (layouts of rows,
// columns and leading dimension, strided batches, op(), the bias epilogue
// over D's rows, beta = 1 when the step accumulates), and its result must
// equal the row-major step's own meaning, element for element, touching
// nothing outside what the plan's bounds check allowed.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/ColumnMajorGemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace gpuc;

namespace {

/// The three buffers of a step (A's, B's, C's) and a bias over C's columns.
/// Small integers, so that every sum is exact in any order.
struct Buffers {
  std::vector<double> a, b, c, bias;
};

Buffers buffersFor(const GemmStep &g, std::mt19937 &rng) {
  auto filled = [&](__int128 size) {
    std::vector<double> v((size_t)size);
    std::uniform_int_distribution<int> value(-4, 4);
    for (double &x : v)
      x = value(rng);
    return v;
  };
  return {filled(g.offsetA + g.extent(0)), filled(g.offsetB + g.extent(1)),
          filled(g.offsetC + g.extent(2)), filled(g.n)};
}

/// The step's meaning (PlanSteps.h): per call and batch entry, row-major
/// C = op(A) op(B) (+ C when it accumulates), plus the bias over C's columns.
void runRowMajor(const GemmStep &g, Buffers &x, bool bias) {
  for (int64_t call = 0; call < g.calls; ++call)
    for (int64_t p = 0; p < g.batch; ++p) {
      int64_t a0 = g.offsetA + call * g.callStrideA + p * g.strideA;
      int64_t b0 = g.offsetB + call * g.callStrideB + p * g.strideB;
      int64_t c0 = g.offsetC + call * g.callStrideC + p * g.strideC;
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < g.k; ++l)
            sum += x.a[a0 + (g.transA ? l * g.lda + i : i * g.lda + l)] *
                   x.b[b0 + (g.transB ? j * g.ldb + l : l * g.ldb + j)];
          double &out = x.c[c0 + i * g.ldc + j];
          out = (g.accumulate ? out : 0) + sum + (bias ? x.bias[j] : 0);
        }
    }
}

/// cuBLASLt's cublasLtMatmul as documented, call after call: each layout is
/// rows x cols column-major at leading dimension ld >= rows; op(first) must
/// be rows x depth, op(second) depth x cols, D rows x cols; batch entries lie
/// their layout's stride apart; the bias epilogue adds bias[i] to D's row i
/// of every entry. Fails the test on a call cuBLASLt would refuse, and on an
/// element read or written outside what Plan.cpp's bounds check allowed
/// (`limit`: each buffer's offset + extent).
void runColumnMajor(const ColumnMajorGemm &lt, bool accumulate, Buffers &x,
                    bool bias, const int64_t limit[3],
                    const std::string &what) {
  auto valid = [&](const ColumnMajorMatrix &m, int64_t rows, int64_t cols,
                   const char *name) {
    EXPECT_EQ(m.rows, rows) << what << ": " << name << "'s rows";
    EXPECT_EQ(m.cols, cols) << what << ": " << name << "'s columns";
    EXPECT_GE(m.ld, std::max<int64_t>(m.rows, 1))
        << what << ": " << name << "'s leading dimension";
    if (lt.batch > 1) {
      EXPECT_NE(m.batchStride, 0) << what << ": " << name << "'s batch stride";
    }
  };
  valid(lt.first, lt.transFirst ? lt.depth : lt.rows,
        lt.transFirst ? lt.rows : lt.depth, "first");
  valid(lt.second, lt.transSecond ? lt.cols : lt.depth,
        lt.transSecond ? lt.depth : lt.cols, "second");
  valid(lt.result, lt.rows, lt.cols, "result");
  ASSERT_GE(lt.batch, 1) << what;
  ASSERT_LE(lt.batch, INT32_MAX) << what; // BATCH_COUNT is an int32_t
  if (::testing::Test::HasFailure())
    return;
  auto at = [&](const ColumnMajorMatrix &m, int64_t call, int64_t entry,
                int64_t i, int64_t j, int64_t limit) {
    int64_t index =
        m.offset + call * m.callStride + entry * m.batchStride + i + j * m.ld;
    EXPECT_TRUE(index >= 0 && index < limit)
        << what << ": element " << index << " of " << limit;
    return std::clamp<int64_t>(index, 0, limit - 1);
  };
  for (int64_t call = 0; call < lt.calls; ++call) {
    // One call's entries write disjoint elements (a GPU runs them at once).
    std::set<int64_t> written;
    for (int64_t e = 0; e < lt.batch; ++e)
      for (int64_t i = 0; i < lt.rows; ++i)
        for (int64_t j = 0; j < lt.cols; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < lt.depth; ++l) {
            double f = x.b[at(lt.first, call, e, lt.transFirst ? l : i,
                              lt.transFirst ? i : l, limit[1])];
            double s = x.a[at(lt.second, call, e, lt.transSecond ? j : l,
                              lt.transSecond ? l : j, limit[0])];
            sum += f * s;
          }
          int64_t d = at(lt.result, call, e, i, j, limit[2]);
          EXPECT_TRUE(written.insert(d).second)
              << what << ": element " << d << " written twice in one call";
          x.c[d] = (accumulate ? x.c[d] : 0) + sum + (bias ? x.bias[i] : 0);
        }
    if (::testing::Test::HasFailure())
      return;
  }
}

/// Runs `g` both ways from the same buffers and compares every element of C
/// (those no product writes included: both must leave them alone).
void expectSameProducts(const GemmStep &g, bool bias, const std::string &what,
                        std::mt19937 &rng) {
  ColumnMajorGemm lt;
  std::string error;
  ASSERT_TRUE(columnMajorGemmOf(g, lt, error)) << what << ": " << error;
  Buffers rowMajor = buffersFor(g, rng), columnMajor = rowMajor;
  runRowMajor(g, rowMajor, bias);
  const int64_t limit[] = {(int64_t)(g.offsetA + g.extent(0)),
                           (int64_t)(g.offsetB + g.extent(1)),
                           (int64_t)(g.offsetC + g.extent(2))};
  runColumnMajor(lt, g.accumulate, columnMajor, bias, limit, what);
  ASSERT_FALSE(::testing::Test::HasFailure());
  for (size_t i = 0; i < rowMajor.c.size(); ++i)
    ASSERT_EQ(columnMajor.c[i], rowMajor.c[i]) << what << ": C[" << i << "]";
}

/// A step with compact operands: A [m,k] (or [k,m]), B [k,n] (or [n,k]), C
/// [m,n], batch entries one after another.
GemmStep compact(int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                 int64_t batch = 1) {
  GemmStep g{};
  g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB;
  g.lda = transA ? m : k, g.ldb = transB ? k : n, g.ldc = n;
  g.batch = batch, g.strideA = m * k, g.strideB = k * n, g.strideC = m * n;
  g.calls = 1;
  return g;
}

TEST(ColumnMajorGemm, EveryTransposeComputesTheRowMajorProduct) {
  std::mt19937 rng(1);
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool bias : {false, true})
        expectSameProducts(compact(5, 7, 3, transA, transB), bias,
                           "transA " + std::to_string(transA) + " transB " +
                               std::to_string(transB),
                           rng);
}

TEST(ColumnMajorGemm, StridedBatchesKeepTheirStrides) {
  std::mt19937 rng(2);
  GemmStep g = compact(4, 6, 5, true, false, 3);
  expectSameProducts(g, true, "batch of 3", rng);
  ColumnMajorGemm lt;
  std::string error;
  ASSERT_TRUE(columnMajorGemmOf(g, lt, error));
  EXPECT_EQ(lt.batch, 3);
  EXPECT_EQ(lt.calls, 1);
}

TEST(ColumnMajorGemm, ASharedWeightFoldsTheBatchIntoRows) {
  // A linear layer over [batch, m, k] inputs: one product of batch * m rows.
  std::mt19937 rng(3);
  GemmStep g = compact(4, 6, 5, false, true, 3);
  g.strideB = 0;
  g.accumulate = true;
  expectSameProducts(g, true, "shared weight", rng);
  ColumnMajorGemm lt;
  std::string error;
  ASSERT_TRUE(columnMajorGemmOf(g, lt, error));
  EXPECT_EQ(lt.batch, 1);
  EXPECT_EQ(lt.calls, 1);
  EXPECT_EQ(lt.cols, 12);
}

TEST(ColumnMajorGemm, OtherBroadcastsBecomeOneCallAnEntry) {
  std::mt19937 rng(4);
  // B shared, but A transposed: its rows are no one matrix with C's.
  GemmStep g = compact(4, 6, 5, true, false, 3);
  g.strideB = 0;
  expectSameProducts(g, false, "shared B under A^T", rng);
  // A shared.
  g = compact(4, 6, 5, false, false, 3);
  g.strideA = 0;
  expectSameProducts(g, true, "shared A", rng);
  ColumnMajorGemm lt;
  std::string error;
  ASSERT_TRUE(columnMajorGemmOf(g, lt, error));
  EXPECT_EQ(lt.batch, 1);
  EXPECT_EQ(lt.calls, 3);
  // With calls already, there is no call sequence for it.
  g.calls = 2;
  g.callStrideA = 100, g.callStrideB = 100, g.callStrideC = 100;
  EXPECT_FALSE(columnMajorGemmOf(g, lt, error));
  EXPECT_NE(error.find("broadcast"), std::string::npos) << error;
}

TEST(ColumnMajorGemm, WindowsAndCallsReadTheirColumnsInPlace) {
  // The attention's products under --attention gemm: queries and keys are
  // windows of one [B, T, 3C] projection (columns 0 and C of rows 3C
  // wide), heads are batch entries D columns apart, and the B sequences
  // are calls T * 3C apart; the scores are [B, H, T, T].
  std::mt19937 rng(5);
  const int64_t b = 2, t = 5, h = 3, d = 4, c = h * d;
  GemmStep g{};
  g.m = t, g.n = t, g.k = d, g.transA = false, g.transB = true;
  g.lda = 3 * c, g.ldb = 3 * c, g.ldc = t;
  g.batch = h, g.strideA = d, g.strideB = d, g.strideC = t * t;
  g.calls = b, g.callStrideA = t * 3 * c, g.callStrideB = t * 3 * c;
  g.callStrideC = h * t * t;
  g.offsetA = 0, g.offsetB = c;
  expectSameProducts(g, false, "scores", rng);
  // The values' window read transposed (the values' gradient's product).
  g.transA = true, g.transB = false, g.k = t, g.m = d, g.n = t;
  g.lda = 3 * c, g.ldb = t, g.strideB = t * t, g.callStrideB = h * t * t;
  g.ldc = t, g.strideC = d * t, g.callStrideC = h * d * t;
  g.offsetA = 2 * c, g.offsetB = 0;
  expectSameProducts(g, false, "values^T", rng);
}

TEST(ColumnMajorGemm, BandsStartAtTheirRowsAndColumns) {
  // A causal attention's products in bands (gemmCalls): of [T, T] scores
  // for 2 sequences of 3 heads, the band of rows [4, 8) computes columns
  // [0, 8) of Q K^T into C from row 4; the keys' band of rows [4, 8) of
  // dS^T Q sums the queries [4, 10) of dS, stored [T, T].
  std::mt19937 rng(9);
  const int64_t t = 10, d = 4, h = 3;
  GemmStep g = compact(4, 8, d, false, true, h);
  g.lda = d, g.ldb = d, g.ldc = t;
  g.strideA = t * d, g.strideB = t * d, g.strideC = t * t;
  g.calls = 2, g.callStrideA = h * t * d, g.callStrideB = h * t * d;
  g.callStrideC = h * t * t;
  g.offsetA = 4 * d, g.offsetC = 4 * t;
  expectSameProducts(g, false, "a band of the scores", rng);
  GemmStep keys = compact(4, d, 6, true, false, h);
  keys.lda = t, keys.ldb = d, keys.ldc = d;
  keys.strideA = t * t, keys.strideB = t * d, keys.strideC = t * d;
  keys.calls = 2, keys.callStrideA = h * t * t, keys.callStrideB = h * t * d;
  keys.callStrideC = h * t * d;
  keys.offsetA = 4 * t + 4, keys.offsetB = 4 * d, keys.offsetC = 4 * d;
  expectSameProducts(keys, false, "a band of the keys' gradient", rng);
}

TEST(ColumnMajorGemm, RandomStepsComputeTheirRowMajorProducts) {
  // Steps of every shape the plan may hold: transposes, windows (leading
  // dimensions past the row, offsets), batches one after another, shared
  // or strided, calls, accumulation and bias.
  std::mt19937 rng(6);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 400; ++trial) {
    GemmStep g{};
    g.m = pick(1, 6), g.n = pick(1, 6), g.k = pick(1, 6);
    g.transA = pick(0, 1), g.transB = pick(0, 1);
    bool windowed = pick(0, 2) == 0;
    g.lda = g.cols(0) + (windowed ? pick(0, 5) : 0);
    g.ldb = g.cols(1) + (windowed ? pick(0, 5) : 0);
    g.ldc = g.cols(2) + (pick(0, 3) == 0 ? pick(1, 3) : 0);
    g.offsetA = windowed ? pick(0, 7) : 0;
    g.offsetB = windowed ? pick(0, 7) : 0;
    g.batch = pick(1, 3);
    auto span = [&](int operand) {
      const int64_t ld[] = {g.lda, g.ldb, g.ldc};
      return (g.rows(operand) - 1) * ld[operand] + g.cols(operand);
    };
    g.strideA = pick(0, 4) == 0 ? 0 : span(0) + pick(0, 3);
    g.strideB = pick(0, 4) == 0 ? 0 : span(1) + pick(0, 3);
    g.strideC = span(2) + pick(0, 3);
    // Sometimes the compact layout a shared weight folds into rows.
    if (pick(0, 3) == 0 && !g.transA) {
      g.lda = g.k, g.ldc = g.n, g.strideA = g.m * g.k, g.strideC = g.m * g.n;
      g.strideB = 0, g.offsetA = pick(0, 2);
      // Or nearly: one of the fold's conditions broken (a single row's
      // entries n apart but its rows ldc apart, a gap between A's entries,
      // A transposed).
      switch (pick(0, 3)) {
      case 0:
        g.ldc += 1, g.strideC = std::max(g.strideC, span(2));
        break;
      case 1:
        g.lda += 1, g.strideA = std::max(g.strideA, span(0));
        break;
      case 2:
        g.strideA += 1;
        break;
      case 3: // A square and transposed: its entries' rows are no one matrix
        g.transA = true, g.m = g.k, g.lda = g.k, g.strideA = g.k * g.k;
        g.strideC = g.m * g.n;
        break;
      }
    }
    g.calls =
        (g.strideA == 0 || g.strideB == 0) && g.batch > 1 ? 1 : pick(1, 3);
    g.callStrideA = pick(0, 3) == 0 ? 0 : g.batch * (span(0) + g.strideA);
    g.callStrideB = pick(0, 3) == 0 ? 0 : g.batch * (span(1) + g.strideB);
    g.callStrideC = g.batch * g.strideC + pick(0, 2);
    g.accumulate = pick(0, 1);
    std::string what =
        "trial " + std::to_string(trial) + ": m " + std::to_string(g.m) +
        " n " + std::to_string(g.n) + " k " + std::to_string(g.k) + " batch " +
        std::to_string(g.batch) + " calls " + std::to_string(g.calls) +
        " strides " + std::to_string(g.strideA) + "/" +
        std::to_string(g.strideB);
    expectSameProducts(g, pick(0, 1), what, rng);
    if (::testing::Test::HasFailure())
      return;
  }
}

TEST(ColumnMajorGemm, AlignmentIsTheLargestPowerOfTwoDividingEveryStart) {
  EXPECT_EQ(commonAlignment({0, 0, 0}), 256u);
  EXPECT_EQ(commonAlignment({64, 0, 0}), 64u);
  // GPT-2's key window: bf16 column 768 of an arena buffer at 4096.
  EXPECT_EQ(commonAlignment({4096, 768 * 2, 0}), 256u);
  // A head's window D = 64 bf16 columns in.
  EXPECT_EQ(commonAlignment({4096, 64 * 2, 0}), 128u);
  // An odd bf16 offset leaves 2 bytes.
  EXPECT_EQ(commonAlignment({4096, 7 * 2, 3 * 2}), 2u);
  EXPECT_EQ(commonAlignment({192, 0, 0}, 32), 32u);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    int64_t a = (int64_t)(rng() % 100000), b = (int64_t)(rng() % 100000),
            c = (int64_t)(rng() % 100000);
    uint32_t align = commonAlignment({a, b, c});
    ASSERT_TRUE(align >= 1 && align <= 256 && (align & (align - 1)) == 0);
    ASSERT_EQ(a % align + b % align + c % align, 0)
        << a << " " << b << " " << c;
    if (align < 256) {
      ASSERT_NE(a % (2 * align) + b % (2 * align) + c % (2 * align), 0);
    }
  }
}

} // namespace

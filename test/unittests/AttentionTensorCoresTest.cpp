//===- AttentionTensorCoresTest.cpp - the tensor-core attention, element by
// element ===//
//
// The fused attention's tensor-core kernels (AttentionTensorCores.h), run by
// the emulator, against attention computed in double from the same bf16
// inputs. Step parity checks them inside a model at the storage type's
// tolerance, where an error confined to a few rows can hide; here every
// element of the result, the row statistics and the three gradients is
// compared, on a causal self-attention (a triangular mask, tiles skipped
// whole) and a cross-attention with a mask that is read, a finite fill and
// values wider than 64 (tiles of 32).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#define GPUC_EMULATE_GPU
#include "gpuc/runtime/device/Kernel.h"

namespace {

struct Case {
  int batch, heads, queries, keys;
  bool causal;   // a triangular mask (by default key > query excluded), -inf
                 // fill
  bool readMask; // every third key excluded, a finite fill
  /// Elements between rows: 4 leaves rows unaligned for 16-byte loads.
  int pad = 0;
  /// With `readMask`: a query row that masks every key (-1: none).
  int maskedRow = -1;
  /// With `causal`: the mask's `key P query` (ComparePredicate + 1: lt 3,
  /// le 4, gt 5, ge 2), and whether it keeps the pairs it holds for.
  int triangle = 5;
  bool maskKeeps = false;
  /// Keys past `keys - paddedKeys` excluded from every query (a padding
  /// mask), with a -inf fill.
  int paddedKeys = 0;
  /// Query heads per key and value head (grouped-query attention).
  int groups = 1;
};

/// Whether `key P query` holds for the test's triangle code.
bool triangleHolds(int triangle, int query, int key) {
  switch (triangle) {
  case 3:
    return key < query;
  case 4:
    return key <= query;
  case 5:
    return key > query;
  default:
    return key >= query;
  }
}

struct Tensors {
  std::vector<gpuc::bf16> q, k, v, dOut;
};

std::vector<gpuc::bf16> randomBf16(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<gpuc::bf16> values(n);
  for (gpuc::bf16 &x : values)
    x = normal(rng);
  return values;
}

/// The three launches against double; the forward's warps own `Tiles`
/// m-tiles of 16 rows each. With `Stored`, the backward's three launches
/// (attentionBackwardStored), whose keys' launch stores the scores'
/// gradients into a buffer that holds NaNs where it stores none. With
/// `QuarterBlocks`, the forward also runs in blocks of 4 warps, and with
/// warps of the other number of rows (16 or 32) in both blocks, and the
/// backward in blocks of 4 warps: all must give the same bits, for the GPU
/// picks among them by their speed.
template <int D, int DV, int Tiles = 1, bool Stored = false,
          bool QuarterBlocks = false>
void check(const Case &c) {
  const int bh = c.batch * c.heads, qs = D + c.pad, vs = DV + c.pad;
  // The keys' and values' (batch, head) slices.
  const int keyHeads = c.heads / c.groups, bk = c.batch * keyHeads;
  std::mt19937 rng(11);
  Tensors t{randomBf16((size_t)bh * c.queries * qs, rng),
            randomBf16((size_t)bk * c.keys * qs, rng),
            randomBf16((size_t)bk * c.keys * vs, rng),
            randomBf16((size_t)bh * c.queries * vs, rng)};
  // The pairs excluded; and beside a triangle, the padding mask the
  // kernels read (true excludes unless the triangle's maskKeeps).
  std::unique_ptr<bool[]> mask(new bool[(size_t)c.queries * c.keys]);
  std::unique_ptr<bool[]> padding(new bool[(size_t)c.queries * c.keys]);
  for (int i = 0; i < c.queries; ++i)
    for (int j = 0; j < c.keys; ++j) {
      bool padded = j >= c.keys - c.paddedKeys;
      mask[(size_t)i * c.keys + j] =
          c.causal ? triangleHolds(c.triangle, i, j) != c.maskKeeps || padded
                   : (c.readMask && (j % 3 == 1 || i == c.maskedRow)) || padded;
      padding[(size_t)i * c.keys + j] = padded != (c.causal && c.maskKeeps);
    }

  gpuc::AttentionGeometry g;
  g.heads = c.heads;
  g.queries = c.queries;
  g.keys = c.keys;
  g.groups = c.groups;
  int64_t q[3] = {(int64_t)c.heads * c.queries * qs, (int64_t)c.queries * qs,
                  qs};
  int64_t k[3] = {(int64_t)keyHeads * c.keys * qs, (int64_t)c.keys * qs, qs};
  int64_t v[3] = {(int64_t)keyHeads * c.keys * vs, (int64_t)c.keys * vs, vs};
  int64_t o[3] = {(int64_t)c.heads * c.queries * vs, (int64_t)c.queries * vs,
                  vs};
  for (int d = 0; d < 3; ++d) {
    g.q[d] = q[d];
    g.k[d] = k[d];
    g.v[d] = v[d];
    g.out[d] = o[d];
    g.dq[d] = q[d];
    g.dk[d] = k[d];
    g.dv[d] = v[d];
  }
  g.scale = 1.0f / std::sqrt((float)D);
  g.fill = c.causal || c.paddedKeys ? -INFINITY : -20.0f;
  // A triangle is compared from the indices, with no mask to read (as the
  // flash lowering leaves it) but a padding mask beside it; the reference
  // reads the excluded pairs.
  const bool masked = c.causal || c.readMask || c.paddedKeys;
  g.mask = c.causal ? (c.paddedKeys ? padding.get() : nullptr)
                    : (masked ? mask.get() : nullptr);
  g.maskStrides[0] = g.maskStrides[1] = 0;
  g.maskStrides[2] = c.keys;
  g.maskStrides[3] = 1;
  // The read mask holds the excluded pairs; a triangle is its predicate.
  g.maskKeeps = c.causal && c.maskKeeps;
  g.triangle = c.causal ? c.triangle : 0;
  g.dropout = 0.0f;
  g.keepScale = 1.0f;
  g.seed = g.step = g.stream = g.weights = 0;
  ASSERT_TRUE((gpuc::attentionOnTensorCores<D, DV, gpuc::bf16>()));

  // Zeros between the rows, which the kernels must leave alone.
  std::vector<gpuc::bf16> out(t.dOut.size()), dq(t.q.size()), dk(t.k.size()),
      dv(t.v.size());
  for (auto *x : {&out, &dq, &dk, &dv})
    for (gpuc::bf16 &e : *x)
      e = 0.0f;
  std::vector<float> lse((size_t)bh * c.queries), rowDots(lse.size());
  int64_t grid = gpuc::attentionGrid(bh, c.queries, c.keys);
  gpuc::emulated::launch(grid, 256, "forward", [&] {
    gpuc::attentionForward<D, DV, Tiles>(t.q.data(), t.k.data(), t.v.data(), g,
                                         out.data(), lse.data());
  });
  if (QuarterBlocks) {
    // The forward's other layouts, each of which the GPU may pick: blocks
    // of 4 warps, and warps of the other number of rows in both blocks.
    constexpr int OtherTiles = 3 - Tiles;
    auto sameBits = [&](const char *layout, int threads, auto forward) {
      std::vector<gpuc::bf16> otherOut(out.size());
      std::vector<float> otherLse(lse.size(), NAN);
      for (gpuc::bf16 &e : otherOut)
        e = 0.0f;
      gpuc::emulated::launch(grid, threads, "forward", [&] {
        forward(otherOut.data(), otherLse.data());
      });
      EXPECT_EQ(
          memcmp(otherOut.data(), out.data(), out.size() * sizeof(gpuc::bf16)),
          0)
          << layout;
      EXPECT_EQ(memcmp(otherLse.data(), lse.data(), lse.size() * sizeof(float)),
                0)
          << layout;
    };
    sameBits("4 warps", 128, [&](gpuc::bf16 *o, float *l) {
      gpuc::attentionForward<D, DV, Tiles, 4>(t.q.data(), t.k.data(),
                                              t.v.data(), g, o, l);
    });
    sameBits("8 warps, the other rows", 256, [&](gpuc::bf16 *o, float *l) {
      gpuc::attentionForward<D, DV, OtherTiles>(t.q.data(), t.k.data(),
                                                t.v.data(), g, o, l);
    });
    sameBits("4 warps, the other rows", 128, [&](gpuc::bf16 *o, float *l) {
      gpuc::attentionForward<D, DV, OtherTiles, 4>(t.q.data(), t.k.data(),
                                                   t.v.data(), g, o, l);
    });
  }
  if (Stored) {
    // A pass's 128 queries past the end, which the last tiles stage.
    std::vector<unsigned short> scoreGrads(
        (size_t)bh * c.keys * c.queries + 128, 0x7fc0);
    for (int phase = 0; phase < 3; ++phase)
      gpuc::emulated::launch(grid, 256, "backward", [&] {
        gpuc::attentionBackwardStored<D, DV>(
            phase, t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data(),
            t.dOut.data(), g, dq.data(), dk.data(), dv.data(), rowDots.data(),
            scoreGrads.data());
      });
  } else {
    gpuc::emulated::launch(grid, 256, "queries", [&] {
      gpuc::attentionBackwardQueries<D, DV>(
          t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data(),
          t.dOut.data(), g, dq.data(), rowDots.data());
    });
    gpuc::emulated::launch(grid, 256, "keys", [&] {
      gpuc::attentionBackwardKeys<D, DV>(t.q.data(), t.k.data(), t.v.data(),
                                         lse.data(), t.dOut.data(), g,
                                         rowDots.data(), dk.data(), dv.data());
    });
    if (QuarterBlocks) {
      std::vector<gpuc::bf16> quarterDq(dq.size()), quarterDk(dk.size()),
          quarterDv(dv.size());
      for (auto *x : {&quarterDq, &quarterDk, &quarterDv})
        for (gpuc::bf16 &e : *x)
          e = 0.0f;
      std::vector<float> quarterDots(rowDots.size(), NAN);
      gpuc::emulated::launch(grid, 128, "queries", [&] {
        gpuc::attentionBackwardQueries<D, DV, 4>(
            t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data(),
            t.dOut.data(), g, quarterDq.data(), quarterDots.data());
      });
      gpuc::emulated::launch(grid, 128, "keys", [&] {
        gpuc::attentionBackwardKeys<D, DV, 4>(
            t.q.data(), t.k.data(), t.v.data(), lse.data(), t.dOut.data(), g,
            quarterDots.data(), quarterDk.data(), quarterDv.data());
      });
      for (auto [quarter, whole] :
           {std::pair{&quarterDq, &dq}, std::pair{&quarterDk, &dk},
            std::pair{&quarterDv, &dv}})
        EXPECT_EQ(memcmp(quarter->data(), whole->data(),
                         whole->size() * sizeof(gpuc::bf16)),
                  0);
      EXPECT_EQ(memcmp(quarterDots.data(), rowDots.data(),
                       rowDots.size() * sizeof(float)),
                0);
    }
  }

  // The reference, in double, from the same bf16 values.
  std::vector<double> refOut(out.size()), refLse(lse.size()), refDq(dq.size()),
      refDk(dk.size()), refDv(dv.size());
  for (int b = 0; b < bh; ++b) {
    // Keys and values are read at the (batch, key head) slice b / groups.
    auto at = [&](const std::vector<gpuc::bf16> &x, int rows, int stride,
                  int row, int col) {
      int slice = &x == &t.k || &x == &t.v ? b / c.groups : b;
      return (double)(float)x[((size_t)slice * rows + row) * stride + col];
    };
    std::vector<double> p((size_t)c.queries * c.keys);
    for (int i = 0; i < c.queries; ++i) {
      double max = -INFINITY;
      for (int j = 0; j < c.keys; ++j) {
        double s = g.fill;
        if (!masked || !mask[(size_t)i * c.keys + j]) {
          s = 0;
          for (int d = 0; d < D; ++d)
            s += at(t.q, c.queries, qs, i, d) * at(t.k, c.keys, qs, j, d);
          s *= (double)g.scale;
        }
        p[(size_t)i * c.keys + j] = s;
        max = std::max(max, s);
      }
      double sum = 0;
      for (int j = 0; j < c.keys; ++j)
        sum += std::exp(p[(size_t)i * c.keys + j] - max);
      refLse[(size_t)b * c.queries + i] = max + std::log(sum);
      for (int j = 0; j < c.keys; ++j)
        p[(size_t)i * c.keys + j] =
            std::exp(p[(size_t)i * c.keys + j] - max) / sum;
      double dot = 0;
      for (int e = 0; e < DV; ++e) {
        double y = 0;
        for (int j = 0; j < c.keys; ++j)
          y += p[(size_t)i * c.keys + j] * at(t.v, c.keys, vs, j, e);
        refOut[((size_t)b * c.queries + i) * vs + e] = y;
        dot += y * at(t.dOut, c.queries, vs, i, e);
      }
      for (int j = 0; j < c.keys; ++j) {
        double dp = 0;
        for (int e = 0; e < DV; ++e)
          dp += at(t.dOut, c.queries, vs, i, e) * at(t.v, c.keys, vs, j, e);
        double pij = p[(size_t)i * c.keys + j];
        bool excluded = masked && mask[(size_t)i * c.keys + j];
        double ds = excluded ? 0.0 : pij * (dp - dot);
        for (int d = 0; d < D; ++d) {
          refDq[((size_t)b * c.queries + i) * qs + d] +=
              g.scale * ds * at(t.k, c.keys, qs, j, d);
          refDk[((size_t)(b / c.groups) * c.keys + j) * qs + d] +=
              g.scale * ds * at(t.q, c.queries, qs, i, d);
        }
        for (int e = 0; e < DV; ++e)
          refDv[((size_t)(b / c.groups) * c.keys + j) * vs + e] +=
              pij * at(t.dOut, c.queries, vs, i, e);
      }
    }
  }

  // Each element within 1% of its tensor's largest: the kernels round the
  // weights and the scores' gradient to bf16 before their products (2^-9
  // each) and store bf16 (2^-9); the worst seen is 0.5%. A tile skipped
  // that should not be is tens of percent off.
  auto compare = [&](const char *name, const auto &got,
                     const std::vector<double> &want, double fraction) {
    double largest = 0;
    for (double w : want)
      largest = std::max(largest, std::fabs(w));
    int bad = 0;
    for (size_t e = 0; e < want.size(); ++e) {
      double x = (double)(float)got[e];
      if (!(std::fabs(x - want[e]) <= fraction * largest) && bad++ < 5)
        ADD_FAILURE() << name << "[" << e << "] is " << x << ", not " << want[e]
                      << " (largest " << largest << ")";
    }
    EXPECT_EQ(bad, 0) << name << ": elements off";
  };
  compare("out", out, refOut, 1e-2);
  compare("logsumexp", lse, refLse, 1e-5);
  compare("dq", dq, refDq, 1e-2);
  compare("dk", dk, refDk, 1e-2);
  compare("dv", dv, refDv, 1e-2);
}

TEST(AttentionTensorCores, CausalSelfAttentionMatchesDouble) {
  // 300 rows: a block of 256 and a partial one, passes past the rows.
  check<64, 64>({2, 2, 300, 300, /*causal=*/true, /*readMask=*/false});
}

TEST(AttentionTensorCores, EveryTriangleMatchesDouble) {
  // Causal as `key <= query` kept; the other half-planes excluded, with
  // more keys than queries (every row keeps a key).
  check<64, 64>({1, 2, 130, 130, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/4,
                 /*maskKeeps=*/true});
  check<64, 64>({1, 2, 70, 150, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/3});
  check<32, 32>({1, 1, 90, 90, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/2,
                 /*maskKeeps=*/true});
}

TEST(AttentionTensorCores, TriangleWithPaddingMaskMatchesDouble) {
  // A causal mask and a padding mask read beside it (Hugging Face's padded
  // batch): the padded keys' rows see only the keys before them; kept as
  // `key <= query` too, the padding's bits then keep.
  check<64, 64>({2, 2, 150, 150, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/5,
                 /*maskKeeps=*/false, /*paddedKeys=*/40});
  check<64, 64>({1, 2, 130, 130, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/4,
                 /*maskKeeps=*/true, /*paddedKeys=*/70});
  check<64, 64, 2>({1, 2, 150, 150, /*causal=*/true, /*readMask=*/false,
                    /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/5,
                    /*maskKeeps=*/false, /*paddedKeys=*/40});
  check<64, 64, 1, true>({1, 2, 150, 150, /*causal=*/true, /*readMask=*/false,
                          /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/5,
                          /*maskKeeps=*/false, /*paddedKeys=*/40});
  check<64, 64, 1, false, true>(
      {1, 2, 150, 150, /*causal=*/true, /*readMask=*/false, /*pad=*/0,
       /*maskedRow=*/-1, /*triangle=*/5, /*maskKeeps=*/false,
       /*paddedKeys=*/40});
}

TEST(AttentionTensorCores, CrossAttentionWithReadMaskMatchesDouble) {
  check<32, 80>({1, 3, 45, 70, /*causal=*/false, /*readMask=*/true});
}

TEST(AttentionTensorCores, RowMaskingEveryKeyWeighsThemEqually) {
  // Every score of row 9 is the fill: its keys weigh 1/100 each, not 0 / 0.
  check<64, 64>({1, 2, 40, 100, /*causal=*/false, /*readMask=*/true,
                 /*pad=*/0, /*maskedRow=*/9});
}

TEST(AttentionTensorCores, UnmaskedMatchesDouble) {
  check<16, 48>({2, 1, 33, 129, /*causal=*/false, /*readMask=*/false});
}

TEST(AttentionTensorCores, UnalignedRowsMatchDouble) {
  // Rows 4 elements apart from 16-byte boundaries: element-wise staging.
  check<64, 64>({1, 2, 100, 100, /*causal=*/true, /*readMask=*/false,
                 /*pad=*/4});
}

// The forward with 32 rows a warp (two m-tiles sharing each B fragment;
// one pass over a block's 256 rows): causal with a partial block, another
// triangle, a read mask with values wider than the keys, a row that masks
// every key, and rows staged element by element.
TEST(AttentionTensorCores, ThirtyTwoRowsAWarpMatchDouble) {
  check<64, 64, 2>({2, 2, 300, 300, /*causal=*/true, /*readMask=*/false});
  check<64, 64, 2>({1, 2, 70, 150, /*causal=*/true, /*readMask=*/false,
                    /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/3});
  check<32, 80, 2>({1, 3, 45, 70, /*causal=*/false, /*readMask=*/true});
  check<64, 64, 2>({1, 2, 40, 100, /*causal=*/false, /*readMask=*/true,
                    /*pad=*/0, /*maskedRow=*/9});
  check<64, 64, 2>({1, 2, 100, 100, /*causal=*/true, /*readMask=*/false,
                    /*pad=*/4});
}

// The forward and the backward's two launches in blocks of 4 warps (the
// same rows in twice the passes), and the forward with 16 or 32 rows a
// warp, give the 8-warp blocks' bits: causal with a partial block, another
// triangle, a read mask with tiles of 32 keys, a row that masks every key,
// rows staged element by element, and 32 rows a warp in the forward.
TEST(AttentionTensorCores, EveryLayoutGivesTheSameBits) {
  check<64, 64, 1, false, true>(
      {2, 2, 300, 300, /*causal=*/true, /*readMask=*/false});
  check<64, 64, 1, false, true>({1, 2, 70, 150, /*causal=*/true,
                                 /*readMask=*/false, /*pad=*/0,
                                 /*maskedRow=*/-1, /*triangle=*/3});
  check<32, 80, 1, false, true>(
      {1, 3, 45, 70, /*causal=*/false, /*readMask=*/true});
  check<64, 64, 1, false, true>({1, 2, 40, 100, /*causal=*/false,
                                 /*readMask=*/true, /*pad=*/0,
                                 /*maskedRow=*/9});
  check<64, 64, 1, false, true>(
      {1, 2, 100, 100, /*causal=*/true, /*readMask=*/false, /*pad=*/4});
  check<64, 64, 2, false, true>(
      {2, 2, 300, 300, /*causal=*/true, /*readMask=*/false});
  // 150 queries: a warp of 32 rows (128 to 159) holds rows past the last
  // and so takes no tile as kept, where the warp of 16 rows 128 to 143
  // keeps the tiles below the diagonal: their scores weigh the same bits.
  check<64, 64, 1, false, true>(
      {1, 2, 150, 150, /*causal=*/true, /*readMask=*/false});
}

// The backward with stored score gradients: the queries' gradients from
// what the keys' launch stored, staged by key tiles (32 keys where values
// are wider than 64), with the excluded, absent and never-stored scores
// (NaN in the buffer) zeroed: causal with a partial block, another
// triangle with more keys than queries, a read mask (tiles of 32 keys), a
// row that masks every key, rows staged element by element, and a padding
// mask.
TEST(AttentionTensorCores, StoredScoreGradientsMatchDouble) {
  check<64, 64, 1, true>({2, 2, 300, 300, /*causal=*/true, /*readMask=*/false});
  check<64, 64, 1, true>({1, 2, 70, 150, /*causal=*/true, /*readMask=*/false,
                          /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/3});
  check<32, 80, 1, true>({1, 3, 46, 70, /*causal=*/false, /*readMask=*/true});
  check<64, 64, 1, true>({1, 2, 40, 100, /*causal=*/false, /*readMask=*/true,
                          /*pad=*/0, /*maskedRow=*/9});
  check<64, 64, 1, true>({1, 2, 100, 100, /*causal=*/true, /*readMask=*/false,
                          /*pad=*/4});
  // Keys 110 on padded: the keys' launch stores nothing for the warps whose
  // 16 keys are all padded, which the queries' tiles of 64 keys still span.
  check<64, 64, 1, true>({1, 2, 100, 150, /*causal=*/false, /*readMask=*/false,
                          /*pad=*/0, /*maskedRow=*/-1, /*triangle=*/5,
                          /*maskKeeps=*/false, /*paddedKeys=*/40});
}

// The blocks' order on the GPU: under a causal mask every (batch, head)'s
// heaviest row block starts first (the last query rows; for the keys'
// gradients, the first key rows), each (batch, head, row block) exactly
// once; without a mask, each head's blocks in row order.
TEST(AttentionBlocks, CausalRowBlocksStartHeaviestFirst) {
  gpuc::AttentionGeometry g{};
  g.heads = 3;
  g.groups = 1;
  g.queries = g.keys = 1000; // 4 row blocks a head
  g.mask = nullptr;          // compared from the indices
  g.triangle = 5;            // key > query excluded: causal
  const int64_t batchHeads = 2 * g.heads, blocksPerHead = 4;
  const int64_t grid = gpuc::attentionGrid(batchHeads, g.queries, g.keys);
  ASSERT_EQ(grid, batchHeads * blocksPerHead);
  gridDim.x = grid;
  auto order = [&](bool rowsAreKeys) {
    std::vector<std::pair<int64_t, int64_t>> blocks;
    for (int64_t i = 0; i < grid; ++i) {
      blockIdx.x = i;
      int64_t b, h, bh, first;
      EXPECT_TRUE(gpuc::attentionBlock(g, rowsAreKeys ? g.keys : g.queries,
                                       rowsAreKeys, b, h, bh, first));
      EXPECT_EQ(bh, b * g.heads + h);
      blocks.push_back({bh, first});
    }
    return blocks;
  };
  for (bool rowsAreKeys : {false, true}) {
    std::vector<std::pair<int64_t, int64_t>> blocks = order(rowsAreKeys);
    int64_t heaviest = rowsAreKeys ? 0 : (blocksPerHead - 1) * 256;
    for (int64_t i = 0; i < batchHeads; ++i)
      EXPECT_EQ(blocks[i], std::make_pair(i, heaviest)) << rowsAreKeys;
    std::sort(blocks.begin(), blocks.end());
    for (int64_t i = 0; i < grid; ++i)
      EXPECT_EQ(blocks[i],
                std::make_pair(i / blocksPerHead, i % blocksPerHead * 256));
  }
  g.triangle = 0;
  std::vector<std::pair<int64_t, int64_t>> plain = order(false);
  for (int64_t i = 0; i < grid; ++i)
    EXPECT_EQ(plain[i],
              std::make_pair(i / blocksPerHead, i % blocksPerHead * 256));
  blockIdx.x = 0;
  gridDim.x = 1;
}

} // namespace

// Grouped-query attention: each key and value head is read by a group of
// query heads (SmolLM's 9 over 3), and the keys' launch sums a key row's
// gradients over its group: causal, in every layout and with the scores'
// gradients stored, and a cross-attention with a read mask.
TEST(AttentionTensorCores, GroupedQueryHeadsMatchDouble) {
  Case causal{1, 6, 300, 300, /*causal=*/true, /*readMask=*/false};
  causal.groups = 3;
  check<64, 64>(causal);
  check<64, 64, 1, false, true>(causal);
  check<64, 64, 1, true>(causal);
  Case cross{1, 4, 45, 70, /*causal=*/false, /*readMask=*/true};
  cross.groups = 2;
  check<32, 80>(cross);
}

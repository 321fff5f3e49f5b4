//===- AttentionTensorCores.h - the fused attention on tensor cores -------===//
//
// The GPU's fused attention for f16/bf16 operands whose widths are
// multiples of 16 (at most 128): the same three launches and the same
// online softmax as Attention.h's rows, with every product on tensor cores
// (Mma.h's m16n8k16, f32 accumulators). A warp owns 16 rows, so a block's
// 8 warps take its kAttentionRows rows in two passes of 128; the block
// stages each tile of keys and values (or of queries and the result's
// gradient, for the keys' gradients) in shared memory as 16-bit bits, row
// by row, rows padded by 8 elements so that ldmatrix's 8 row reads hit
// different banks; ldmatrix, plain or transposed, gives each product its B
// fragments from the one copy. Scores stay in registers: their C fragments
// become the A
// fragments of the next product (weights times values, or the scores'
// gradient times keys or queries), rounded to the operand type as
// FlashAttention does. A tile whose scores a warp's rows all exclude (a
// causal mask's upper triangle) costs that warp no product. As on the
// CPU, every sum runs in a fixed order and nothing is atomic: a replay
// gives the same bits.
//
// Included by Attention.h, in the GPU's text only.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_ATTENTIONTENSORCORES_H
#define GPUC_RUNTIME_DEVICE_ATTENTIONTENSORCORES_H

#include "gpuc/runtime/device/Mma.h"
#ifdef GPUC_HAVE_MMA
#include "gpuc/runtime/device/AsyncCopy.h"
#endif

namespace gpuc {

/// Whether attention over T with query/key width D and value width DV runs
/// on tensor cores.
template <int D, int DV, typename T> constexpr bool attentionOnTensorCores() {
#ifdef GPUC_HAVE_MMA
  return MmaOperand<T>::kAvailable && D % 16 == 0 && DV % 16 == 0 && D <= 128 &&
         DV <= 128;
#else
  return false;
#endif
}

#ifdef GPUC_HAVE_MMA

/// The kernels take their exponentials in base 2, as FlashAttention does:
/// a score is scaled once, by the softmax scale times log2 e, and a weight
/// is 2^(score - max), one special-function op. Only differences of
/// scores are exponentiated, so a fill however low stays finite: a row that
/// masks every key gives each 2^0.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

/// 2^x. On the GPU ex2.approx.ftz (relative error 2^-22): exp2f adds a
/// test, a scaling before and a squaring after for a result under 2^-126,
/// four instructions a weight where these weights are rounded to 16 bits
/// for the next product and summed in f32 beside a weight of 1. (Not
/// gpuc::exponential, expf: these weights need no more.)
__device__ __forceinline__ float attentionExp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

/// A score in base-2 units; -inf stays -inf.
__device__ __forceinline__ float attentionLog2Units(float x) {
  return x * kLog2e;
}

/// Rows of an m-tile (a warp owns `Tiles` of them: 16 or 32 rows), and
/// the passes a block's warps (8, or 4 in the forward's block of 128
/// threads) make over its rows.
inline constexpr int kMmaRows = 16;
inline constexpr int kMmaWarps = kBlockThreads / 32;
template <int Tiles, int Warps = kMmaWarps> constexpr int mmaPasses() {
  return kAttentionRows / (kMmaRows * Tiles * Warps);
}
inline constexpr int kMmaPasses = mmaPasses<1>();

/// Keys (or queries) a staged tile holds: shared memory stays under the
/// 48 KB a block may declare.
template <int D, int DV> constexpr int attentionMmaTile() {
  return D <= 64 && DV <= 64 ? 64 : 32;
}

/// A staged tile's elements: Tile rows of Width, Width + 8 apart.
template <int Tile, int Width> constexpr int mmaTileElements() {
  return Tile * (Width + 8);
}

/// Elements of one of a kernel's two buffers: a tile of rows D wide (keys,
/// or queries) and one DV wide (values, or the result's gradient).
template <int D, int DV> constexpr int attentionMmaBufferElements() {
  constexpr int T = attentionMmaTile<D, DV>();
  return mmaTileElements<T, D>() + mmaTileElements<T, DV>();
}

/// The kernels' staged tiles, one array for all of them (a kernel's two
/// backward phases are one function, and arrays of their own would add up
/// past 48 KB): two buffers, so that a pass stages its next tile while it
/// computes on the current one.
template <int D, int DV>
__device__ __forceinline__ unsigned short *attentionMmaShared() {
  // 16-byte aligned, as is every row in it (widths are multiples of 16):
  // ldmatrix reads rows of 16 bytes, cp.async writes them.
  alignas(16)
      __shared__ unsigned short tiles[2 * attentionMmaBufferElements<D, DV>()];
  return tiles;
}

/// Whether rows of 16-bit elements `stride` apart from `rows` can be read
/// 8 elements (16 bytes) at a time.
__device__ __forceinline__ bool mmaVectorRows(const void *rows,
                                              int64_t stride) {
  return ((unsigned long long)rows & 15) == 0 && stride % 8 == 0;
}

/// Starts staging rows [first, first + count) of a [rows, Width] operand
/// (rows `stride` apart) as a tile of Tile rows, Width + 8 apart; rows
/// past `count` are zeros (their products must be 0, not a stale NaN times
/// 0). Where the rows allow it a thread copies 16 bytes at once,
/// asynchronously (the caller commits and waits); otherwise element by
/// element, at once. The block has `Threads` threads.
template <int Tile, int Width, int Threads = kBlockThreads, typename T>
__device__ __forceinline__ void
mmaStageRows(unsigned short *tile, const T *rows, int64_t stride, int count) {
  if (mmaVectorRows(rows, stride)) {
    constexpr int Vectors = Width / 8;
    constexpr int Rounds = (Tile * Vectors + Threads - 1) / Threads;
    GPUC_UNROLL
    for (int round = 0; round < Rounds; ++round) {
      int e = round * Threads + threadIdx.x;
      if (Tile * Vectors % Threads != 0 && e >= Tile * Vectors)
        break;
      int r = e / Vectors, c = e % Vectors * 8;
      // A row past `count` reads nothing: the tile's first row stands in.
      copyAsync<16>(tile + r * (Width + 8) + c,
                    rows + (r < count ? r * stride + c : 0), r < count);
    }
    return;
  }
  for (int e = threadIdx.x; e < Tile * Width; e += Threads) {
    int r = e / Width, c = e % Width;
    tile[r * (Width + 8) + c] =
        r < count ? storedBits(rows[r * stride + c]) : 0;
  }
}

/// Buffer `buffer` (0 or 1) of a kernel's tiles: a tile of rows D wide,
/// then one DV wide.
template <int D, int DV>
__device__ __forceinline__ unsigned short *mmaBuffer(unsigned short *tiles,
                                                     int buffer) {
  return tiles + buffer * attentionMmaBufferElements<D, DV>();
}

/// Starts staging rows [j, j + Tile) of `a` (D wide) and of `b` (DV wide)
/// into a buffer, zeros past `count` rows.
template <int D, int DV, int Threads = kBlockThreads, typename T>
__device__ __forceinline__ void
mmaStagePair(unsigned short *buffer, const T *a, int64_t aStride, const T *b,
             int64_t bStride, int64_t j, int64_t count) {
  constexpr int Tile = attentionMmaTile<D, DV>();
  int rows = count - j < Tile ? (int)(count - j) : Tile;
  mmaStageRows<Tile, D, Threads>(buffer, a + j * aStride, aStride, rows);
  mmaStageRows<Tile, DV, Threads>(buffer + mmaTileElements<Tile, D>(),
                                  b + j * bStride, bStride, rows);
}

/// A pass's tiles, each `Tile` of `count` rows (keys, or queries) from 0,
/// but those `skipped(j, end)` (rows [j, end)) says the pass needs nothing
/// from. `stage(j,
/// buffer)` starts staging tile j into buffer 0 or 1, and `compute(j,
/// buffer)` runs once every thread's copies of it have landed, while the
/// next tile's are in flight: two buffers, one barrier a tile. Every
/// thread of the block calls it with the same tiles.
template <int Tile, typename Skipped, typename Stage, typename Compute>
__device__ __forceinline__ void mmaStagedTiles(int64_t count, Skipped skipped,
                                               Stage stage, Compute compute) {
  auto unskipped = [&](int64_t j) {
    while (j < count && skipped(j, j + Tile < count ? j + Tile : count))
      j += Tile;
    return j;
  };
  int64_t j = unskipped(0);
  // The block's previous pass may still read either buffer.
  __syncthreads();
  if (j < count) {
    stage(j, 0);
    commitAsyncCopies();
  }
  for (int buffer = 0; j < count; buffer ^= 1) {
    int64_t next = unskipped(j + Tile);
    waitAsyncCopies<0>();
    // Tile j has landed for every thread, and every warp is done with the
    // tile before it, whose buffer tile `next` takes.
    __syncthreads();
    if (next < count) {
      stage(next, buffer ^ 1);
      commitAsyncCopies();
    }
    compute(j, buffer);
    j = next;
  }
}

/// The A fragments of the caller's warp's 16 rows of a [rows, Width]
/// operand (row `row0` first, `stride` apart), zeros past `rows`.
template <int Width, typename T>
__device__ __forceinline__ void mmaLoadRows(unsigned (*a)[4], const T *base,
                                            int64_t stride, int64_t row0,
                                            int64_t rows) {
  int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  GPUC_UNROLL
  for (int c = 0; c < Width / 16; ++c) {
    GPUC_UNROLL
    for (int r = 0; r < 4; ++r) {
      int64_t row = row0 + g + (r & 1) * 8;
      int col = c * 16 + 2 * t + (r >> 1) * 8;
      a[c][r] =
          row < rows
              ? (unsigned)storedBits(base[row * stride + col]) |
                    ((unsigned)storedBits(base[row * stride + col + 1]) << 16)
              : 0u;
    }
  }
}

/// acc[n] += A (16 x 16K) times columns n * 8.. of B (16K x 8N), for
/// every n < N (N even), B's fragments loaded from a staged tile by
/// ldmatrix, two n-tiles at a time. A tile is rows `pitch` apart: with
/// `KMajor` its row r holds B's row k = r (B is the tile), else its row r
/// holds B's column n = r (B is the tile transposed).
/// The same for M m-tiles of A (acc[m] += a[m] times B): each B fragment
/// loaded once serves all M.
template <typename T, int M, int K, int N, bool KMajor>
__device__ __forceinline__ void
mmaProductTiles(float (*acc)[N][4], const unsigned (*a)[K][4],
                const unsigned short *tile, int pitch) {
  static_assert(N % 2 == 0, "ldmatrix.x4 loads two n-tiles");
  // Lane l addresses row l % 8 of matrix l / 8: matrices 0 and 1 are
  // n-tile n's k 0..7 and 8..15, matrices 2 and 3 n-tile n + 1's.
  int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
  int nOffset = (matrix >> 1) * 8, kOffset = (matrix & 1) * 8;
  GPUC_UNROLL
  for (int n = 0; n < N; n += 2) {
    GPUC_UNROLL
    for (int k = 0; k < K; ++k) {
      const unsigned short *at =
          KMajor ? tile + (k * 16 + kOffset + row) * pitch + n * 8 + nOffset
                 : tile + (n * 8 + nOffset + row) * pitch + k * 16 + kOffset;
      unsigned b[4];
      mmaLoadMatrices<KMajor>(b, at);
      GPUC_UNROLL
      for (int m = 0; m < M; ++m) {
        mmaSync<T>(acc[m][n], a[m][k], b);
        mmaSync<T>(acc[m][n + 1], a[m][k], b + 2);
      }
    }
  }
}
template <typename T, int K, int N, bool KMajor>
__device__ __forceinline__ void
mmaProduct(float (*acc)[4], const unsigned (*a)[4], const unsigned short *tile,
           int pitch) {
  mmaProductTiles<T, 1, K, N, KMajor>((float(*)[N][4])acc,
                                      (const unsigned(*)[K][4])a, tile, pitch);
}

/// C fragments (16 x 8N) as the A fragments (16 x 16, N / 2 of them) of
/// the same values rounded to T.
template <typename T, int N>
__device__ __forceinline__ void mmaScoresAsA(unsigned (*a)[4],
                                             const float (*c)[4]) {
  GPUC_UNROLL
  for (int k = 0; k < N / 2; ++k) {
    a[k][0] = mmaPack<T>(c[2 * k][0], c[2 * k][1]);
    a[k][1] = mmaPack<T>(c[2 * k][2], c[2 * k][3]);
    a[k][2] = mmaPack<T>(c[2 * k + 1][0], c[2 * k + 1][1]);
    a[k][3] = mmaPack<T>(c[2 * k + 1][2], c[2 * k + 1][3]);
  }
}

/// Stores the caller's warp's 16 rows from `row0` (those before `rows`) of
/// C fragments `acc` (16 x Width), times `scale`, into rows `stride`
/// apart from `base`: a gradient's rows at the end of a pass.
template <int Width, typename T>
__device__ __forceinline__ void
mmaStoreRows(T *base, int64_t stride, const float (*acc)[4], int64_t row0,
             int64_t rows, float scale) {
  const int t = threadIdx.x & 3;
  GPUC_UNROLL
  for (int r = 0; r < 2; ++r) {
    int64_t row = row0 + ((threadIdx.x & 31) >> 2) + r * 8;
    if (row >= rows)
      continue;
    T *out = base + row * stride;
    GPUC_UNROLL
    for (int n = 0; n < Width / 8; ++n) {
      out[n * 8 + 2 * t] = scale * acc[n][2 * r];
      out[n * 8 + 2 * t + 1] = scale * acc[n][2 * r + 1];
    }
  }
}

/// The sum (or max) of a row's values over the 4 lanes that hold it.
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
/// Whether `v` holds in every lane of the warp.
__device__ __forceinline__ bool warpAll(bool v) {
  int x = v ? 1 : 0;
  GPUC_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1)
    x &= __shfl_xor_sync(0xffffffffu, x, offset);
  return x != 0;
}

/// Element i of an n-tile of a C fragment: its row (0..15) and column
/// (0..7) within the tile.
__device__ __forceinline__ int mmaRow(int i) {
  return ((threadIdx.x & 31) >> 2) + (i >> 1) * 8;
}
__device__ __forceinline__ int mmaColumn(int i) {
  return 2 * (threadIdx.x & 3) + (i & 1);
}

/// The rows of a block's pass (`pass` of mmaPasses<Tiles>() over the
/// block's rows from `first`, each warp `Tiles` m-tiles of them): [begin,
/// end), `end` clamped to `rows`, and the first of the caller's warp.
/// Empty (begin >= rows) past the last row.
struct MmaPass {
  int64_t begin, end, warpRow;
};
template <int Tiles, int Warps = kMmaWarps>
constexpr int64_t kMmaPassRowsOf = Warps *kMmaRows *Tiles;
inline constexpr int64_t kMmaPassRows = kMmaPassRowsOf<1>;
template <int Tiles = 1, int Warps = kMmaWarps>
__device__ __forceinline__ MmaPass mmaPass(int64_t first, int pass,
                                           int64_t rows) {
  constexpr int64_t PassRows = kMmaPassRowsOf<Tiles, Warps>;
  int64_t begin = first + pass * PassRows;
  int64_t end = begin + PassRows < rows ? begin + PassRows : rows;
  return {begin, end, begin + (threadIdx.x >> 5) * kMmaRows * Tiles};
}

/// The flags of all N * 4 scores a lane holds (mmaScoreFlags' bits).
template <int N> constexpr unsigned mmaAllFlags() {
  return N * 4 == 32 ? ~0u : (1u << (N * 4)) - 1u;
}

/// Which of a tile's scores the caller holds (rows `row0`.., columns
/// `col0`.., each N n-tiles wide) are absent (past the queries or keys) or
/// excluded by the mask, as bits n * 4 + i; no score is both. `transposed`:
/// the rows are keys and the columns queries.
template <int N>
__device__ __forceinline__ void
mmaScoreFlags(const AttentionGeometry &g, int64_t b, int64_t h, int64_t row0,
              int64_t col0, bool transposed, unsigned &absent,
              unsigned &excluded) {
  // The tile spans 16 rows and 8N columns from (row0, col0): offsets from
  // them compare in 32 bits, clamped to +-kSpan, which keeps every
  // comparison's outcome.
  constexpr int64_t kSpan = 1 << 20;
  auto clamp = [](int64_t v) {
    return (int)(v < -kSpan ? -kSpan : v > kSpan ? kSpan : v);
  };
  const int rowsLeft = clamp((transposed ? g.keys : g.queries) - row0);
  const int columnsLeft = clamp((transposed ? g.queries : g.keys) - col0);
  absent = excluded = 0;
  GPUC_UNROLL
  for (int n = 0; n < N; ++n) {
    GPUC_UNROLL
    for (int i = 0; i < 4; ++i) {
      if (mmaRow(i) >= rowsLeft || n * 8 + mmaColumn(i) >= columnsLeft)
        absent |= 1u << (n * 4 + i);
    }
  }
  if (!g.mask && !g.triangle)
    return;
  if (g.triangle) {
    // Key index minus query index at (row0, col0).
    const int corner = clamp(transposed ? row0 - col0 : col0 - row0);
    GPUC_UNROLL
    for (int n = 0; n < N; ++n) {
      GPUC_UNROLL
      for (int i = 0; i < 4; ++i) {
        int down = mmaRow(i), across = n * 8 + mmaColumn(i);
        if (attentionTriangleExcludes(
                g, corner + (transposed ? down - across : across - down)))
          excluded |= 1u << (n * 4 + i);
      }
    }
    excluded &= ~absent;
    if (!g.mask)
      return;
  }
  // A mask that is read (beside a triangle: a padding mask): only present
  // scores read it.
  GPUC_UNROLL
  for (int n = 0; n < N; ++n) {
    GPUC_UNROLL
    for (int i = 0; i < 4; ++i) {
      unsigned bit = 1u << (n * 4 + i);
      int64_t row = row0 + mmaRow(i), col = col0 + n * 8 + mmaColumn(i);
      if (!(absent & bit) && attentionExcluded(g, b, h, transposed ? col : row,
                                               transposed ? row : col))
        excluded |= bit;
    }
  }
}

/// Which scores of the caller's warp's 16 queries (from `row0`) by a tile
/// of keys (from `col0`) have no gradient, as mmaScoreFlags' bits: those
/// past the queries or keys, and those the mask excludes (whatever the
/// fill, an excluded score does not depend on the query).
template <int N>
__device__ __forceinline__ unsigned
mmaGradientlessScores(const AttentionGeometry &g, int64_t b, int64_t h,
                      int64_t row0, int64_t col0) {
  unsigned absent, excluded;
  mmaScoreFlags<N>(g, b, h, row0, col0, false, absent, excluded);
  return absent | excluded;
}

/// A tile's body, compiled twice: for a tile whose scores the caller's
/// warp holds are all present and kept (attentionTileKept: most of a
/// causal attention's tiles, all but those on the diagonal), with no
/// flags and no selects, and for the others. The flags and the selects on
/// them cost a tile a few integer operations a score, as many as its
/// products and exponentials issue.
template <bool Kept> struct MmaTileKept { static constexpr bool value = Kept; };
template <typename Body>
__device__ __forceinline__ void mmaTileBody(bool kept, Body body) {
  if (kept)
    body(MmaTileKept<true>());
  else
    body(MmaTileKept<false>());
}

/// The forward: each warp owns `Tiles` m-tiles (16 or 32 rows), whose
/// scores it multiplies with each B fragment it loads once; with 2 the
/// block's 8 warps take its 256 rows in one pass, with twice the
/// independent products between a tile's barrier and its softmax. A block
/// of `Warps` 4 (128 threads) takes the same rows in twice the passes:
/// each row's arithmetic is the same, in the same order (the same bits),
/// and an SM holds two or three such blocks, whose barriers do not wait
/// for each other.
template <int D, int DV, int Tiles, int Warps, typename T>
__device__ void attentionForwardMma(const T *q, const T *k, const T *v,
                                    const AttentionGeometry &g, T *out,
                                    float *lse) {
  constexpr int KT = attentionMmaTile<D, DV>(), N = KT / 8;
  constexpr int WarpRows = kMmaRows * Tiles;
  static_assert(N * 4 <= 32, "a tile's flags fit a word");
  unsigned short *tiles = attentionMmaShared<D, DV>();
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const int t = threadIdx.x & 3;
  const T *qBase = q + b * g.q[0] + h * g.q[1];
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  // Scores, their maxima and the fill in base-2 units.
  const float scale2 = g.scale * kLog2e, fill2 = attentionLog2Units(g.fill);
  for (int pass = 0; pass < mmaPasses<Tiles, Warps>(); ++pass) {
    const MmaPass rows = mmaPass<Tiles, Warps>(first, pass, g.queries);
    if (rows.begin >= g.queries)
      break;
    const int64_t row0 = rows.warpRow;
    unsigned qa[Tiles][D / 16][4];
    GPUC_UNROLL
    for (int m = 0; m < Tiles; ++m)
      mmaLoadRows<D>(qa[m], qBase, g.q[2], row0 + m * kMmaRows, g.queries);
    float o[Tiles][DV / 8][4] = {};
    float max[Tiles][2], sum[Tiles][2];
    GPUC_UNROLL
    for (int m = 0; m < Tiles; ++m)
      GPUC_UNROLL
    for (int r = 0; r < 2; ++r) {
      max[m][r] = -INFINITY;
      sum[m][r] = 0.0f;
    }
    // A tile the mask excludes from all the pass's rows adds nothing.
    auto skipped = [&](int64_t j, int64_t end) {
      return g.fill == -INFINITY &&
             attentionTileExcluded(g, rows.begin, rows.end, j, end);
    };
    auto stage = [&](int64_t j, int buffer) {
      mmaStagePair<D, DV, Warps * 32>(mmaBuffer<D, DV>(tiles, buffer), kBase,
                                      g.k[2], vBase, g.v[2], j, g.keys);
    };
    // A tile is kept whole for the warp's present rows: its rows past the
    // last query (loaded as zeros, never stored) do not count. A kept tile
    // weighs a score in one rounding fewer than a tile with flags, so the
    // choice must not depend on how many rows a warp owns (16 or 32, which
    // the GPU picks by speed): at 150 queries a warp of rows 128 to 159
    // would otherwise take flags where the warp of rows 128 to 143 keeps.
    const int64_t presentEnd =
        row0 + WarpRows < g.queries ? row0 + WarpRows : g.queries;
    auto compute = [&](int64_t j, int buffer) {
      mmaTileBody(
          scale2 > 0.0f && attentionTileKept(g, row0, presentEnd, j, j + KT),
          [&](auto kept) {
            constexpr bool kKept = decltype(kept)::value;
            const unsigned short *kTile = mmaBuffer<D, DV>(tiles, buffer);
            const unsigned short *vTile = kTile + mmaTileElements<KT, D>();
            unsigned absent[Tiles] = {}, excluded[Tiles] = {};
            if (!kKept) {
              bool dead = true;
              GPUC_UNROLL
              for (int m = 0; m < Tiles; ++m) {
                mmaScoreFlags<N>(g, b, h, row0 + m * kMmaRows, j, false,
                                 absent[m], excluded[m]);
                dead &=
                    (absent[m] | (g.fill == -INFINITY ? excluded[m] : 0u)) ==
                    mmaAllFlags<N>();
              }
              if (warpAll(dead))
                return;
            }
            float s[Tiles][N][4] = {};
            mmaProductTiles<T, Tiles, D / 16, N, false>(s, qa, kTile, D + 8);
            // Each m-tile's weights times the values right after its
            // softmax: its weights' registers are free before the next
            // m-tile's (sharing the values' fragments too spilled).
            GPUC_UNROLL
            for (int m = 0; m < Tiles; ++m) {
              // A kept tile keeps its products unscaled: with a positive
              // scale the largest scaled score is the scaled largest
              // product (rounding is monotonic), and a weight is
              // 2^(scale2 * s - max) in one fused multiply-add. Other
              // tiles scale each score.
              float tileMax[2] = {-INFINITY, -INFINITY};
              GPUC_UNROLL
              for (int n = 0; n < N; ++n) {
                GPUC_UNROLL
                for (int i = 0; i < 4; ++i) {
                  unsigned bit = 1u << (n * 4 + i);
                  if (!kKept)
                    s[m][n][i] = (absent[m] & bit)     ? -INFINITY
                                 : (excluded[m] & bit) ? fill2
                                                       : scale2 * s[m][n][i];
                  tileMax[i >> 1] = fmaxf(tileMax[i >> 1], s[m][n][i]);
                }
              }
              float newMax[2];
              GPUC_UNROLL
              for (int r = 0; r < 2; ++r) {
                float rowMax = quadMax(tileMax[r]);
                newMax[r] = fmaxf(max[m][r], kKept ? scale2 * rowMax : rowMax);
                float correction = newMax[r] == -INFINITY
                                       ? 1.0f
                                       : attentionExp2(max[m][r] - newMax[r]);
                sum[m][r] *= correction;
                GPUC_UNROLL
                for (int n = 0; n < DV / 8; ++n) {
                  o[m][n][2 * r] *= correction;
                  o[m][n][2 * r + 1] *= correction;
                }
                max[m][r] = newMax[r];
              }
              // A row whose maximum is still -inf has only -inf (or NaN)
              // scores so far: against 0 instead they weigh 2^-inf = 0
              // (NaN stays NaN), as the test of each score did, with no
              // select.
              float shift[2];
              GPUC_UNROLL
              for (int r = 0; r < 2; ++r)
                shift[r] = newMax[r] == -INFINITY ? 0.0f : newMax[r];
              GPUC_UNROLL
              for (int n = 0; n < N; ++n) {
                GPUC_UNROLL
                for (int i = 0; i < 4; ++i) {
                  float shifted = shift[i >> 1];
                  float p =
                      attentionExp2(kKept ? fmaf(scale2, s[m][n][i], -shifted)
                                          : s[m][n][i] - shifted);
                  sum[m][i >> 1] += p;
                  if (p != 0.0f && g.dropout > 0.0f)
                    p *= attentionKeep(g, bh, row0 + m * kMmaRows + mmaRow(i),
                                       j + n * 8 + mmaColumn(i));
                  s[m][n][i] = p;
                }
              }
              unsigned pa[N / 2][4];
              mmaScoresAsA<T, N>(pa, s[m]);
              mmaProduct<T, N / 2, DV / 8, true>(o[m], pa, vTile, DV + 8);
            }
          });
    };
    mmaStagedTiles<KT>(g.keys, skipped, stage, compute);
    GPUC_UNROLL
    for (int m = 0; m < Tiles; ++m)
      GPUC_UNROLL
    for (int r = 0; r < 2; ++r) {
      float rowSum = quadSum(sum[m][r]);
      int64_t row = row0 + m * kMmaRows + mmaRow(2 * r);
      if (row >= g.queries)
        continue;
      T *outRow = out + b * g.out[0] + h * g.out[1] + row * g.out[2];
      // One division a row: each of the DV / 4 a lane held was a
      // reciprocal, a range check and a branch to a slow path.
      const float inverse = 1.0f / rowSum;
      GPUC_UNROLL
      for (int n = 0; n < DV / 8; ++n) {
        outRow[n * 8 + 2 * t] = o[m][n][2 * r] * inverse;
        outRow[n * 8 + 2 * t + 1] = o[m][n][2 * r + 1] * inverse;
      }
      if (t == 0)
        lse[bh * g.queries + row] = max[m][r] * kLn2 + logf(rowSum);
    }
  }
}

/// The queries' launch of the backward: each query row's dot(dO, O) into
/// `rowDots` (for the keys' launch) and, unless `DotsOnly` (the keys'
/// launch stores the scores' gradients: attentionQueryGradsFromStoredMma),
/// the queries' gradients.
template <int D, int DV, bool DotsOnly = false, int Warps = kMmaWarps,
          typename T>
__device__ void
attentionBackwardQueriesMma(const T *q, const T *k, const T *v, const T *out,
                            const float *lse, const T *dOut,
                            const AttentionGeometry &g, T *dq, float *rowDots) {
  constexpr int KT = attentionMmaTile<D, DV>(), N = KT / 8;
  // The key tile is the scores' B (k = width) and, read transposed, dQ's
  // (k = keys); the value tile is dP's (k = value width).
  unsigned short *tiles = attentionMmaShared<D, DV>();
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const int t = threadIdx.x & 3;
  const T *qBase = q + b * g.q[0] + h * g.q[1];
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  const T *oBase = out + b * g.out[0] + h * g.out[1];
  const T *dOBase = dOut + b * g.out[0] + h * g.out[1];
  const float scale2 = g.scale * kLog2e;
  for (int pass = 0; pass < mmaPasses<1, Warps>(); ++pass) {
    const MmaPass rows = mmaPass<1, Warps>(first, pass, g.queries);
    if (rows.begin >= g.queries)
      break;
    const int64_t row0 = rows.warpRow;
    unsigned qa[D / 16][4], da[DV / 16][4];
    mmaLoadRows<D>(qa, qBase, g.q[2], row0, g.queries);
    mmaLoadRows<DV>(da, dOBase, g.out[2], row0, g.queries);
    // dot(dO, O) of the warp's rows, each lane its C-fragment columns, and
    // their logsumexp in base-2 units.
    float rowDot[2], rowLse2[2];
    GPUC_UNROLL
    for (int r = 0; r < 2; ++r) {
      int64_t row = row0 + mmaRow(2 * r);
      float partial = 0.0f;
      if (row < g.queries)
        GPUC_UNROLL
      for (int n = 0; n < DV / 8; ++n) {
        GPUC_UNROLL
        for (int c = 0; c < 2; ++c) {
          int64_t at = row * g.out[2] + n * 8 + 2 * t + c;
          partial += (float)dOBase[at] * (float)oBase[at];
        }
      }
      rowDot[r] = quadSum(partial);
      rowLse2[r] = row < g.queries ? lse[bh * g.queries + row] * kLog2e : 0.0f;
      if (t == 0 && row < g.queries)
        rowDots[bh * g.queries + row] = rowDot[r];
    }
    if constexpr (DotsOnly)
      continue;
    float grad[D / 8][4] = {};
    // Excluded scores have no gradient, whatever the fill.
    auto skipped = [&](int64_t j, int64_t end) {
      return attentionTileExcluded(g, rows.begin, rows.end, j, end);
    };
    auto stage = [&](int64_t j, int buffer) {
      mmaStagePair<D, DV, Warps * 32>(mmaBuffer<D, DV>(tiles, buffer), kBase,
                                      g.k[2], vBase, g.v[2], j, g.keys);
    };
    auto compute = [&](int64_t j, int buffer) {
      mmaTileBody(
          attentionTileKept(g, row0, row0 + kMmaRows, j, j + KT),
          [&](auto kept) {
            constexpr bool kKept = decltype(kept)::value;
            const unsigned short *kTile = mmaBuffer<D, DV>(tiles, buffer);
            const unsigned short *vTile = kTile + mmaTileElements<KT, D>();
            // An excluded score does not depend on the query: no gradient.
            unsigned dead = 0;
            if (!kKept) {
              dead = mmaGradientlessScores<N>(g, b, h, row0, j);
              if (warpAll(dead == mmaAllFlags<N>()))
                return;
            }
            float s[N][4] = {}, dp[N][4] = {};
            mmaProduct<T, D / 16, N, false>(s, qa, kTile, D + 8);
            mmaProduct<T, DV / 16, N, false>(dp, da, vTile, DV + 8);
            GPUC_UNROLL
            for (int n = 0; n < N; ++n) {
              GPUC_UNROLL
              for (int i = 0; i < 4; ++i) {
                int r = i >> 1;
                if (!kKept && (dead & (1u << (n * 4 + i)))) {
                  s[n][i] = 0.0f;
                  continue;
                }
                float p = attentionExp2(fmaf(scale2, s[n][i], -rowLse2[r]));
                float keep = g.dropout > 0.0f
                                 ? attentionKeep(g, bh, row0 + mmaRow(i),
                                                 j + n * 8 + mmaColumn(i))
                                 : 1.0f;
                s[n][i] = p * (dp[n][i] * keep - rowDot[r]);
              }
            }
            unsigned dsa[N / 2][4];
            mmaScoresAsA<T, N>(dsa, s);
            mmaProduct<T, N / 2, D / 8, true>(grad, dsa, kTile, D + 8);
          });
    };
    mmaStagedTiles<KT>(g.keys, skipped, stage, compute);
    mmaStoreRows<D>(dq + b * g.dq[0] + h * g.dq[1], g.dq[2], grad, row0,
                    g.queries, g.scale);
  }
}

/// The keys' launch of the backward: the keys' and values' gradients,
/// and, given `scoreGrads` (for an even number of queries), every score
/// gradient it computes, rounded to T
/// as its products take them, for the queries' gradients
/// (attentionQueryGradsFromStoredMma): at scoreGrads[(bh * keys + key) *
/// queries + query], a key's row of queries, so that a lane stores the two
/// adjacent queries its fragment holds in one word.
template <int D, int DV, int Warps = kMmaWarps, typename T>
__device__ void attentionBackwardKeysMma(const T *q, const T *k, const T *v,
                                         const float *lse, const T *dOut,
                                         const AttentionGeometry &g,
                                         const float *rowDots, T *dk, T *dv,
                                         unsigned short *scoreGrads = nullptr) {
  constexpr int QT = attentionMmaTile<D, DV>(), N = QT / 8;
  // The query tile is the transposed scores' B (k = width) and, read
  // transposed, dK's (k = queries); the dO tile is dP's (k = value width)
  // and, read transposed, dV's (k = queries).
  unsigned short *tiles = attentionMmaShared<D, DV>();
  // The tile's queries' logsumexp and dot(dO, O), a pair per buffer.
  alignas(16) __shared__ float rowTiles[2][2][QT];
  int64_t b, keyHead, keyBh, first;
  if (!attentionBlock(g, g.keys, true, b, keyHead, keyBh, first, true))
    return;
  const T *kBase = k + b * g.k[0] + keyHead * g.k[1];
  const T *vBase = v + b * g.v[0] + keyHead * g.v[1];
  // The query head whose rows the tiles run over (each of the key head's
  // group in turn: the key rows' gradients sum over them).
  int64_t h = 0, bh = 0;
  const T *qBase = nullptr, *dOBase = nullptr;
  // Scores and the fill in base-2 units.
  const float scale2 = g.scale * kLog2e, fill2 = attentionLog2Units(g.fill);
  for (int pass = 0; pass < mmaPasses<1, Warps>(); ++pass) {
    const MmaPass keys = mmaPass<1, Warps>(first, pass, g.keys);
    if (keys.begin >= g.keys)
      break;
    const int64_t key0 = keys.warpRow;
    unsigned ka[D / 16][4], va[DV / 16][4];
    mmaLoadRows<D>(ka, kBase, g.k[2], key0, g.keys);
    mmaLoadRows<DV>(va, vBase, g.v[2], key0, g.keys);
    float gk[D / 8][4] = {}, gv[DV / 8][4] = {};
    auto skipped = [&](int64_t i0, int64_t end) {
      return g.fill == -INFINITY &&
             attentionTileExcluded(g, i0, end, keys.begin, keys.end);
    };
    auto stage = [&](int64_t i0, int buffer) {
      mmaStagePair<D, DV, Warps * 32>(mmaBuffer<D, DV>(tiles, buffer), qBase,
                                      g.q[2], dOBase, g.out[2], i0, g.queries);
      const int64_t rowsAt = bh * g.queries + i0;
      static_assert(QT <= Warps * 32, "a thread per query of a tile");
      if (const int e = threadIdx.x; e < QT) {
        // A query past the last reads nothing: the tile's first stands in.
        bool valid = i0 + e < g.queries;
        copyAsync<4>(&rowTiles[buffer][0][e], lse + rowsAt + (valid ? e : 0),
                     valid);
        copyAsync<4>(&rowTiles[buffer][1][e],
                     rowDots + rowsAt + (valid ? e : 0), valid);
      }
    };
    auto compute = [&](auto keptTile, int64_t i0, int buffer) {
      constexpr bool kKept = decltype(keptTile)::value;
      const unsigned short *qTile = mmaBuffer<D, DV>(tiles, buffer);
      const unsigned short *dOTile = qTile + mmaTileElements<QT, D>();
      const float *lseTile = rowTiles[buffer][0],
                  *dotTile = rowTiles[buffer][1];
      // Rows are keys, columns queries. An excluded pair still weighs
      // exp(fill - lse) into dV unless the fill is -inf; it never has a
      // score gradient.
      unsigned absent = 0, excluded = 0, weightless = 0;
      if (!kKept) {
        mmaScoreFlags<N>(g, b, h, key0, i0, true, absent, excluded);
        weightless = absent | (g.fill == -INFINITY ? excluded : 0u);
        if (warpAll(weightless == mmaAllFlags<N>()))
          return;
      }
      float s[N][4] = {}, dp[N][4] = {};
      mmaProduct<T, D / 16, N, false>(s, ka, qTile, D + 8);
      mmaProduct<T, DV / 16, N, false>(dp, va, dOTile, DV + 8);
      // Each lane's scores: n-tile n's columns n * 8 + 2t + c, rows g + 8r
      // (fragment element 2r + c). A column's logsumexp and dot(dO, O) are
      // read once for both rows; the weights and the scores' gradients are
      // rounded into the next products' A fragments as they come (as
      // mmaScoresAsA lays them out), so that their f32 values do not all
      // live at once.
      unsigned wa[N / 2][4], dsa[N / 2][4];
      GPUC_UNROLL
      for (int n = 0; n < N; ++n) {
        float lse2[2], dot[2];
        GPUC_UNROLL
        for (int c = 0; c < 2; ++c) {
          int column = n * 8 + mmaColumn(c);
          lse2[c] = lseTile[column] * kLog2e;
          dot[c] = dotTile[column];
        }
        GPUC_UNROLL
        for (int r = 0; r < 2; ++r) {
          float w[2], ds[2];
          GPUC_UNROLL
          for (int c = 0; c < 2; ++c) {
            int i = 2 * r + c;
            unsigned bit = 1u << (n * 4 + i);
            bool isWeightless = !kKept && (weightless & bit);
            bool isExcluded = !kKept && (excluded & bit);
            float p = attentionExp2(
                isExcluded ? fill2 - lse2[c] : fmaf(scale2, s[n][i], -lse2[c]));
            float keep = g.dropout > 0.0f
                             ? attentionKeep(g, bh, i0 + n * 8 + mmaColumn(c),
                                             key0 + mmaRow(i))
                             : 1.0f;
            w[c] = isWeightless ? 0.0f : p * keep;
            ds[c] = isWeightless || isExcluded ? 0.0f
                                               : p * (dp[n][i] * keep - dot[c]);
          }
          wa[n / 2][(n & 1) * 2 + r] = mmaPack<T>(w[0], w[1]);
          dsa[n / 2][(n & 1) * 2 + r] = mmaPack<T>(ds[0], ds[1]);
          // The lane's two adjacent queries, both present or both absent
          // (the queries are even in number), in one word.
          if (scoreGrads && (kKept || !(absent & 1u << (n * 4 + 2 * r))))
            *(unsigned *)(scoreGrads +
                          (bh * g.keys + key0 + mmaRow(2 * r)) * g.queries +
                          i0 + n * 8 + mmaColumn(0)) =
                dsa[n / 2][(n & 1) * 2 + r];
        }
      }
      mmaProduct<T, N / 2, DV / 8, true>(gv, wa, dOTile, DV + 8);
      mmaProduct<T, N / 2, D / 8, true>(gk, dsa, qTile, D + 8);
    };
    // The pass's tiles in two runs: first those that every warp's rows
    // keep whole (a causal mask's tiles but its diagonal band), whose body
    // has no flags and no selects on them, then the others, with flags.
    // Two loops, not a body compiled twice inside one, which spilled
    // registers.
    // (Over the keys of the pass of a block of 8 warps, so that a block
    // of 4 runs each warp's tiles in the same order, with the same
    // arithmetic: the same bits.)
    const int64_t keptBegin =
        first + (keys.begin - first) / kMmaPassRows * kMmaPassRows;
    auto passKept = [&](int64_t i0) {
      return attentionTileKept(g, i0, i0 + QT, keptBegin,
                               keptBegin + kMmaPassRows);
    };
    for (int member = 0; member < g.groups; ++member) {
      h = keyHead * g.groups + member;
      bh = b * g.heads + h;
      qBase = q + b * g.q[0] + h * g.q[1];
      dOBase = dOut + b * g.out[0] + h * g.out[1];
      mmaStagedTiles<QT>(
          g.queries,
          [&](int64_t i0, int64_t end) {
            return skipped(i0, end) || !passKept(i0);
          },
          stage,
          [&](int64_t i0, int buffer) {
            compute(MmaTileKept<true>(), i0, buffer);
          });
      mmaStagedTiles<QT>(
          g.queries,
          [&](int64_t i0, int64_t end) {
            return skipped(i0, end) || passKept(i0);
          },
          stage,
          [&](int64_t i0, int buffer) {
            compute(MmaTileKept<false>(), i0, buffer);
          });
    }
    mmaStoreRows<D>(dk + b * g.dk[0] + keyHead * g.dk[1], g.dk[2], gk, key0,
                    g.keys, g.scale);
    mmaStoreRows<DV>(dv + b * g.dv[0] + keyHead * g.dv[1], g.dv[2], gv, key0,
                     g.keys, 1.0f);
  }
}

/// The stored scores' gradients a block of the queries' gradient launch
/// stages (attentionQueryGradsFromStoredMma): per buffer, a tile of a key
/// tile's rows of a pass's queries (kMmaPassRows, 8 apart), two buffers,
/// in the launch's dynamic shared memory. gpuc compile asks for these
/// bytes at launch (the kernel's text asserts that they agree).
template <int D, int DV> constexpr int attentionStoredScoreTileElements() {
  return mmaTileElements<attentionMmaTile<D, DV>(), kMmaPassRows>();
}
template <int D, int DV> constexpr int attentionStoredScoreSharedBytes() {
  return 2 * attentionStoredScoreTileElements<D, DV>() * 2;
}

/// The queries' gradients from the scores' gradients the keys' launch
/// stored (attentionBackwardKeysMma's `scoreGrads`): dQ = dS K, one
/// product a tile where the queries' launch computed the scores and their
/// gradients again (three). A block stages each key tile and its rows of
/// the stored gradients (past the keys or the queries: whatever the
/// buffer holds there, zeroed by the scores' flags before the product, as
/// are the excluded scores, which the keys' launch may not have stored).
template <int D, int DV, typename T>
__device__ void
attentionQueryGradsFromStoredMma(const T *k, const AttentionGeometry &g,
                                 const unsigned short *scoreGrads, T *dq) {
  constexpr int KT = attentionMmaTile<D, DV>(), N = KT / 8;
  constexpr int Pitch = kMmaPassRows + 8;
  unsigned short *tiles = attentionMmaShared<D, DV>();
  unsigned short *scoreTiles = stagedRow<unsigned short>(0);
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const int lane = threadIdx.x & 31;
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const unsigned short *scoreBase = scoreGrads + bh * g.keys * g.queries;
  for (int pass = 0; pass < kMmaPasses; ++pass) {
    const MmaPass rows = mmaPass(first, pass, g.queries);
    if (rows.begin >= g.queries)
      break;
    const int64_t row0 = rows.warpRow;
    float grad[D / 8][4] = {};
    auto skipped = [&](int64_t j, int64_t end) {
      return attentionTileExcluded(g, rows.begin, rows.end, j, end);
    };
    auto stage = [&](int64_t j, int buffer) {
      int count = g.keys - j < KT ? (int)(g.keys - j) : KT;
      mmaStageRows<KT, D>(mmaBuffer<D, DV>(tiles, buffer), kBase + j * g.k[2],
                          g.k[2], count);
      mmaStageRows<KT, kMmaPassRows>(
          scoreTiles + buffer * attentionStoredScoreTileElements<D, DV>(),
          scoreBase + j * g.queries + rows.begin, g.queries, count);
    };
    auto compute = [&](int64_t j, int buffer) {
      const bool kept = attentionTileKept(g, row0, row0 + kMmaRows, j, j + KT);
      unsigned dead = 0;
      if (!kept) {
        dead = mmaGradientlessScores<N>(g, b, h, row0, j);
        if (warpAll(dead == mmaAllFlags<N>()))
          return;
      }
      const unsigned short *kTile = mmaBuffer<D, DV>(tiles, buffer);
      const unsigned short *scoreTile =
          scoreTiles + buffer * attentionStoredScoreTileElements<D, DV>() +
          (row0 - rows.begin);
      // The A fragments of the warp's 16 queries by 16 keys, from a tile
      // whose rows are keys: transposed. Matrix l / 8 of lane l: queries
      // 0..7 or 8..15 (bit 0), keys 0..7 or 8..15 (bit 1).
      const int matrix = lane >> 3;
      unsigned dsa[N / 2][4];
      GPUC_UNROLL
      for (int kk = 0; kk < N / 2; ++kk) {
        mmaLoadMatrices<true>(
            dsa[kk], scoreTile +
                         (kk * 16 + (matrix >> 1) * 8 + (lane & 7)) * Pitch +
                         (matrix & 1) * 8);
        if (!kept)
          GPUC_UNROLL
        for (int r = 0; r < 4; ++r) {
          // As mmaScoresAsA lays out the C fragments' elements.
          int bitAt = (2 * kk + (r >> 1)) * 4 + (r & 1) * 2;
          unsigned keep = ((dead >> bitAt) & 1u ? 0u : 0xffffu) |
                          ((dead >> (bitAt + 1)) & 1u ? 0u : 0xffff0000u);
          dsa[kk][r] &= keep;
        }
      }
      mmaProduct<T, N / 2, D / 8, true>(grad, dsa, kTile, D + 8);
    };
    mmaStagedTiles<KT>(g.keys, skipped, stage, compute);
    mmaStoreRows<D>(dq + b * g.dq[0] + h * g.dq[1], g.dq[2], grad, row0,
                    g.queries, g.scale);
  }
}

#endif // GPUC_HAVE_MMA

} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_ATTENTIONTENSORCORES_H

//===- Attention.h - the fused attention kernels --------------------------===//
//
// gpuc.attention and gpuc.attention_grad as fused kernels that never store
// a score or a weight: each query row runs an online softmax over tiles of
// kAttentionKeyTile keys (the row's running maximum and normalizer rescale
// what it has summed so far), so a row needs O(width) state, not O(keys).
// Backward recomputes the weights from the scores and the forward's
// logsumexp, in two launches that own what they write: phase 0 a query row
// each (dQ, and the row's dot(dO, O) into the workspace), phase 1 a key row
// each (dK, dV). No atomics: each gradient sums in a fixed order, and a
// replay gives the same bits.
//
// A block owns kAttentionRows rows of one (batch, head). On the GPU each
// thread owns one row and the block stages the tile it streams (keys and
// values, or queries and their gradients) in shared memory; on the CPU the
// block's one thread takes its rows in turn and reads the tiles where they
// are. The arithmetic of a row is the same code on both. Excluded scores
// skip their dot products, so a causal mask halves the work. Included by
// Kernel.h.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_ATTENTION_H
#define GPUC_RUNTIME_DEVICE_ATTENTION_H

namespace gpuc {

inline constexpr int kAttentionRows = kBlockThreads;
inline constexpr int kAttentionKeyTile = 32;

/// An attention's shape, layout and score rules, filled by the kernel.
struct AttentionGeometry {
  int32_t heads, queries, keys;
  /// Query heads per key and value head (grouped-query attention; 1: as
  /// many key heads as query heads). Query head h reads key head h /
  /// groups.
  int32_t groups;
  /// Element (b, h, t, d) of an operand is at b * [0] + h * [1] + t * [2]
  /// + d; the result and its gradient share out's. The operands' gradients
  /// have strides of their own (dq, dk, dv): an operand may be read as a
  /// window of wider rows (a fused projection's), its gradient stored
  /// whole.
  int64_t q[3], k[3], v[3], out[3], dq[3], dk[3], dv[3];
  float scale;
  /// The score of an excluded pair (-inf: no weight).
  float fill;
  /// i1 [B, H, Tq, Tk] read with these strides (0 where it broadcasts), or
  /// null; true excludes unless maskKeeps. With a triangle (below), a score
  /// is excluded where either excludes it (a padding mask).
  const bool *mask;
  int64_t maskStrides[4];
  bool maskKeeps;
  /// Where the mask is `key P query` (the op's mask_triangle): 1 + P's
  /// ComparePredicate value (lt 2, le 3, gt 4, ge 5), compared from the
  /// indices instead of read; 0: none.
  int triangle;
  /// Dropout of the weights, as gpuc.dropout of [B, H, Tq, Tk] (ratio 0:
  /// none); keepScale is 1 / (1 - ratio).
  float dropout, keepScale;
  unsigned long long seed, step, stream;
  /// The weights' elements, B * H * Tq * Tk (dropout's index space).
  unsigned long long weights;
};

/// Whether a triangular mask (g.triangle != 0) excludes a pair whose key
/// index minus its query index is `delta`. Each `key P query` is `delta <
/// 0` or `delta < 1`, or the negation of one, so the test is one
/// comparison whatever the predicate (the fused attention on tensor cores
/// makes it per score, on 32-bit differences).
template <typename Int>
__device__ __forceinline__ bool
attentionTriangleExcludes(const AttentionGeometry &g, Int delta) {
  // lt (3): delta < 0; le (4): delta < 1; gt (5): !(delta < 1); ge: !(delta
  // < 0).
  bool below = delta < (Int)(g.triangle == 4 || g.triangle == 5 ? 1 : 0);
  bool set = g.triangle == 3 || g.triangle == 4 ? below : !below;
  return set != g.maskKeeps;
}

__device__ __forceinline__ bool attentionExcluded(const AttentionGeometry &g,
                                                  int64_t b, int64_t h,
                                                  int64_t i, int64_t j) {
  if (g.triangle && attentionTriangleExcludes(g, j - i))
    return true;
  if (!g.mask)
    return false;
  bool set = g.mask[b * g.maskStrides[0] + h * g.maskStrides[1] +
                    i * g.maskStrides[2] + j * g.maskStrides[3]];
  return set != g.maskKeeps;
}

/// How many corners of query rows [i0, i1) by keys [j0, j1) a triangular
/// mask excludes. Its excluded pairs and its kept ones are half-planes, so
/// the corners decide the whole tile: 4, all excluded; 0, all kept (by the
/// triangle: a mask read beside it may exclude more).
__device__ __forceinline__ int
attentionExcludedCorners(const AttentionGeometry &g, int64_t i0, int64_t i1,
                         int64_t j0, int64_t j1) {
  return (int)attentionTriangleExcludes(g, j0 - i0) +
         (int)attentionTriangleExcludes(g, j1 - 1 - i0) +
         (int)attentionTriangleExcludes(g, j0 - (i1 - 1)) +
         (int)attentionTriangleExcludes(g, j1 - 1 - (i1 - 1));
}

/// Whether a triangular mask excludes every pair of query rows [i0, i1)
/// and keys [j0, j1). False for a mask that is read (it is not known).
__device__ __forceinline__ bool
attentionTileExcluded(const AttentionGeometry &g, int64_t i0, int64_t i1,
                      int64_t j0, int64_t j1) {
  if (!g.triangle || i1 <= i0 || j1 <= j0)
    return false;
  return attentionExcludedCorners(g, i0, i1, j0, j1) == 4;
}

/// Whether every pair of query rows [i0, i1) and keys [j0, j1) exists and
/// is kept: no mask, or a triangular one that excludes none of it. False
/// for a mask that is read.
__device__ __forceinline__ bool attentionTileKept(const AttentionGeometry &g,
                                                  int64_t i0, int64_t i1,
                                                  int64_t j0, int64_t j1) {
  if (i1 <= i0 || j1 <= j0 || i1 > g.queries || j1 > g.keys)
    return false;
  if (g.mask)
    return false;
  return !g.triangle || attentionExcludedCorners(g, i0, i1, j0, j1) == 0;
}

/// Weight (bh, i, j)'s dropout factor: 0, or 1 / (1 - ratio).
__device__ __forceinline__ float
attentionKeep(const AttentionGeometry &g, int64_t bh, int64_t i, int64_t j) {
  if (g.dropout <= 0.0f)
    return 1.0f;
  unsigned long long index =
      ((unsigned long long)bh * (unsigned long long)g.queries +
       (unsigned long long)i) *
          (unsigned long long)g.keys +
      (unsigned long long)j;
  return dropoutKeeps(g.seed, g.step, g.stream, index, g.weights, g.dropout)
             ? g.keepScale
             : 0.0f;
}

/// One query row against keys [first, first + count): their scores, then
/// the running maximum, normalizer and weighted sum of values rescaled and
/// extended. `kRows`/`vRows` hold those keys' rows (`stride` apart).
template <int D, int DV, typename K>
__device__ __forceinline__ void
attentionRowTile(const AttentionGeometry &g, int64_t b, int64_t h, int64_t bh,
                 int64_t i, const float *qRow, const K *kRows, int64_t kStride,
                 const K *vRows, int64_t vStride, int64_t first, int count,
                 float &max, float &sum, float *acc) {
  float s[kAttentionKeyTile];
  float tileMax = -INFINITY;
  for (int t = 0; t < count; ++t) {
    float x = g.fill;
    if (!attentionExcluded(g, b, h, i, first + t)) {
      float dot = 0.0f;
      for (int d = 0; d < D; ++d)
        dot += qRow[d] * (float)kRows[t * kStride + d];
      x = g.scale * dot;
    }
    s[t] = x;
    tileMax = x > tileMax ? x : tileMax;
  }
  float newMax = tileMax > max ? tileMax : max;
  if (newMax == -INFINITY)
    return;
  float correction = expf(max - newMax);
  sum *= correction;
  for (int d = 0; d < DV; ++d)
    acc[d] *= correction;
  for (int t = 0; t < count; ++t) {
    float p = expf(s[t] - newMax);
    sum += p;
    float w = p * attentionKeep(g, bh, i, first + t);
    if (w != 0.0f)
      for (int d = 0; d < DV; ++d)
        acc[d] += w * (float)vRows[t * vStride + d];
  }
  max = newMax;
}

/// Query row i's gradient contributions from keys [first, first + count):
/// dq += ds k for each, ds = p (keep dot(dO, v) - rowDot).
template <int D, int DV, typename K>
__device__ __forceinline__ void
attentionQueryGradTile(const AttentionGeometry &g, int64_t b, int64_t h,
                       int64_t bh, int64_t i, const float *qRow,
                       const float *dORow, float lse, float rowDot,
                       const K *kRows, int64_t kStride, const K *vRows,
                       int64_t vStride, int64_t first, int count, float *dq) {
  for (int t = 0; t < count; ++t) {
    if (attentionExcluded(g, b, h, i, first + t))
      continue;
    float dot = 0.0f, dWeight = 0.0f;
    for (int d = 0; d < D; ++d)
      dot += qRow[d] * (float)kRows[t * kStride + d];
    for (int d = 0; d < DV; ++d)
      dWeight += dORow[d] * (float)vRows[t * vStride + d];
    float p = expf(g.scale * dot - lse);
    float ds = p * (dWeight * attentionKeep(g, bh, i, first + t) - rowDot);
    for (int d = 0; d < D; ++d)
      dq[d] += ds * (float)kRows[t * kStride + d];
  }
}

/// Key row j's gradient contributions from queries [first, first + count):
/// dv += keep p dO and dk += ds q for each.
template <int D, int DV, typename Q>
__device__ __forceinline__ void attentionKeyGradTile(
    const AttentionGeometry &g, int64_t b, int64_t h, int64_t bh, int64_t j,
    const float *kRow, const float *vRow, const Q *qRows, int64_t qStride,
    const Q *dORows, int64_t dOStride, const float *lse, const float *rowDot,
    int64_t first, int count, float *dk, float *dv) {
  for (int t = 0; t < count; ++t) {
    int64_t i = first + t;
    bool excluded = attentionExcluded(g, b, h, i, j);
    if (excluded && g.fill == -INFINITY)
      continue;
    float score = g.fill;
    if (!excluded) {
      float dot = 0.0f;
      for (int d = 0; d < D; ++d)
        dot += (float)qRows[t * qStride + d] * kRow[d];
      score = g.scale * dot;
    }
    float p = expf(score - lse[t]);
    float keep = attentionKeep(g, bh, i, j);
    float w = p * keep;
    float dWeight = 0.0f;
    for (int d = 0; d < DV; ++d) {
      float dO = (float)dORows[t * dOStride + d];
      dv[d] += w * dO;
      dWeight += dO * vRow[d];
    }
    if (excluded)
      continue;
    float ds = p * (dWeight * keep - rowDot[t]);
    for (int d = 0; d < D; ++d)
      dk[d] += ds * (float)qRows[t * qStride + d];
  }
}

/// The block's (batch, head) and first row, for rows of `rows` (the keys
/// when `rowsAreKeys`, else the queries); false for a block past them (a
/// launch sized for the longer of queries and keys). With `keyHeads` the
/// head is a key head (grouped-query attention's keys' launch, whose block
/// sums its key rows' gradients over the query heads of the group): the
/// launch, sized for the query heads, then has blocks to spare.
///
/// Under a triangular mask row blocks differ in work: a causal attention's
/// last query rows weigh every key, its first a tile of them, and the
/// reverse for key rows. On the GPU the row blocks then go heaviest first,
/// every (batch, head)'s at once, so the last blocks to start are the
/// shortest: a tensor-core kernel's block fills an SM, and GPT-2's causal
/// forward (768 blocks of 1, 3, 5 and 7 units on 132 SMs) finishes in 24
/// units that way, in 28 with each head's blocks in row order (23.3 is
/// the work over the SMs). Blocks of equal work keep the row order, which
/// keeps a head's keys in L2 while its blocks run. The CPU's blocks keep
/// the row order.
__device__ __forceinline__ bool attentionBlock(const AttentionGeometry &g,
                                               int64_t rows, bool rowsAreKeys,
                                               int64_t &b, int64_t &h,
                                               int64_t &bh, int64_t &first,
                                               bool keyHeads = false) {
  int64_t longer = g.queries > g.keys ? g.queries : g.keys;
  int64_t blocksPerHead = (longer + kAttentionRows - 1) / kAttentionRows;
  int64_t rowBlock = blockIdx.x % blocksPerHead;
  bh = blockIdx.x / blocksPerHead;
  int64_t batchHeads = gridDim.x / blocksPerHead;
#ifndef GPUC_CPU
  if (g.triangle) {
    // Whether a query excludes the keys after it (a causal mask): its
    // later query rows, and earlier key rows, weigh more.
    bool laterQueriesHeavier = attentionExcluded(g, 0, 0, 0, 1);
    rowBlock = blockIdx.x / batchHeads;
    bh = blockIdx.x % batchHeads;
    if (laterQueriesHeavier != rowsAreKeys)
      rowBlock = blocksPerHead - 1 - rowBlock;
  }
#endif
  int64_t heads = keyHeads ? g.heads / g.groups : g.heads;
  if (keyHeads && bh >= batchHeads / g.groups)
    return false;
  first = rowBlock * kAttentionRows;
  b = bh / heads;
  h = bh % heads;
  return first < rows;
}

/// The launch's blocks: every (batch, head) times the longer side's row
/// blocks.
__host__ __device__ inline int64_t
attentionGrid(int64_t batchHeads, int64_t queries, int64_t keys) {
  int64_t longer = queries > keys ? queries : keys;
  return batchHeads * ((longer + kAttentionRows - 1) / kAttentionRows);
}

#ifdef GPUC_CPU

template <int D, int DV, typename T>
__device__ void attentionForward(const T *q, const T *k, const T *v,
                                 const AttentionGeometry &g, T *out,
                                 float *lse) {
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  for (int64_t i = first; i < first + kAttentionRows && i < g.queries; ++i) {
    float qRow[D], acc[DV];
    const T *qi = q + b * g.q[0] + h * g.q[1] + i * g.q[2];
    for (int d = 0; d < D; ++d)
      qRow[d] = (float)qi[d];
    for (int d = 0; d < DV; ++d)
      acc[d] = 0.0f;
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < g.keys; j += kAttentionKeyTile) {
      int count = g.keys - j < kAttentionKeyTile ? (int)(g.keys - j)
                                                 : kAttentionKeyTile;
      attentionRowTile<D, DV>(g, b, h, bh, i, qRow, kBase + j * g.k[2], g.k[2],
                              vBase + j * g.v[2], g.v[2], j, count, max, sum,
                              acc);
    }
    T *o = out + b * g.out[0] + h * g.out[1] + i * g.out[2];
    for (int d = 0; d < DV; ++d)
      o[d] = acc[d] / sum;
    lse[bh * g.queries + i] = max + logf(sum);
  }
}

template <int D, int DV, typename T>
__device__ void
attentionBackwardQueries(const T *q, const T *k, const T *v, const T *out,
                         const float *lse, const T *dOut,
                         const AttentionGeometry &g, T *dq, float *rowDots) {
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  for (int64_t i = first; i < first + kAttentionRows && i < g.queries; ++i) {
    float qRow[D], dORow[DV], grad[D];
    int64_t oAt = b * g.out[0] + h * g.out[1] + i * g.out[2];
    const T *qi = q + b * g.q[0] + h * g.q[1] + i * g.q[2];
    for (int d = 0; d < D; ++d) {
      qRow[d] = (float)qi[d];
      grad[d] = 0.0f;
    }
    float rowDot = 0.0f;
    for (int d = 0; d < DV; ++d) {
      dORow[d] = (float)dOut[oAt + d];
      rowDot += dORow[d] * (float)out[oAt + d];
    }
    rowDots[bh * g.queries + i] = rowDot;
    float rowLse = lse[bh * g.queries + i];
    for (int64_t j = 0; j < g.keys; j += kAttentionKeyTile) {
      int count = g.keys - j < kAttentionKeyTile ? (int)(g.keys - j)
                                                 : kAttentionKeyTile;
      attentionQueryGradTile<D, DV>(g, b, h, bh, i, qRow, dORow, rowLse, rowDot,
                                    kBase + j * g.k[2], g.k[2],
                                    vBase + j * g.v[2], g.v[2], j, count, grad);
    }
    T *dqi = dq + b * g.dq[0] + h * g.dq[1] + i * g.dq[2];
    for (int d = 0; d < D; ++d)
      dqi[d] = g.scale * grad[d];
  }
}

template <int D, int DV, typename T>
__device__ void attentionBackwardKeys(const T *q, const T *k, const T *v,
                                      const float *lse, const T *dOut,
                                      const AttentionGeometry &g,
                                      const float *rowDots, T *dk, T *dv) {
  int64_t b, keyHead, keyBh, first;
  if (!attentionBlock(g, g.keys, true, b, keyHead, keyBh, first, true))
    return;
  for (int64_t j = first; j < first + kAttentionRows && j < g.keys; ++j) {
    float kRow[D], vRow[DV], gk[D], gv[DV];
    const T *kj = k + b * g.k[0] + keyHead * g.k[1] + j * g.k[2];
    const T *vj = v + b * g.v[0] + keyHead * g.v[1] + j * g.v[2];
    for (int d = 0; d < D; ++d) {
      kRow[d] = (float)kj[d];
      gk[d] = 0.0f;
    }
    for (int d = 0; d < DV; ++d) {
      vRow[d] = (float)vj[d];
      gv[d] = 0.0f;
    }
    // The key row's gradients sum over the query heads that read it.
    for (int member = 0; member < g.groups; ++member) {
      int64_t h = keyHead * g.groups + member, bh = b * g.heads + h;
      const T *qBase = q + b * g.q[0] + h * g.q[1];
      const T *dOBase = dOut + b * g.out[0] + h * g.out[1];
      for (int64_t i = 0; i < g.queries; i += kAttentionKeyTile) {
        int count = g.queries - i < kAttentionKeyTile ? (int)(g.queries - i)
                                                      : kAttentionKeyTile;
        attentionKeyGradTile<D, DV>(
            g, b, h, bh, j, kRow, vRow, qBase + i * g.q[2], g.q[2],
            dOBase + i * g.out[2], g.out[2], lse + bh * g.queries + i,
            rowDots + bh * g.queries + i, i, count, gk, gv);
      }
    }
    T *dkj = dk + b * g.dk[0] + keyHead * g.dk[1] + j * g.dk[2];
    T *dvj = dv + b * g.dv[0] + keyHead * g.dv[1] + j * g.dv[2];
    for (int d = 0; d < D; ++d)
      dkj[d] = g.scale * gk[d];
    for (int d = 0; d < DV; ++d)
      dvj[d] = gv[d];
  }
}

template <int D, int DV, typename T>
__device__ void
attentionBackwardStored(int phase, const T *q, const T *k, const T *v,
                        const T *out, const float *lse, const T *dOut,
                        const AttentionGeometry &g, T *dq, T *dk, T *dv,
                        float *rowDots, unsigned short *) {
  if (phase == 0)
    attentionBackwardQueries<D, DV>(q, k, v, out, lse, dOut, g, dq, rowDots);
  else if (phase == 1)
    attentionBackwardKeys<D, DV>(q, k, v, lse, dOut, g, rowDots, dk, dv);
}

#else

} // namespace gpuc

#include "gpuc/runtime/device/AttentionTensorCores.h"

namespace gpuc {

/// Copies rows [first, first + count) of a [rows, width] operand (rows
/// `stride` apart) into a tile of floats, the block's threads together.
template <int Width, typename T>
__device__ __forceinline__ void attentionStage(float *tile, const T *rows,
                                               int64_t stride, int count) {
  for (int e = threadIdx.x; e < count * Width; e += blockDim.x)
    tile[e] = (float)rows[(e / Width) * stride + e % Width];
}

template <int D, int DV, typename T>
__device__ void attentionForwardRows(const T *q, const T *k, const T *v,
                                     const AttentionGeometry &g, T *out,
                                     float *lse) {
  __shared__ float kTile[kAttentionKeyTile * D];
  __shared__ float vTile[kAttentionKeyTile * DV];
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const int64_t i = first + threadIdx.x;
  const bool active = i < g.queries;
  float qRow[D], acc[DV];
  for (int d = 0; d < D; ++d)
    qRow[d] =
        active ? (float)q[b * g.q[0] + h * g.q[1] + i * g.q[2] + d] : 0.0f;
  for (int d = 0; d < DV; ++d)
    acc[d] = 0.0f;
  float max = -INFINITY, sum = 0.0f;
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  for (int64_t j = 0; j < g.keys; j += kAttentionKeyTile) {
    int count =
        g.keys - j < kAttentionKeyTile ? (int)(g.keys - j) : kAttentionKeyTile;
    __syncthreads();
    attentionStage<D>(kTile, kBase + j * g.k[2], g.k[2], count);
    attentionStage<DV>(vTile, vBase + j * g.v[2], g.v[2], count);
    __syncthreads();
    if (active)
      attentionRowTile<D, DV>(g, b, h, bh, i, qRow, kTile, D, vTile, DV, j,
                              count, max, sum, acc);
  }
  if (!active)
    return;
  T *o = out + b * g.out[0] + h * g.out[1] + i * g.out[2];
  for (int d = 0; d < DV; ++d)
    o[d] = acc[d] / sum;
  lse[bh * g.queries + i] = max + logf(sum);
}

template <int D, int DV, typename T>
__device__ void attentionBackwardQueriesRows(const T *q, const T *k, const T *v,
                                             const T *out, const float *lse,
                                             const T *dOut,
                                             const AttentionGeometry &g, T *dq,
                                             float *rowDots) {
  __shared__ float kTile[kAttentionKeyTile * D];
  __shared__ float vTile[kAttentionKeyTile * DV];
  int64_t b, h, bh, first;
  if (!attentionBlock(g, g.queries, false, b, h, bh, first))
    return;
  const int64_t i = first + threadIdx.x;
  const bool active = i < g.queries;
  float qRow[D], dORow[DV], grad[D];
  int64_t oAt = b * g.out[0] + h * g.out[1] + i * g.out[2];
  float rowDot = 0.0f, rowLse = 0.0f;
  for (int d = 0; d < D; ++d) {
    qRow[d] =
        active ? (float)q[b * g.q[0] + h * g.q[1] + i * g.q[2] + d] : 0.0f;
    grad[d] = 0.0f;
  }
  for (int d = 0; d < DV; ++d) {
    dORow[d] = active ? (float)dOut[oAt + d] : 0.0f;
    rowDot += active ? dORow[d] * (float)out[oAt + d] : 0.0f;
  }
  if (active) {
    rowDots[bh * g.queries + i] = rowDot;
    rowLse = lse[bh * g.queries + i];
  }
  const T *kBase = k + b * g.k[0] + h / g.groups * g.k[1];
  const T *vBase = v + b * g.v[0] + h / g.groups * g.v[1];
  for (int64_t j = 0; j < g.keys; j += kAttentionKeyTile) {
    int count =
        g.keys - j < kAttentionKeyTile ? (int)(g.keys - j) : kAttentionKeyTile;
    __syncthreads();
    attentionStage<D>(kTile, kBase + j * g.k[2], g.k[2], count);
    attentionStage<DV>(vTile, vBase + j * g.v[2], g.v[2], count);
    __syncthreads();
    if (active)
      attentionQueryGradTile<D, DV>(g, b, h, bh, i, qRow, dORow, rowLse, rowDot,
                                    kTile, D, vTile, DV, j, count, grad);
  }
  if (!active)
    return;
  T *dqi = dq + b * g.dq[0] + h * g.dq[1] + i * g.dq[2];
  for (int d = 0; d < D; ++d)
    dqi[d] = g.scale * grad[d];
}

template <int D, int DV, typename T>
__device__ void attentionBackwardKeysRows(const T *q, const T *k, const T *v,
                                          const float *lse, const T *dOut,
                                          const AttentionGeometry &g,
                                          const float *rowDots, T *dk, T *dv) {
  __shared__ float qTile[kAttentionKeyTile * D];
  __shared__ float dOTile[kAttentionKeyTile * DV];
  __shared__ float lseTile[kAttentionKeyTile];
  __shared__ float dotTile[kAttentionKeyTile];
  int64_t b, keyHead, keyBh, first;
  if (!attentionBlock(g, g.keys, true, b, keyHead, keyBh, first, true))
    return;
  const int64_t j = first + threadIdx.x;
  const bool active = j < g.keys;
  float kRow[D], vRow[DV], gk[D], gv[DV];
  for (int d = 0; d < D; ++d) {
    kRow[d] = active ? (float)k[b * g.k[0] + keyHead * g.k[1] + j * g.k[2] + d]
                     : 0.0f;
    gk[d] = 0.0f;
  }
  for (int d = 0; d < DV; ++d) {
    vRow[d] = active ? (float)v[b * g.v[0] + keyHead * g.v[1] + j * g.v[2] + d]
                     : 0.0f;
    gv[d] = 0.0f;
  }
  // The key rows' gradients sum over the query heads that read them.
  for (int member = 0; member < g.groups; ++member) {
    const int64_t h = keyHead * g.groups + member, bh = b * g.heads + h;
    const T *qBase = q + b * g.q[0] + h * g.q[1];
    const T *dOBase = dOut + b * g.out[0] + h * g.out[1];
    for (int64_t i = 0; i < g.queries; i += kAttentionKeyTile) {
      int count = g.queries - i < kAttentionKeyTile ? (int)(g.queries - i)
                                                    : kAttentionKeyTile;
      __syncthreads();
      attentionStage<D>(qTile, qBase + i * g.q[2], g.q[2], count);
      attentionStage<DV>(dOTile, dOBase + i * g.out[2], g.out[2], count);
      for (int t = threadIdx.x; t < count; t += blockDim.x) {
        lseTile[t] = lse[bh * g.queries + i + t];
        dotTile[t] = rowDots[bh * g.queries + i + t];
      }
      __syncthreads();
      if (active)
        attentionKeyGradTile<D, DV>(g, b, h, bh, j, kRow, vRow, qTile, D,
                                    dOTile, DV, lseTile, dotTile, i, count, gk,
                                    gv);
    }
  }
  if (!active)
    return;
  T *dkj = dk + b * g.dk[0] + keyHead * g.dk[1] + j * g.dk[2];
  T *dvj = dv + b * g.dv[0] + keyHead * g.dv[1] + j * g.dv[2];
  for (int d = 0; d < D; ++d)
    dkj[d] = g.scale * gk[d];
  for (int d = 0; d < DV; ++d)
    dvj[d] = gv[d];
}

/// Tensor cores where the operands allow them (AttentionTensorCores.h),
/// each warp `Tiles` m-tiles of 16 rows, a block `Warps` warps (8, or 4
/// for a launch of 128 threads a block), else a thread per row in f32 (a
/// block of 256 threads).
template <int D, int DV, int Tiles = 1, int Warps = 8, typename T>
__device__ void attentionForward(const T *q, const T *k, const T *v,
                                 const AttentionGeometry &g, T *out,
                                 float *lse) {
  static_assert(Tiles == 1 || Tiles == 2, "a warp owns 16 or 32 rows");
  static_assert(Warps == 8 || Warps == 4, "a block of 8 or 4 warps");
#ifdef GPUC_HAVE_MMA
  if constexpr (attentionOnTensorCores<D, DV, T>()) {
    attentionForwardMma<D, DV, Tiles, Warps>(q, k, v, g, out, lse);
    return;
  } else
#endif
  {
    static_assert(Warps == 8 || attentionOnTensorCores<D, DV, T>(),
                  "a thread per row takes a block of 256");
    attentionForwardRows<D, DV>(q, k, v, g, out, lse);
  }
}

/// The backward's two launches, as the forward: on tensor cores in blocks
/// of `Warps` 8 or 4 (the same bits), else a thread per row (a block of
/// 256).
template <int D, int DV, int Warps = 8, typename T>
__device__ void
attentionBackwardQueries(const T *q, const T *k, const T *v, const T *out,
                         const float *lse, const T *dOut,
                         const AttentionGeometry &g, T *dq, float *rowDots) {
  static_assert(Warps == 8 || Warps == 4, "a block of 8 or 4 warps");
#ifdef GPUC_HAVE_MMA
  if constexpr (attentionOnTensorCores<D, DV, T>()) {
    attentionBackwardQueriesMma<D, DV, false, Warps>(q, k, v, out, lse, dOut, g,
                                                     dq, rowDots);
    return;
  } else
#endif
  {
    static_assert(Warps == 8 || attentionOnTensorCores<D, DV, T>(),
                  "a thread per row takes a block of 256");
    attentionBackwardQueriesRows<D, DV>(q, k, v, out, lse, dOut, g, dq,
                                        rowDots);
  }
}

template <int D, int DV, int Warps = 8, typename T>
__device__ void attentionBackwardKeys(const T *q, const T *k, const T *v,
                                      const float *lse, const T *dOut,
                                      const AttentionGeometry &g,
                                      const float *rowDots, T *dk, T *dv) {
  static_assert(Warps == 8 || Warps == 4, "a block of 8 or 4 warps");
#ifdef GPUC_HAVE_MMA
  if constexpr (attentionOnTensorCores<D, DV, T>()) {
    attentionBackwardKeysMma<D, DV, Warps>(q, k, v, lse, dOut, g, rowDots, dk,
                                           dv);
    return;
  } else
#endif
  {
    static_assert(Warps == 8 || attentionOnTensorCores<D, DV, T>(),
                  "a thread per row takes a block of 256");
    attentionBackwardKeysRows<D, DV>(q, k, v, lse, dOut, g, rowDots, dk, dv);
  }
}

/// The backward in three launches (gpuc compile --attention-score-gradients
/// stored, for an even number of queries): on tensor cores, launch 0 writes
/// each query row's dot(dO, O),
/// launch 1 the keys' and values' gradients and every score gradient into
/// `scoreGrads` (the bits of T), launch 2 the queries' gradients from
/// those, one product a tile where the queries' launch of two computed the
/// scores and their gradients again. Elsewhere (a thread per row in f32)
/// launch 0 is the queries' launch of two and launch 2 does nothing.
template <int D, int DV, typename T>
__device__ void
attentionBackwardStored(int phase, const T *q, const T *k, const T *v,
                        const T *out, const float *lse, const T *dOut,
                        const AttentionGeometry &g, T *dq, T *dk, T *dv,
                        float *rowDots, unsigned short *scoreGrads) {
#ifdef GPUC_HAVE_MMA
  if constexpr (attentionOnTensorCores<D, DV, T>()) {
    if (phase == 0)
      attentionBackwardQueriesMma<D, DV, /*DotsOnly=*/true>(
          q, k, v, out, lse, dOut, g, dq, rowDots);
    else if (phase == 1)
      attentionBackwardKeysMma<D, DV>(q, k, v, lse, dOut, g, rowDots, dk, dv,
                                      scoreGrads);
    else
      attentionQueryGradsFromStoredMma<D, DV>(k, g, scoreGrads, dq);
    return;
  } else
#endif
  {
    if (phase == 0)
      attentionBackwardQueriesRows<D, DV>(q, k, v, out, lse, dOut, g, dq,
                                          rowDots);
    else if (phase == 1)
      attentionBackwardKeysRows<D, DV>(q, k, v, lse, dOut, g, rowDots, dk, dv);
  }
}

#endif

} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_ATTENTION_H

//===- Attention.cpp - the interpreter: attention and its gradient --------===//
#include "Attention.h"
#include "Executor.h"

#include "gpuc/runtime/Philox.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <vector>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

namespace {
/// Index arithmetic over [B, H, Tq, Tk] scores, the [B, H, Tq, D] query
/// rows and the [B, H / groups, Tk, D] key and value rows (grouped-query
/// attention: `groups` query heads read each key head).
struct Geometry {
  int64_t batch, heads, rows, keys, width, valueWidth, groups;
  int64_t maskStrides[4] = {0, 0, 0, 0};

  Geometry(const HostTensor &q, const HostTensor &k, const HostTensor &v,
           const HostTensor *mask)
      : batch(q.shape[0]), heads(q.shape[1]), rows(q.shape[2]),
        keys(k.shape[2]), width(q.shape[3]), valueWidth(v.shape[3]),
        groups(q.shape[1] / k.shape[1]) {
    if (!mask)
      return;
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      maskStrides[d] = mask->shape[d] == 1 ? 0 : stride;
      stride *= mask->shape[d];
    }
  }
  /// The (b, h) slice's first row of a [B, H, n, w] tensor.
  int64_t slice(int64_t bh, int64_t n, int64_t w) const { return bh * n * w; }
  /// The (b, h) slice's first row of a key or value tensor.
  int64_t keySlice(int64_t bh, int64_t w) const {
    return bh / groups * keys * w;
  }
  bool masked(const HostTensor *mask, const AttentionParams &p, int64_t b,
              int64_t h, int64_t i, int64_t j) const {
    if (p.triangle && holdsComparison(*p.triangle, j, i) != p.maskKeeps)
      return true;
    if (!mask)
      return false;
    bool set = mask->data[b * maskStrides[0] + h * maskStrides[1] +
                          i * maskStrides[2] + j * maskStrides[3]] != 0.0;
    return set != p.maskKeeps;
  }
  /// The dropout factor of weight (b, h, i, j): 0 or 1 / (1 - ratio).
  double keep(const AttentionParams &p, int64_t bh, int64_t i,
              int64_t j) const {
    if (p.dropout <= 0.0)
      return 1.0;
    uint64_t index = (uint64_t)((bh * rows + i) * keys + j);
    return ::gpuc::dropoutKeeps(p.seed, p.step, p.stream, index,
                                (uint64_t)(batch * heads * rows * keys),
                                (float)p.dropout)
               ? 1.0 / (1.0 - p.dropout)
               : 0.0;
  }
};

/// Row i's scores of slice bh, the mask applied.
void scores(const Geometry &g, const HostTensor &q, const HostTensor &k,
            const HostTensor *mask, const AttentionParams &p, int64_t bh,
            int64_t i, std::vector<double> &s) {
  int64_t b = bh / g.heads, h = bh % g.heads;
  const double *qi = q.data.data() + g.slice(bh, g.rows, g.width) + i * g.width;
  const double *kb = k.data.data() + g.keySlice(bh, g.width);
  s.assign(g.keys, 0.0);
  for (int64_t j = 0; j < g.keys; ++j) {
    if (g.masked(mask, p, b, h, i, j)) {
      s[j] = p.fill;
      continue;
    }
    double dot = 0.0;
    for (int64_t d = 0; d < g.width; ++d)
      dot += qi[d] * kb[j * g.width + d];
    s[j] = p.scale * dot;
  }
}
} // namespace

void mlir::gpuc::interpreter::attentionForward(
    const HostTensor &q, const HostTensor &k, const HostTensor &v,
    const HostTensor *mask, const AttentionParams &params, HostTensor &out,
    HostTensor &logsumexp) {
  Geometry g(q, k, v, mask);
  std::vector<double> s;
  for (int64_t bh = 0; bh < g.batch * g.heads; ++bh) {
    const double *vb = v.data.data() + g.keySlice(bh, g.valueWidth);
    for (int64_t i = 0; i < g.rows; ++i) {
      scores(g, q, k, mask, params, bh, i, s);
      double max = -INFINITY, sum = 0.0;
      for (double x : s)
        max = std::max(max, x);
      for (double &x : s) {
        x = std::exp(x - max);
        sum += x;
      }
      double *o = out.data.data() + g.slice(bh, g.rows, g.valueWidth) +
                  i * g.valueWidth;
      for (int64_t j = 0; j < g.keys; ++j) {
        double w = s[j] / sum * g.keep(params, bh, i, j);
        for (int64_t d = 0; d < g.valueWidth; ++d)
          o[d] += w * vb[j * g.valueWidth + d];
      }
      logsumexp.data[bh * g.rows + i] = max + std::log(sum);
    }
  }
}

void mlir::gpuc::interpreter::attentionBackward(
    const HostTensor &q, const HostTensor &k, const HostTensor &v,
    const HostTensor &out, const HostTensor &logsumexp, const HostTensor &dout,
    const HostTensor *mask, const AttentionParams &params, HostTensor &dq,
    HostTensor &dk, HostTensor &dv) {
  Geometry g(q, k, v, mask);
  std::vector<double> s;
  for (int64_t bh = 0; bh < g.batch * g.heads; ++bh) {
    int64_t b = bh / g.heads, h = bh % g.heads;
    int64_t qBase = g.slice(bh, g.rows, g.width);
    // A key head's gradients sum over the query heads of its group.
    int64_t kBase = g.keySlice(bh, g.width);
    int64_t vBase = g.keySlice(bh, g.valueWidth);
    int64_t oBase = g.slice(bh, g.rows, g.valueWidth);
    for (int64_t i = 0; i < g.rows; ++i) {
      scores(g, q, k, mask, params, bh, i, s);
      const double *doi = dout.data.data() + oBase + i * g.valueWidth;
      const double *oi = out.data.data() + oBase + i * g.valueWidth;
      // D = sum(dO * O): the row's sum of weight times weight gradient.
      double rowDot = 0.0;
      for (int64_t d = 0; d < g.valueWidth; ++d)
        rowDot += doi[d] * oi[d];
      double lse = logsumexp.data[bh * g.rows + i];
      for (int64_t j = 0; j < g.keys; ++j) {
        double p = std::exp(s[j] - lse), keep = g.keep(params, bh, i, j);
        const double *vj = v.data.data() + vBase + j * g.valueWidth;
        double dWeight = 0.0;
        for (int64_t d = 0; d < g.valueWidth; ++d) {
          dv.data[vBase + j * g.valueWidth + d] += p * keep * doi[d];
          dWeight += doi[d] * vj[d];
        }
        if (g.masked(mask, params, b, h, i, j))
          continue;
        double ds = params.scale * p * (dWeight * keep - rowDot);
        for (int64_t d = 0; d < g.width; ++d) {
          dq.data[qBase + i * g.width + d] +=
              ds * k.data[kBase + j * g.width + d];
          dk.data[kBase + j * g.width + d] +=
              ds * q.data[qBase + i * g.width + d];
        }
      }
    }
  }
}

namespace {
/// [B, T, H, D] <-> [B, H, T, D]: an attention's bthd layout.
constexpr int64_t kSwapHeads[] = {0, 2, 1, 3};

/// The attributes an attention op shares with its gradient, and its key.
template <typename OpTy> AttentionParams attentionParams(OpTy op) {
  AttentionParams p;
  p.scale = op.getScale().convertToDouble();
  p.fill = op.getFill().convertToDouble();
  p.dropout = op.getDropout().convertToDouble();
  p.maskKeeps = op.getMaskKeeps();
  p.triangle = op.getMaskTriangle();
  p.stream = (uint64_t)op.getStream();
  return p;
}

} // namespace

std::optional<LogicalResult> Interpreter::executeAttention(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AttentionOp o) {
        interpreter::AttentionParams params = attentionParams(o);
        if (Value key = o.getRngKey()) {
          params.seed = (uint64_t)(int64_t)get(key).data[0];
          params.step = (uint64_t)(int64_t)get(key).data[1];
        }
        // Under bthd the [B, T, H, D] tensors are read as [B, H, T, D].
        ArrayRef<int64_t> heads =
            o.getBthd() ? ArrayRef<int64_t>(kSwapHeads) : ArrayRef<int64_t>();
        HostTensor out = transposed(like(o.getResult()), heads),
                   lse = like(o.getLogsumexp());
        interpreter::attentionForward(transposed(get(o.getQuery()), heads),
                                      transposed(get(o.getKey()), heads),
                                      transposed(get(o.getValue()), heads),
                                      o.getMask() ? &get(o.getMask()) : nullptr,
                                      params, out, lse);
        set(o.getResult(), transposed(out, heads));
        set(o.getLogsumexp(), std::move(lse));
        return success();
      })
      .Case([&](AttentionGradOp o) {
        interpreter::AttentionParams params = attentionParams(o);
        if (Value key = o.getRngKey()) {
          params.seed = (uint64_t)(int64_t)get(key).data[0];
          params.step = (uint64_t)(int64_t)get(key).data[1];
        }
        ArrayRef<int64_t> heads =
            o.getBthd() ? ArrayRef<int64_t>(kSwapHeads) : ArrayRef<int64_t>();
        HostTensor dq = transposed(like(o.getQueryGrad()), heads),
                   dk = transposed(like(o.getKeyGrad()), heads),
                   dv = transposed(like(o.getValueGrad()), heads);
        interpreter::attentionBackward(
            transposed(get(o.getQuery()), heads),
            transposed(get(o.getKey()), heads),
            transposed(get(o.getValue()), heads),
            transposed(get(o.getResult()), heads), get(o.getLogsumexp()),
            transposed(get(o.getResultGrad()), heads),
            o.getMask() ? &get(o.getMask()) : nullptr, params, dq, dk, dv);
        set(o.getQueryGrad(), transposed(dq, heads));
        set(o.getKeyGrad(), transposed(dk, heads));
        set(o.getValueGrad(), transposed(dv, heads));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

//===- DepthwiseFilterGradient.cpp - a depthwise filter's gradient --------===//
//
// NCHW: a channel at a time. Each sample's input plane is copied, padded,
// into one plane per phase of the strides, so that every tap reads its
// inputs at one offset from the output gradient's: with the output
// gradient laid out at the phase planes' row width (zeros past its own
// width), a tap's sum is one dot product over the whole plane, kept in 16
// lane sums (explicit, so the order is the code's, not the vector unit's)
// and added up at the end.
//
// NHWC: blocks of channels, each tap's sums a vector over the block.
//
// Built without floating-point contraction (CMakeLists.txt), so that each
// clone (AVX-512, AVX2, baseline) rounds as the others do.
//
//===----------------------------------------------------------------------===//
#include "DepthwiseFilterGradient.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace gpuc {
namespace {

constexpr int64_t kLanes = 16;

/// acc[l] += sum over blocks b of y[16 b + l] * x[16 b + l], for `length` a
/// multiple of 16.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
laneDot(const float *y, const float *x, int64_t length, float *acc) {
  float lanes[kLanes];
  std::memcpy(lanes, acc, sizeof(lanes));
  for (int64_t q = 0; q < length; q += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] += y[q + l] * x[q + l];
  std::memcpy(acc, lanes, sizeof(lanes));
}

/// acc[i] += y[i] * x[i] for i < n.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
multiplyAdd(const float *y, const float *x, int64_t n, float *acc) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] += y[i] * x[i];
}

/// to[i] = from[i * stride] for i < n.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
gatherColumns(const float *from, int64_t stride, int64_t n, float *to) {
  if (stride == 1) {
    std::memcpy(to, from, n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    to[i] = from[i * stride];
}

/// a / b rounded up, for b > 0 and any a.
int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

void channelsFirst(const ConvGeometry &g, const float *x, const float *dy,
                   float *dw) {
  const int64_t taps = g.kh * g.kw;
  // Phase planes: row r' of phase (pr, pc) holds input row r' * sy + pr
  // - py at columns c' * sx + pc - px. A tap (i, j) reads phase
  // (i dy mod sy, j dx mod sx) at (i dy / sy, j dx / sx) rows and columns
  // from the output position.
  const int64_t rowShift = (g.kh - 1) * g.dy / g.sy;
  const int64_t colShift = (g.kw - 1) * g.dx / g.sx;
  const int64_t width = g.ow + colShift;
  const int64_t rows = g.oh + rowShift + 1;
  const int64_t plane = rows * width;
  const int64_t length = (g.oh * width + kLanes - 1) / kLanes * kLanes;
  const int64_t phases = g.sy * g.sx;
#pragma omp parallel
  {
    // The last tap reads up to `length` past its offset, within a plane
    // and the lanes' rounding.
    std::vector<float> phased(phases * plane + kLanes, 0.0f);
    std::vector<float> gradient(length, 0.0f);
    std::vector<float> sums(taps * kLanes);
#pragma omp for schedule(dynamic)
    for (int64_t c = 0; c < g.c; ++c) {
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t n = 0; n < g.n; ++n) {
        const float *in = x + (n * g.c + c) * g.h * g.w;
        for (int64_t pr = 0; pr < g.sy; ++pr)
          for (int64_t pc = 0; pc < g.sx; ++pc) {
            float *to = phased.data() + (pr * g.sx + pc) * plane;
            // The columns c' whose input column c' sx + pc - px is inside.
            int64_t first =
                std::clamp<int64_t>(ceilDiv(g.px - pc, g.sx), 0, width);
            int64_t last = std::clamp<int64_t>(ceilDiv(g.w + g.px - pc, g.sx),
                                               first, width);
            for (int64_t r = 0; r < rows; ++r, to += width) {
              int64_t ih = r * g.sy + pr - g.py;
              if (ih < 0 || ih >= g.h) {
                std::fill(to, to + width, 0.0f);
                continue;
              }
              std::fill(to, to + first, 0.0f);
              gatherColumns(in + ih * g.w + first * g.sx + pc - g.px, g.sx,
                            last - first, to + first);
              std::fill(to + last, to + width, 0.0f);
            }
          }
        const float *out = dy + (n * g.c + c) * g.oh * g.ow;
        for (int64_t oh = 0; oh < g.oh; ++oh)
          std::memcpy(gradient.data() + oh * width, out + oh * g.ow,
                      g.ow * sizeof(float));
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            int64_t phase = (i * g.dy % g.sy) * g.sx + j * g.dx % g.sx;
            const float *from = phased.data() + phase * plane +
                                i * g.dy / g.sy * width + j * g.dx / g.sx;
            laneDot(gradient.data(), from, length,
                    sums.data() + (i * g.kw + j) * kLanes);
          }
      }
      for (int64_t t = 0; t < taps; ++t) {
        float total = 0.0f;
        for (int64_t l = 0; l < kLanes; ++l)
          total += sums[t * kLanes + l];
        dw[c * taps + t] = total;
      }
    }
  }
}

void channelsLast(const ConvGeometry &g, const float *x, const float *dy,
                  float *dw) {
  const int64_t taps = g.kh * g.kw;
  const int64_t block = 64;
  const int64_t blocks = (g.c + block - 1) / block;
#pragma omp parallel
  {
    std::vector<float> sums(taps * block);
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * block, span = std::min(block, g.c - c0);
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const float *out = dy + ((n * g.oh + oh) * g.ow + ow) * g.c + c0;
            for (int64_t i = 0; i < g.kh; ++i) {
              int64_t ih = oh * g.sy + i * g.dy - g.py;
              if (ih < 0 || ih >= g.h)
                continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                int64_t iw = ow * g.sx + j * g.dx - g.px;
                if (iw < 0 || iw >= g.w)
                  continue;
                multiplyAdd(out, x + ((n * g.h + ih) * g.w + iw) * g.c + c0,
                            span, sums.data() + (i * g.kw + j) * block);
              }
            }
          }
      for (int64_t c = 0; c < span; ++c)
        for (int64_t t = 0; t < taps; ++t)
          dw[(c0 + c) * taps + t] = sums[t * block + c];
    }
  }
}

} // namespace

void depthwiseFilterGradient(const ConvGeometry &g, const float *x,
                             const float *dy, float *dw) {
  if (g.channelsLast)
    channelsLast(g, x, dy, dw);
  else
    channelsFirst(g, x, dy, dw);
}

} // namespace gpuc

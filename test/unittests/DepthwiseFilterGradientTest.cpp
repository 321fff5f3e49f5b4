//===- DepthwiseFilterGradientTest.cpp - a depthwise filter's gradient ----===//
//
// depthwiseFilterGradient against the definition summed in double, over
// filters, strides, dilations, paddings and both layouts; and the same
// bits on 1 thread as on several.
//
//===----------------------------------------------------------------------===//
#include "DepthwiseFilterGradient.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace gpuc;

namespace {

/// Channels c, input h x w, filter kh x kw, stride, padding (top/left),
/// dilation; the output size from padding on both sides.
ConvGeometry geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                      int64_t kw, int64_t stride, int64_t pad, int64_t dilation,
                      bool channelsLast) {
  ConvGeometry g{};
  g.n = n, g.c = c, g.h = h, g.w = w;
  g.k = c, g.cg = 1, g.kh = kh, g.kw = kw;
  g.sy = g.sx = stride, g.py = g.px = pad, g.dy = g.dx = dilation;
  g.groups = c;
  g.channelsLast = channelsLast;
  g.oh = (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1;
  g.ow = (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1;
  return g;
}

int64_t dataIndex(const ConvGeometry &g, int64_t n, int64_t c, int64_t y,
                  int64_t x, int64_t height, int64_t width) {
  return g.channelsLast ? ((n * height + y) * width + x) * g.c + c
                        : ((n * g.c + c) * height + y) * width + x;
}

std::vector<double> reference(const ConvGeometry &g,
                              const std::vector<float> &x,
                              const std::vector<float> &dy) {
  std::vector<double> dw(g.c * g.kh * g.kw, 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow)
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              int64_t ih = oh * g.sy + i * g.dy - g.py;
              int64_t iw = ow * g.sx + j * g.dx - g.px;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w)
                continue;
              dw[(c * g.kh + i) * g.kw + j] +=
                  (double)dy[dataIndex(g, n, c, oh, ow, g.oh, g.ow)] *
                  x[dataIndex(g, n, c, ih, iw, g.h, g.w)];
            }
  return dw;
}

std::vector<float> random(int64_t count, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(engine);
  return values;
}

void expectDefinition(const ConvGeometry &g) {
  SCOPED_TRACE(testing::Message()
               << "c " << g.c << ", " << g.h << "x" << g.w << ", filter "
               << g.kh << "x" << g.kw << ", stride " << g.sy << ", pad " << g.py
               << ", dilation " << g.dy
               << (g.channelsLast ? ", NHWC" : ", NCHW"));
  std::vector<float> x = random(g.n * g.c * g.h * g.w, 1);
  std::vector<float> dy = random(g.n * g.c * g.oh * g.ow, 2);
  std::vector<float> dw(g.c * g.kh * g.kw, NAN);
  depthwiseFilterGradient(g, x.data(), dy.data(), dw.data());
  std::vector<double> exact = reference(g, x, dy);
  // Sums of n * oh * ow products of magnitude at most 1, in f32.
  double tolerance = 1e-6 * g.n * g.oh * g.ow;
  for (size_t i = 0; i < dw.size(); ++i)
    ASSERT_NEAR(dw[i], exact[i], tolerance) << "tap " << i;
}

TEST(DepthwiseFilterGradient, MatchesTheDefinition) {
  for (bool channelsLast : {false, true}) {
    // EfficientNet's: 5x5 at strides 1 and 2, and 3x3.
    expectDefinition(geometry(2, 24, 14, 14, 5, 5, 1, 2, 1, channelsLast));
    expectDefinition(geometry(2, 16, 28, 28, 5, 5, 2, 2, 1, channelsLast));
    expectDefinition(geometry(3, 5, 9, 9, 3, 3, 1, 1, 1, channelsLast));
    // Odd sizes, no padding, padding past the filter, dilation, a filter
    // wider than the input, a channel count off the vector width.
    expectDefinition(geometry(1, 70, 11, 13, 7, 7, 2, 3, 1, channelsLast));
    expectDefinition(geometry(2, 3, 10, 7, 3, 3, 1, 0, 1, channelsLast));
    expectDefinition(geometry(2, 3, 6, 6, 3, 3, 3, 4, 1, channelsLast));
    expectDefinition(geometry(2, 4, 15, 15, 3, 3, 1, 2, 2, channelsLast));
    expectDefinition(geometry(2, 4, 17, 16, 5, 5, 2, 4, 2, channelsLast));
    expectDefinition(geometry(1, 2, 3, 3, 5, 5, 1, 2, 1, channelsLast));
    expectDefinition(geometry(1, 1, 1, 1, 1, 1, 1, 0, 1, channelsLast));
  }
}

TEST(DepthwiseFilterGradient, SameBitsOnAnyNumberOfThreads) {
  for (bool channelsLast : {false, true}) {
    ConvGeometry g = geometry(4, 96, 20, 20, 5, 5, 1, 2, 1, channelsLast);
    std::vector<float> x = random(g.n * g.c * g.h * g.w, 3);
    std::vector<float> dy = random(g.n * g.c * g.oh * g.ow, 4);
    std::vector<float> one(g.c * g.kh * g.kw), many(one.size());
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    depthwiseFilterGradient(g, x.data(), dy.data(), one.data());
    omp_set_num_threads(std::max(threads, 3));
    depthwiseFilterGradient(g, x.data(), dy.data(), many.data());
    omp_set_num_threads(threads);
    EXPECT_EQ(0,
              std::memcmp(one.data(), many.data(), one.size() * sizeof(float)));
  }
}

} // namespace

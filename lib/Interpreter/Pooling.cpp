//===- Pooling.cpp - the interpreter: pooling and its gradients -----------===//
//
// Max and average pooling over NCHW windows (channels-last ones through
// their NCHW views), and the gradients that route or spread back.
//
//===----------------------------------------------------------------------===//
#include "Executor.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

namespace {
/// Calls `visit(outIndex, inIndex)` for the in-bounds positions of each
/// pooling window, and `window(outIndex, count)` after each window with the
/// number of its positions inside the input.
void forEachPoolTerm(ArrayRef<int64_t> x, ArrayRef<int64_t> y,
                     ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> pads,
                     function_ref<void(int64_t, int64_t)> visit,
                     function_ref<void(int64_t, int64_t)> window) {
  int64_t planes = x[0] * x[1], ih = x[2], iw = x[3], oh = y[2], ow = y[3];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t yy = 0; yy < oh; ++yy)
      for (int64_t xx = 0; xx < ow; ++xx) {
        int64_t out = (p * oh + yy) * ow + xx, count = 0;
        for (int64_t ky = 0; ky < kernel[0]; ++ky) {
          int64_t iy = yy * strides[0] - pads[0] + ky;
          if (iy < 0 || iy >= ih)
            continue;
          for (int64_t kx = 0; kx < kernel[1]; ++kx) {
            int64_t ix = xx * strides[1] - pads[1] + kx;
            if (ix < 0 || ix >= iw)
              continue;
            visit(out, (p * ih + iy) * iw + ix);
            ++count;
          }
        }
        window(out, count);
      }
}

/// The number of positions of a pooling window counted with the padding.
int64_t paddedWindowCount(int64_t yy, int64_t xx, ArrayRef<int64_t> x,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads) {
  auto extent = [&](int64_t o, int64_t axis) {
    int64_t start = o * strides[axis] - pads[axis];
    int64_t end = std::min(start + kernel[axis], x[axis + 2] + pads[axis + 2]);
    return end - start;
  };
  return extent(yy, 0) * extent(xx, 1);
}
} // namespace

std::optional<LogicalResult> Interpreter::executePooling(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // Channels-last windows are the NCHW ones of their operands' NCHW
      // views, as for convolutions.
      .Case([&](MaxPool2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor y = transposed(
            like(o.getResult(), -std::numeric_limits<double>::infinity()),
            first);
        forEachPoolTerm(
            x.shape, y.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t out, int64_t in) {
              y.data[out] = std::max(y.data[out], x.data[in]);
            },
            [](int64_t, int64_t) {});
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](MaxPool2DArgmaxOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor indices = transposed(like(o.getResult()), first);
        ArrayRef<int64_t> kernel = o.getKernel(), strides = o.getStrides(),
                          pads = o.getPads();
        int64_t ih = x.shape[2], iw = x.shape[3];
        int64_t oh = indices.shape[2], ow = indices.shape[3], best = -1;
        forEachPoolTerm(
            x.shape, indices.shape, kernel, strides, pads,
            [&](int64_t, int64_t in) {
              if (best < 0 || x.data[in] > x.data[best])
                best = in;
            },
            [&](int64_t out, int64_t) {
              // The position of `best` from the window's top-left corner.
              int64_t top = ((out / ow) % oh) * strides[0] - pads[0];
              int64_t left = (out % ow) * strides[1] - pads[1];
              int64_t iy = (best / iw) % ih, ix = best % iw;
              indices.data[out] =
                  best < 0 ? 0 : (double)((iy - top) * kernel[1] + ix - left);
              best = -1;
            });
        set(o.getResult(), transposed(indices, last));
        return success();
      })
      .Case([&](MaxPool2DBackwardOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor indices = transposed(get(o.getIndices()), first);
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        ArrayRef<int64_t> kernel = o.getKernel(), strides = o.getStrides(),
                          pads = o.getPads();
        int64_t planes = dx.shape[0] * dx.shape[1], ih = dx.shape[2],
                iw = dx.shape[3], oh = dy.shape[2], ow = dy.shape[3];
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t yy = 0; yy < oh; ++yy)
            for (int64_t xx = 0; xx < ow; ++xx) {
              int64_t out = (p * oh + yy) * ow + xx;
              auto position = (int64_t)indices.data[out];
              int64_t iy = yy * strides[0] - pads[0] + position / kernel[1];
              int64_t ix = xx * strides[1] - pads[1] + position % kernel[1];
              if (iy >= 0 && iy < ih && ix >= 0 && ix < iw)
                dx.data[(p * ih + iy) * iw + ix] += dy.data[out];
            }
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      .Case([&](AvgPool2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor y = transposed(like(o.getResult()), first);
        int64_t oh = y.shape[2], ow = y.shape[3];
        forEachPoolTerm(
            x.shape, y.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t out, int64_t in) { y.data[out] += x.data[in]; },
            [&](int64_t out, int64_t count) {
              if (o.getCountIncludePad())
                count = paddedWindowCount((out / ow) % oh, out % ow, x.shape,
                                          o.getKernel(), o.getStrides(),
                                          o.getPads());
              y.data[out] /= std::max<int64_t>(count, 1);
            });
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](AvgPool2DBackwardOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        int64_t oh = dy.shape[2], ow = dy.shape[3];
        SmallVector<int64_t> window;
        forEachPoolTerm(
            dx.shape, dy.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t, int64_t in) { window.push_back(in); },
            [&](int64_t out, int64_t count) {
              if (o.getCountIncludePad())
                count = paddedWindowCount((out / ow) % oh, out % ow, dx.shape,
                                          o.getKernel(), o.getStrides(),
                                          o.getPads());
              for (int64_t in : window)
                dx.data[in] += dy.data[out] / std::max<int64_t>(count, 1);
              window.clear();
            });
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

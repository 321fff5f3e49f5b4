//===- HostDnn.cpp - the cuDNN convolutions CudaDevice runs, on the host --===//
//
// 2-D cross-correlations with padding, strides, dilations and groups, NCHW
// or NHWC tensors (KCHW or KHWC filters), f32, f16 or bf16 elements summed
// in f32: the forward, the input's gradient and the filter's. The
// heuristics propose two deterministic algorithms (the same loops), so that
// the device's timing and its cache run. GPUC_HOST_CUDA_REFUSE_ALGO=N makes
// algorithm N fail when it runs, as cuDNN sometimes refuses one its
// heuristic proposed, to test the device's fallback.
//
//===----------------------------------------------------------------------===//
#include "HostCuda.h"

#include <cudnn.h>

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
};
struct cudnnFilterStruct {
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int k = 0, c = 0, h = 0, w = 0;
};
struct cudnnConvolutionStruct {
  int py = 0, px = 0, sy = 1, sx = 1, dy = 1, dx = 1, groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace {

enum class Pass { Forward, Input, Filter };

using gpuc::host_cuda::Element;

Element elementOf(cudnnDataType_t type) {
  return type == CUDNN_DATA_HALF       ? Element::F16
         : type == CUDNN_DATA_BFLOAT16 ? Element::BF16
                                       : Element::F32;
}

float load(const void *base, int64_t i, cudnnDataType_t type) {
  return gpuc::host_cuda::loadElement(base, i, elementOf(type));
}

void store(void *base, int64_t i, cudnnDataType_t type, float value) {
  gpuc::host_cuda::storeElement(base, i, elementOf(type), value);
}

int64_t elementBytes(cudnnDataType_t type) {
  return gpuc::host_cuda::elementBytes(elementOf(type));
}

/// Element (n, c, h, w) of a tensor of [N, C, H, W] in `format`.
int64_t at(cudnnTensorFormat_t format, int C, int H, int W, int64_t n, int c,
           int h, int w) {
  return format == CUDNN_TENSOR_NHWC ? ((n * H + h) * W + w) * C + c
                                     : ((n * C + c) * H + h) * W + w;
}

/// Calls f(i, o) for each element of a tensor of [N, C, H, W] in `format`:
/// i its index in NCHW order, o its index in the format's.
template <typename F>
void forEachElement(cudnnTensorFormat_t format, int N, int C, int H, int W,
                    F f) {
  int64_t i = 0;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int col = 0; col < W; ++col, ++i)
          f(i, at(format, C, H, W, n, c, h, col));
}

/// The refused algorithm, if any.
int refusedAlgorithm() {
  const char *text = getenv("GPUC_HOST_CUDA_REFUSE_ALGO");
  return text && *text ? atoi(text) : -1;
}

/// Whether the three operands agree on a convolution's shapes and types.
bool consistent(const cudnnTensorStruct &x, const cudnnFilterStruct &w,
                const cudnnConvolutionStruct &conv,
                const cudnnTensorStruct &y) {
  if (x.type != w.type || x.type != y.type || x.format != w.format ||
      x.format != y.format || conv.groups <= 0 || x.c != w.c * conv.groups ||
      w.k % conv.groups != 0 || y.c != w.k || y.n != x.n)
    return false;
  int oh = (x.h + 2 * conv.py - conv.dy * (w.h - 1) - 1) / conv.sy + 1;
  int ow = (x.w + 2 * conv.px - conv.dx * (w.w - 1) - 1) / conv.sx + 1;
  return y.h == oh && y.w == ow;
}

/// Runs one pass: the result (y, x or w) is alpha times the sums plus beta
/// times what it held.
cudnnStatus_t run(cudnnHandle_t handle, Pass pass, int algo,
                  const cudnnTensorStruct &x, const void *xData,
                  const cudnnFilterStruct &w, const void *wData,
                  const cudnnConvolutionStruct &conv,
                  const cudnnTensorStruct &y, const void *yData,
                  const void *alphaPointer, const void *betaPointer) {
  if (!consistent(x, w, conv, y))
    return CUDNN_STATUS_BAD_PARAM;
  if (algo < 0 || algo > 1)
    return CUDNN_STATUS_BAD_PARAM;
  int64_t xCount = (int64_t)x.n * x.c * x.h * x.w,
          wCount = (int64_t)w.k * w.c * w.h * w.w,
          yCount = (int64_t)y.n * y.c * y.h * y.w;
  if (!gpuc::host_cuda::isDeviceRange(xData, xCount * elementBytes(x.type)) ||
      !gpuc::host_cuda::isDeviceRange(wData, wCount * elementBytes(w.type)) ||
      !gpuc::host_cuda::isDeviceRange(yData, yCount * elementBytes(y.type)))
    return CUDNN_STATUS_BAD_PARAM;
  if (algo == refusedAlgorithm())
    return CUDNN_STATUS_NOT_SUPPORTED;
  float alpha = *(const float *)alphaPointer,
        beta = *(const float *)betaPointer;
  gpuc::host_cuda::enqueue((CUstream)handle->stream, [=]() -> CUresult {
    // The operands in double, in NCHW (the filter KCRS) whatever their
    // format, read once: a 16-bit element's conversion is a call on a CPU
    // without F16C, and the loops below then index plain arrays.
    auto canonical = [](const void *data, cudnnTensorFormat_t format,
                        cudnnDataType_t type, int N, int C, int H, int W) {
      std::vector<double> values((int64_t)N * C * H * W);
      forEachElement(format, N, C, H, W, [&](int64_t i, int64_t o) {
        values[i] = load(data, o, type);
      });
      return values;
    };
    std::vector<double> xs, ws, dys;
    if (pass != Pass::Input)
      xs = canonical(xData, x.format, x.type, x.n, x.c, x.h, x.w);
    if (pass != Pass::Filter)
      ws = canonical(wData, w.format, w.type, w.k, w.c, w.h, w.w);
    if (pass != Pass::Forward)
      dys = canonical(yData, y.format, y.type, y.n, y.c, y.h, y.w);
    std::vector<double> sums(pass == Pass::Forward ? yCount
                             : pass == Pass::Input ? xCount
                                                   : wCount,
                             0.0);
    // The first index i of 0..n-1 with 0 <= start + i * step < limit, and
    // one past the last (step > 0).
    auto inside = [](int start, int step, int n, int limit) {
      int first = 0, last = n;
      while (first < n && start + first * step < 0)
        ++first;
      while (last > first && start + (last - 1) * step >= limit)
        --last;
      return std::make_pair(first, last);
    };
    int kg = w.k / conv.groups;
    for (int64_t n = 0; n < y.n; ++n)
      for (int k = 0; k < y.c; ++k) {
        int group = k / kg;
        for (int oh = 0; oh < y.h; ++oh) {
          int ih0 = oh * conv.sy - conv.py;
          auto [r0, r1] = inside(ih0, conv.dy, w.h, x.h);
          for (int ow = 0; ow < y.w; ++ow) {
            int iw0 = ow * conv.sx - conv.px;
            auto [s0, s1] = inside(iw0, conv.dx, w.w, x.w);
            int64_t yi = ((n * y.c + k) * y.h + oh) * y.w + ow;
            double dy = pass == Pass::Forward ? 0.0 : dys[yi];
            double sum = 0.0;
            for (int c = 0; c < w.c; ++c) {
              int64_t xPlane = (n * x.c + group * w.c + c) * x.h,
                      wPlane = ((int64_t)k * w.c + c) * w.h;
              for (int r = r0; r < r1; ++r) {
                int64_t xRow = (xPlane + ih0 + r * conv.dy) * x.w + iw0,
                        wRow = (wPlane + r) * w.w;
                for (int s = s0; s < s1; ++s) {
                  int64_t xi = xRow + s * conv.dx, wi = wRow + s;
                  if (pass == Pass::Forward)
                    sum += xs[xi] * ws[wi];
                  else if (pass == Pass::Input)
                    sums[xi] += dy * ws[wi];
                  else
                    sums[wi] += dy * xs[xi];
                }
              }
            }
            if (pass == Pass::Forward)
              sums[yi] = sum;
          }
        }
      }
    // Back in the result's own format: alpha times the sums plus beta times
    // what it held.
    void *out = const_cast<void *>(pass == Pass::Forward ? yData
                                   : pass == Pass::Input ? xData
                                                         : wData);
    cudnnTensorFormat_t format = pass == Pass::Forward ? y.format
                                 : pass == Pass::Input ? x.format
                                                       : w.format;
    int N = pass == Pass::Forward ? y.n : pass == Pass::Input ? x.n : w.k;
    int C = pass == Pass::Forward ? y.c : pass == Pass::Input ? x.c : w.c;
    int H = pass == Pass::Forward ? y.h : pass == Pass::Input ? x.h : w.h;
    int W = pass == Pass::Forward ? y.w : pass == Pass::Input ? x.w : w.w;
    cudnnDataType_t type = x.type;
    forEachElement(format, N, C, H, W, [&](int64_t i, int64_t o) {
      store(out, o, type,
            alpha * (float)sums[i] +
                (beta != 0.0f ? beta * load(out, o, type) : 0.0f));
    });
    return CUDA_SUCCESS;
  });
  return CUDNN_STATUS_SUCCESS;
}

/// Two algorithms, both deterministic, on tensor cores where the
/// descriptor asks for them.
template <typename Perf, typename Algo>
void propose(const cudnnConvolutionStruct &conv, int requested, int *returned,
             Perf *perfs) {
  *returned = 0;
  for (int i = 0; i < 2 && i < requested; ++i) {
    Perf &p = perfs[i];
    memset(&p, 0, sizeof(p));
    p.algo = (Algo)i;
    p.status = CUDNN_STATUS_SUCCESS;
    p.memory = 0;
    p.determinism = CUDNN_DETERMINISTIC;
    p.mathType = conv.math;
    ++*returned;
  }
}

} // namespace

extern "C" {

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
  *stream = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS:
    return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM:
    return "CUDNN_STATUS_BAD_PARAM (host CUDA: inconsistent shapes, or an "
           "operand outside device memory)";
  case CUDNN_STATUS_NOT_SUPPORTED:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  default:
    return "CUDNN_STATUS_INTERNAL_ERROR";
  }
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc) {
  *desc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc) {
  *desc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t
cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc) {
  *desc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t
cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}

static bool knownType(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_HALF ||
         type == CUDNN_DATA_BFLOAT16;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc,
                                         cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c,
                                         int h, int w) {
  if (!knownType(type) || n <= 0 || c <= 0 || h <= 0 || w <= 0 ||
      (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC))
    return CUDNN_STATUS_BAD_PARAM;
  *desc = {format, type, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc,
                                         cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k,
                                         int c, int h, int w) {
  if (!knownType(type) || k <= 0 || c <= 0 || h <= 0 || w <= 0 ||
      (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC))
    return CUDNN_STATUS_BAD_PARAM;
  *desc = {format, type, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc,
                                              int py, int px, int sy, int sx,
                                              int dy, int dx,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (mode != CUDNN_CROSS_CORRELATION || compute != CUDNN_DATA_FLOAT ||
      py < 0 || px < 0 || sy <= 0 || sx <= 0 || dy <= 0 || dx <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  desc->py = py;
  desc->px = px;
  desc->sy = sy;
  desc->sx = sx;
  desc->dy = dy;
  desc->dx = dx;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc,
                                            int groups) {
  if (groups <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  desc->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc,
                                          cudnnMathType_t math) {
  desc->math = math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t y, const int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perfs) {
  if (!consistent(*x, *w, *conv, *y))
    return CUDNN_STATUS_BAD_PARAM;
  propose<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      *conv, requested, returned, perfs);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t, const cudnnFilterDescriptor_t w,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t dx, const int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perfs) {
  if (!consistent(*dx, *w, *conv, *dy))
    return CUDNN_STATUS_BAD_PARAM;
  propose<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      *conv, requested, returned, perfs);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t, const cudnnTensorDescriptor_t x,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnFilterDescriptor_t dw, const int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfs) {
  if (!consistent(*x, *dw, *conv, *dy))
    return CUDNN_STATUS_BAD_PARAM;
  propose<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      *conv, requested, returned, perfs);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
    void *, size_t, const void *beta, const cudnnTensorDescriptor_t yd,
    void *y) {
  return run(handle, Pass::Forward, (int)algo, *xd, x, *wd, w, *conv, *yd, y,
             alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wd,
    const void *w, const cudnnTensorDescriptor_t dyd, const void *dy,
    const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
    void *, size_t, const void *beta, const cudnnTensorDescriptor_t dxd,
    void *dx) {
  return run(handle, Pass::Input, (int)algo, *dxd, dx, *wd, w, *conv, *dyd, dy,
             alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
    const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionBwdFilterAlgo_t algo, void *, size_t, const void *beta,
    const cudnnFilterDescriptor_t dwd, void *dw) {
  return run(handle, Pass::Filter, (int)algo, *xd, x, *dwd, dw, *conv, *dyd, dy,
             alpha, beta);
}

} // extern "C"

//===- HostDnnAttention.cpp - cuDNN's fused attention, on the host --------===//
//
// What the host CUDA gives CudaDevice for a plan step's cudnn_attention:
// the attention it describes, computed in double from the operands where
// the descriptor says they lie (offsets, strides, the causal rule, the
// scale; the logsumexp a row in natural log), queued on the handle's
// stream. The device checks it against the generated kernels at load and
// runs it in their place, so the descriptor the compiler writes is tested
// against the kernels it stands in for, where no GPU is. (Whether cuDNN
// takes the shapes is for a GPU to say.) GPUC_HOST_CUDA_ATTENTION_SKEW=1
// adds 0.5 to every output, for the test of the device's refusal.
//
// A reference in double is not a fast library: each call counts a second
// more as the events see it, so that where a plan asks the device to run
// the faster (--attention-library auto) the generated kernels keep
// running, and every other host test's step is theirs. With
// GPUC_HOST_CUDA_SLOW=kernels the kernels' launches count the second
// instead, and the device takes this.
//
//===----------------------------------------------------------------------===//
#include "../CudnnAttention.h"
#include "HostCuda.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace gpuc {
namespace cuda_device {

namespace {

using host_cuda::Element;

class HostAttention final : public CudnnAttention {
public:
  explicit HostAttention(const CudnnAttentionShape &shape) : shape(shape) {}

  size_t workspaceBytes() const override { return 0; }

  bool run(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args, CUdeviceptr,
           std::string &error) override {
    return queue(dnn, args, shape.backward, error);
  }

  bool runForward(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args,
                  CUdeviceptr, std::string &error) override {
    return queue(dnn, args, /*backward=*/false, error);
  }

private:
  bool queue(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args,
             bool backward, std::string &error) {
    cudaStream_t stream = nullptr;
    cudnnGetStream(dnn, &stream);
    for (const auto &[name, operand] : shape.operands) {
      size_t element = name == "lse" ? 4 : 2;
      int64_t last = operand.offset + (shape.batch - 1) * operand.strides[0] +
                     (shape.headsOf(name) - 1) * operand.strides[1] +
                     (shape.rowsOf(name) - 1) * operand.strides[2] +
                     shape.widthOf(name);
      if (!host_cuda::isDeviceRange(
              reinterpret_cast<const void *>(args[operand.arg]),
              last * element)) {
        error = "host cuDNN attention: operand " + name +
                " lies outside device memory";
        return false;
      }
    }
    CudnnAttentionShape s = shape;
    const char *slowing = getenv("GPUC_HOST_CUDA_SLOW");
    bool slow = !slowing || strcmp(slowing, "kernels") != 0;
    CUresult result =
        host_cuda::enqueue((CUstream)stream, [s, args, backward, slow]() {
          compute(s, args, backward);
          if (slow)
            host_cuda::countSecondMore();
          return CUDA_SUCCESS;
        });
    if (result != CUDA_SUCCESS) {
      error = "host cuDNN attention: the stream refused its work";
      return false;
    }
    return true;
  }

  /// Element (b, h, r, c) of an operand.
  static int64_t at(const CudnnAttentionShape &s, const std::string &name,
                    int64_t b, int64_t h, int64_t r, int64_t c) {
    const CudnnAttentionShape::Operand &o = s.operands.at(name);
    return o.offset + b * o.strides[0] + h * o.strides[1] + r * o.strides[2] +
           c;
  }

  static void compute(const CudnnAttentionShape &s,
                      const std::vector<CUdeviceptr> &args, bool backward) {
    Element type = s.bf16 ? Element::BF16 : Element::F16;
    auto base = [&](const std::string &name) {
      return reinterpret_cast<void *>(args[s.operands.at(name).arg]);
    };
    auto load = [&](const std::string &name, int64_t b, int64_t h, int64_t r,
                    int64_t c) -> double {
      if (name == "lse")
        return host_cuda::loadElement(base(name), at(s, name, b, h, r, 0),
                                      Element::F32);
      return host_cuda::loadElement(base(name), at(s, name, b, h, r, c), type);
    };
    double skew = getenv("GPUC_HOST_CUDA_ATTENTION_SKEW") ? 0.5 : 0.0;
    auto store = [&](const std::string &name, int64_t b, int64_t h, int64_t r,
                     int64_t c, double value) {
      host_cuda::storeElement(base(name), at(s, name, b, h, r, c),
                              name == "lse" ? Element::F32 : type,
                              (float)(value + skew));
    };
    int64_t T = s.queries, S = s.keys, D = s.width, DV = s.valueWidth;
    std::vector<double> p(S), ds(S);
    // Query head h reads key head kh = h / group; a key head's gradients
    // sum over its group.
    int64_t group = s.heads / s.keyHeads;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t kh = 0; kh < s.keyHeads; ++kh) {
        std::vector<double> dk(S * D, 0.0), dv(S * DV, 0.0);
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
          for (int64_t i = 0; i < T; ++i) {
            // The row's weights: softmax of the scaled, masked scores.
            int64_t seen = s.causal ? std::min(S, i + 1) : S;
            double most = -INFINITY;
            for (int64_t j = 0; j < seen; ++j) {
              double dot = 0;
              for (int64_t c = 0; c < D; ++c)
                dot += load("q", b, h, i, c) * load("k", b, kh, j, c);
              p[j] = s.scale * dot;
              most = std::max(most, p[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < seen; ++j)
              sum += std::exp(p[j] - most);
            double lse = most + std::log(sum);
            for (int64_t j = 0; j < seen; ++j)
              p[j] = std::exp(p[j] - lse);
            if (!backward) {
              for (int64_t c = 0; c < DV; ++c) {
                double o = 0;
                for (int64_t j = 0; j < seen; ++j)
                  o += p[j] * load("v", b, kh, j, c);
                store("out", b, h, i, c, o);
              }
              store("lse", b, h, i, 0, lse);
              continue;
            }
            // dP = dO V^T; dS = P (dP - rowsum(dO O)); dQ = scale dS K,
            // dK += scale dS^T Q, dV += P^T dO.
            double rowDot = 0;
            for (int64_t c = 0; c < DV; ++c)
              rowDot += load("d_out", b, h, i, c) * load("out", b, h, i, c);
            for (int64_t j = 0; j < seen; ++j) {
              double dot = 0;
              for (int64_t c = 0; c < DV; ++c)
                dot += load("d_out", b, h, i, c) * load("v", b, kh, j, c);
              ds[j] = p[j] * (dot - rowDot);
              for (int64_t c = 0; c < DV; ++c)
                dv[j * DV + c] += p[j] * load("d_out", b, h, i, c);
              for (int64_t c = 0; c < D; ++c)
                dk[j * D + c] += s.scale * ds[j] * load("q", b, h, i, c);
            }
            for (int64_t c = 0; c < D; ++c) {
              double dq = 0;
              for (int64_t j = 0; j < seen; ++j)
                dq += s.scale * ds[j] * load("k", b, kh, j, c);
              store("dq", b, h, i, c, dq);
            }
          }
        if (!backward)
          continue;
        for (int64_t j = 0; j < S; ++j) {
          for (int64_t c = 0; c < D; ++c)
            store("dk", b, kh, j, c, dk[j * D + c]);
          for (int64_t c = 0; c < DV; ++c)
            store("dv", b, kh, j, c, dv[j * DV + c]);
        }
      }
  }

  CudnnAttentionShape shape;
};

} // namespace

bool cudnnAttentionBuilt() { return true; }

std::unique_ptr<CudnnAttention>
buildCudnnAttention(cudnnHandle_t, const CudnnAttentionShape &shape,
                    std::string &) {
  return std::make_unique<HostAttention>(shape);
}

} // namespace cuda_device
} // namespace gpuc

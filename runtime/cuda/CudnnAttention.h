//===- CudnnAttention.h - cuDNN's fused attention for a kernel --*- C++ -*-===//
//
// gpuc compile --attention-library auto|cudnn marks each fused attention
// kernel that cuDNN's fused attention can stand in for (the plan step's
// `cudnn_attention`: shapes, score rules, where each operand lies among the
// kernel's arguments). The CUDA device builds cuDNN's graph for it at load,
// checks it against the generated kernels on the same operands, and runs
// it in place of the kernel's launches where it agrees (and, for auto,
// where it also is the faster of the two at load); where it cannot
// (this build has no cuDNN frontend, cuDNN refuses the shapes, the results
// differ), the generated kernels run and the log says why.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_CUDA_CUDNNATTENTION_H
#define GPUC_RUNTIME_CUDA_CUDNNATTENTION_H

#include <cuda.h>
#include <cudnn.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpuc {
namespace cuda_device {

/// A plan step's `cudnn_attention`, checked against the step's arguments.
struct CudnnAttentionShape {
  struct Operand {
    int arg = 0;
    int64_t offset = 0;               // elements
    std::array<int64_t, 3> strides{}; // batch, head, row (elements)
  };
  bool backward = false;
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, width = 0,
          valueWidth = 0;
  /// The key and value heads: `heads`, or fewer under grouped-query
  /// attention (query head h reads key head h / (heads / keyHeads)).
  int64_t keyHeads = 0;
  float scale = 1;
  bool causal = false;
  bool bf16 = true; // else f16
  /// The kernel launches (plan steps, this one first) it stands in for.
  int launches = 1;
  /// Whether it runs only where it also is faster than they are (the
  /// descriptor's "when": "faster"), not wherever it agrees ("agrees").
  bool timed = false;
  /// q, k, v, out, lse (forward); and d_out, dq, dk, dv (backward).
  std::map<std::string, Operand> operands;

  /// An operand's heads, rows (its row count) and width.
  int64_t headsOf(const std::string &name) const;
  int64_t rowsOf(const std::string &name) const;
  int64_t widthOf(const std::string &name) const;
  /// The names of the operands the call writes.
  std::vector<std::string> outputs() const;
};

/// Reads `desc` (a plan step's cudnn_attention) for a step whose arguments
/// hold `argBytes` bytes each: every field present and in range, and every
/// operand's elements inside its argument. False with `error` otherwise.
bool parseCudnnAttention(const nlohmann::json &desc,
                         const std::vector<size_t> &argBytes,
                         CudnnAttentionShape &shape, std::string &error);

/// cuDNN's fused attention for one step, its graphs built.
class CudnnAttention {
public:
  virtual ~CudnnAttention() = default;
  /// Workspace bytes a call needs.
  virtual size_t workspaceBytes() const = 0;
  /// Runs the call on `dnn`'s stream over the step's arguments.
  virtual bool run(cudnnHandle_t dnn, const std::vector<CUdeviceptr> &args,
                   CUdeviceptr workspace, std::string &error) = 0;
  /// A backward's forward: writes its out and lse operands from its q, k
  /// and v (what the load's check runs the backward on).
  virtual bool runForward(cudnnHandle_t dnn,
                          const std::vector<CUdeviceptr> &args,
                          CUdeviceptr workspace, std::string &error) = 0;
};

/// Whether this plugin was built with cuDNN's frontend, and so can build
/// any (the tests' host CUDA has none).
bool cudnnAttentionBuilt();

/// Builds cuDNN's graphs for `shape` on `dnn`; null with `why` where this
/// build or cuDNN cannot.
std::unique_ptr<CudnnAttention>
buildCudnnAttention(cudnnHandle_t dnn, const CudnnAttentionShape &shape,
                    std::string &why);

} // namespace cuda_device
} // namespace gpuc

#endif // GPUC_RUNTIME_CUDA_CUDNNATTENTION_H

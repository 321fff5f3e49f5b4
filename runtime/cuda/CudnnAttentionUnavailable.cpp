//===- CudnnAttentionUnavailable.cpp - a plugin without cuDNN's frontend --===//
//
// Where the build found no cuDNN frontend headers (and on the host CUDA of
// the tests), no cuDNN attention is built: the generated kernels run.
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"

namespace gpuc {
namespace cuda_device {

bool cudnnAttentionBuilt() { return false; }

std::unique_ptr<CudnnAttention> buildCudnnAttention(cudnnHandle_t,
                                                    const CudnnAttentionShape &,
                                                    std::string &why) {
  why = "this CUDA plugin was built without cuDNN's frontend "
        "(scripts/install-deps.sh installs its headers; rebuild gpuc)";
  return nullptr;
}

} // namespace cuda_device
} // namespace gpuc

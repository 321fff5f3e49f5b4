//===- DepthwiseFilterGradient.h - depthwise filter gradients ---*- C++ -*-===//
//
// The filter gradient of a depthwise convolution (one filter per channel)
// on the CPU. oneDNN 2.x has no direct implementation of it for filters
// wider than 3: it falls back to an im2col and a GEMM per channel, 1-2
// GFLOP/s, a quarter of EfficientNet-B0's step on its 5x5 filters alone.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_LIB_DEPTHWISEFILTERGRADIENT_H
#define GPUC_RUNTIME_LIB_DEPTHWISEFILTERGRADIENT_H

#include "gpuc/runtime/PlanSteps.h"

namespace gpuc {

/// Whether `g` is depthwise: one single-channel filter per input channel.
inline bool isDepthwise(const ConvGeometry &g) {
  return g.groups > 1 && g.groups == g.c && g.k == g.c && g.cg == 1;
}

/// Writes `dw` ([c, kh, kw]), the gradient of the depthwise convolution `g`
/// for its input `x` and output gradient `dy` (NCHW, or NHWC where
/// `g.channelsLast`): each tap's sum over samples and output positions of
/// the output gradient times the input under the tap, zero outside the
/// input. Each channel is summed in one order whatever the threads and the
/// CPU's vector width, so the result is the same on every machine.
void depthwiseFilterGradient(const ConvGeometry &g, const float *x,
                             const float *dy, float *dw);

} // namespace gpuc

#endif // GPUC_RUNTIME_LIB_DEPTHWISEFILTERGRADIENT_H

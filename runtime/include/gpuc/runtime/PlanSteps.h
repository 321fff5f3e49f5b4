//===- PlanSteps.h - what every device reads from a plan step ---*- C++ -*-===//
//
// The step kinds of plan.json, a step's label, kind and profile entry, and
// the geometry of its convolution steps, read
// the same way by the CPU device and the CUDA device plugin (header-only: the
// plugin links no part of the runtime library).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_PLANSTEPS_H
#define GPUC_RUNTIME_PLANSTEPS_H

#include "gpuc/runtime/StepProfile.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc {

enum class StepKind {
  Kernel,
  Gemm,
  Copy,
  Conv,
  ConvBackwardInput,
  ConvBackwardFilter,
  AllReduce,
  ReduceScatter,
  AllGather,
  RankShard,
  CollectiveWait
};

/// The kind of plan step `op`; false (with `error` for the user) when this
/// runtime does not know it.
inline bool stepKindOf(const std::string &op, StepKind &kind,
                       std::string &error) {
  static const std::pair<const char *, StepKind> kinds[] = {
      {"kernel", StepKind::Kernel},
      {"gemm", StepKind::Gemm},
      {"copy", StepKind::Copy},
      {"conv2d", StepKind::Conv},
      {"conv2d_backward_input", StepKind::ConvBackwardInput},
      {"conv2d_backward_filter", StepKind::ConvBackwardFilter},
      {"all_reduce", StepKind::AllReduce},
      {"reduce_scatter", StepKind::ReduceScatter},
      {"all_gather", StepKind::AllGather},
      {"rank_shard", StepKind::RankShard},
      {"collective_wait", StepKind::CollectiveWait}};
  for (auto &[name, k] : kinds)
    if (op == name) {
      kind = k;
      return true;
    }
  error = "unknown step '" + op + "' in plan.json (recompile)";
  return false;
}

/// What every device's step starts from, read from plan step `s`, the
/// `index`th of `function`: its label (a kernel's launch name, else the op),
/// its kind and its profile entry. False (with `error`) for an op this
/// runtime does not know.
template <typename Step>
bool readStepHeader(const std::string &function, size_t index,
                    const nlohmann::json &s, Step &step, std::string &error) {
  const std::string &op = s["op"].get_ref<const std::string &>();
  step.label = op == "kernel" ? s["kernel"].get<std::string>() : op;
  if (!stepKindOf(op, step.kind, error))
    return false;
  step.time = StepTime::of(function, index, step.label,
                           step.kind == StepKind::Kernel, s);
  return true;
}

/// Bytes per element of a plan buffer's dtype; 0 for one the runtime
/// does not compute with.
inline int64_t dtypeBytes(const std::string &dtype) {
  if (dtype == "F64" || dtype == "I64")
    return 8;
  if (dtype == "F32" || dtype == "I32")
    return 4;
  if (dtype == "F16" || dtype == "BF16")
    return 2;
  if (dtype == "BOOL" || dtype == "I8")
    return 1;
  return 0;
}

/// The steps that start or wait for communication between the ranks, or
/// read this rank's shard.
inline bool isCollective(StepKind kind) {
  return kind == StepKind::AllReduce || kind == StepKind::ReduceScatter ||
         kind == StepKind::AllGather || kind == StepKind::RankShard ||
         kind == StepKind::CollectiveWait;
}

/// Elements in each shard of a tensor of `elements` cut over `ranks` (the
/// compiler's shardElements), and how many of them rank `rank` holds of the
/// tensor (the last ranks' shards run past its end).
inline int64_t shardElements(int64_t elements, int64_t ranks) {
  return (elements + ranks - 1) / ranks;
}
inline int64_t shardFilled(int64_t elements, int64_t ranks, int64_t rank) {
  int64_t shard = shardElements(elements, ranks);
  int64_t left = elements - rank * shard;
  return left < 0 ? 0 : (left < shard ? left : shard);
}

inline bool isConvolution(StepKind kind) {
  return kind == StepKind::Conv || kind == StepKind::ConvBackwardInput ||
         kind == StepKind::ConvBackwardFilter;
}

/// A convolution step's shapes (NCHW input x, KCgHW filter w, output y),
/// and whether the tensors hold them channels last (NHWC, KHWCg).
struct ConvGeometry {
  int64_t n, c, h, w;    // input
  int64_t k, cg, kh, kw; // filter: k outputs, cg inputs per group
  int64_t oh, ow;        // output
  int64_t sy, sx, py, px, dy, dx, groups;
  bool channelsLast;

  int64_t rows() const { return c * kh * kw; } // im2col rows, all groups
  int64_t cols() const { return n * oh * ow; } // im2col columns
};

inline ConvGeometry convGeometryOf(const nlohmann::json &s) {
  auto x = s["x_shape"].get<std::vector<int64_t>>();
  auto w = s["w_shape"].get<std::vector<int64_t>>();
  auto y = s["y_shape"].get<std::vector<int64_t>>();
  auto st = s["strides"].get<std::vector<int64_t>>();
  auto p = s["pads"].get<std::vector<int64_t>>();
  auto d = s["dilations"].get<std::vector<int64_t>>();
  return {x[0],
          x[1],
          x[2],
          x[3],
          w[0],
          w[1],
          w[2],
          w[3],
          y[2],
          y[3],
          st[0],
          st[1],
          p[0],
          p[1],
          d[0],
          d[1],
          s["groups"].get<int64_t>(),
          s.value("layout", "nchw") == "nhwc"};
}

/// A GEMM step: `calls` library calls `callStride*` elements apart, each a
/// batch of `batch` row-major products C = op(A) op(B) (plus C's own
/// values when `accumulate`) `stride*` apart, A
/// [m,k] ([k,m] when transA), B [k,n] ([n,k]) and C [m,n] at leading
/// dimensions lda, ldb, ldc.
struct GemmStep {
  int64_t m, n, k;
  bool transA, transB;
  int64_t lda, ldb, ldc;
  int64_t batch, strideA, strideB, strideC;
  int64_t calls, callStrideA, callStrideB, callStrideC;
  bool accumulate;
  /// Where A's, B's and C's first elements lie in their buffers (a window
  /// of a wider tensor's columns; a band of a product's rows).
  int64_t offsetA = 0, offsetB = 0, offsetC = 0;

  int64_t rows(int operand) const {
    return operand == 0   ? (transA ? k : m)
           : operand == 1 ? (transB ? n : k)
                          : m;
  }
  int64_t cols(int operand) const {
    return operand == 0   ? (transA ? m : k)
           : operand == 1 ? (transB ? k : n)
                          : n;
  }
  int64_t offset(int operand) const {
    return operand == 0 ? offsetA : operand == 1 ? offsetB : offsetC;
  }
  /// Elements from an operand's first to its last one read or written (a:
  /// 0, b: 1, c: 2), plus one; in 128 bits, so that a damaged plan's
  /// counts cannot overflow past the check of its buffers.
  __int128 extent(int operand) const {
    const int64_t ld[] = {lda, ldb, ldc};
    const int64_t stride[] = {strideA, strideB, strideC};
    const int64_t callStride[] = {callStrideA, callStrideB, callStrideC};
    return __int128(calls - 1) * callStride[operand] +
           __int128(batch - 1) * stride[operand] +
           __int128(rows(operand) - 1) * ld[operand] + cols(operand);
  }
};

inline GemmStep gemmStepOf(const nlohmann::json &s) {
  return {s["m"],
          s["n"],
          s["k"],
          s["trans_a"],
          s["trans_b"],
          s["lda"],
          s["ldb"],
          s["ldc"],
          s["batch"],
          s["stride_a"],
          s["stride_b"],
          s["stride_c"],
          s["calls"],
          s["call_stride_a"],
          s["call_stride_b"],
          s["call_stride_c"],
          s.value("accumulate", false),
          s.value("a_offset", (int64_t)0),
          s.value("b_offset", (int64_t)0),
          s.value("c_offset", (int64_t)0)};
}

} // namespace gpuc

#endif // GPUC_RUNTIME_PLANSTEPS_H

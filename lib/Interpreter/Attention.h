//===- Attention.h - the interpreter's attention ----------------*- C++ -*-===//
//
// gpuc.attention and gpuc.attention_grad as plain loops in double: the
// reference both lowerings are tested against.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_INTERPRETER_ATTENTION_H
#define GPUC_INTERPRETER_ATTENTION_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Interpreter/Interpreter.h"

#include <cstdint>
#include <optional>

namespace mlir::gpuc::interpreter {

/// The attributes both ops share, and the dropout key's (seed, step).
struct AttentionParams {
  double scale = 1.0, fill = -INFINITY, dropout = 0.0;
  bool maskKeeps = false;
  /// The op's mask_triangle: a mask bit `key P query` for every score,
  /// combined with the mask operand's (a score is excluded where either
  /// excludes it).
  std::optional<ComparePredicate> triangle;
  uint64_t seed = 0, step = 0, stream = 0;
};

/// Fills `out` and `logsumexp` (shaped and typed already).
void attentionForward(const HostTensor &q, const HostTensor &k,
                      const HostTensor &v, const HostTensor *mask,
                      const AttentionParams &params, HostTensor &out,
                      HostTensor &logsumexp);

/// Fills `dq`, `dk`, `dv` (shaped like q, k, v, zero).
void attentionBackward(const HostTensor &q, const HostTensor &k,
                       const HostTensor &v, const HostTensor &out,
                       const HostTensor &logsumexp, const HostTensor &dout,
                       const HostTensor *mask, const AttentionParams &params,
                       HostTensor &dq, HostTensor &dk, HostTensor &dv);

} // namespace mlir::gpuc::interpreter

#endif // GPUC_INTERPRETER_ATTENTION_H

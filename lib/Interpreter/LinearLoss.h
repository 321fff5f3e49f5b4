//===- LinearLoss.h - the interpreter's linear cross-entropy ----*- C++ -*-===//
//
// gpuc.linear_cross_entropy, its gradient and gpuc.linear_token_scores as
// plain loops in double: the reference the chunked lowerings are tested
// against.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_INTERPRETER_LINEARLOSS_H
#define GPUC_INTERPRETER_LINEARLOSS_H

#include "gpuc/Interpreter/Interpreter.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::gpuc::interpreter {

/// What a linear cross-entropy reads: `x` [N, C], `w` [V, C], `bias` [V]
/// (or null), `labels` [N].
struct LinearLossInputs {
  const HostTensor &x, &w, *bias, &labels;
  std::optional<int64_t> ignoreIndex;
  bool mean = true;
  /// 16-bit inputs store the logits (before the bias) and their gradient
  /// in their own type, as the chunked lowering's GEMMs read and write
  /// them; null: not rounded.
  Type storedLogits = {};
};

/// The loss; with `lossGrad`, the gradients too, into `dx`, `dw` and `db`
/// (shaped like their operands, zero; `db` null without a bias); with
/// `correct`, the count of counted rows whose largest logit (the first, on
/// a tie) is the label's. A label outside [0, V) is an error, in `error`.
bool linearCrossEntropy(const LinearLossInputs &in, double &loss,
                        std::string &error, const double *lossGrad = nullptr,
                        HostTensor *dx = nullptr, HostTensor *dw = nullptr,
                        HostTensor *db = nullptr, int64_t *correct = nullptr);

} // namespace mlir::gpuc::interpreter

#endif // GPUC_INTERPRETER_LINEARLOSS_H

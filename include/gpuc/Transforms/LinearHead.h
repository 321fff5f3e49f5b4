//===- LinearHead.h - a language model's head: a linear layer's logits ----===//
//
// The last linear layer of a language model, `input · weightᵀ + bias` over
// `N x V` logits as exporters write it (through reshapes, the bias added
// before or after them, the weight stored `V x C` or `C x V`), is what the
// head ops (gpuc.linear_cross_entropy, gpuc.linear_token_scores) fold in so
// that no `N x V` value exists.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_LINEARHEAD_H
#define GPUC_TRANSFORMS_LINEARHEAD_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include <optional>

namespace mlir::gpuc {

struct LinearHead {
  Value input, weight, bias;
  /// The weight is stored `C x V`.
  bool weightTransposed = false;
  /// The ops from the product to the logits.
  SmallVector<Operation *> chain;

  /// The weight as `V x C`, a transpose built at `b` when it is stored
  /// the other way.
  Value weightRows(OpBuilder &b, Location loc) const;
};

/// The linear head computing `logits` (`N x V`, or `d0 x ... x V`, a
/// reshape of them), if it is one.
std::optional<LinearHead> matchLinearHead(Value logits);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_LINEARHEAD_H

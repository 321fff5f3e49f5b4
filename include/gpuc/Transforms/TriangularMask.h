//===- TriangularMask.h - masks that are a comparison of indices ----------===//
//
// A causal attention mask is `key > query` (or >=, <, <=) at every
// [..., query, key]. Recognised, a kernel computes it from its indices and
// reads no mask: nothing to load, and a loop the host compiler vectorizes.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_TRIANGULARMASK_H
#define GPUC_TRANSFORMS_TRIANGULARMASK_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include <optional>

namespace mlir::gpuc {

struct TriangularMask {
  /// The mask is `key keyVsQuery query`.
  ComparePredicate keyVsQuery;
  /// Set when the mask compares a frozen parameter (nanoGPT's tril buffer)
  /// with a constant: the step then depends on that parameter's value,
  /// which the trainer must check (recordOn).
  ParameterOp parameter;
  ComparePredicate compare = ComparePredicate::eq;
  double with = 0.0;

  /// Marks `parameter` with gpuc.compiled_mask (no-op for a constant mask).
  void recordOn();
};

/// `mask` (i1) as a comparison of its last two indices: a constant (the
/// same over its leading dimensions), or a frozen parameter compared with a
/// splat (its leading dimensions 1).
std::optional<TriangularMask> matchTriangularMask(Value mask);

/// `mask` as a triangle combined with another mask: with `keeps` (true
/// keeps a score) `select(a, b, false)`, the two and'ed, else `select(a,
/// true, b)`, or'ed; one of a and b a triangle. Hugging Face ands its
/// padding mask with its causal one. The other mask comes back without
/// the broadcast that made it the scores' shape.
struct TriangleAndMask {
  TriangularMask triangle;
  Value other;
};
std::optional<TriangleAndMask> matchTriangleAndMask(Value mask, bool keeps);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_TRIANGULARMASK_H

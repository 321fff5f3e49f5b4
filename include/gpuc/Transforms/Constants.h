//===- Constants.h - the constants pattern passes match on ------*- C++ -*-===//
//
// The passes that recognise what an exporter spelled as a chain of ops (an
// attention's scale and mask fill, GELU's 1/sqrt(2), a causal mask's
// threshold) find its constants through the broadcasts and reshapes that
// import and canonicalisation may leave between a constant and its reader.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_CONSTANTS_H
#define GPUC_TRANSFORMS_CONSTANTS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::gpuc {

/// The dense constant that `v` is through broadcasts and reshapes, or null.
DenseElementsAttr constantOf(Value v);

/// The one value of a constant (through broadcasts and reshapes) whose
/// elements are all equal: a float, an integer or an i1 (0 or 1).
std::optional<double> splatOf(Value v);

/// `v` as `base * c`, `c * base` or `base / c` with a constant c (nonzero
/// for a quotient): c (or 1 / c), and base.
std::optional<double> scaleOf(Value v, Value &base);

/// As scaleOf, where nothing else reads `v`: base, with the factor folded
/// into `scale`. Anything else is itself, scale unchanged.
Value stripScale(Value v, double &scale);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_CONSTANTS_H

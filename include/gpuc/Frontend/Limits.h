//===- Limits.h - the largest shapes gpuc accepts ---------------*- C++ -*-===//
//
// Bounds that keep every size computation (elements, bytes, FLOPs) inside
// int64 and every allocation at compile time sane. The frontends and the
// driver check them where a shape enters: a DSL type, an ONNX model's
// values and initializers, --batch.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FRONTEND_LIMITS_H
#define GPUC_FRONTEND_LIMITS_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>

namespace mlir::gpuc {

/// The largest dimension (2^31 - 1).
constexpr int64_t kMaxDim = 2147483647;
/// The most elements one tensor may hold (2^40: 4 TiB of f32), so that its
/// bytes, and FLOP counts over it, stay far inside int64.
constexpr int64_t kMaxElements = int64_t(1) << 40;
/// The most elements of a parameter the DSL initializes at compile time
/// (2^30: 4 GiB of f32); larger ones need an ONNX model with its data.
constexpr int64_t kMaxInitializedElements = int64_t(1) << 30;

/// The number of elements of `shape` (dimensions >= 0), or nullopt when a
/// dimension exceeds kMaxDim or the product kMaxElements.
inline std::optional<int64_t> boundedElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxDim)
      return std::nullopt;
    if (d != 0 && n > kMaxElements / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

} // namespace mlir::gpuc

#endif // GPUC_FRONTEND_LIMITS_H

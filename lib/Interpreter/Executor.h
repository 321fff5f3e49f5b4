//===- Executor.h - what the interpreter's op families share ---*- C++ -*-===//
//
// The interpreter runs a function op by op. Each family of ops has a file of
// its own (Elementwise, Layout, Contractions, Pooling, Normalization,
// Attention) that answers for its ops only; this header is what they share:
// the values computed so far and the index arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_INTERPRETER_EXECUTOR_H
#define GPUC_INTERPRETER_EXECUTOR_H

#include "LinearLoss.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"

#include <optional>
#include <utility>
#include <vector>

namespace mlir::gpuc::interpreter {

using Index = SmallVector<int64_t, 6>;

inline Index stridesOf(ArrayRef<int64_t> shape) {
  Index strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

inline void unravel(int64_t flat, ArrayRef<int64_t> shape, Index &index) {
  index.resize(shape.size());
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    index[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
}

/// transpose(x, perm): result axis i is x's axis perm[i] (x itself when
/// `perm` is empty).
HostTensor transposed(const HostTensor &x, ArrayRef<int64_t> perm);

/// The permutations to a convolution's or a window's NCHW views and back
/// (none for an NCHW one).
inline std::pair<ArrayRef<int64_t>, ArrayRef<int64_t>>
channelsFirstViews(bool channelsLast) {
  if (!channelsLast)
    return {};
  return {ArrayRef<int64_t>(kToChannelsFirst),
          ArrayRef<int64_t>(kToChannelsLast)};
}

inline int64_t ravel(ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
  int64_t flat = 0;
  for (auto [i, s] : llvm::zip(index, strides))
    flat += i * s;
  return flat;
}

inline Type elementTypeOf(Value v) { return getElementTypeOrSelf(v.getType()); }

/// The outer x axis x inner decomposition of a shape around `axis`.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
  AxisView(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i)
      outer *= shape[i];
    size = shape[axis];
    for (int64_t i = axis + 1; i < (int64_t)shape.size(); ++i)
      inner *= shape[i];
  }
  int64_t at(int64_t o, int64_t k, int64_t i) const {
    return (o * size + k) * inner + i;
  }
};

class Interpreter {
public:
  explicit Interpreter(const InterpreterOptions &options) : options(options) {}

  FailureOr<std::vector<HostTensor>> run(func::FuncOp func,
                                         ArrayRef<HostTensor> args);

private:
  LogicalResult execute(Operation *op);
  // Each family of ops in a file of its own: the op's outcome, or nothing
  // when `op` is not of the family.
  std::optional<LogicalResult> executeElementwise(Operation *op);
  std::optional<LogicalResult> executeLayout(Operation *op);
  std::optional<LogicalResult> executeContraction(Operation *op);
  std::optional<LogicalResult> executePooling(Operation *op);
  std::optional<LogicalResult> executeNormalization(Operation *op);
  std::optional<LogicalResult> executeAttention(Operation *op);

  const HostTensor &get(Value v) { return values.find(v)->second; }
  void set(Value v, HostTensor t) {
    if (options.roundToElementType)
      for (double &d : t.data)
        d = roundToType(d, t.elementType);
    values[v] = std::move(t);
  }
  HostTensor like(Value result, double fill = 0.0) {
    return HostTensor(shapeOf(result), elementTypeOf(result), fill);
  }

  LogicalResult unary(Operation *op, function_ref<double(double)> fn);
  LogicalResult binary(Operation *op, function_ref<double(double, double)> fn);
  template <typename OpTy> LogicalResult reduce(OpTy op);
  template <typename OpTy> LogicalResult classLoss(OpTy op, bool logits);
  template <typename OpTy> LogicalResult softmax(OpTy op, bool log);
  template <typename OpTy>
  LogicalResult linearLoss(OpTy op, Value lossGrad, ArrayRef<Value> grads);
  LogicalResult tokenScores(LinearTokenScoresOp op);
  template <typename OpTy> LinearLossInputs headInputs(OpTy op, bool mean);

  const InterpreterOptions &options;
  DenseMap<Value, HostTensor> values;
};

} // namespace mlir::gpuc::interpreter

#endif // GPUC_INTERPRETER_EXECUTOR_H

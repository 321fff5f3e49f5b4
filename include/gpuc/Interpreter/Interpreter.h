//===- Interpreter.h - the reference semantics of the gpuc dialect -*- C++ -*-//
//
// Executes a function of gpuc ops with plain loops, accumulating in double.
// It is slow on purpose and is the definition every other implementation
// (generated kernels, library calls) is tested against.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_INTERPRETER_INTERPRETER_H
#define GPUC_INTERPRETER_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"

#include <vector>

namespace mlir::gpuc {

/// A dense row-major tensor whose elements are held as doubles whatever the
/// element type (i64 values beyond 2^53 are not representable; indices and
/// labels never are that large).
struct HostTensor {
  SmallVector<int64_t> shape;
  Type elementType;
  std::vector<double> data;

  HostTensor() = default;
  HostTensor(ArrayRef<int64_t> shape, Type elementType, double fill = 0.0);
  static HostTensor fromAttr(ElementsAttr attr);
  int64_t numElements() const { return data.size(); }
  RankedTensorType getType() const {
    return RankedTensorType::get(shape, elementType);
  }
};

struct InterpreterOptions {
  /// Round every op's result to its element type (f32, f16, bf16, integers),
  /// as a real implementation stores it. Off, every float is kept in double:
  /// what finite-difference gradient checks need.
  bool roundToElementType = true;
};

/// Runs `func` on `args`. Errors (a wrong argument type, an op the
/// interpreter does not know) are reported on the op and give failure.
FailureOr<std::vector<HostTensor>>
interpret(func::FuncOp func, ArrayRef<HostTensor> args,
          const InterpreterOptions &options = {});

/// Rounds `value` to what `elementType` can hold.
double roundToType(double value, Type elementType);

} // namespace mlir::gpuc

#endif // GPUC_INTERPRETER_INTERPRETER_H

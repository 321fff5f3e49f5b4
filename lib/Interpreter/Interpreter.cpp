//===- Interpreter.cpp - the reference semantics of the gpuc dialect ------===//
//
// Plain loops, double accumulation: clarity beats speed here, since the
// interpreter is what "correct" means for every other implementation of an
// op. This file holds the host tensors and the walk over a function; each
// family of ops has a file of its own (Executor.h).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Interpreter/Interpreter.h"
#include "Executor.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor::HostTensor(ArrayRef<int64_t> shape, Type elementType, double fill)
    : shape(shape), elementType(elementType) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  data.assign(n, fill);
}

double mlir::gpuc::roundToType(double value, Type elementType) {
  if (elementType.isF32())
    return (double)(float)value;
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    if (floatType.getWidth() == 64)
      return value;
    bool losesInfo;
    llvm::APFloat f(value);
    f.convert(floatType.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
              &losesInfo);
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &losesInfo);
    return f.convertToDouble();
  }
  if (elementType.isInteger(1))
    return value != 0.0 ? 1.0 : 0.0;
  if (elementType.isInteger(32))
    return std::isfinite(value) ? (double)(int32_t)(int64_t)std::trunc(value)
                                : 0.0;
  return std::isfinite(value) ? (double)(int64_t)std::trunc(value) : 0.0;
}

/// Reads element `i` of raw little-endian storage of `type`.
static double readRaw(const char *bytes, int64_t i, Type type) {
  if (type.isF32()) {
    float v;
    std::memcpy(&v, bytes + 4 * i, 4);
    return v;
  }
  if (type.isF64()) {
    double v;
    std::memcpy(&v, bytes + 8 * i, 8);
    return v;
  }
  if (type.isF16() || type.isBF16()) {
    uint16_t v;
    std::memcpy(&v, bytes + 2 * i, 2);
    llvm::APFloat f(cast<FloatType>(type).getFloatSemantics(),
                    llvm::APInt(16, v));
    bool losesInfo;
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &losesInfo);
    return f.convertToDouble();
  }
  if (type.isInteger(64)) {
    int64_t v;
    std::memcpy(&v, bytes + 8 * i, 8);
    return (double)v;
  }
  if (type.isInteger(32)) {
    int32_t v;
    std::memcpy(&v, bytes + 4 * i, 4);
    return v;
  }
  return bytes[i] ? 1.0 : 0.0; // i1 is stored as one byte
}

HostTensor HostTensor::fromAttr(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  HostTensor t(type.getShape(), type.getElementType());
  Type et = type.getElementType();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    // Callers check missingElements first; zeros rather than a read past
    // the blob should one not.
    if (missingElements(attr))
      return t;
    ArrayRef<char> bytes = resource.getRawHandle().getBlob()->getData();
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.data[i] = readRaw(bytes.data(), i, et);
    return t;
  }
  auto dense = cast<DenseElementsAttr>(attr);
  if (isa<FloatType>(et)) {
    int64_t i = 0;
    for (const llvm::APFloat &v : dense.getValues<llvm::APFloat>()) {
      llvm::APFloat d = v;
      bool losesInfo;
      d.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
      t.data[i++] = d.convertToDouble();
    }
  } else {
    int64_t i = 0;
    for (const llvm::APInt &v : dense.getValues<llvm::APInt>())
      t.data[i++] =
          et.isInteger(1) ? (double)v.getZExtValue() : (double)v.getSExtValue();
  }
  return t;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::execute(Operation *op) {
  for (auto family :
       {&Interpreter::executeElementwise, &Interpreter::executeLayout,
        &Interpreter::executeContraction, &Interpreter::executePooling,
        &Interpreter::executeNormalization, &Interpreter::executeAttention})
    if (std::optional<LogicalResult> outcome = (this->*family)(op))
      return *outcome;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) -> LogicalResult {
        if (std::optional<std::string> why = missingElements(c.getValue()))
          return c.emitOpError() << "value " << *why
                                 << ", and the interpreter needs its values";
        set(c.getResult(), HostTensor::fromAttr(c.getValue()));
        return success();
      })
      // The interpreter is one rank: the sum over the ranks is the operand.
      .Case([&](AllReduceOp o) {
        for (auto [input, result] : llvm::zip(o.getInputs(), o.getResults()))
          set(result, HostTensor(get(input)));
        return success();
      })
      // Shards over one rank are the whole tensors, flattened.
      .Case<ReduceScatterOp, AllGatherOp, RankShardOp>([&](auto o)
                                                           -> LogicalResult {
        if (o.getRanks() != 1)
          return o.emitOpError()
                 << "cuts tensors into shards over " << o.getRanks()
                 << " ranks; the interpreter evaluates one rank (the trainer "
                    "runs it under mpirun -np "
                 << o.getRanks() << ")";
        for (auto [input, result] :
             llvm::zip(o->getOperands(), o->getResults())) {
          HostTensor y = like(result);
          y.data = get(input).data;
          set(result, std::move(y));
        }
        return success();
      })
      // A kernel formed by gpuc-form-kernels/gpuc-fuse: its body, op by op
      // (so the IR after fusion can be checked against the IR before it).
      .Case([&](FusionOp o) -> LogicalResult {
        Block &block = o.getBodyBlock();
        for (auto [arg, operand] :
             llvm::zip(block.getArguments(), o.getOperands())) {
          // A copy first: inserting may move what get() refers to.
          HostTensor value = get(operand);
          values[arg] = std::move(value);
        }
        for (Operation &inner : block) {
          if (auto yield = dyn_cast<YieldOp>(inner)) {
            for (auto [result, v] :
                 llvm::zip(o.getResults(), yield.getOperands())) {
              HostTensor value = get(v);
              values[result] = std::move(value);
            }
            return success();
          }
          if (failed(execute(&inner)))
            return failure();
        }
        return o.emitOpError() << "has no gpuc.yield";
      })
      .Default([&](Operation *other) {
        return other->emitOpError()
               << "is not supported by the gpuc interpreter";
      });
}

FailureOr<std::vector<HostTensor>> Interpreter::run(func::FuncOp func,
                                                    ArrayRef<HostTensor> args) {
  Block &body = func.getBody().front();
  if (args.size() != body.getNumArguments())
    return func.emitError()
           << "@" << func.getSymName() << " takes " << body.getNumArguments()
           << " arguments, got " << args.size();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    if (args[i].getType() != arg.getType())
      return func.emitError()
             << "argument " << i << " of @" << func.getSymName() << " is "
             << arg.getType() << ", got " << args[i].getType();
    values[arg] = args[i];
  }
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<HostTensor> results;
      for (Value v : ret.getOperands())
        results.push_back(get(v));
      return results;
    }
    if (failed(execute(&op)))
      return failure();
  }
  return func.emitError() << "@" << func.getSymName() << " has no return";
}

FailureOr<std::vector<HostTensor>>
mlir::gpuc::interpret(func::FuncOp func, ArrayRef<HostTensor> args,
                      const InterpreterOptions &options) {
  return Interpreter(options).run(func, args);
}

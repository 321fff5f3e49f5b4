//===- Elementwise.cpp - the interpreter: elementwise ops, reductions -----===//
//
// Each op in double, then rounded to its element type (InterpreterOptions):
// the reference every kernel's arithmetic is tested against.
//
//===----------------------------------------------------------------------===//
#include "Executor.h"
#include "gpuc/runtime/Philox.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

LogicalResult Interpreter::unary(Operation *op,
                                 function_ref<double(double)> fn) {
  const HostTensor &x = get(op->getOperand(0));
  HostTensor y = like(op->getResult(0));
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.data[i] = fn(x.data[i]);
  set(op->getResult(0), std::move(y));
  return success();
}

LogicalResult Interpreter::binary(Operation *op,
                                  function_ref<double(double, double)> fn) {
  const HostTensor &a = get(op->getOperand(0));
  const HostTensor &b = get(op->getOperand(1));
  HostTensor y = like(op->getResult(0));
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.data[i] = fn(a.data[i], b.data[i]);
  set(op->getResult(0), std::move(y));
  return success();
}

template <typename OpTy> LogicalResult Interpreter::reduce(OpTy op) {
  const HostTensor &x = get(op.getInput());
  ArrayRef<int64_t> axes = op.getAxes();
  SmallVector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes)
    reduced[a] = true;
  // The result index of an input element, as if keep_dims were set.
  Index keptShape(x.shape);
  for (int64_t a : axes)
    keptShape[a] = 1;
  Index keptStrides = stridesOf(keptShape);
  bool isMax = isa<ReduceMaxOp>(op);
  HostTensor y = like(op.getResult(),
                      isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  Index index;
  for (int64_t i = 0; i < x.numElements(); ++i) {
    unravel(i, x.shape, index);
    for (auto [d, r] : llvm::enumerate(reduced))
      if (r)
        index[d] = 0;
    int64_t out = ravel(index, keptStrides);
    if (isMax)
      y.data[out] = std::isnan(x.data[i]) || std::isnan(y.data[out])
                        ? std::numeric_limits<double>::quiet_NaN()
                        : std::max(y.data[out], x.data[i]);
    else
      y.data[out] += x.data[i];
  }
  if (isa<ReduceMeanOp>(op)) {
    int64_t count = x.numElements() / std::max<int64_t>(1, y.numElements());
    for (double &v : y.data)
      v /= count;
  }
  set(op.getResult(), std::move(y));
  return success();
}

std::optional<LogicalResult> Interpreter::executeElementwise(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // Unary
      .Case([&](NegOp o) { return unary(o, [](double x) { return -x; }); })
      .Case([&](AbsOp o) {
        return unary(o, [](double x) { return std::fabs(x); });
      })
      .Case([&](ExpOp o) {
        return unary(o, [](double x) { return std::exp(x); });
      })
      .Case([&](LogOp o) {
        return unary(o, [](double x) { return std::log(x); });
      })
      .Case([&](SqrtOp o) {
        return unary(o, [](double x) { return std::sqrt(x); });
      })
      .Case([&](RsqrtOp o) {
        return unary(o, [](double x) { return 1.0 / std::sqrt(x); });
      })
      .Case([&](ReciprocalOp o) {
        return unary(o, [](double x) { return 1.0 / x; });
      })
      .Case([&](TanhOp o) {
        return unary(o, [](double x) { return std::tanh(x); });
      })
      .Case([&](CosOp o) {
        return unary(o, [](double x) { return std::cos(x); });
      })
      .Case([&](SinOp o) {
        return unary(o, [](double x) { return std::sin(x); });
      })
      .Case([&](ErfOp o) {
        return unary(o, [](double x) { return std::erf(x); });
      })
      .Case([&](SigmoidOp o) {
        return unary(o, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
      })
      .Case([&](ReluOp o) {
        return unary(o, [](double x) { return x > 0 ? x : 0.0; });
      })
      .Case([&](GeluOp o) {
        if (o.getTanh())
          return unary(o, [](double x) {
            double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
            return 0.5 * x * (1.0 + std::tanh(u));
          });
        return unary(o, [](double x) {
          return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2));
        });
      })
      // Binary
      .Case([&](AddOp o) {
        return binary(o, [](double a, double b) { return a + b; });
      })
      .Case([&](SubOp o) {
        return binary(o, [](double a, double b) { return a - b; });
      })
      .Case([&](MulOp o) {
        return binary(o, [](double a, double b) { return a * b; });
      })
      .Case([&](DivOp o) {
        if (!isa<FloatType>(elementTypeOf(o.getResult())))
          return binary(o, [&](double a, double b) {
            // Integer division truncates; a zero divisor gives 0 rather than
            // undefined behaviour.
            return b == 0 ? 0.0 : std::trunc(a / b);
          });
        return binary(o, [](double a, double b) { return a / b; });
      })
      .Case([&](PowOp o) {
        return binary(o, [](double a, double b) { return std::pow(a, b); });
      })
      .Case([&](MaxOp o) {
        return binary(o, [](double a, double b) {
          return std::isnan(a) || std::isnan(b)
                     ? std::numeric_limits<double>::quiet_NaN()
                     : std::max(a, b);
        });
      })
      .Case([&](MinOp o) {
        return binary(o, [](double a, double b) {
          return std::isnan(a) || std::isnan(b)
                     ? std::numeric_limits<double>::quiet_NaN()
                     : std::min(a, b);
        });
      })
      .Case([&](CompareOp o) {
        ComparePredicate p = o.getPredicate();
        return binary(o, [p](double a, double b) -> double {
          return holdsComparison(p, a, b);
        });
      })
      .Case([&](SelectOp o) {
        const HostTensor &c = get(o.getCond());
        const HostTensor &t = get(o.getOnTrue());
        const HostTensor &f = get(o.getOnFalse());
        HostTensor y = like(o.getResult());
        for (int64_t i = 0; i < y.numElements(); ++i)
          y.data[i] = c.data[i] != 0 ? t.data[i] : f.data[i];
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](CastOp o) {
        HostTensor y = get(o.getInput());
        y.elementType = elementTypeOf(o.getResult());
        // A cast always rounds, whatever the options: it is the op's meaning.
        for (double &d : y.data)
          d = roundToType(d, y.elementType);
        set(o.getResult(), std::move(y));
        return success();
      })
      // Reductions
      .Case([&](ReduceSumOp o) { return reduce(o); })
      .Case([&](ReduceMaxOp o) { return reduce(o); })
      .Case([&](ReduceMeanOp o) { return reduce(o); })
      .Case([&](IotaOp o) {
        HostTensor y = like(o.getResult());
        Index index;
        for (int64_t i = 0; i < y.numElements(); ++i) {
          unravel(i, y.shape, index);
          y.data[i] = index[o.getDim()];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](DropoutOp o) {
        const HostTensor &x = get(o.getInput());
        const HostTensor &key = get(o.getRngKey());
        double ratio = o.getRatio().convertToDouble();
        auto seed = (uint64_t)(int64_t)key.data[0];
        auto step = (uint64_t)(int64_t)key.data[1];
        HostTensor y = like(o.getResult());
        for (int64_t i = 0; i < y.numElements(); ++i)
          if (::gpuc::dropoutKeeps(seed, step, o.getStream(), i,
                                   y.numElements(), (float)ratio))
            y.data[i] = x.data[i] / (1.0 - ratio);
        set(o.getResult(), std::move(y));
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

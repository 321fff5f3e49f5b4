//===- Interpreter.cpp - the reference semantics of the gpuc dialect ------===//
//
// One small function per op family, plain loops, double accumulation. Clarity
// beats speed here: this file is what "correct" means for every other
// implementation of an op.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Interpreter/Interpreter.h"
#include "Attention.h"
#include "LinearLoss.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"
#include "gpuc/runtime/Philox.h"

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
// Index helpers
//===----------------------------------------------------------------------===//

namespace {
using Index = SmallVector<int64_t, 6>;

Index stridesOf(ArrayRef<int64_t> shape) {
  Index strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

void unravel(int64_t flat, ArrayRef<int64_t> shape, Index &index) {
  index.resize(shape.size());
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    index[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
}

/// [B, T, H, D] <-> [B, H, T, D]: an attention's bthd layout.
constexpr int64_t kSwapHeads[] = {0, 2, 1, 3};

/// transpose(x, perm): result axis i is x's axis perm[i] (x itself when
/// `perm` is empty).
HostTensor transposed(const HostTensor &x, ArrayRef<int64_t> perm) {
  if (perm.empty())
    return x;
  Index shape;
  for (int64_t p : perm)
    shape.push_back(x.shape[p]);
  HostTensor y(shape, x.elementType);
  Index inStrides = stridesOf(x.shape), index;
  for (int64_t i = 0; i < y.numElements(); ++i) {
    unravel(i, y.shape, index);
    int64_t in = 0;
    for (auto [d, p] : llvm::enumerate(perm))
      in += index[d] * inStrides[p];
    y.data[i] = x.data[in];
  }
  return y;
}

/// The columns `window` reads of x's rows, split into its shape
/// (gpuc.matmul's lhs_window and rhs_window); x itself without one.
HostTensor columnsOf(const HostTensor &x, ColumnsAttr window) {
  if (!window)
    return x;
  Index shape(x.shape.begin(), x.shape.end() - 1);
  llvm::append_range(shape, window.getShape());
  HostTensor y(shape, x.elementType);
  int64_t width = window.getWidth(), row = x.shape.back();
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.data[i] = x.data[(i / width) * row + window.getOffset() + i % width];
  return y;
}

/// The permutations to a convolution's or a window's NCHW views and back
/// (none for an NCHW one).
std::pair<ArrayRef<int64_t>, ArrayRef<int64_t>>
channelsFirstViews(bool channelsLast) {
  if (!channelsLast)
    return {};
  return {ArrayRef<int64_t>(kToChannelsFirst),
          ArrayRef<int64_t>(kToChannelsLast)};
}

int64_t ravel(ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
  int64_t flat = 0;
  for (auto [i, s] : llvm::zip(index, strides))
    flat += i * s;
  return flat;
}

Type elementTypeOf(Value v) { return getElementTypeOrSelf(v.getType()); }

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

/// log(sum_k exp(x[a, k, b])) along the view's axis, stable (max first): the
/// one normalizer softmax, log_softmax and cross_entropy share.
double logSumExp(const std::vector<double> &x, const AxisView &v, int64_t a,
                 int64_t b) {
  double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
  for (int64_t k = 0; k < v.size; ++k)
    m = std::max(m, x[v.at(a, k, b)]);
  for (int64_t k = 0; k < v.size; ++k)
    sum += std::exp(x[v.at(a, k, b)] - m);
  return m + std::log(sum);
}

/// Calls `visit(outIndex, inIndex, weightIndex)` for every term of a 2-D
/// convolution: the one loop nest that forward, backward-input and
/// backward-filter all share.
void forEachConvTerm(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                     ArrayRef<int64_t> y, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                     int64_t groups,
                     function_ref<void(int64_t, int64_t, int64_t)> visit) {
  int64_t n = x[0], c = x[1], ih = x[2], iw = x[3];
  int64_t o = w[0], cg = w[1], kh = w[2], kw = w[3];
  int64_t oh = y[2], ow = y[3];
  int64_t og = o / groups;
  (void)c;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc) {
      int64_t g = oc / og;
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          int64_t out = ((b * o + oc) * oh + yy) * ow + xx;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = yy * strides[0] - pads[0] + ky * dilations[0];
              if (iy < 0 || iy >= ih)
                continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t ix = xx * strides[1] - pads[1] + kx * dilations[1];
                if (ix < 0 || ix >= iw)
                  continue;
                int64_t in = ((b * x[1] + g * cg + ci) * ih + iy) * iw + ix;
                int64_t wt = ((oc * cg + ci) * kh + ky) * kw + kx;
                visit(out, in, wt);
              }
            }
        }
    }
}

/// Calls `visit(outIndex, inIndex)` for the in-bounds positions of each
/// pooling window, and `window(outIndex, count)` after each window with the
/// number of its positions inside the input.
void forEachPoolTerm(ArrayRef<int64_t> x, ArrayRef<int64_t> y,
                     ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> pads,
                     function_ref<void(int64_t, int64_t)> visit,
                     function_ref<void(int64_t, int64_t)> window) {
  int64_t planes = x[0] * x[1], ih = x[2], iw = x[3], oh = y[2], ow = y[3];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t yy = 0; yy < oh; ++yy)
      for (int64_t xx = 0; xx < ow; ++xx) {
        int64_t out = (p * oh + yy) * ow + xx, count = 0;
        for (int64_t ky = 0; ky < kernel[0]; ++ky) {
          int64_t iy = yy * strides[0] - pads[0] + ky;
          if (iy < 0 || iy >= ih)
            continue;
          for (int64_t kx = 0; kx < kernel[1]; ++kx) {
            int64_t ix = xx * strides[1] - pads[1] + kx;
            if (ix < 0 || ix >= iw)
              continue;
            visit(out, (p * ih + iy) * iw + ix);
            ++count;
          }
        }
        window(out, count);
      }
}

/// The number of positions of a pooling window counted with the padding.
int64_t paddedWindowCount(int64_t yy, int64_t xx, ArrayRef<int64_t> x,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads) {
  auto extent = [&](int64_t o, int64_t axis) {
    int64_t start = o * strides[axis] - pads[axis];
    int64_t end = std::min(start + kernel[axis], x[axis + 2] + pads[axis + 2]);
    return end - start;
  };
  return extent(yy, 0) * extent(xx, 1);
}

/// The attributes an attention op shares with its gradient, and its key.
template <typename OpTy> interpreter::AttentionParams attentionParams(OpTy op) {
  interpreter::AttentionParams p;
  p.scale = op.getScale().convertToDouble();
  p.fill = op.getFill().convertToDouble();
  p.dropout = op.getDropout().convertToDouble();
  p.maskKeeps = op.getMaskKeeps();
  p.triangle = op.getMaskTriangle();
  p.stream = (uint64_t)op.getStream();
  return p;
}

class Interpreter {
public:
  explicit Interpreter(const InterpreterOptions &options) : options(options) {}

  FailureOr<std::vector<HostTensor>> run(func::FuncOp func,
                                         ArrayRef<HostTensor> args);

private:
  LogicalResult execute(Operation *op);
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
  template <typename OpTy>
  interpreter::LinearLossInputs headInputs(OpTy op, bool mean);

  const InterpreterOptions &options;
  DenseMap<Value, HostTensor> values;
};
} // namespace

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

template <typename OpTy> LogicalResult Interpreter::softmax(OpTy op, bool log) {
  const HostTensor &x = get(op.getInput());
  HostTensor y = like(op.getResult());
  AxisView v(x.shape, op.getAxis());
  for (int64_t a = 0; a < v.outer; ++a)
    for (int64_t b = 0; b < v.inner; ++b) {
      double lse = logSumExp(x.data, v, a, b);
      for (int64_t k = 0; k < v.size; ++k) {
        int64_t i = v.at(a, k, b);
        y.data[i] = log ? x.data[i] - lse : std::exp(x.data[i] - lse);
      }
    }
  set(op.getResult(), std::move(y));
  return success();
}

/// cross_entropy (from logits) and nll_loss (from log-probabilities): class
/// axis 1, labels shaped like the input without it.
template <typename OpTy>
LogicalResult Interpreter::classLoss(OpTy op, bool logits) {
  const HostTensor &x = get(op.getInput());
  const HostTensor &labels = get(op.getLabels());
  AxisView view(x.shape, 1);
  // (As a flag and a number: GCC took the optional for uninitialized.)
  bool ignoring = op.getIgnoreIndex().has_value();
  int64_t ignored = op.getIgnoreIndex().value_or(0);
  HostTensor perSample(labels.shape, elementTypeOf(op.getInput()));
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t in = 0; in < view.inner; ++in) {
      int64_t s = o * view.inner + in;
      int64_t label = (int64_t)labels.data[s];
      if (ignoring && label == ignored)
        continue;
      if (label < 0 || label >= view.size)
        return op.emitOpError() << "label " << label << " of sample " << s
                                << " is outside [0, " << view.size << ")";
      double loss;
      if (logits) {
        loss = logSumExp(x.data, view, o, in) - x.data[view.at(o, label, in)];
      } else {
        loss = -x.data[view.at(o, label, in)];
      }
      perSample.data[s] = loss;
      total += loss;
      ++counted;
    }
  switch (op.getReduction()) {
  case Reduction::none:
    set(op.getResult(), std::move(perSample));
    break;
  case Reduction::sum:
    set(op.getResult(), HostTensor({}, perSample.elementType, total));
    break;
  case Reduction::mean:
    set(op.getResult(),
        HostTensor({}, perSample.elementType,
                   counted ? total / counted
                           : std::numeric_limits<double>::quiet_NaN()));
    break;
  }
  return success();
}

/// What a head op (linear_cross_entropy, its gradient, linear_token_scores)
/// reads, its 16-bit logits rounded as its lowering stores them.
template <typename OpTy>
interpreter::LinearLossInputs Interpreter::headInputs(OpTy op, bool mean) {
  interpreter::LinearLossInputs in{get(op.getInput()),
                                   get(op.getWeight()),
                                   op.getBias() ? &get(op.getBias()) : nullptr,
                                   get(op.getLabels()),
                                   op.getIgnoreIndex(),
                                   mean};
  if (Type element = elementTypeOf(op.getInput());
      options.roundToElementType && element.getIntOrFloatBitWidth() < 32)
    in.storedLogits = element;
  return in;
}

/// linear_cross_entropy (`grads` empty) and its gradient (the input's, the
/// weight's and the bias's, null without a bias).
template <typename OpTy>
LogicalResult Interpreter::linearLoss(OpTy op, Value lossGrad,
                                      ArrayRef<Value> grads) {
  interpreter::LinearLossInputs in =
      headInputs(op, op.getReduction() == Reduction::mean);
  double loss, g = lossGrad ? get(lossGrad).data[0] : 0.0;
  std::string error;
  HostTensor dx, dw, db;
  if (!grads.empty()) {
    dx = like(grads[0]);
    dw = like(grads[1]);
    if (grads[2])
      db = like(grads[2]);
  }
  if (!interpreter::linearCrossEntropy(
          in, loss, error, lossGrad ? &g : nullptr,
          grads.empty() ? nullptr : &dx, grads.empty() ? nullptr : &dw,
          !grads.empty() && grads[2] ? &db : nullptr))
    return op.emitOpError() << error;
  set(op.getResult(), HostTensor({}, elementTypeOf(op.getResult()), loss));
  if (!grads.empty()) {
    set(grads[0], std::move(dx));
    set(grads[1], std::move(dw));
    if (grads[2])
      set(grads[2], std::move(db));
  }
  return success();
}

/// linear_token_scores: the head's summed loss and its correct rows.
LogicalResult Interpreter::tokenScores(LinearTokenScoresOp op) {
  interpreter::LinearLossInputs in = headInputs(op, /*mean=*/false);
  double loss;
  int64_t correct = 0;
  std::string error;
  if (!interpreter::linearCrossEntropy(in, loss, error, nullptr, nullptr,
                                       nullptr, nullptr, &correct))
    return op.emitOpError() << error;
  set(op.getLossSum(), HostTensor({}, elementTypeOf(op.getLossSum()), loss));
  set(op.getCorrect(),
      HostTensor({}, elementTypeOf(op.getCorrect()), (double)correct));
  return success();
}

// One case per op, in one place: this switch is the semantic reference
// every generated kernel is checked against, and a reader compares an op's
// case with its neighbours' (long, and meant to be).
LogicalResult Interpreter::execute(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) -> LogicalResult {
        if (std::optional<std::string> why = missingElements(c.getValue()))
          return c.emitOpError() << "value " << *why
                                 << ", and the interpreter needs its values";
        set(c.getResult(), HostTensor::fromAttr(c.getValue()));
        return success();
      })
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
      // Data movement
      .Case([&](ReshapeOp o) {
        HostTensor y = get(o.getInput());
        y.shape.assign(shapeOf(o.getResult()).begin(),
                       shapeOf(o.getResult()).end());
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](TransposeOp o) {
        set(o.getResult(), transposed(get(o.getInput()), o.getPerm()));
        return success();
      })
      .Case([&](BroadcastOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult());
        Index inStrides = stridesOf(x.shape), index;
        int64_t lead = y.shape.size() - x.shape.size();
        for (int64_t i = 0; i < y.numElements(); ++i) {
          unravel(i, y.shape, index);
          int64_t in = 0;
          for (int64_t d = 0; d < (int64_t)x.shape.size(); ++d)
            if (x.shape[d] != 1)
              in += index[d + lead] * inStrides[d];
          y.data[i] = x.data[in];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](SliceOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult());
        Index inStrides = stridesOf(x.shape), index;
        for (int64_t i = 0; i < y.numElements(); ++i) {
          unravel(i, y.shape, index);
          int64_t in = 0;
          for (size_t d = 0; d < index.size(); ++d)
            in += (o.getStarts()[d] + index[d] * o.getStrides()[d]) *
                  inStrides[d];
          y.data[i] = x.data[in];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](PadOp o) {
        const HostTensor &x = get(o.getInput());
        HostTensor y = like(o.getResult(), o.getValue().convertToDouble());
        Index outStrides = stridesOf(y.shape), index;
        for (int64_t i = 0; i < x.numElements(); ++i) {
          unravel(i, x.shape, index);
          bool inside = true;
          for (size_t d = 0; d < index.size(); ++d) {
            index[d] += o.getLow()[d];
            inside &= index[d] >= 0 && index[d] < y.shape[d];
          }
          if (inside)
            y.data[ravel(index, outStrides)] = x.data[i];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](ConcatOp o) {
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis());
        int64_t offset = 0;
        for (Value input : o.getInputs()) {
          const HostTensor &x = get(input);
          AxisView in(x.shape, o.getAxis());
          for (int64_t a = 0; a < in.outer; ++a)
            for (int64_t k = 0; k < in.size; ++k)
              for (int64_t b = 0; b < in.inner; ++b)
                y.data[out.at(a, offset + k, b)] = x.data[in.at(a, k, b)];
          offset += in.size;
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](GatherOp o) -> LogicalResult {
        const HostTensor &x = get(o.getData());
        const HostTensor &indices = get(o.getIndices());
        AxisView in(x.shape, o.getAxis());
        HostTensor y = like(o.getResult());
        int64_t n = indices.numElements();
        for (int64_t a = 0; a < in.outer; ++a)
          for (int64_t j = 0; j < n; ++j) {
            int64_t k = (int64_t)indices.data[j];
            if (k < 0)
              k += in.size;
            if (k < 0 || k >= in.size)
              return o.emitOpError()
                     << "index " << (int64_t)indices.data[j] << " is outside [-"
                     << in.size << ", " << in.size << ")";
            for (int64_t b = 0; b < in.inner; ++b)
              y.data[(a * n + j) * in.inner + b] = x.data[in.at(a, k, b)];
          }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](ScatterAddOp o) -> LogicalResult {
        const HostTensor &u = get(o.getUpdates());
        const HostTensor &indices = get(o.getIndices());
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis());
        int64_t n = indices.numElements();
        for (int64_t a = 0; a < out.outer; ++a)
          for (int64_t j = 0; j < n; ++j) {
            int64_t k = (int64_t)indices.data[j];
            if (k < 0)
              k += out.size;
            if (k < 0 || k >= out.size)
              return o.emitOpError()
                     << "index " << (int64_t)indices.data[j] << " is outside [-"
                     << out.size << ", " << out.size << ")";
            for (int64_t b = 0; b < out.inner; ++b)
              y.data[out.at(a, k, b)] += u.data[(a * n + j) * out.inner + b];
          }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](AttentionOp o) {
        interpreter::AttentionParams params = attentionParams(o);
        if (Value key = o.getRngKey()) {
          params.seed = (uint64_t)(int64_t)get(key).data[0];
          params.step = (uint64_t)(int64_t)get(key).data[1];
        }
        // Under bthd the [B, T, H, D] tensors are read as [B, H, T, D].
        ArrayRef<int64_t> heads =
            o.getBthd() ? ArrayRef<int64_t>(kSwapHeads) : ArrayRef<int64_t>();
        HostTensor out = transposed(like(o.getResult()), heads),
                   lse = like(o.getLogsumexp());
        interpreter::attentionForward(transposed(get(o.getQuery()), heads),
                                      transposed(get(o.getKey()), heads),
                                      transposed(get(o.getValue()), heads),
                                      o.getMask() ? &get(o.getMask()) : nullptr,
                                      params, out, lse);
        set(o.getResult(), transposed(out, heads));
        set(o.getLogsumexp(), std::move(lse));
        return success();
      })
      .Case([&](AttentionGradOp o) {
        interpreter::AttentionParams params = attentionParams(o);
        if (Value key = o.getRngKey()) {
          params.seed = (uint64_t)(int64_t)get(key).data[0];
          params.step = (uint64_t)(int64_t)get(key).data[1];
        }
        ArrayRef<int64_t> heads =
            o.getBthd() ? ArrayRef<int64_t>(kSwapHeads) : ArrayRef<int64_t>();
        HostTensor dq = transposed(like(o.getQueryGrad()), heads),
                   dk = transposed(like(o.getKeyGrad()), heads),
                   dv = transposed(like(o.getValueGrad()), heads);
        interpreter::attentionBackward(
            transposed(get(o.getQuery()), heads),
            transposed(get(o.getKey()), heads),
            transposed(get(o.getValue()), heads),
            transposed(get(o.getResult()), heads), get(o.getLogsumexp()),
            transposed(get(o.getResultGrad()), heads),
            o.getMask() ? &get(o.getMask()) : nullptr, params, dq, dk, dv);
        set(o.getQueryGrad(), transposed(dq, heads));
        set(o.getKeyGrad(), transposed(dk, heads));
        set(o.getValueGrad(), transposed(dv, heads));
        return success();
      })
      .Case([&](RowGroupsOp o) -> LogicalResult {
        const HostTensor &indices = get(o.getIndices());
        int64_t rows = o.getRows(), n = indices.numElements();
        SmallVector<int64_t> rowOf(n);
        for (int64_t j = 0; j < n; ++j) {
          int64_t k = (int64_t)indices.data[j];
          if (k < 0)
            k += rows;
          if (k < 0 || k >= rows)
            return o.emitOpError()
                   << "index " << (int64_t)indices.data[j] << " is outside [-"
                   << rows << ", " << rows << ")";
          rowOf[j] = k;
        }
        SmallVector<int64_t> groupOffsets, groupOrder;
        RowGroupsOp::group(rowOf, rows, groupOffsets, groupOrder);
        HostTensor offsets = like(o.getOffsets()), order = like(o.getOrder());
        offsets.data.assign(groupOffsets.begin(), groupOffsets.end());
        order.data.assign(groupOrder.begin(), groupOrder.end());
        set(o.getOffsets(), std::move(offsets));
        set(o.getOrder(), std::move(order));
        return success();
      })
      .Case([&](SegmentSumOp o) -> LogicalResult {
        const HostTensor &u = get(o.getUpdates());
        const HostTensor &offsets = get(o.getOffsets());
        const HostTensor &order = get(o.getOrder());
        HostTensor y = like(o.getResult());
        AxisView out(y.shape, o.getAxis()), in(u.shape, o.getAxis());
        for (int64_t k = 0; k < out.size; ++k) {
          auto begin = (int64_t)offsets.data[k],
               end = (int64_t)offsets.data[k + 1];
          if (begin < 0 || begin > end || end > in.size)
            return o.emitOpError()
                   << "row " << k << "'s group [" << begin << ", " << end
                   << ") is not within the " << in.size << " positions";
          for (int64_t p = begin; p < end; ++p) {
            auto j = (int64_t)order.data[p];
            if (j < 0 || j >= in.size)
              return o.emitOpError() << "position " << j << " is outside [0, "
                                     << in.size << ")";
            for (int64_t a = 0; a < out.outer; ++a)
              for (int64_t b = 0; b < out.inner; ++b)
                y.data[out.at(a, k, b)] += u.data[in.at(a, j, b)];
          }
        }
        set(o.getResult(), std::move(y));
        return success();
      })
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
      // Contractions and windows
      .Case([&](MatmulOp o) {
        // The operands as the product reads them, and the product before
        // its layout.
        HostTensor a = transposed(
            columnsOf(get(o.getLhs()), o.getLhsWindowAttr()), o.getLhsPerm());
        // A triangle's entries of the lhs read as zero; the result's are
        // not computed, NaN here so that a reader that depends on them
        // shows.
        auto inTriangle = [](ComparePredicate p, int64_t row, int64_t col) {
          return p == ComparePredicate::gt ? col > row : col < row;
        };
        auto overTriangle = [&](HostTensor &t, ComparePredicate p,
                                double value) {
          int64_t rows = t.shape.end()[-2], cols = t.shape.back();
          for (size_t e = 0; e < t.data.size(); ++e)
            if (inTriangle(p, (int64_t)(e / cols) % rows, (int64_t)e % cols))
              t.data[e] = value;
        };
        if (std::optional<ComparePredicate> p = o.getLhsTriangle())
          overTriangle(a, *p, 0.0);
        HostTensor b = transposed(
            columnsOf(get(o.getRhs()), o.getRhsWindowAttr()), o.getRhsPerm());
        Index productShape(a.shape.begin(), a.shape.end() - 2);
        productShape.push_back(o.getTransposeLhs() ? a.shape.back()
                                                   : a.shape.end()[-2]);
        productShape.push_back(o.getTransposeRhs() ? b.shape.end()[-2]
                                                   : b.shape.back());
        HostTensor y(productShape, elementTypeOf(o.getResult()));
        size_t r = y.shape.size();
        int64_t m = y.shape[r - 2], n = y.shape[r - 1];
        int64_t k = o.getTransposeLhs() ? a.shape[r - 2] : a.shape[r - 1];
        int64_t batches = y.numElements() / (m * n);
        bool ta = o.getTransposeLhs(), tb = o.getTransposeRhs();
        for (int64_t p = 0; p < batches; ++p) {
          const double *pa = a.data.data() + p * m * k;
          const double *pb = b.data.data() + p * k * n;
          double *py = y.data.data() + p * m * n;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double acc = 0.0;
              for (int64_t l = 0; l < k; ++l)
                acc += (ta ? pa[l * m + i] : pa[i * k + l]) *
                       (tb ? pb[j * k + l] : pb[l * n + j]);
              py[i * n + j] = acc;
            }
        }
        if (Value acc = o.getAcc())
          for (auto [out, plus] : llvm::zip(y.data, get(acc).data))
            out += plus;
        // The bias joins the sums before the result is rounded to its type.
        if (Value bias = o.getBias()) {
          const std::vector<double> &b = get(bias).data;
          for (size_t e = 0; e < y.data.size(); ++e)
            y.data[e] += b[e % n];
        }
        if (std::optional<ComparePredicate> p = o.getResultTriangle())
          overTriangle(y, *p, std::nan(""));
        set(o.getResult(), transposed(y, o.getResultPerm()));
        return success();
      })
      // A channels-last convolution is the NCHW one of its operands' NCHW
      // views, its result held channels last again.
      .Case([&](Conv2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor w = transposed(get(o.getFilter()), first);
        HostTensor y = transposed(like(o.getResult()), first);
        forEachConvTerm(x.shape, w.shape, y.shape, o.getStrides(), o.getPads(),
                        o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          y.data[out] += x.data[in] * w.data[wt];
                        });
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](Conv2DBackwardInputOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor w = transposed(get(o.getFilter()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        forEachConvTerm(dx.shape, w.shape, dy.shape, o.getStrides(),
                        o.getPads(), o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          dx.data[in] += dy.data[out] * w.data[wt];
                        });
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      .Case([&](Conv2DBackwardFilterOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dw = transposed(like(o.getResult()), first);
        forEachConvTerm(x.shape, dw.shape, dy.shape, o.getStrides(),
                        o.getPads(), o.getDilations(), o.getGroups(),
                        [&](int64_t out, int64_t in, int64_t wt) {
                          dw.data[wt] += x.data[in] * dy.data[out];
                        });
        set(o.getResult(), transposed(dw, last));
        return success();
      })
      // Channels-last windows are the NCHW ones of their operands' NCHW
      // views, as for convolutions.
      .Case([&](MaxPool2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor y = transposed(
            like(o.getResult(), -std::numeric_limits<double>::infinity()),
            first);
        forEachPoolTerm(
            x.shape, y.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t out, int64_t in) {
              y.data[out] = std::max(y.data[out], x.data[in]);
            },
            [](int64_t, int64_t) {});
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](MaxPool2DArgmaxOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor indices = transposed(like(o.getResult()), first);
        ArrayRef<int64_t> kernel = o.getKernel(), strides = o.getStrides(),
                          pads = o.getPads();
        int64_t ih = x.shape[2], iw = x.shape[3];
        int64_t oh = indices.shape[2], ow = indices.shape[3], best = -1;
        forEachPoolTerm(
            x.shape, indices.shape, kernel, strides, pads,
            [&](int64_t, int64_t in) {
              if (best < 0 || x.data[in] > x.data[best])
                best = in;
            },
            [&](int64_t out, int64_t) {
              // The position of `best` from the window's top-left corner.
              int64_t top = ((out / ow) % oh) * strides[0] - pads[0];
              int64_t left = (out % ow) * strides[1] - pads[1];
              int64_t iy = (best / iw) % ih, ix = best % iw;
              indices.data[out] =
                  best < 0 ? 0 : (double)((iy - top) * kernel[1] + ix - left);
              best = -1;
            });
        set(o.getResult(), transposed(indices, last));
        return success();
      })
      .Case([&](MaxPool2DBackwardOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor indices = transposed(get(o.getIndices()), first);
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        ArrayRef<int64_t> kernel = o.getKernel(), strides = o.getStrides(),
                          pads = o.getPads();
        int64_t planes = dx.shape[0] * dx.shape[1], ih = dx.shape[2],
                iw = dx.shape[3], oh = dy.shape[2], ow = dy.shape[3];
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t yy = 0; yy < oh; ++yy)
            for (int64_t xx = 0; xx < ow; ++xx) {
              int64_t out = (p * oh + yy) * ow + xx;
              auto position = (int64_t)indices.data[out];
              int64_t iy = yy * strides[0] - pads[0] + position / kernel[1];
              int64_t ix = xx * strides[1] - pads[1] + position % kernel[1];
              if (iy >= 0 && iy < ih && ix >= 0 && ix < iw)
                dx.data[(p * ih + iy) * iw + ix] += dy.data[out];
            }
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      .Case([&](AvgPool2DOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor x = transposed(get(o.getInput()), first);
        HostTensor y = transposed(like(o.getResult()), first);
        int64_t oh = y.shape[2], ow = y.shape[3];
        forEachPoolTerm(
            x.shape, y.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t out, int64_t in) { y.data[out] += x.data[in]; },
            [&](int64_t out, int64_t count) {
              if (o.getCountIncludePad())
                count = paddedWindowCount((out / ow) % oh, out % ow, x.shape,
                                          o.getKernel(), o.getStrides(),
                                          o.getPads());
              y.data[out] /= std::max<int64_t>(count, 1);
            });
        set(o.getResult(), transposed(y, last));
        return success();
      })
      .Case([&](AvgPool2DBackwardOp o) {
        auto [first, last] = channelsFirstViews(o.getChannelsLast());
        HostTensor dy = transposed(get(o.getGradOutput()), first);
        HostTensor dx = transposed(like(o.getResult()), first);
        int64_t oh = dy.shape[2], ow = dy.shape[3];
        SmallVector<int64_t> window;
        forEachPoolTerm(
            dx.shape, dy.shape, o.getKernel(), o.getStrides(), o.getPads(),
            [&](int64_t, int64_t in) { window.push_back(in); },
            [&](int64_t out, int64_t count) {
              if (o.getCountIncludePad())
                count = paddedWindowCount((out / ow) % oh, out % ow, dx.shape,
                                          o.getKernel(), o.getStrides(),
                                          o.getPads());
              for (int64_t in : window)
                dx.data[in] += dy.data[out] / std::max<int64_t>(count, 1);
              window.clear();
            });
        set(o.getResult(), transposed(dx, last));
        return success();
      })
      // Composites
      .Case([&](SoftmaxOp o) { return softmax(o, /*log=*/false); })
      .Case([&](LogSoftmaxOp o) { return softmax(o, /*log=*/true); })
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
      .Case([&](LayerNormOp o) {
        const HostTensor &x = get(o.getInput());
        const HostTensor &scale = get(o.getScale());
        const HostTensor &bias = get(o.getBias());
        HostTensor y = like(o.getResult());
        int64_t m = scale.numElements(), rows = x.numElements() / m;
        double eps = o.getEpsilon().convertToDouble();
        for (int64_t r = 0; r < rows; ++r) {
          const double *px = x.data.data() + r * m;
          double mean = 0.0, var = 0.0;
          for (int64_t j = 0; j < m; ++j)
            mean += px[j];
          mean /= m;
          for (int64_t j = 0; j < m; ++j)
            var += (px[j] - mean) * (px[j] - mean);
          var /= m;
          double rstd = 1.0 / std::sqrt(var + eps);
          for (int64_t j = 0; j < m; ++j)
            y.data[r * m + j] =
                (px[j] - mean) * rstd * scale.data[j] + bias.data[j];
        }
        set(o.getResult(), std::move(y));
        return success();
      })
      .Case([&](BatchNormTrainOp o) {
        const HostTensor &x = get(o.getInput());
        const HostTensor &scale = get(o.getScale());
        const HostTensor &bias = get(o.getBias());
        const HostTensor &runMean = get(o.getRunningMean());
        const HostTensor &runVar = get(o.getRunningVar());
        AxisView v(x.shape, 1);
        double eps = o.getEpsilon().convertToDouble();
        double momentum = o.getMomentum().convertToDouble();
        HostTensor y = like(o.getResult());
        HostTensor newMean = like(o.getNewRunningMean());
        HostTensor newVar = like(o.getNewRunningVar());
        int64_t count = v.outer * v.inner;
        for (int64_t c = 0; c < v.size; ++c) {
          double mean = 0.0, var = 0.0;
          for (int64_t a = 0; a < v.outer; ++a)
            for (int64_t b = 0; b < v.inner; ++b)
              mean += x.data[v.at(a, c, b)];
          mean /= count;
          for (int64_t a = 0; a < v.outer; ++a)
            for (int64_t b = 0; b < v.inner; ++b) {
              double d = x.data[v.at(a, c, b)] - mean;
              var += d * d;
            }
          var /= count;
          double rstd = 1.0 / std::sqrt(var + eps);
          for (int64_t a = 0; a < v.outer; ++a)
            for (int64_t b = 0; b < v.inner; ++b) {
              int64_t i = v.at(a, c, b);
              y.data[i] =
                  (x.data[i] - mean) * rstd * scale.data[c] + bias.data[c];
            }
          double batchVar = o.getUnbiasedRunningVar() && count > 1
                                ? var * count / (count - 1)
                                : var;
          newMean.data[c] = runMean.data[c] * momentum + mean * (1 - momentum);
          newVar.data[c] =
              runVar.data[c] * momentum + batchVar * (1 - momentum);
        }
        set(o.getResult(), std::move(y));
        set(o.getNewRunningMean(), std::move(newMean));
        set(o.getNewRunningVar(), std::move(newVar));
        return success();
      })
      .Case([&](LinearCrossEntropyOp o) { return linearLoss(o, Value(), {}); })
      .Case([&](LinearCrossEntropyGradOp o) {
        return linearLoss(
            o, o.getResultGrad(),
            {o.getInputGrad(), o.getWeightGrad(), o.getBiasGrad()});
      })
      .Case([&](LinearTokenScoresOp o) { return tokenScores(o); })
      .Case([&](CrossEntropyOp o) { return classLoss(o, /*logits=*/true); })
      .Case([&](NllLossOp o) { return classLoss(o, /*logits=*/false); })
      .Case([&](MseLossOp o) {
        const HostTensor &x = get(o.getInput());
        const HostTensor &t = get(o.getTarget());
        HostTensor perElement = like(o.getInput());
        double total = 0.0;
        for (int64_t i = 0; i < x.numElements(); ++i) {
          double d = x.data[i] - t.data[i];
          perElement.data[i] = d * d;
          total += d * d;
        }
        Type et = perElement.elementType;
        if (o.getReduction() == Reduction::none)
          set(o.getResult(), std::move(perElement));
        else
          set(o.getResult(),
              HostTensor({}, et,
                         o.getReduction() == Reduction::sum
                             ? total
                             : total / std::max<int64_t>(1, x.numElements())));
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

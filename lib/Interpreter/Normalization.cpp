//===- Normalization.cpp - the interpreter: softmax, norms, losses --------===//
//
// The ops that normalize along an axis or reduce to a loss: softmax, layer
// and batch norm, the classification and regression losses, and a linear
// head's loss with its gradients.
//
//===----------------------------------------------------------------------===//
#include "Executor.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::interpreter;

namespace {
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
} // namespace

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
LinearLossInputs Interpreter::headInputs(OpTy op, bool mean) {
  LinearLossInputs in{get(op.getInput()),
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
  LinearLossInputs in = headInputs(op, op.getReduction() == Reduction::mean);
  double loss, g = lossGrad ? get(lossGrad).data[0] : 0.0;
  std::string error;
  HostTensor dx, dw, db;
  if (!grads.empty()) {
    dx = like(grads[0]);
    dw = like(grads[1]);
    if (grads[2])
      db = like(grads[2]);
  }
  if (!linearCrossEntropy(in, loss, error, lossGrad ? &g : nullptr,
                          grads.empty() ? nullptr : &dx,
                          grads.empty() ? nullptr : &dw,
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
  LinearLossInputs in = headInputs(op, /*mean=*/false);
  double loss;
  int64_t correct = 0;
  std::string error;
  if (!linearCrossEntropy(in, loss, error, nullptr, nullptr, nullptr, nullptr,
                          &correct))
    return op.emitOpError() << error;
  set(op.getLossSum(), HostTensor({}, elementTypeOf(op.getLossSum()), loss));
  set(op.getCorrect(),
      HostTensor({}, elementTypeOf(op.getCorrect()), (double)correct));
  return success();
}

// One case per op, in one place: this switch is the semantic reference
// every generated kernel is checked against, and a reader compares an op's
// case with its neighbours' (long, and meant to be).

std::optional<LogicalResult> Interpreter::executeNormalization(Operation *op) {
  using std::exp;
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // Composites
      .Case([&](SoftmaxOp o) { return softmax(o, /*log=*/false); })
      .Case([&](LogSoftmaxOp o) { return softmax(o, /*log=*/true); })
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
      .Default([](Operation *) { return std::nullopt; });
}

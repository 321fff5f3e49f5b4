//===- LinearLoss.cpp - the interpreter's linear cross-entropy ------------===//
#include "LinearLoss.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace mlir::gpuc;

bool interpreter::linearCrossEntropy(const LinearLossInputs &in, double &loss,
                                     std::string &error, const double *lossGrad,
                                     HostTensor *dx, HostTensor *dw,
                                     HostTensor *db, int64_t *correct) {
  int64_t n = in.x.shape[0], c = in.x.shape[1], v = in.w.shape[0];
  int64_t counted = 0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t label = (int64_t)in.labels.data[s];
    if (in.ignoreIndex && label == *in.ignoreIndex)
      continue;
    if (label < 0 || label >= v) {
      error = "label " + std::to_string(label) + " of sample " +
              std::to_string(s) + " is outside [0, " + std::to_string(v) + ")";
      return false;
    }
    ++counted;
  }
  // The weight of each counted sample's gradient.
  double weight = 0.0;
  if (lossGrad)
    weight = in.mean ? *lossGrad / counted : *lossGrad;
  std::vector<double> logits(v);
  double total = 0.0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t label = (int64_t)in.labels.data[s];
    if (in.ignoreIndex && label == *in.ignoreIndex)
      continue;
    const double *xs = &in.x.data[s * c];
    double max = -std::numeric_limits<double>::infinity();
    int64_t best = 0;
    for (int64_t j = 0; j < v; ++j) {
      double z = 0.0;
      const double *wj = &in.w.data[j * c];
      for (int64_t k = 0; k < c; ++k)
        z += xs[k] * wj[k];
      if (in.storedLogits)
        z = roundToType(z, in.storedLogits);
      if (in.bias)
        z += in.bias->data[j];
      logits[j] = z;
      if (z > max) {
        max = z;
        best = j;
      }
    }
    if (correct && best == label)
      ++*correct;
    double sum = 0.0;
    for (double z : logits)
      sum += std::exp(z - max);
    double lse = max + std::log(sum);
    total += lse - logits[label];
    if (!lossGrad)
      continue;
    for (int64_t j = 0; j < v; ++j) {
      double d =
          (std::exp(logits[j] - lse) - (j == label ? 1.0 : 0.0)) * weight;
      if (in.storedLogits)
        d = roundToType(d, in.storedLogits);
      if (d == 0.0)
        continue;
      const double *wj = &in.w.data[j * c];
      for (int64_t k = 0; k < c; ++k) {
        dx->data[s * c + k] += d * wj[k];
        dw->data[j * c + k] += d * xs[k];
      }
      if (db)
        db->data[j] += d;
    }
  }
  loss = !in.mean  ? total
         : counted ? total / counted
                   : std::numeric_limits<double>::quiet_NaN();
  return true;
}

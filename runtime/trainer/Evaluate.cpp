//===- Evaluate.cpp - accuracy on the test split --------------------------===//
#include "Evaluate.h"

#include "BufferFill.h"
#include "CompiledStep.h"

#include "gpuc/runtime/TokenScores.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace gpuc::trainer {

namespace {

/// A language model on the test split's windows: the mean cross-entropy
/// per token (nats) in `meanLoss`, and the next-token accuracy returned.
/// An @eval that scores its tokens returns each batch's summed loss and
/// correct count (a short last batch's padding labelled -1, which counts
/// in neither); one compiled with --eval-logits returns the logits, whose
/// rows are scored on all of the host's cores while the device waits (at
/// GPT-2's vocabulary a batch is 824M logits).
double evaluateTokens(CompiledStep &s, const Split &test, double &meanLoss) {
  int64_t B = s.batch, T = s.window, V = s.classes;
  bool onDevice = s.evalLossSum >= 0;
  std::vector<float> tokens(B * T), logits;
  std::vector<int64_t> labels;
  if (onDevice)
    labels.resize(B * T);
  else
    logits.resize(B * T * V);
  TokenScores scores;
  int64_t counted = 0;
  // Ranks take turns over the batches.
  for (int64_t first = s.rank * B; first < test.count; first += B * s.ranks) {
    int64_t n = std::min(B, test.count - first);
    std::fill(tokens.begin(), tokens.end(), 0.0f);
    std::copy_n(&test.samples[first * T], n * T, tokens.data());
    uploadImages(s, tokens);
    counted += n * T;
    if (!onDevice) {
      s.run("eval");
      s.device->download(s.logits, logits.data(),
                         logits.size() * sizeof(float));
      scoreTokenRows(logits.data(), &test.labels[first * T], n * T, V,
                     std::thread::hardware_concurrency(), scores);
      continue;
    }
    std::fill(labels.begin(), labels.end(), -1);
    std::copy_n(&test.labels[first * T], n * T, labels.data());
    s.device->upload(s.label, labels.data(), labels.size() * sizeof(int64_t));
    s.run("eval");
    float lossSum = 0, correct = 0;
    s.device->download(s.evalLossSum, &lossSum, sizeof(float));
    s.device->download(s.evalCorrect, &correct, sizeof(float));
    scores.lossSum += lossSum;
    scores.correct += (int64_t)correct;
  }
  std::vector<double> totals = {scores.lossSum, (double)scores.correct,
                                (double)counted};
  s.sumOverRanks(totals);
  meanLoss = totals[0] / std::max(totals[2], 1.0);
  return totals[1] / std::max(totals[2], 1.0);
}

} // namespace

double evaluate(CompiledStep &s, const Split &test, const ImageSamples &images,
                double &meanLoss) {
  meanLoss = -1;
  if (!s.evaluates() || s.classes <= 0)
    return -1;
  if (s.tokens)
    return evaluateTokens(s, test, meanLoss);
  int64_t B = s.batch, C = s.classes, correct = 0;
  std::vector<float> values(B * test.sampleSize), logits(B * C);
  for (int64_t first = s.rank * B; first < test.count; first += B * s.ranks) {
    int64_t n = std::min(B, test.count - first);
    std::fill(values.begin(), values.end(), 0.0f);
    sampleRange(test, images, first, n, values.data());
    uploadImages(s, values);
    s.run("eval");
    s.device->download(s.logits, logits.data(), B * C * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (logits[i * C + c] > logits[i * C + best])
          best = c;
      correct += best == test.labels[first + i];
    }
  }
  std::vector<double> totals = {(double)correct};
  s.sumOverRanks(totals);
  return totals[0] / std::max<int64_t>(test.count, 1);
}

} // namespace gpuc::trainer

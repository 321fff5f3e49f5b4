//===- TokenScores.cpp - a language model's loss and accuracy from logits -===//
#include "gpuc/runtime/TokenScores.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace gpuc {

void scoreTokenRows(const float *logits, const int64_t *labels, int64_t rows,
                    int64_t classes, unsigned threads, TokenScores &total) {
  std::vector<double> loss(rows);
  std::vector<char> correct(rows);
  auto score = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float *row = logits + i * classes;
      int64_t best = 0;
      float top = row[0];
      for (int64_t c = 1; c < classes; ++c)
        if (row[c] > top)
          top = row[c], best = c;
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp((double)row[c] - top);
      loss[i] = std::log(sum) + top - row[labels[i]];
      correct[i] = best == labels[i];
    }
  };
  // A thread takes 1M logits at least (milliseconds of work, where starting
  // it takes tens of microseconds).
  int64_t perThread =
      std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(classes, 1));
  int64_t workers = std::clamp<int64_t>((rows + perThread - 1) / perThread, 1,
                                        std::max(threads, 1u));
  int64_t share = (rows + workers - 1) / workers;
  std::vector<std::thread> helpers;
  for (int64_t w = 1; w < workers; ++w)
    helpers.emplace_back(score, std::min(rows, w * share),
                         std::min(rows, (w + 1) * share));
  score(0, std::min(rows, share));
  for (std::thread &t : helpers)
    t.join();
  for (int64_t i = 0; i < rows; ++i) {
    total.lossSum += loss[i];
    total.correct += correct[i];
  }
}

} // namespace gpuc

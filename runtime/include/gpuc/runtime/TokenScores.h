//===- TokenScores.h - a language model's loss and accuracy from logits ---===//
#ifndef GPUC_RUNTIME_TOKENSCORES_H
#define GPUC_RUNTIME_TOKENSCORES_H

#include <cstdint>

namespace gpuc {

struct TokenScores {
  /// The cross-entropy of each row against its label (nats), summed.
  double lossSum = 0;
  /// Rows whose largest logit (the first, on a tie) is the label's.
  int64_t correct = 0;
};

/// Adds to `total` the scores of `rows` rows of `classes` logits against
/// `labels` (each in [0, classes)). A row's softmax is summed in double in
/// class order and the rows' losses onto `total` in row order, so the
/// result does not depend on `threads`, at most that many of which score
/// disjoint rows (a GPT-2 batch is 16K rows of 50K logits: seconds on one
/// core).
void scoreTokenRows(const float *logits, const int64_t *labels, int64_t rows,
                    int64_t classes, unsigned threads, TokenScores &total);

} // namespace gpuc

#endif // GPUC_RUNTIME_TOKENSCORES_H

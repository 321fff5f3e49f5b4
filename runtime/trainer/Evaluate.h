//===- Evaluate.h - accuracy on the test split ------------------*- C++ -*-===//
#ifndef GPUC_TRAINER_EVALUATE_H
#define GPUC_TRAINER_EVALUATE_H

#include "TrainingData.h"

#include "gpuc/runtime/Dataset.h"

namespace gpuc::trainer {

class CompiledStep;

/// The test split's accuracy (next-token accuracy for a language model),
/// or -1 where the model has no class scores; a language model's mean
/// cross-entropy per token (nats) in `meanLoss`, else -1. A streamed
/// split's images are decoded as `images` says, batch by batch.
double evaluate(CompiledStep &s, const Split &test, const ImageSamples &images,
                double &meanLoss);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_EVALUATE_H

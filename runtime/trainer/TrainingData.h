//===- TrainingData.h - the data a run trains on ---------------------*- C++
//-*-===//
#ifndef GPUC_TRAINER_TRAININGDATA_H
#define GPUC_TRAINER_TRAININGDATA_H

#include "Options.h"

#include "gpuc/runtime/Dataset.h"

namespace gpuc::trainer {

class CompiledStep;

/// Loads --data for the compiled step's model (images, or a token stream),
/// normalizes float images (their mean and standard deviation in `mean`,
/// `stddev`), checks that samples and labels fit the model, and applies
/// --limit-train. Any mismatch is an error naming the data.
void loadTrainingData(const CompiledStep &s, const Options &o, Dataset &data,
                      double &mean, double &stddev);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_TRAININGDATA_H

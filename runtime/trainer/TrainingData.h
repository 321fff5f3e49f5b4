//===- TrainingData.h - the data a run trains on ---------------------*- C++
//-*-===//
#ifndef GPUC_TRAINER_TRAININGDATA_H
#define GPUC_TRAINER_TRAININGDATA_H

#include "Options.h"

#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/ImageDataset.h"

namespace gpuc::trainer {

class CompiledStep;

/// The training images of an image dataset, kept decoded for --augment:
/// the loader draws each sample's crop and flip per epoch, then scales its
/// values as the split's were (`integer`: 0..255 for an integer input;
/// else normalized by `mean` and `stddev`).
struct AugmentedImages {
  std::vector<Pixels> images;
  ImageShape shape;
  Augmentation augmentation;
  /// Per channel (one value: every channel).
  std::vector<double> mean{0.0}, stddev{1.0};
  bool integer = false;
  int workers = 1;
  /// How long decoding the dataset's files took, and how many decoded
  /// (both splits); -1 seconds when the data are not image files.
  double decodeSeconds = -1;
  int64_t decoded = 0;
};

/// Loads --data for the compiled step's model (images, or a token stream),
/// normalizes float images (their mean and standard deviation in `mean`,
/// `stddev`: per channel for RGB images, else one value), checks that samples
/// and labels fit the model, and applies
/// --limit-train. Any mismatch is an error naming the data. With
/// --augment, `augmented` gets the training images.
void loadTrainingData(const CompiledStep &s, const Options &o, Dataset &data,
                      std::vector<double> &mean, std::vector<double> &stddev,
                      AugmentedImages &augmented);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_TRAININGDATA_H

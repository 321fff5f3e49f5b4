//===- TrainingData.h - the data a run trains on ----------------*- C++ -*-===//
#ifndef GPUC_TRAINER_TRAININGDATA_H
#define GPUC_TRAINER_TRAININGDATA_H

#include "Options.h"

#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/ImageDataset.h"

namespace gpuc::trainer {

class CompiledStep;

/// How the samples of an image dataset are made, where they are not the
/// split's decoded values: each training sample's crop and flip drawn per
/// epoch (--augment, from the images kept decoded in `images`, or from its
/// file), or each sample decoded when a batch needs it (a streamed split,
/// Split::files); then scaled as the step's input takes it (`integer`:
/// 0..255 for an integer input; else normalized by `mean` and `stddev`).
struct ImageSamples {
  std::vector<Pixels> images;
  ImageShape shape;
  Augmentation augmentation;
  /// Per channel (one value: every channel).
  std::vector<double> mean{0.0}, stddev{1.0};
  bool integer = false;
  int workers = 1;
  /// How long reading the dataset's files took before training, and how
  /// many were decoded then (both splits; 0 when streamed, where only
  /// their headers are read); -1 seconds when the data are not image files.
  double decodeSeconds = -1;
  int64_t decoded = 0;
  /// Streamed: the training images the normalization's mean and standard
  /// deviation were estimated from (0: computed over the whole split, or
  /// given).
  int64_t statisticsFrom = 0;
  /// Whether the loader makes the training samples (rather than copying
  /// the split's values).
  bool makesTrainingSamples(const Split &train) const {
    return augmentation.any() || train.streamed();
  }
};

/// Sample `s` of `split` into `values` (split.sampleSize floats), scaled as
/// the step's input takes it: the split's own values, or made as `images`
/// says (with epoch `epoch`'s crop and flip from `seed` when `augment`). A
/// streamed file that does not decode any more is named once on stderr and
/// the split's next sample takes its place, the same one on every run.
void sampleValues(const Split &split, const ImageSamples &images, int64_t s,
                  bool augment, uint64_t seed, int64_t epoch, float *values);

/// Samples [first, first + n) of `split` (no augmentation), sampleSize
/// floats each, into `values`, on `images.workers` threads.
void sampleRange(const Split &split, const ImageSamples &images, int64_t first,
                 int64_t n, float *values);

/// Loads --data for the compiled step's model (images, or a token stream),
/// normalizes float images (their mean and standard deviation in `mean`,
/// `stddev`: per channel for RGB images, else one value), checks that samples
/// and labels fit the model, and applies
/// --limit-train. Any mismatch is an error naming the data. With
/// --augment, `augmented` gets the training images.
void loadTrainingData(const CompiledStep &s, const Options &o, Dataset &data,
                      std::vector<double> &mean, std::vector<double> &stddev,
                      ImageSamples &augmented);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_TRAININGDATA_H

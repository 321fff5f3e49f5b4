//===- TrainingData.cpp - the data a run trains on
//--------------------------===//
#include "TrainingData.h"

#include <chrono>

#include "BufferFill.h"
#include "CompiledStep.h"

#include "gpuc/runtime/ImageDataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

namespace gpuc::trainer {

namespace {

/// An integer data input (a model whose images are UINT8, say, and which
/// casts and scales them itself) gets the data's integer values: bytes as
/// 0..255, not the [0, 1] floats float inputs get. Data that is neither
/// bytes nor integral is refused rather than truncated.
void integerSamples(const CompiledStep &s, Dataset &data,
                    const std::string &dir) {
  const PlanBuffer &input = s.plan.buffers[s.image];
  for (Split *split : {&data.train, &data.test}) {
    if (split->fromBytes) {
      for (float &v : split->samples)
        v = std::round(v * 255.0f);
      continue;
    }
    for (float v : split->samples)
      if (v != std::floor(v) || !std::isfinite(v))
        fail("the model's data input '" + input.name + "' is " + input.dtype +
             " (an integer type; UINT8/INT8/UINT16/INT16 in an ONNX model are "
             "read as I32) but the samples in " +
             dir + " are not integers (" + std::to_string(v) +
             "): give it byte images (IDX, or a .npy of uint8) or integer "
             "values");
  }
}

void checkData(const CompiledStep &s, const Dataset &data,
               const std::string &dir) {
  const PlanBuffer &in = s.plan.buffers[s.image];
  if (s.tokens) {
    // Token ids index the embedding and the class scores: one outside the
    // vocabulary would read past them.
    for (const Split *split : {&data.train, &data.test})
      for (size_t i = 0; i < split->labels.size(); ++i)
        if (s.classes && (split->labels[i] >= s.classes ||
                          split->samples[i] >= (float)s.classes))
          fail(dir + ": token " +
               std::to_string(std::max<int64_t>(split->labels[i],
                                                (int64_t)split->samples[i])) +
               " is outside the model's vocabulary of " +
               std::to_string(s.classes) +
               " (its class scores); a byte file needs a vocabulary of 256");
    return;
  }
  int64_t perSample = in.numElements() / in.shape[0];
  if (data.train.sampleSize != perSample)
    fail(dir + ": samples have " + std::to_string(data.train.sampleSize) +
         " values, but the model's input '" + s.imageName + "' takes " +
         std::to_string(perSample) + " per sample");
  if (s.label < 0 || s.plan.buffers[s.label].shape.size() != 1)
    fail("the trainer feeds one class label per sample, but this model's "
         "labels input is not [batch]; use --run-step to drive it");
  for (const Split *split : {&data.train, &data.test})
    for (int64_t i = 0; i < split->count; ++i)
      if (split->labels[i] < 0 || (s.classes && split->labels[i] >= s.classes))
        fail(dir + ": label " + std::to_string(split->labels[i]) +
             " of sample " + std::to_string(i) + " is outside [0, " +
             std::to_string(s.classes) + "), the model's classes");
}

} // namespace

/// What the model's image input takes per sample: [B, C, H, W], [B, H, W]
/// (one channel) or a flat [B, N].
ImageShape imageShapeOf(const PlanBuffer &input) {
  ImageShape shape;
  const std::vector<int64_t> &d = input.shape;
  shape.values = input.numElements() / std::max<int64_t>(d[0], 1);
  if (d.size() == 4 && (d[1] == 1 || d[1] == 3)) {
    shape.channels = d[1];
    shape.height = d[2];
    shape.width = d[3];
  } else if (d.size() == 3) {
    shape.height = d[1];
    shape.width = d[2];
  } else if (d.size() != 2) {
    fail("the model's data input '" + input.name +
         "' is not an image batch ([B, C, H, W] with 1 or 3 channels, "
         "[B, H, W] or [B, N]): it cannot train on an image folder");
  }
  return shape;
}

/// An image dataset, decoded on --workers threads; files that do not
/// decode are named once and left out.
void loadImages(const CompiledStep &s, const Options &o, Dataset &data,
                AugmentedImages &augmented) {
  int workers = o.workers
                    ? (int)o.workers
                    : (int)std::max(1u, std::thread::hardware_concurrency());
  augmented.workers = workers;
  augmented.shape = imageShapeOf(s.plan.buffers[s.image]);
  std::vector<std::string> skipped;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  if (!loadImageDataset(o.data, augmented.shape, workers, data, skipped, error,
                        augmented.augmentation.any() ? &augmented.images
                                                     : nullptr))
    fail(error);
  augmented.decodeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  augmented.decoded = data.train.count + data.test.count;
  if (s.rank == 0 && !o.quiet) {
    double rate = augmented.decoded / std::max(augmented.decodeSeconds, 1e-9);
    printf("decoded %lld images in %.2f s on %d worker%s: %.0f images/s "
           "(%.0f per worker)\n",
           (long long)augmented.decoded, augmented.decodeSeconds, workers,
           workers == 1 ? "" : "s", rate, rate / workers);
  }
  if (skipped.empty() || s.rank != 0)
    return;
  std::string list;
  for (size_t i = 0; i < skipped.size() && i < 3; ++i)
    list += "\n  " + skipped[i];
  if (skipped.size() > 3)
    list += "\n  (and " + std::to_string(skipped.size() - 3) + " more)";
  fprintf(stderr,
          "train: warning: %zu image file%s could not be decoded and %s left "
          "out:%s\n",
          skipped.size(), skipped.size() == 1 ? "" : "s",
          skipped.size() == 1 ? "is" : "are", list.c_str());
}

void loadTrainingData(const CompiledStep &s, const Options &o, Dataset &data,
                      std::vector<double> &mean, std::vector<double> &stddev,
                      AugmentedImages &augmented) {
  std::string error;
  augmented.augmentation = {o.augmentCrop, o.augmentFlip};
  bool images = !s.tokens && isImageDataset(o.data);
  if (augmented.augmentation.any() && !images)
    fail("--augment crops and flips images: --data " + o.data +
         " is not an image folder or CIFAR");
  if (images)
    loadImages(s, o, data, augmented);
  else if (s.tokens ? !loadTokenStream(o.data, s.window, o.heldOut, data, error)
                    : !loadDataset(o.data, data, error))
    fail(error);
  mean = {0.0};
  stddev = {1.0};
  // RGB images per channel, as torchvision's recipes normalize them.
  int64_t channels = images && augmented.shape.channels == 3 ? 3 : 1;
  bool given = !o.mean.empty() || !o.stddev.empty();
  if (given && (o.mean.empty() || o.stddev.empty()))
    fail(std::string(o.mean.empty() ? "--std" : "--mean") + " needs " +
         (o.mean.empty() ? "--mean" : "--std") +
         " too: a given normalization takes both");
  if (given && (s.tokens || !isFloatBuffer(s.plan.buffers[s.image])))
    fail("--mean and --std normalize float inputs, but this model's input '" +
         s.imageName + "' takes " + (s.tokens ? "token ids" : "integers") +
         ", used as they are");
  for (const std::vector<double> *values : {&o.mean, &o.stddev})
    if (given && values->size() != 1 && (int64_t)values->size() != channels)
      fail(std::string(values == &o.mean ? "--mean" : "--std") + " has " +
           std::to_string(values->size()) + " values, but the input has " +
           std::to_string(channels) + " channel" + (channels == 1 ? "" : "s") +
           ": give one per channel, or one");
  if (given) {
    auto perChannel = [&](const std::vector<double> &v) {
      return v.size() == 1 ? std::vector<double>(channels, v[0]) : v;
    };
    mean = perChannel(o.mean);
    stddev = perChannel(o.stddev);
    normalizeWith(data, channels, mean, stddev);
  } else if (isFloatBuffer(s.plan.buffers[s.image]))
    normalizeChannels(data, channels, mean, stddev);
  else if (!s.tokens)
    integerSamples(s, data, o.data);
  augmented.mean = mean;
  augmented.stddev = stddev;
  augmented.integer = !isFloatBuffer(s.plan.buffers[s.image]);
  checkData(s, data, o.data);
  if (o.limitTrain && o.limitTrain < data.train.count)
    data.train.count = o.limitTrain;
}

} // namespace gpuc::trainer

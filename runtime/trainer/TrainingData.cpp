//===- TrainingData.cpp - the data a run trains on ------------------------===//
#include "TrainingData.h"

#include <chrono>

#include "BufferFill.h"
#include "CompiledStep.h"

#include "gpuc/runtime/ImageDataset.h"
#include "gpuc/runtime/Workers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
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

/// An image dataset: an image folder listed (its headers read on --workers
/// threads) to be decoded as batches need it, or (--cache-decoded, and
/// CIFAR) decoded on --workers threads now; files that do not decode are
/// named once and left out.
void loadImages(const CompiledStep &s, const Options &o, Dataset &data,
                ImageSamples &images) {
  int workers = o.workers
                    ? (int)o.workers
                    : (int)std::max(1u, std::thread::hardware_concurrency());
  images.workers = workers;
  images.shape = imageShapeOf(s.plan.buffers[s.image]);
  std::vector<std::string> skipped;
  std::string error;
  auto start = std::chrono::steady_clock::now();
  // Augmentation from memory keeps the decoded training images (streamed,
  // each is decoded again when drawn, and none is kept).
  if (!loadImageDataset(o.data, images.shape, workers, data, skipped, error,
                        images.augmentation.any() ? &images.images : nullptr,
                        /*stream=*/!o.cacheDecoded))
    fail(error);
  images.decodeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  bool streamed = data.train.streamed();
  images.decoded = streamed ? 0 : data.train.count + data.test.count;
  if (s.rank == 0 && !o.quiet) {
    if (streamed) {
      printf("listed %lld images (headers read in %.2f s on %d worker%s); "
             "each is decoded when a batch needs it (--cache-decoded "
             "decodes them all first)\n",
             (long long)(data.train.count + data.test.count),
             images.decodeSeconds, workers, workers == 1 ? "" : "s");
    } else {
      double rate = images.decoded / std::max(images.decodeSeconds, 1e-9);
      printf("decoded %lld images in %.2f s on %d worker%s: %.0f images/s "
             "(%.0f per worker)\n",
             (long long)images.decoded, images.decodeSeconds, workers,
             workers == 1 ? "" : "s", rate, rate / workers);
    }
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

namespace {

/// A streamed training split's per-channel mean and standard deviation,
/// estimated from kStatisticsImages of its images spread evenly over it
/// (center crops, values in [0, 1]): what the whole split would give,
/// without decoding it all before the first step.
constexpr int64_t kStatisticsImages = 1024;
void estimateStatistics(const Split &train, ImageSamples &images,
                        int64_t channels, std::vector<double> &mean,
                        std::vector<double> &stddev) {
  int64_t n = std::min(train.count, kStatisticsImages);
  Split picked;
  picked.sampleSize = train.sampleSize;
  picked.count = n;
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = (int64_t)((__int128)i * train.count / n);
    picked.files.push_back(train.files[at]);
    picked.labels.push_back(train.labels[at]);
  }
  ImageSamples raw = images;
  raw.mean = {0.0};
  raw.stddev = {1.0};
  raw.integer = false;
  std::vector<float> values(n * train.sampleSize);
  sampleRange(picked, raw, 0, n, values.data());
  channelStatistics(values, train.sampleSize, channels, mean, stddev);
  images.statisticsFrom = n;
}

/// Files of a streamed split that stopped decoding, each named once.
std::mutex undecodableMutex;
std::set<std::string> undecodable;

} // namespace

void sampleValues(const Split &split, const ImageSamples &images, int64_t s,
                  bool augment, uint64_t seed, int64_t epoch, float *values) {
  const int64_t size = split.sampleSize;
  if (!augment && !split.streamed()) {
    std::copy_n(&split.samples[s * size], size, values);
    return;
  }
  if (augment && !split.streamed()) {
    if (s >= (int64_t)images.images.size())
      fail("sample " + std::to_string(s) +
           " has no decoded image to augment (" +
           std::to_string(images.images.size()) + " kept)");
    gpuc::augmentedSample(images.images[s], images.shape, images.augmentation,
                          seed, epoch, s, values);
  } else {
    // Decoded from its file; one that fails (changed or damaged since it
    // was listed) gives its place to the next sample that decodes.
    Pixels image;
    std::string error;
    int64_t at = s;
    for (int64_t tried = 0;; ++tried) {
      if (tried == split.count)
        fail("none of the " + std::to_string(split.count) +
             " image files of the split decodes any more (" + split.files[s] +
             ": " + error + ")");
      if (decodeImage(split.files[at], image, error) &&
          fitsShape(image, images.shape, error))
        break;
      {
        std::lock_guard<std::mutex> lock(undecodableMutex);
        if (undecodable.insert(split.files[at]).second)
          fprintf(stderr,
                  "train: warning: %s: %s; it no longer decodes, and the "
                  "next image of the split takes its place\n",
                  split.files[at].c_str(), error.c_str());
      }
      at = (at + 1) % split.count;
    }
    if (augment)
      gpuc::augmentedSample(image, images.shape, images.augmentation, seed,
                            epoch, s, values);
    else if (!imageToSample(image, images.shape, values, error))
      fail(split.files[at] + ": " + error);
  }
  // Scaled as the split's samples are (per channel plane).
  int64_t planes = images.mean.size();
  int64_t plane = size / planes;
  for (int64_t i = 0; i < size; ++i) {
    float &v = values[i];
    int64_t c = planes > 1 ? i / plane : 0;
    v = images.integer ? std::round(v * 255.0f)
                       : (float)((v - images.mean[c]) / images.stddev[c]);
  }
}

void sampleRange(const Split &split, const ImageSamples &images, int64_t first,
                 int64_t n, float *values) {
  // (The split's own values are copied on this thread.)
  onWorkers(n, split.streamed() ? images.workers : 1, [&](int64_t i) {
    sampleValues(split, images, first + i, /*augment=*/false, 0, 0,
                 values + i * split.sampleSize);
  });
}

void loadTrainingData(const CompiledStep &s, const Options &o, Dataset &data,
                      std::vector<double> &mean, std::vector<double> &stddev,
                      ImageSamples &augmented) {
  // --data gives the step its data input and labels; any other input (a
  // padding mask) would be read unwritten.
  for (const auto &[name, id] :
       s.plan.json["functions"]["train_step"]["inputs"].items())
    if (name != s.imageName && name != s.labelName)
      fail("the model takes input '" + name + "' beside its data '" +
           s.imageName + "'" +
           (s.labelName.empty() ? std::string()
                                : " and labels '" + s.labelName + "'") +
           ", and --data feeds only those: give every input of a step with "
           "--run-step DIR (DIR/" +
           name + ".npy), or export the model without '" + name + "'");
  std::string error;
  augmented.augmentation = {o.augmentCrop, o.augmentFlip};
  bool images = !s.tokens && isImageDataset(o.data);
  if (augmented.augmentation.any() && !images)
    fail("--augment crops and flips images: --data " + o.data +
         " is not an image folder or CIFAR");
  if (o.cacheDecoded && !images)
    fail("--cache-decoded keeps an image folder's decoded images: --data " +
         o.data +
         " is not an image folder (its samples are in memory "
         "already)");
  if (images)
    loadImages(s, o, data, augmented);
  else if (s.tokens ? !loadTokenStream(o.data, s.window, o.heldOut, data, error,
                                       s.modelShiftsLabels)
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
  } else if (isFloatBuffer(s.plan.buffers[s.image])) {
    if (data.train.streamed())
      estimateStatistics(data.train, augmented, channels, mean, stddev);
    else
      normalizeChannels(data, channels, mean, stddev);
  } else if (!s.tokens)
    integerSamples(s, data, o.data);
  augmented.mean = mean;
  augmented.stddev = stddev;
  augmented.integer = !isFloatBuffer(s.plan.buffers[s.image]);
  checkData(s, data, o.data);
  if (o.limitTrain && o.limitTrain < data.train.count)
    data.train.count = o.limitTrain;
}

} // namespace gpuc::trainer

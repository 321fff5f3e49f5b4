//===- Options.h - the trainer's command line -------------------*- C++ -*-===//
#ifndef GPUC_TRAINER_OPTIONS_H
#define GPUC_TRAINER_OPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc::trainer {

struct Options {
  std::string data, checkpointDir, resume, exportOnnx, metrics, tensorboard;
  std::string runStepInputs, outputDir, profile;
  std::string device = "auto";
  std::string artifact;
  /// --init: initial weights from a safetensors file.
  std::string init;
  bool graphs = true;
  int64_t epochs = 1, batchSize = 0, limitTrain = 0, benchSteps = 0;
  int64_t evalEvery = 0, logEvery = 50, step = 0;
  uint64_t seed = 0;
  double lr = -1, heldOut = 0.1;
  /// How long a rank waits in a collective for the others (seconds).
  double collectiveTimeout = 300;
  /// Threads decoding an image dataset (0: one per core).
  int64_t workers = 0;
  /// --cache-decoded: an image folder's images decoded once, before
  /// training, and kept in memory (else decoded as batches need them).
  bool cacheDecoded = false;
  /// --augment: random resized crops and horizontal flips of images.
  bool augmentCrop = false, augmentFlip = false;
  /// --mean, --std: the normalization of float inputs, per channel (or one
  /// value for all), instead of the training split's statistics.
  std::vector<double> mean, stddev;
  bool quiet = false;
  /// --bench-loader: times the data loader alone, no steps.
  bool benchLoader = false;
};

/// Prints "train: MESSAGE" and exits 1: every user-facing error of the
/// trainer ends here.
[[noreturn]] void fail(const std::string &message);
/// In a data-parallel run, errors name the rank that met them.
void setRankForErrors(int rank, int ranks);

/// The usage text (`train --help`).
extern const char *const kUsage;

/// The options of `argv`; a bad flag or value is an error naming it.
Options parseOptions(int argc, char **argv);

/// The directory the trainer's executable is in: its artifact.
std::string artifactDir();

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_OPTIONS_H

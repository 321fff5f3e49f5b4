//===- Dataset.h - training data: IDX (MNIST family) and .npy ---*- C++ -*-===//
#ifndef GPUC_RUNTIME_DATASET_H
#define GPUC_RUNTIME_DATASET_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc {

/// One split: `count` samples of `sampleSize` floats, and their labels
/// (`labelsPerSample` each: 1 for a class, T for a window of T tokens).
struct Split {
  int64_t count = 0, sampleSize = 0, labelsPerSample = 1;
  /// The samples were bytes (IDX, or a .npy of uint8), stored as byte/255.
  bool fromBytes = false;
  std::vector<int64_t> sampleShape;
  std::vector<float> samples;
  std::vector<int64_t> labels;
  /// A streamed split (an image folder read as batches need it): sample i
  /// is decoded from files[i], and `samples` stays empty.
  std::vector<std::string> files;
  bool streamed() const { return !files.empty(); }
};

struct Dataset {
  Split train, test;
  std::string format; // "idx", "npy", "tokens (npy)" or "bytes"
};

/// Reads a token stream for a language model: a .npy of integer token ids
/// (any shape, read in order), or any other file as its bytes (one token
/// per byte, 0-255: a character-level model). The last `heldOut` fraction
/// of the stream is the test split. Each split is cut into windows of
/// `window` tokens, back to back; a window's labels are the tokens that
/// follow each of its tokens (the stream shifted by one), or with
/// `modelShiftsLabels` the training windows' own tokens (a model that
/// computes its loss on labels[:, 1:] itself, as Hugging Face's causal LMs
/// do; the held-out split stays shifted: it is scored from the logits).
bool loadTokenStream(const std::string &path, int64_t window, double heldOut,
                     Dataset &data, std::string &error,
                     bool modelShiftsLabels = false);

/// Reads DIR: either the MNIST-family IDX files
/// ({train,t10k}-{images-idx3,labels-idx1}-ubyte, gzipped or raw) or
/// train_x.npy/train_y.npy/test_x.npy/test_y.npy. Integer images are scaled
/// to [0, 1]. Errors name the file and what is wrong with it.
bool loadDataset(const std::string &dir, Dataset &data, std::string &error);

/// Normalizes both splits with the training split's mean and standard
/// deviation (one value over all pixels), returned for the record.
void normalize(Dataset &data, double &mean, double &stddev);
/// The same per channel: samples are `channels` planes (C, H, W), each
/// normalized with the training split's mean and standard deviation of its
/// plane (torchvision's Normalize, with the dataset's own figures).
void normalizeChannels(Dataset &data, int64_t channels,
                       std::vector<double> &mean, std::vector<double> &stddev);
/// The per-channel mean and standard deviation of `samples` (each
/// `sampleSize` values of `channels` planes).
void channelStatistics(const std::vector<float> &samples, int64_t sampleSize,
                       int64_t channels, std::vector<double> &mean,
                       std::vector<double> &stddev);
/// Normalizes both splits' samples with the given per-channel `mean` and
/// `stddev` (`channels` values each).
void normalizeWith(Dataset &data, int64_t channels,
                   const std::vector<double> &mean,
                   const std::vector<double> &stddev);

} // namespace gpuc

#endif // GPUC_RUNTIME_DATASET_H

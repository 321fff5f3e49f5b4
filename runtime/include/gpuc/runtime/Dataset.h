//===- Dataset.h - training data: IDX (MNIST family) and .npy ---*- C++ -*-===//
#ifndef GPUC_RUNTIME_DATASET_H
#define GPUC_RUNTIME_DATASET_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc {

/// One split: `count` samples of `sampleSize` floats, and their labels.
struct Split {
  int64_t count = 0, sampleSize = 0;
  std::vector<int64_t> sampleShape;
  std::vector<float> samples;
  std::vector<int64_t> labels;
};

struct Dataset {
  Split train, test;
  std::string format; // "idx" or "npy"
};

/// Reads DIR: either the MNIST-family IDX files
/// ({train,t10k}-{images-idx3,labels-idx1}-ubyte, gzipped or raw) or
/// train_x.npy/train_y.npy/test_x.npy/test_y.npy. Integer images are scaled
/// to [0, 1]. Errors name the file and what is wrong with it.
bool loadDataset(const std::string &dir, Dataset &data, std::string &error);

/// Normalizes both splits with the training split's mean and standard
/// deviation (one value over all pixels), returned for the record.
void normalize(Dataset &data, double &mean, double &stddev);

} // namespace gpuc

#endif // GPUC_RUNTIME_DATASET_H

//===- Dataset.cpp - training data: IDX (MNIST family) and .npy -----------===//
#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/Npy.h"

#include <zlib.h>

#include <cmath>
#include <sys/stat.h>

namespace gpuc {
namespace {

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

/// Reads a whole file through zlib, which reads raw files unchanged.
bool readMaybeGzip(const std::string &path, std::vector<unsigned char> &bytes,
                   std::string &error) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) {
    error = "cannot open " + path;
    return false;
  }
  bytes.clear();
  unsigned char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0)
    bytes.insert(bytes.end(), buffer, buffer + n);
  int status;
  // gzerror's text lives in the gzFile: copy it before gzclose frees it.
  std::string message = gzerror(file, &status);
  bool ok = n == 0 && status == Z_OK;
  gzclose(file);
  if (!ok) {
    error = path + ": corrupt or truncated gzip data (" + message + ")";
    return false;
  }
  return true;
}

uint32_t bigEndian(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

/// An IDX file of unsigned bytes: magic 0x0000 08 <rank>, rank big-endian
/// dimensions, then the data.
bool readIdx(const std::string &path, std::vector<int64_t> &shape,
             std::vector<unsigned char> &data, std::string &error) {
  std::vector<unsigned char> bytes;
  if (!readMaybeGzip(path, bytes, error))
    return false;
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08) {
    error = path + ": not an IDX file of unsigned bytes (bad magic number)";
    return false;
  }
  int rank = bytes[3];
  if (rank < 1 || bytes.size() < 4 + 4 * (size_t)rank) {
    error = path + ": IDX header truncated";
    return false;
  }
  shape.clear();
  size_t count = 1;
  for (int d = 0; d < rank; ++d) {
    shape.push_back(bigEndian(&bytes[4 + 4 * d]));
    count *= shape.back();
  }
  size_t header = 4 + 4 * rank;
  if (bytes.size() - header != count) {
    error = path + ": holds " + std::to_string(bytes.size() - header) +
            " data bytes where its header promises " + std::to_string(count) +
            " (truncated or corrupt)";
    return false;
  }
  data.assign(bytes.begin() + header, bytes.end());
  return true;
}

std::string findIdx(const std::string &dir, const std::string &stem) {
  for (const char *suffix : {"", ".gz"}) {
    std::string path = dir + "/" + stem + suffix;
    if (exists(path))
      return path;
  }
  return "";
}

bool loadIdxSplit(const std::string &dir, const std::string &prefix,
                  Split &split, std::string &error) {
  std::string images = findIdx(dir, prefix + "-images-idx3-ubyte");
  std::string labels = findIdx(dir, prefix + "-labels-idx1-ubyte");
  if (images.empty() || labels.empty()) {
    error = dir + ": missing " + prefix + "-images-idx3-ubyte[.gz] or " +
            prefix + "-labels-idx1-ubyte[.gz]";
    return false;
  }
  std::vector<int64_t> imageShape, labelShape;
  std::vector<unsigned char> pixels, classes;
  if (!readIdx(images, imageShape, pixels, error) ||
      !readIdx(labels, labelShape, classes, error))
    return false;
  if (labelShape.size() != 1 || imageShape[0] != labelShape[0]) {
    error = images + " has " + std::to_string(imageShape[0]) + " images but " +
            labels + " has " + std::to_string(labelShape[0]) + " labels";
    return false;
  }
  split.count = imageShape[0];
  split.sampleShape.assign(imageShape.begin() + 1, imageShape.end());
  split.sampleSize = split.count ? pixels.size() / split.count : 0;
  split.samples.resize(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i)
    split.samples[i] = pixels[i] / 255.0f;
  split.fromBytes = true;
  split.labels.assign(classes.begin(), classes.end());
  return true;
}

bool loadNpySplit(const std::string &dir, const std::string &prefix,
                  Split &split, std::string &error) {
  NpyArray x, y;
  if (!readNpy(dir + "/" + prefix + "_x.npy", x, error) ||
      !readNpy(dir + "/" + prefix + "_y.npy", y, error))
    return false;
  if (x.shape.empty() || y.shape.size() != 1 || x.shape[0] != y.shape[0]) {
    error = dir + "/" + prefix + "_x.npy and " + prefix +
            "_y.npy disagree: x must be [N, ...] and y [N]";
    return false;
  }
  if (y.dtype[1] == 'f') {
    error =
        dir + "/" + prefix + "_y.npy: labels must be integers, not " + y.dtype;
    return false;
  }
  split.count = x.shape[0];
  split.sampleShape.assign(x.shape.begin() + 1, x.shape.end());
  split.sampleSize = split.count ? x.numElements() / split.count : 0;
  bool bytes = x.dtype == "|u1";
  split.fromBytes = bytes;
  split.samples.resize(x.numElements());
  for (int64_t i = 0; i < x.numElements(); ++i)
    split.samples[i] = bytes ? x.at(i) / 255.0 : x.at(i);
  split.labels.resize(y.numElements());
  for (int64_t i = 0; i < y.numElements(); ++i)
    split.labels[i] = (int64_t)y.at(i);
  return true;
}
} // namespace

bool loadDataset(const std::string &dir, Dataset &data, std::string &error) {
  if (!exists(dir)) {
    error = "--data " + dir + ": no such directory";
    return false;
  }
  if (exists(dir + "/train_x.npy")) {
    data.format = "npy";
    return loadNpySplit(dir, "train", data.train, error) &&
           loadNpySplit(dir, "test", data.test, error);
  }
  data.format = "idx";
  if (!loadIdxSplit(dir, "train", data.train, error) ||
      !loadIdxSplit(dir, "t10k", data.test, error)) {
    error += "\n  (--data expects the MNIST-family IDX files, e.g. "
             "/usr/share/datasets/fashion-mnist, or train_x.npy, train_y.npy, "
             "test_x.npy, test_y.npy)";
    return false;
  }
  if (data.train.sampleSize != data.test.sampleSize) {
    error = dir + ": train samples have " +
            std::to_string(data.train.sampleSize) + " values, test samples " +
            std::to_string(data.test.sampleSize);
    return false;
  }
  return true;
}

bool loadTokenStream(const std::string &path, int64_t window, double heldOut,
                     Dataset &data, std::string &error,
                     bool modelShiftsLabels) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "--data " + path +
            ": not a file (a language model trains on a token file: a .npy "
            "of integer token ids, or a text file read as bytes)";
    return false;
  }
  std::vector<int64_t> tokens;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    NpyArray array;
    if (!readNpy(path, array, error))
      return false;
    if (array.dtype[1] == 'f' || array.dtype[1] == 'b') {
      error = path + ": token ids must be integers, not " + array.dtype;
      return false;
    }
    tokens.resize(array.numElements());
    for (int64_t i = 0; i < array.numElements(); ++i) {
      double v = array.at(i);
      if (!(v >= 0 && v < 16777216.0)) {
        error = path + ": token " + std::to_string((long long)v) + " at " +
                std::to_string(i) + " is not an id in [0, 2^24)";
        return false;
      }
      tokens[i] = (int64_t)v;
    }
    data.format = "tokens (npy)";
  } else {
    std::vector<unsigned char> bytes;
    if (!readMaybeGzip(path, bytes, error))
      return false;
    tokens.assign(bytes.begin(), bytes.end());
    data.format = "bytes";
  }
  // Each split needs one window and the token after it.
  int64_t n = tokens.size();
  int64_t testTokens = (int64_t)(n * heldOut);
  int64_t trainTokens = n - testTokens;
  // (Only the training split follows the model's shift: the held-out
  // split is scored from the logits, each against the token after it.)
  auto cut = [&](int64_t begin, int64_t length, Split &split, int shift) {
    split.count = length > window ? (length - 1) / window : 0;
    split.sampleSize = window;
    split.labelsPerSample = window;
    split.sampleShape = {window};
    split.samples.resize(split.count * window);
    split.labels.resize(split.count * window);
    for (int64_t i = 0; i < split.count * window; ++i) {
      split.samples[i] = (float)tokens[begin + i];
      split.labels[i] = tokens[begin + i + shift];
    }
  };
  cut(0, trainTokens, data.train, modelShiftsLabels ? 0 : 1);
  cut(trainTokens, testTokens, data.test, 1);
  if (data.train.count == 0 || (heldOut > 0 && data.test.count == 0)) {
    error = path + ": " + std::to_string(n) + " tokens are too few for " +
            "windows of " + std::to_string(window) + " in both splits (the " +
            "last " + std::to_string((int)std::lround(heldOut * 100)) +
            "% is held out)";
    return false;
  }
  return true;
}

void normalize(Dataset &data, double &mean, double &stddev) {
  std::vector<double> means, stddevs;
  normalizeChannels(data, 1, means, stddevs);
  mean = means[0];
  stddev = stddevs[0];
}

void channelStatistics(const std::vector<float> &samples, int64_t sampleSize,
                       int64_t channels, std::vector<double> &mean,
                       std::vector<double> &stddev) {
  int64_t plane = sampleSize / std::max<int64_t>(channels, 1);
  std::vector<double> sum(channels, 0.0), squares(channels, 0.0);
  for (size_t i = 0; i < samples.size(); ++i) {
    double v = samples[i];
    int64_t c = plane ? (int64_t)(i % sampleSize) / plane : 0;
    sum[c] += v;
    squares[c] += v * v;
  }
  double n = std::max<double>((double)samples.size() / channels, 1);
  mean.assign(channels, 0.0);
  stddev.assign(channels, 1.0);
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = sum[c] / n;
    stddev[c] = std::sqrt(std::max(squares[c] / n - mean[c] * mean[c], 1e-12));
  }
}

void normalizeChannels(Dataset &data, int64_t channels,
                       std::vector<double> &mean, std::vector<double> &stddev) {
  channelStatistics(data.train.samples, data.train.sampleSize, channels, mean,
                    stddev);
  normalizeWith(data, channels, mean, stddev);
}

void normalizeWith(Dataset &data, int64_t channels,
                   const std::vector<double> &mean,
                   const std::vector<double> &stddev) {
  int64_t plane = data.train.sampleSize / std::max<int64_t>(channels, 1);
  for (Split *split : {&data.train, &data.test})
    for (size_t i = 0; i < split->samples.size(); ++i) {
      int64_t c = plane ? (int64_t)(i % split->sampleSize) / plane : 0;
      float &v = split->samples[i];
      v = (float)((v - mean[c]) / stddev[c]);
    }
}

} // namespace gpuc

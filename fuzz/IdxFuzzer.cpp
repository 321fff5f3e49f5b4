//===- IdxFuzzer.cpp - MNIST-family IDX files, raw and gzipped ------------===//
//
// The input is the training images file of an otherwise valid dataset
// directory (one test image and label, one training label); an odd first
// byte writes it gzipped-named, so zlib's inflate and its error paths read
// it.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "gpuc/runtime/Dataset.h"

#include <unistd.h>

namespace {
void writeIdx(const std::string &name, const std::vector<uint8_t> &bytes) {
  gpuc::fuzz::writeInput(name, bytes.data(), bytes.size());
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool prepared = [] {
    // Magic 0x00000801 / 0x00000803, big-endian dimensions.
    writeIdx("train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 1, 3});
    writeIdx("t10k-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 1, 7});
    writeIdx("t10k-images-idx3-ubyte",
             {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4});
    return true;
  }();
  (void)prepared;
  bool gzipped = size > 0 && (data[0] & 1);
  std::string raw = gpuc::fuzz::workDir() + "/train-images-idx3-ubyte";
  unlink(raw.c_str());
  unlink((raw + ".gz").c_str());
  gpuc::fuzz::writeInput(gzipped ? "train-images-idx3-ubyte.gz"
                                 : "train-images-idx3-ubyte",
                         data, size);
  gpuc::Dataset dataset;
  std::string error;
  gpuc::loadDataset(gpuc::fuzz::workDir(), dataset, error);
  return 0;
}

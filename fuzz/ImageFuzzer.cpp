//===- ImageFuzzer.cpp - JPEG and PNG files of an image folder -----------===//
//
// The input is an image file as the trainer meets it in an image folder:
// its header read before training (readImageHeader), then decoded and
// brought to a model's input (center crop, and the random resized crop
// and flip of --augment). The first byte picks the model's input shape,
// so both the resampler and the flat-input check see every image.
//
//===----------------------------------------------------------------------===//
#include "FuzzInput.h"
#include "gpuc/runtime/ImageDataset.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  // An RGB 224x224 input, a gray 28x28 one, or a flat one of 784 values.
  gpuc::ImageShape shapes[] = {
      {3, 224, 224, 3 * 224 * 224}, {1, 28, 28, 784}, {1, 0, 0, 784}};
  const gpuc::ImageShape &shape = shapes[data[0] % 3];
  std::string path = gpuc::fuzz::writeInput("image", data + 1, size - 1);
  gpuc::Pixels header, image;
  std::string error;
  bool listed = gpuc::readImageHeader(path, header, error) &&
                gpuc::fitsShape(header, shape, error);
  // Decoded whatever the header said: a file may change after listing.
  if (!gpuc::decodeImage(path, image, error))
    return 0;
  // Huge images would only measure the resampler's time.
  if (image.height * image.width > (int64_t(1) << 22))
    return 0;
  if (listed && (header.height != image.height || header.width != image.width))
    abort(); // the header and the decoded image disagree
  std::vector<float> values(shape.values);
  if (!gpuc::imageToSample(image, shape, values.data(), error))
    return 0;
  if (shape.height)
    gpuc::augmentedSample(image, shape, {true, true}, 1, 0, 0, values.data());
  return 0;
}

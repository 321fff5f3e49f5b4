//===- ImageDataset.h - image datasets as people keep them ------*- C++ -*-===//
//
// Two layouts: the ImageFolder one (DIR/train/<class>/*.jpg|png and
// DIR/val/<class>/..., classes in name order, as torchvision numbers them)
// and CIFAR-10/100's binary batches. Images are decoded with libjpeg-turbo
// and libpng and brought to the model's input shape: resized so that the
// crop keeps 87.5 % of the shorter side, then center-cropped
// (torchvision's evaluation recipe; an image already of the input's size
// is kept as it is), with channels converted (gray to RGB by copying, RGB
// to gray by luminance).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_IMAGEDATASET_H
#define GPUC_RUNTIME_IMAGEDATASET_H

#include "gpuc/runtime/Dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc {

/// 8-bit pixels of one image, rows of `width` pixels of `channels` (1 or
/// 3) interleaved values.
struct Pixels {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<unsigned char> data;
};

/// What a model's image input takes per sample. `height` and `width` 0:
/// a flat input of `values` per sample, which an image of exactly that
/// many values fills unchanged.
struct ImageShape {
  int64_t channels = 1, height = 0, width = 0, values = 0;
};

/// Decodes the JPEG or PNG file at `path` (by its first bytes) to gray or
/// RGB pixels. False with `error` naming the file and the decoder's reason.
bool decodeImage(const std::string &path, Pixels &image, std::string &error);

/// The size and channels of the JPEG or PNG file at `path` from its header
/// (`image.data` stays empty), without decoding it: what tells a damaged or
/// foreign file from an image before training. False with `error` naming
/// the reason.
bool readImageHeader(const std::string &path, Pixels &image,
                     std::string &error);

/// Whether an image of `image`'s size can become a sample of `shape` (a
/// flat input takes only images of its own size); false with `error`.
bool fitsShape(const Pixels &image, const ImageShape &shape,
               std::string &error);

/// `image` as `shape`'s values in [0, 1], channel-major (C, H, W), into
/// `out`; false with `error` when a flat shape does not fit the image.
bool imageToSample(const Pixels &image, const ImageShape &shape, float *out,
                   std::string &error);

/// torchvision's training recipe, applied by the loader to each sample of
/// each epoch: a random resized crop (8 % to 100 % of the area, aspect 3/4
/// to 4/3, resized to the input) and a horizontal flip with probability
/// 1/2.
struct Augmentation {
  bool crop = false, flip = false;
  bool any() const { return crop || flip; }
};

/// `image` as `shape`'s values in [0, 1] (channel-major) into `out`, with
/// the random choices of `augmentation` drawn from (seed, epoch, sample):
/// the same sample in the same epoch is the same values, on any thread
/// and after any resume.
void augmentedSample(const Pixels &image, const ImageShape &shape,
                     const Augmentation &augmentation, uint64_t seed,
                     int64_t epoch, int64_t sample, float *out);

/// Whether DIR looks like an image dataset this runtime reads: a train/
/// folder of class folders, or CIFAR's binary batches.
bool isImageDataset(const std::string &dir);

/// The images of an image dataset, decoded by `workers` threads into
/// samples of `shape`. Files whose extension is not an image's are
/// ignored; image files that cannot be decoded are skipped and listed in
/// `skipped` ("path: reason"). Errors name the folder and the layout
/// expected.
/// With `trainImages`, the training split's decoded images are kept there
/// too, in the split's order, for augmentation.
/// With `stream`, an image folder's splits are lists of files (Split::files)
/// to decode when a batch needs them: only their headers are read here
/// (on the `workers` threads), and a file whose header is damaged is
/// skipped as above. CIFAR's batches are small and always decoded.
bool loadImageDataset(const std::string &dir, const ImageShape &shape,
                      int workers, Dataset &data,
                      std::vector<std::string> &skipped, std::string &error,
                      std::vector<Pixels> *trainImages = nullptr,
                      bool stream = false);

} // namespace gpuc

#endif // GPUC_RUNTIME_IMAGEDATASET_H

//===- ImageDecode.cpp - JPEG and PNG to the model's input ----------------===//
//
// Decoding goes through libjpeg-turbo and libpng; the resampling is the
// antialiased bilinear filter torchvision's Resize uses on PIL images (a
// triangle whose support widens with the downscale), so a model trained on
// torchvision's evaluation transform sees the same pixels within rounding.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/ImageDataset.h"
#include "gpuc/runtime/Philox.h"

// (jpeglib.h uses FILE without including its header.)
#include <cstdio>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <fstream>
#include <iterator>

namespace gpuc {
namespace {

bool readFile(const std::string &path, std::vector<unsigned char> &bytes,
              std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open";
    return false;
  }
  bytes.assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
  return true;
}

/// libjpeg reports errors through error_exit, which must not return: it
/// jumps back to decodeJpeg with the message.
struct JpegError {
  jpeg_error_mgr manager;
  jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};

void jpegErrorExit(j_common_ptr info) {
  auto *error = reinterpret_cast<JpegError *>(info->err);
  (*info->err->format_message)(info, error->message);
  longjmp(error->back, 1);
}

/// libjpeg's warnings go nowhere (it would print them), except that a file
/// that ends early is an error: the rest of its image would be gray.
void jpegWarning(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF)
    jpegErrorExit(info);
}

/// The most pixels an image may have: 8192 x 8192. A header can claim
/// 65,500 x 65,500 in a few hundred bytes, and decoding it (a progressive
/// JPEG keeps every coefficient of the image) would take gigabytes; no
/// training image comes near (ImageNet's largest are about 10 MP).
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;
/// What libjpeg may allocate for one image's large buffers, past which it
/// stops with an error (it has no backing store to spill to).
constexpr long kMaxJpegMemory = 1L << 30;

bool refuseHugeImage(int64_t width, int64_t height, std::string &error) {
  if (width * height <= kMaxImagePixels)
    return false;
  error = "an image of " + std::to_string(width) + "x" +
          std::to_string(height) + " pixels, more than gpuc decodes (" +
          std::to_string(kMaxImagePixels) +
          "): a damaged header, or an image to shrink first";
  return true;
}

/// Routes libjpeg's errors and warnings for `info` to `jerr` (the caller
/// sets jerr.back with setjmp, in its own frame, before any libjpeg call).
void catchJpegErrors(jpeg_decompress_struct &info, JpegError &jerr) {
  info.err = jpeg_std_error(&jerr.manager);
  jerr.manager.error_exit = jpegErrorExit;
  jerr.manager.emit_message = jpegWarning;
  jerr.message[0] = 0;
}

// Only trivially destructible locals live between setjmp and the decoder's
// calls: a jump back skips no destructor.
bool decodeJpeg(const std::vector<unsigned char> &bytes, Pixels &image,
                std::string &error) {
  jpeg_decompress_struct info;
  JpegError jerr;
  catchJpegErrors(info, jerr);
  if (setjmp(jerr.back)) {
    jpeg_destroy_decompress(&info);
    error = std::string("a damaged or truncated JPEG (") + jerr.message + ")";
    return false;
  }
  jpeg_create_decompress(&info);
  info.mem->max_memory_to_use = kMaxJpegMemory;
  jpeg_mem_src(&info, bytes.data(), (unsigned long)bytes.size());
  jpeg_read_header(&info, TRUE);
  if (refuseHugeImage(info.image_width, info.image_height, error)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  bool gray = info.num_components == 1;
  info.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  image.height = info.output_height;
  image.width = info.output_width;
  image.channels = info.output_components;
  image.data.resize(image.height * image.width * image.channels);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = image.data.data() +
                   (int64_t)info.output_scanline * image.width * image.channels;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

bool decodePng(const std::vector<unsigned char> &bytes, Pixels &image,
               std::string &error) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    error = std::string("not a PNG libpng can read (") + png.message + ")";
    return false;
  }
  // Alpha is composited over black; palettes and 16-bit samples become
  // 8-bit gray or RGB.
  if (refuseHugeImage(png.width, png.height, error)) {
    png_image_free(&png);
    return false;
  }
  bool color = png.format & PNG_FORMAT_FLAG_COLOR;
  png.format = color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  image.height = png.height;
  image.width = png.width;
  image.channels = color ? 3 : 1;
  image.data.resize(PNG_IMAGE_SIZE(png));
  png_color black{0, 0, 0};
  if (!png_image_finish_read(&png, &black, image.data.data(), 0, nullptr)) {
    error = std::string("a damaged PNG (") + png.message + ")";
    png_image_free(&png);
    return false;
  }
  return true;
}

/// The antialiased bilinear filter (a triangle whose support widens with
/// the downscale) from `in` samples to outputs [begin, end) of `out`: for
/// output o, `taps` inputs at index[(o - begin) * taps + j] with weights
/// weight[...]. Rows shorter than `taps` are padded with zero weights at a
/// valid index, which add exactly nothing.
struct Taps {
  int64_t taps = 0;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

Taps taps(int64_t in, int64_t out, int64_t begin, int64_t end) {
  Taps t;
  double scale = (double)in / out, support = std::max(scale, 1.0);
  std::vector<std::vector<float>> weights;
  std::vector<int64_t> first;
  for (int64_t o = begin; o < end; ++o) {
    double center = (o + 0.5) * scale;
    int64_t lo = std::max<int64_t>(0, (int64_t)std::floor(center - support));
    int64_t hi = std::min<int64_t>(in, (int64_t)std::ceil(center + support));
    std::vector<float> w;
    double total = 0;
    for (int64_t i = lo; i < hi; ++i) {
      double x = std::fabs((i + 0.5 - center) / support);
      w.push_back((float)std::max(0.0, 1.0 - x));
      total += w.back();
    }
    for (float &v : w)
      v = (float)(v / total);
    t.taps = std::max<int64_t>(t.taps, (int64_t)w.size());
    first.push_back(lo);
    weights.push_back(std::move(w));
  }
  for (size_t o = 0; o < weights.size(); ++o)
    for (int64_t j = 0; j < t.taps; ++j) {
      bool real = j < (int64_t)weights[o].size();
      t.index.push_back(real ? first[o] + j : first[o]);
      t.weight.push_back(real ? weights[o][j] : 0.0f);
    }
  return t;
}

/// One row of `C`-channel pixels `in` filtered by `across` into `width`
/// output pixels: a pixel's channels share its taps' loads of index and
/// weight.
template <int C>
void filterRow(const Taps &across, const float *in, int64_t width, float *row) {
  for (int64_t x = 0; x < width; ++x) {
    const int64_t *index = &across.index[x * across.taps];
    const float *weight = &across.weight[x * across.taps];
    float sum[C] = {};
    for (int64_t j = 0; j < across.taps; ++j)
      for (int k = 0; k < C; ++k)
        sum[k] += weight[j] * in[index[j] * C + k];
    for (int k = 0; k < C; ++k)
      row[x * C + k] = sum[k];
  }
}

/// The part [top, top + height) x [left, left + width) of the box
/// (boxTop, boxLeft, boxHeight, boxWidth) of `image` resized to outHeight x
/// outWidth, as floats in 0..255 (rows of `width` pixels). Only the input
/// rows and the output pixels the part needs are computed: a row pass into
/// floats, then each output row as a weighted sum of whole rows, which
/// vectorizes. Each value adds its taps in order, as a pixel-by-pixel
/// filter would.
std::vector<float> resized(const Pixels &image, int64_t boxTop, int64_t boxLeft,
                           int64_t boxHeight, int64_t boxWidth,
                           int64_t outHeight, int64_t outWidth, int64_t top,
                           int64_t left, int64_t height, int64_t width) {
  const int64_t c = image.channels;
  Taps across = taps(boxWidth, outWidth, left, left + width);
  Taps down = taps(boxHeight, outHeight, top, top + height);
  // The input rows the part reads (relative to the box).
  int64_t firstRow = boxHeight, lastRow = -1;
  for (int64_t i : down.index) {
    firstRow = std::min(firstRow, i);
    lastRow = std::max(lastRow, i);
  }
  const int64_t rowValues = width * c;
  std::vector<float> rows((lastRow - firstRow + 1) * rowValues);
  std::vector<float> in(boxWidth * c);
  for (int64_t y = firstRow; y <= lastRow; ++y) {
    const unsigned char *src =
        &image.data[((boxTop + y) * image.width + boxLeft) * c];
    for (int64_t i = 0; i < boxWidth * c; ++i)
      in[i] = src[i];
    float *row = &rows[(y - firstRow) * rowValues];
    if (c == 3)
      filterRow<3>(across, in.data(), width, row);
    else
      filterRow<1>(across, in.data(), width, row);
  }
  std::vector<float> out(height * rowValues, 0.0f);
  for (int64_t y = 0; y < height; ++y) {
    float *o = &out[y * rowValues];
    for (int64_t j = 0; j < down.taps; ++j) {
      float w = down.weight[y * down.taps + j];
      const float *row =
          &rows[(down.index[y * down.taps + j] - firstRow) * rowValues];
      for (int64_t i = 0; i < rowValues; ++i)
        o[i] += w * row[i];
    }
  }
  return out;
}

/// `values` (rows of `rowWidth` pixels of `c` channels, 0..255) from
/// (top, left) as `channels` channels in [0, 1], channel-major, `height` x
/// `width`, mirrored when `flip`.
void writeSample(const std::vector<float> &values, int64_t rowWidth, int64_t c,
                 int64_t top, int64_t left, int64_t height, int64_t width,
                 int64_t channels, bool flip, float *out) {
  for (int64_t k = 0; k < channels; ++k)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        int64_t from = flip ? width - 1 - x : x;
        const float *p = &values[((top + y) * rowWidth + left + from) * c];
        // Gray from RGB by luminance (ITU-R 601, PIL's "L"); RGB from gray
        // by copying.
        float v = c == channels ? p[k]
                  : c == 1      ? p[0]
                                : 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
        out[(k * height + y) * width + x] = v / 255.0f;
      }
}

/// The first `limit` bytes of the file at `path` (all of it when shorter).
bool readFileStart(const std::string &path, size_t limit,
                   std::vector<unsigned char> &bytes, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open";
    return false;
  }
  bytes.resize(limit);
  in.read(reinterpret_cast<char *>(bytes.data()), (std::streamsize)limit);
  bytes.resize((size_t)in.gcount());
  return true;
}

/// A JPEG's size and channels from its header alone. False when the header
/// is damaged or (`complete` false) may lie past the bytes given.
bool jpegHeader(const std::vector<unsigned char> &bytes, bool complete,
                Pixels &image, std::string &error) {
  jpeg_decompress_struct info;
  JpegError jerr;
  catchJpegErrors(info, jerr);
  if (setjmp(jerr.back)) {
    jpeg_destroy_decompress(&info);
    error = complete ? std::string("a damaged or truncated JPEG (") +
                           jerr.message + ")"
                     : "";
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), (unsigned long)bytes.size());
  jpeg_read_header(&info, TRUE);
  image.height = info.image_height;
  image.width = info.image_width;
  image.channels = info.num_components == 1 ? 1 : 3;
  jpeg_destroy_decompress(&info);
  return !refuseHugeImage(image.width, image.height, error);
}

constexpr unsigned char kJpegMagic[] = {0xFF, 0xD8, 0xFF},
                        kPngMagic[] = {0x89, 'P', 'N', 'G'};
bool isJpeg(const std::vector<unsigned char> &bytes) {
  return bytes.size() >= 3 &&
         std::equal(kJpegMagic, kJpegMagic + 3, bytes.begin());
}
bool isPng(const std::vector<unsigned char> &bytes) {
  return bytes.size() >= 4 &&
         std::equal(kPngMagic, kPngMagic + 4, bytes.begin());
}

} // namespace

bool decodeImage(const std::string &path, Pixels &image, std::string &error) {
  std::vector<unsigned char> bytes;
  if (!readFile(path, bytes, error))
    return false;
  if (isJpeg(bytes))
    return decodeJpeg(bytes, image, error);
  if (isPng(bytes))
    return decodePng(bytes, image, error);
  error = bytes.empty() ? "an empty file" : "neither a JPEG nor a PNG";
  return false;
}

bool readImageHeader(const std::string &path, Pixels &image,
                     std::string &error) {
  // A header fits in the first 64 KiB unless metadata (EXIF, an embedded
  // thumbnail) comes first: then the whole file is read.
  constexpr size_t kHeaderBytes = 64 << 10;
  std::vector<unsigned char> bytes;
  if (!readFileStart(path, kHeaderBytes, bytes, error))
    return false;
  bool complete = bytes.size() < kHeaderBytes;
  image.data.clear();
  if (isJpeg(bytes)) {
    if (jpegHeader(bytes, complete, image, error))
      return true;
    if (complete)
      return false;
    return readFile(path, bytes, error) &&
           jpegHeader(bytes, /*complete=*/true, image, error);
  }
  if (isPng(bytes)) {
    // The IHDR chunk comes first, so the start of the file is enough.
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
      error = std::string("not a PNG libpng can read (") + png.message + ")";
      return false;
    }
    image.height = png.height;
    image.width = png.width;
    image.channels = png.format & PNG_FORMAT_FLAG_COLOR ? 3 : 1;
    png_image_free(&png);
    return !refuseHugeImage(image.width, image.height, error);
  }
  error = bytes.empty() ? "an empty file" : "neither a JPEG nor a PNG";
  return false;
}

bool fitsShape(const Pixels &image, const ImageShape &shape,
               std::string &error) {
  if (shape.height ||
      shape.channels * image.height * image.width == shape.values)
    return true;
  error = "a " + std::to_string(image.width) + "x" +
          std::to_string(image.height) + " image does not fill the model's " +
          std::to_string(shape.values) +
          " input values (a flat input takes images of its size as they are)";
  return false;
}

bool imageToSample(const Pixels &image, const ImageShape &shape, float *out,
                   std::string &error) {
  int64_t c = image.channels;
  int64_t height = shape.height ? shape.height : image.height;
  int64_t width = shape.width ? shape.width : image.width;
  if (!fitsShape(image, shape, error))
    return false;
  // The evaluation recipe: the shorter side to crop / 0.875, then the
  // center crop. An image of the input's size is kept as it is.
  std::vector<float> values;
  int64_t top = 0, left = 0, rowWidth = width;
  if (image.height == height && image.width == width) {
    values.assign(image.data.begin(), image.data.end());
  } else {
    double side = std::round(std::max(height, width) / 0.875);
    double scale = side / std::min(image.height, image.width);
    int64_t h = std::max<int64_t>(height, std::lround(image.height * scale));
    int64_t w = std::max<int64_t>(width, std::lround(image.width * scale));
    values = resized(image, 0, 0, image.height, image.width, h, w,
                     (int64_t)std::lround((h - height) / 2.0),
                     (int64_t)std::lround((w - width) / 2.0), height, width);
  }
  writeSample(values, rowWidth, c, top, left, height, width, shape.channels,
              /*flip=*/false, out);
  return true;
}

void augmentedSample(const Pixels &image, const ImageShape &shape,
                     const Augmentation &augmentation, uint64_t seed,
                     int64_t epoch, int64_t sample, float *out) {
  // Draw k of this sample in this epoch, on a stream of its own (apart
  // from dropout's).
  const uint64_t kAugmentationStream = 0x417567;
  int64_t draws = 0;
  auto uniform = [&] {
    return (double)philoxUniform(seed, (uint64_t)epoch, kAugmentationStream,
                                 (uint64_t)sample * 64 + draws++);
  };
  int64_t height = shape.height ? shape.height : image.height;
  int64_t width = shape.width ? shape.width : image.width;
  // torchvision's RandomResizedCrop: ten tries at a box of a random area
  // and aspect that fits, else the whole image cut to an aspect in range.
  int64_t top = 0, left = 0, h = image.height, w = image.width;
  if (augmentation.crop) {
    double area = (double)image.height * image.width;
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      double target = area * (0.08 + 0.92 * uniform());
      double aspect =
          std::exp(std::log(3.0 / 4) + uniform() * std::log(16.0 / 9));
      int64_t cw = std::lround(std::sqrt(target * aspect));
      int64_t ch = std::lround(std::sqrt(target / aspect));
      if (cw > 0 && ch > 0 && cw <= image.width && ch <= image.height) {
        top = (int64_t)(uniform() * (image.height - ch + 1));
        left = (int64_t)(uniform() * (image.width - cw + 1));
        h = ch;
        w = cw;
        found = true;
      }
    }
    if (!found) {
      double ratio = (double)image.width / image.height;
      if (ratio < 3.0 / 4)
        h = std::lround(image.width / (3.0 / 4));
      else if (ratio > 4.0 / 3)
        w = std::lround(image.height * (4.0 / 3));
      top = (image.height - h) / 2;
      left = (image.width - w) / 2;
    }
  }
  bool flip = augmentation.flip && uniform() < 0.5;
  if (h == height && w == width) {
    std::vector<float> values(image.data.begin(), image.data.end());
    writeSample(values, image.width, image.channels, top, left, height, width,
                shape.channels, flip, out);
    return;
  }
  std::vector<float> values =
      resized(image, top, left, h, w, height, width, 0, 0, height, width);
  writeSample(values, width, image.channels, 0, 0, height, width,
              shape.channels, flip, out);
}

} // namespace gpuc

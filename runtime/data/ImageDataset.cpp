//===- ImageDataset.cpp - ImageFolder and CIFAR datasets ------------------===//
#include "gpuc/runtime/ImageDataset.h"
#include "gpuc/runtime/Workers.h"

#include <algorithm>
#include <cctype>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

namespace gpuc {
namespace {

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The entries of `dir` other than . and .., sorted by name.
std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// The extensions of the files read as images (torchvision's, of those
/// libjpeg and libpng decode).
bool hasImageExtension(const std::string &name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos)
    return false;
  std::string ext = name.substr(dot + 1);
  for (char &ch : ext)
    ch = (char)std::tolower((unsigned char)ch);
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

/// One sample to decode: an image file (or a CIFAR record) and its class.
struct Entry {
  std::string path;
  int64_t label;
};

/// Every image file under `dir`, in name order, depth first (as
/// torchvision's ImageFolder walks a class folder). Other files count in
/// `ignored`.
void walk(const std::string &dir, int64_t label, std::vector<Entry> &out,
          int64_t &ignored) {
  for (const std::string &name : entries(dir)) {
    std::string path = dir + "/" + name;
    if (isDirectory(path))
      walk(path, label, out, ignored);
    else if (hasImageExtension(name))
      out.push_back({path, label});
    else
      ++ignored;
  }
}

/// Decodes `files` into `split` on `workers` threads; a file that does not
/// decode is left out and listed in `skipped`.
void decodeSplit(const std::vector<Entry> &files, const ImageShape &shape,
                 int workers, Split &split, std::vector<std::string> &skipped,
                 std::vector<Pixels> *images) {
  int64_t n = files.size();
  split.samples.assign(n * split.sampleSize, 0.0f);
  std::vector<std::string> errors(n);
  std::vector<Pixels> decoded(images ? n : 0);
  onWorkers(n, workers, [&](int64_t i) {
    Pixels image;
    std::string error;
    if (!decodeImage(files[i].path, image, error) ||
        !imageToSample(image, shape, &split.samples[i * split.sampleSize],
                       error))
      errors[i] = error.empty() ? "unreadable" : error;
    else if (images)
      decoded[i] = std::move(image);
  });
  // Keep the decoded samples, in order.
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!errors[i].empty()) {
      skipped.push_back(files[i].path + ": " + errors[i]);
      continue;
    }
    if (kept != i)
      std::copy_n(&split.samples[i * split.sampleSize], split.sampleSize,
                  &split.samples[kept * split.sampleSize]);
    if (images)
      images->push_back(std::move(decoded[i]));
    split.labels.push_back(files[i].label);
    ++kept;
  }
  split.count = kept;
  split.samples.resize(kept * split.sampleSize);
}

/// Lists `files` in `split` for decoding later, keeping those whose header
/// reads (on `workers` threads) as an image that fits `shape`; the others
/// are listed in `skipped`.
void listSplit(const std::vector<Entry> &files, const ImageShape &shape,
               int workers, Split &split, std::vector<std::string> &skipped) {
  int64_t n = files.size();
  std::vector<std::string> errors(n);
  onWorkers(n, workers, [&](int64_t i) {
    Pixels header;
    std::string error;
    if (!readImageHeader(files[i].path, header, error) ||
        !fitsShape(header, shape, error))
      errors[i] = error.empty() ? "unreadable" : error;
  });
  for (int64_t i = 0; i < n; ++i) {
    if (!errors[i].empty()) {
      skipped.push_back(files[i].path + ": " + errors[i]);
      continue;
    }
    split.files.push_back(files[i].path);
    split.labels.push_back(files[i].label);
  }
  split.count = split.files.size();
}

bool loadImageFolder(const std::string &dir, const ImageShape &shape,
                     int workers, Dataset &data,
                     std::vector<std::string> &skipped, std::string &error,
                     std::vector<Pixels> *trainImages, bool stream) {
  std::string train = dir + "/train", val = dir + "/val";
  if (!isDirectory(val))
    val = dir + "/test";
  if (!isDirectory(val)) {
    error = dir + ": an image folder needs train/ and val/ (or test/), each "
                  "with one folder per class";
    return false;
  }
  std::vector<std::string> classes;
  for (const std::string &name : entries(train))
    if (isDirectory(train + "/" + name))
      classes.push_back(name);
  if (classes.empty()) {
    error = train + ": no class folders (an image folder has train/<class>/"
                    "*.jpg or *.png)";
    return false;
  }
  std::vector<Entry> trainFiles, valFiles;
  int64_t ignored = 0;
  for (size_t c = 0; c < classes.size(); ++c)
    walk(train + "/" + classes[c], (int64_t)c, trainFiles, ignored);
  for (const std::string &name : entries(val)) {
    if (!isDirectory(val + "/" + name))
      continue;
    auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end()) {
      error = val + "/" + name + ": a class that " + train +
              " does not have (the classes are train/'s folders)";
      return false;
    }
    walk(val + "/" + name, it - classes.begin(), valFiles, ignored);
  }
  if (trainFiles.empty() || valFiles.empty()) {
    error = (trainFiles.empty() ? train : val) +
            ": no .jpg, .jpeg or .png files in its class folders";
    return false;
  }
  for (Split *split : {&data.train, &data.test}) {
    split->fromBytes = true;
    split->sampleSize = shape.height
                            ? shape.channels * shape.height * shape.width
                            : shape.values;
  }
  if (stream) {
    listSplit(trainFiles, shape, workers, data.train, skipped);
    listSplit(valFiles, shape, workers, data.test, skipped);
  } else {
    decodeSplit(trainFiles, shape, workers, data.train, skipped, trainImages);
    decodeSplit(valFiles, shape, workers, data.test, skipped, nullptr);
  }
  if (data.train.count == 0 || data.test.count == 0) {
    error = (data.train.count == 0 ? train : val) +
            ": none of its images could be decoded (" + skipped.front() + ")";
    return false;
  }
  data.format = "image folder (" + std::to_string(classes.size()) + " classes" +
                (ignored ? ", " + std::to_string(ignored) +
                               " files that are not images ignored"
                         : std::string()) +
                ")";
  return true;
}

/// CIFAR's binary batches: records of a label byte (CIFAR-100: coarse and
/// fine, the fine one read) and a 32x32 RGB image, channel-major.
bool readCifar(const std::vector<std::string> &paths, int64_t labelBytes,
               const ImageShape &shape, Split &split, std::string &error,
               std::vector<Pixels> *images = nullptr) {
  const int64_t pixels = 32 * 32 * 3, record = labelBytes + pixels;
  split.fromBytes = true;
  split.sampleSize =
      shape.height ? shape.channels * shape.height * shape.width : shape.values;
  for (const std::string &path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      error = path + ": cannot read";
      return false;
    }
    if (bytes.empty() || bytes.size() % record) {
      error = path + ": " + std::to_string(bytes.size()) +
              " bytes are not whole CIFAR records of " +
              std::to_string(record) + " bytes (truncated or not CIFAR)";
      return false;
    }
    Pixels image;
    image.height = image.width = 32;
    image.channels = 3;
    image.data.resize(pixels);
    for (size_t r = 0; r < bytes.size() / record; ++r) {
      const unsigned char *p = &bytes[r * record];
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < 32 * 32; ++i)
          image.data[i * 3 + c] = p[labelBytes + c * 1024 + i];
      split.samples.resize((split.count + 1) * split.sampleSize);
      if (!imageToSample(image, shape,
                         &split.samples[split.count * split.sampleSize],
                         error)) {
        error = path + ": " + error;
        return false;
      }
      split.labels.push_back(p[labelBytes - 1]);
      ++split.count;
      if (images)
        images->push_back(image);
    }
  }
  return true;
}

/// The folder holding CIFAR's batches: DIR or its cifar-*-binary child.
std::string cifarFolder(const std::string &dir) {
  for (const char *sub : {"", "/cifar-10-batches-bin", "/cifar-100-binary"}) {
    std::string d = dir + sub;
    if (isFile(d + "/data_batch_1.bin") || isFile(d + "/train.bin"))
      return d;
  }
  return "";
}

} // namespace

bool isImageDataset(const std::string &dir) {
  return isDirectory(dir + "/train") || !cifarFolder(dir).empty();
}

bool loadImageDataset(const std::string &dir, const ImageShape &shape,
                      int workers, Dataset &data,
                      std::vector<std::string> &skipped, std::string &error,
                      std::vector<Pixels> *trainImages, bool stream) {
  std::string cifar = cifarFolder(dir);
  if (cifar.empty())
    return loadImageFolder(dir, shape, workers, data, skipped, error,
                           trainImages, stream);
  if (isFile(cifar + "/data_batch_1.bin")) {
    std::vector<std::string> batches;
    for (int b = 1; b <= 5; ++b)
      if (isFile(cifar + "/data_batch_" + std::to_string(b) + ".bin"))
        batches.push_back(cifar + "/data_batch_" + std::to_string(b) + ".bin");
    data.format = "CIFAR-10";
    return readCifar(batches, 1, shape, data.train, error, trainImages) &&
           readCifar({cifar + "/test_batch.bin"}, 1, shape, data.test, error);
  }
  data.format = "CIFAR-100";
  return readCifar({cifar + "/train.bin"}, 2, shape, data.train, error,
                   trainImages) &&
         readCifar({cifar + "/test.bin"}, 2, shape, data.test, error);
}

} // namespace gpuc

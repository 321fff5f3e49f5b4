//===- Safetensors.cpp - checkpoints and initial weights ------------------===//
//
// Format: u64 little-endian header length, a JSON header mapping names to
// {dtype, shape, data_offsets} (plus "__metadata__": string map), the data.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Safetensors.h"
#include "gpuc/runtime/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

using json = nlohmann::json;

namespace gpuc {

bool writeSafetensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error, std::vector<uint64_t> *fileOffsets) {
  json header = json::object();
  uint64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8)
    text += ' ';
  if (fileOffsets) {
    fileOffsets->clear();
    uint64_t at = 8 + text.size();
    for (const NamedTensor &t : tensors) {
      fileOffsets->push_back(at);
      at += t.data.size();
    }
  }
  return writeFileAtomically(
      path,
      [&](FILE *f) {
        uint64_t n = text.size();
        bool ok = fwrite(&n, 8, 1, f) == 1 &&
                  fwrite(text.data(), 1, text.size(), f) == text.size();
        for (const NamedTensor &t : tensors)
          ok =
              ok && fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
        return ok;
      },
      error);
}

bool readSafetensors(const std::string &path, std::vector<NamedTensor> &tensors,
                     std::map<std::string, std::string> &metadata,
                     std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open " + path;
    return false;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint64_t n = 0;
  if (size < 8 || fread(&n, 8, 1, f) != 1 || n > (uint64_t)size - 8) {
    fclose(f);
    error = path + ": truncated, or not a safetensors file (its header "
                   "length is larger than the file)";
    return false;
  }
  std::string text(n, '\0');
  std::vector<char> data(size - 8 - n);
  bool ok = fread(text.data(), 1, n, f) == n &&
            fread(data.data(), 1, data.size(), f) == data.size();
  fclose(f);
  if (!ok) {
    error = path + ": truncated";
    return false;
  }
  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    error = path + ": the header is not JSON";
    return false;
  }
  tensors.clear();
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (auto &[k, v] : entry.items())
        if (v.is_string())
          metadata[k] = v.get<std::string>();
      continue;
    }
    NamedTensor t;
    t.name = name;
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry.contains("shape") || !entry.contains("data_offsets")) {
      error = path + ": tensor '" + name + "' lacks dtype/shape/data_offsets";
      return false;
    }
    // The types are checked before anything is read: a header from
    // elsewhere may hold anything.
    const json &dtype = entry["dtype"], &shape = entry["shape"],
               &offsets = entry["data_offsets"];
    auto isCount = [](const json &v) {
      return v.is_number_unsigned() ||
             (v.is_number_integer() && v.get<int64_t>() >= 0);
    };
    if (!dtype.is_string() || !shape.is_array() ||
        !std::all_of(shape.begin(), shape.end(), isCount) ||
        !offsets.is_array() || offsets.size() != 2 || !isCount(offsets[0]) ||
        !isCount(offsets[1])) {
      error = path + ": tensor '" + name +
              "' has a malformed entry (dtype must be a string, shape a list "
              "of non-negative integers, data_offsets two of them)";
      return false;
    }
    t.dtype = dtype.get<std::string>();
    t.shape = shape.get<std::vector<int64_t>>();
    uint64_t begin = offsets[0].get<uint64_t>(),
             end = offsets[1].get<uint64_t>();
    if (begin > end || end > data.size()) {
      error =
          path + ": tensor '" + name + "' lies outside the file (truncated?)";
      return false;
    }
    t.data.assign(data.begin() + begin, data.begin() + end);
    tensors.push_back(std::move(t));
  }
  return true;
}

} // namespace gpuc

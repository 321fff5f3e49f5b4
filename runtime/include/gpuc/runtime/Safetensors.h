//===- Safetensors.h - checkpoints and initial weights ----------*- C++ -*-===//
#ifndef GPUC_RUNTIME_SAFETENSORS_H
#define GPUC_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuc {

struct NamedTensor {
  std::string name;
  std::string dtype; // F32, I64, I32, BOOL
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Writes `tensors` and string `metadata` in the safetensors format, to a
/// temporary file that is renamed over `path` once complete and synced, so a
/// crash never leaves a truncated checkpoint. `fileOffsets`, when given,
/// receives where each tensor's bytes begin in the file (what another
/// format's reference into it needs).
bool writeSafetensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error,
                      std::vector<uint64_t> *fileOffsets = nullptr);

/// Reads a safetensors file; errors name the file and what is wrong.
bool readSafetensors(const std::string &path, std::vector<NamedTensor> &tensors,
                     std::map<std::string, std::string> &metadata,
                     std::string &error);

} // namespace gpuc

#endif // GPUC_RUNTIME_SAFETENSORS_H

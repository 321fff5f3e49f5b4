//===- FuzzInput.h - a libFuzzer input as a file the readers open --------===//
//
// The runtime's readers take paths: each input is written to a file of this
// process (a directory made once per process) before the reader opens it.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FUZZ_FUZZINPUT_H
#define GPUC_FUZZ_FUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace gpuc::fuzz {

/// A directory of this process's own for input files, removed with what it
/// holds when the process exits normally (a crashing input stays where
/// libFuzzer saves it, not here).
inline const std::string &workDir() {
  struct Dir {
    std::string path;
    Dir() {
      std::string pattern =
          (std::filesystem::temp_directory_path() / "gpuc-fuzz-XXXXXX")
              .string();
      if (!mkdtemp(pattern.data())) {
        perror("gpuc fuzz: mkdtemp");
        abort();
      }
      path = pattern;
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

/// Writes `size` bytes to `name` in workDir() and returns its path.
inline std::string writeInput(const std::string &name, const uint8_t *data,
                              size_t size) {
  std::string path = workDir() + "/" + name;
  FILE *f = fopen(path.c_str(), "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror("gpuc fuzz: writing the input");
    abort();
  }
  return path;
}

} // namespace gpuc::fuzz

#endif // GPUC_FUZZ_FUZZINPUT_H

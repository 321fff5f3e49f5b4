//===- Npy.h - reading and writing NumPy .npy files -----------------------===//
//
// The runtime's tensor exchange format with Python: the trainer reads data
// from .npy, and the interpreter CLI reads inputs and writes results as .npy.
// No MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_NPY_H
#define GPUC_RUNTIME_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc {

/// An array as stored in a .npy file: little-endian, C order.
struct NpyArray {
  /// NumPy's type string: "<f4", "<f8", "<f2", "<i8", "<i4", "|u1", "|b1".
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;

  int64_t numElements() const;
  int64_t elementSize() const;
  /// Element `i` converted to double (any supported dtype).
  double at(int64_t i) const;
};

/// Reads `path`; on failure returns false and says why in `error` (which
/// names the file).
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// Writes `array` to `path` (format version 1.0).
bool writeNpy(const std::string &path, const NpyArray &array,
              std::string &error);

/// An array of `dtype` ("<f4", "<i8", ...) and `shape` from doubles.
NpyArray makeNpy(const std::string &dtype, const std::vector<int64_t> &shape,
                 const std::vector<double> &values);

} // namespace gpuc

#endif // GPUC_RUNTIME_NPY_H

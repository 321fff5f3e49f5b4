//===- Npy.cpp - reading and writing NumPy .npy files ---------------------===//
#include "gpuc/runtime/Npy.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace gpuc;

namespace {
/// Half precision to float, for "<f2" files.
float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f,
           mantissa = h & 0x3ff;
  float value;
  if (exponent == 0)
    value = std::ldexp((float)mantissa, -24);
  else if (exponent == 31)
    value = mantissa ? NAN : INFINITY;
  else
    value = std::ldexp((float)(mantissa | 0x400), (int)exponent - 25);
  return sign ? -value : value;
}

/// The value of `key` in the header dictionary, as raw text.
bool headerField(const std::string &header, const std::string &key,
                 std::string &value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return false;
  size_t colon = header.find(':', at);
  if (colon == std::string::npos)
    return false;
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return false;
  size_t end = header[start] == '(' ? header.find(')', start)
                                    : header.find_first_of(",}", start);
  if (end == std::string::npos)
    return false;
  if (header[start] == '(')
    ++end;
  value = header.substr(start, end - start);
  return true;
}
} // namespace

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t NpyArray::elementSize() const {
  if (dtype.size() < 3)
    return 0;
  return std::atoi(dtype.c_str() + 2);
}

double NpyArray::at(int64_t i) const {
  const char *p = bytes.data() + i * elementSize();
  if (dtype == "<f4") {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (dtype == "<f8") {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (dtype == "<f2") {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return halfToFloat(v);
  }
  if (dtype == "<i8") {
    int64_t v;
    std::memcpy(&v, p, 8);
    return (double)v;
  }
  if (dtype == "<i4") {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (dtype == "|u1")
    return (unsigned char)*p;
  return *p ? 1.0 : 0.0; // |b1
}

bool gpuc::readNpy(const std::string &path, NpyArray &array,
                   std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the file";
    return false;
  }
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    error = path + ": not a .npy file (bad magic; write it with numpy.save)";
    return false;
  }
  uint32_t headerLength = 0;
  if (magic[6] == 1) {
    unsigned char len[2];
    in.read((char *)len, 2);
    headerLength = len[0] | (len[1] << 8);
  } else {
    unsigned char len[4];
    in.read((char *)len, 4);
    headerLength = len[0] | (len[1] << 8) | (len[2] << 16) | (len[3] << 24);
  }
  // Sizes read from the file are checked against what the file holds
  // before anything that large is allocated.
  std::streamoff headerStart = in.tellg();
  in.seekg(0, std::ios::end);
  std::streamoff fileSize = in.tellg();
  in.seekg(headerStart);
  if (!in || headerStart < 0 || headerLength > fileSize - headerStart) {
    error = path + ": truncated .npy header";
    return false;
  }
  std::string header(headerLength, '\0');
  if (!in || !in.read(header.data(), headerLength)) {
    error = path + ": truncated .npy header";
    return false;
  }
  std::string descr, order, shape;
  if (!headerField(header, "descr", descr) ||
      !headerField(header, "fortran_order", order) ||
      !headerField(header, "shape", shape)) {
    error = path + ": malformed .npy header '" + header + "'";
    return false;
  }
  if (order.rfind("False", 0) != 0) {
    error = path + ": Fortran-ordered arrays are not supported; save a "
                   "C-contiguous array (numpy.ascontiguousarray)";
    return false;
  }
  if (descr.size() < 2 || shape.size() < 2 || shape.front() != '(' ||
      shape.back() != ')') {
    error = path + ": malformed .npy header '" + header + "'";
    return false;
  }
  array.dtype = descr.substr(1, descr.size() - 2);
  if (array.dtype == "<b1" || array.dtype == "?")
    array.dtype = "|b1";
  static const char *kSupported[] = {"<f4", "<f8", "<f2", "<i8",
                                     "<i4", "|u1", "|b1"};
  bool known = false;
  for (const char *s : kSupported)
    known |= array.dtype == s;
  if (!known) {
    error = path + ": dtype '" + array.dtype +
            "' is not supported (use float32, float64, float16, int64, "
            "int32, uint8 or bool)";
    return false;
  }
  array.shape.clear();
  std::string dims = shape.substr(1, shape.size() - 2);
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos)
      continue;
    // A dimension is digits only, and small enough that the element count
    // stays far inside int64 (2^40 elements at most).
    std::string digits = item.substr(first);
    digits.erase(digits.find_last_not_of(' ') + 1);
    if (digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      error = path + ": shape " + shape +
              " is not a tuple of non-negative integers";
      return false;
    }
    int64_t d = std::stoll(digits);
    int64_t before = array.numElements();
    if (d != 0 && before > (int64_t(1) << 40) / d) {
      error = path + ": shape " + shape + " holds more than 2^40 elements";
      return false;
    }
    array.shape.push_back(d);
  }
  int64_t bytes = array.numElements() * array.elementSize();
  std::streamoff dataStart = in.tellg();
  if (dataStart < 0 || bytes > fileSize - dataStart) {
    error = path + ": truncated data (expected " + std::to_string(bytes) +
            " bytes for shape " + shape + ", the file holds " +
            std::to_string(dataStart < 0 ? 0 : fileSize - dataStart) + ")";
    return false;
  }
  array.bytes.resize(bytes);
  if (!in.read(array.bytes.data(), bytes)) {
    error = path + ": truncated data (expected " + std::to_string(bytes) +
            " bytes for shape " + shape + ")";
    return false;
  }
  return true;
}

bool gpuc::writeNpy(const std::string &path, const NpyArray &array,
                    std::string &error) {
  std::string shape = "(";
  for (int64_t d : array.shape)
    shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + array.dtype +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts on a 64-byte boundary, newline-terminated.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    error = path + ": cannot write the file";
    return false;
  }
  out.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {(unsigned char)(header.size() & 0xff),
                          (unsigned char)(header.size() >> 8)};
  out.write((const char *)len, 2);
  out.write(header.data(), header.size());
  out.write(array.bytes.data(), array.bytes.size());
  if (!out) {
    error = path + ": write failed";
    return false;
  }
  return true;
}

NpyArray gpuc::makeNpy(const std::string &dtype,
                       const std::vector<int64_t> &shape,
                       const std::vector<double> &values) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = shape;
  int64_t size = array.elementSize();
  array.bytes.resize(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    char *p = array.bytes.data() + i * size;
    if (dtype == "<f4") {
      float v = (float)values[i];
      std::memcpy(p, &v, 4);
    } else if (dtype == "<f8") {
      std::memcpy(p, &values[i], 8);
    } else if (dtype == "<i8") {
      int64_t v = (int64_t)values[i];
      std::memcpy(p, &v, 8);
    } else if (dtype == "<i4") {
      int32_t v = (int32_t)values[i];
      std::memcpy(p, &v, 4);
    } else if (dtype == "|u1") {
      *p = (char)(unsigned char)values[i];
    } else {
      *p = values[i] != 0;
    }
  }
  return array;
}

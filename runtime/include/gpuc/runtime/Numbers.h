//===- Numbers.h - numbers parsed from text without exceptions --*- C++ -*-===//
//
// Every number the runtime reads from text (flags, checkpoint metadata,
// environment variables) goes through these: the whole text must be the
// number, and a value outside the range asked for is refused, never clamped
// (strtoll's LLONG_MAX) and never thrown (std::stoull's out_of_range).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_NUMBERS_H
#define GPUC_RUNTIME_NUMBERS_H

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace gpuc {

/// `text` as a decimal integer in [min, max] (no sign, space or suffix
/// beyond a leading '-'), or false.
inline bool parseInteger(const std::string &text, int64_t min, int64_t max,
                         int64_t &value) {
  const char *first = text.data(), *last = text.data() + text.size();
  int64_t parsed = 0;
  auto [end, error] = std::from_chars(first, last, parsed, 10);
  if (text.empty() || error != std::errc() || end != last || parsed < min ||
      parsed > max)
    return false;
  value = parsed;
  return true;
}

/// `text` as a decimal unsigned 64-bit integer (a seed), or false.
inline bool parseUnsigned(const std::string &text, uint64_t &value) {
  const char *first = text.data(), *last = text.data() + text.size();
  uint64_t parsed = 0;
  auto [end, error] = std::from_chars(first, last, parsed, 10);
  if (text.empty() || error != std::errc() || end != last)
    return false;
  value = parsed;
  return true;
}

/// `text` as a finite floating-point number, or false.
inline bool parseFinite(const std::string &text, double &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  double parsed = std::strtod(text.c_str(), &end);
  if (*end || !std::isfinite(parsed))
    return false;
  value = parsed;
  return true;
}

} // namespace gpuc

#endif // GPUC_RUNTIME_NUMBERS_H

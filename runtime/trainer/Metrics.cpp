//===- Metrics.cpp - the --metrics file
//-------------------------------------===//
#include "Metrics.h"

#include "Options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace gpuc::trainer {

FILE *dropMetricsAfter(FILE *metrics, const std::string &path, int64_t step) {
  fclose(metrics);
  std::ifstream in(path);
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    size_t at = line.find("\"step\": ");
    // A line cut short (the process killed while writing it) goes too.
    if ((at != std::string::npos &&
         strtoll(line.c_str() + at + 8, nullptr, 10) > step) ||
        line.empty() || line.back() != '}') {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (dropped) {
    std::string tmp = path + ".tmp";
    FILE *out = fopen(tmp.c_str(), "w");
    if (!out || fwrite(kept.data(), 1, kept.size(), out) != kept.size() ||
        fclose(out) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
      std::string reason = strerror(errno);
      unlink(tmp.c_str());
      fail("cannot rewrite --metrics " + path + " without the " +
           std::to_string(dropped) +
           " lines written after the checkpoint: " + reason);
    }
  }
  FILE *reopened = fopen(path.c_str(), "a");
  if (!reopened)
    fail("cannot write --metrics " + path + ": " + strerror(errno));
  return reopened;
}

} // namespace gpuc::trainer

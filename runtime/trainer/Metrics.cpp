//===- Metrics.cpp - the --metrics file ----------------------------------===//
#include "Metrics.h"

#include "Options.h"
#include "gpuc/runtime/AtomicFile.h"

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
    std::string error;
    if (!writeFileAtomically(path, kept, error))
      fail("cannot rewrite --metrics without the " + std::to_string(dropped) +
           " lines written after the checkpoint: " + error);
  }
  FILE *reopened = fopen(path.c_str(), "a");
  if (!reopened)
    fail("cannot write --metrics " + path + ": " + strerror(errno));
  return reopened;
}

} // namespace gpuc::trainer

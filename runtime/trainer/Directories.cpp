//===- Directories.cpp - folders the trainer writes into ------------------===//
#include "Directories.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace gpuc::trainer {

bool makeDirectories(const std::string &dir, std::string &error) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/')
      continue;
    std::string prefix = dir.substr(0, at);
    struct stat st;
    if (stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        error = prefix + " is not a directory";
        return false;
      }
      continue;
    }
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      error = "cannot create " + prefix + ": " + strerror(errno);
      return false;
    }
  }
  return true;
}

} // namespace gpuc::trainer

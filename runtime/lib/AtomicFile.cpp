//===- AtomicFile.cpp - a file written whole or not at all ----------------===//
#include "gpuc/runtime/AtomicFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <unistd.h>

namespace gpuc {

bool writeFileAtomically(const std::string &path,
                         const std::function<bool(FILE *)> &write,
                         std::string &error) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE *f = fopen(tmp.c_str(), "wb");
  if (!f) {
    error = "cannot write " + tmp + ": " + strerror(errno);
    return false;
  }
  // errno from the first step that failed; fclose runs either way.
  errno = 0;
  int failure = 0;
  if (!write(f) || fflush(f) != 0 || fsync(fileno(f)) != 0)
    failure = errno ? errno : EIO;
  if (fclose(f) != 0 && !failure)
    failure = errno ? errno : EIO;
  if (!failure && rename(tmp.c_str(), path.c_str()) != 0)
    failure = errno;
  if (!failure)
    return true;
  error = "cannot write " + path + ": " + strerror(failure);
  unlink(tmp.c_str());
  return false;
}

bool writeFileAtomically(const std::string &path, std::string_view bytes,
                         std::string &error) {
  return writeFileAtomically(
      path,
      [&](FILE *f) {
        return fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      },
      error);
}

void removeTemporariesOf(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp";
  DIR *entries = opendir(dir.empty() ? "/" : dir.c_str());
  if (!entries)
    return;
  while (dirent *entry = readdir(entries)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // `path`.tmp (an older trainer's) or `path`.tmp.<process id>.
    std::string rest = name.substr(prefix.size());
    bool ours = rest.empty() ||
                (rest.size() > 1 && rest[0] == '.' &&
                 std::all_of(rest.begin() + 1, rest.end(),
                             [](char c) { return isdigit((unsigned char)c); }));
    if (ours)
      unlink((dir + "/" + name).c_str());
  }
  closedir(entries);
}

} // namespace gpuc

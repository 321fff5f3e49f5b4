//===- ArtifactCache.cpp - whole artifacts reused by what made them -------===//
//
// An entry is a directory named by the BLAKE3 hash of everything that
// decides the artifact; it holds the artifact's files, `summary` (the line
// the compile printed, the output directory replaced by a marker) and
// `external` (each external data file's hash and path, checked again on
// restore: the import alone knows them).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Target/ArtifactCache.h"

#include "gpuc/Codegen/Nvrtc.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <unistd.h>

using namespace mlir;
using namespace mlir::gpuc;

/// Stands for the output directory in a stored summary line.
static constexpr char kOutputDirMarker = '\x01';

/// Adds `path`'s contents to `hash`; false when it cannot be read.
static bool hashFile(llvm::BLAKE3 &hash, const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return false;
  hash.update((*buffer)->getBuffer());
  hash.update(llvm::StringRef("\0", 1));
  return true;
}

static std::string fileDigest(const std::string &path) {
  llvm::BLAKE3 hash;
  if (!hashFile(hash, path))
    return "";
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

static void mainExecutableAnchor() {}

std::string mlir::gpuc::artifactCacheEntry(llvm::ArrayRef<std::string> args,
                                           const ArtifactOptions &options) {
  if (options.cacheDir.empty())
    return "";
  llvm::BLAKE3 hash;
  hash.update(llvm::StringRef("gpuc artifact v2\0", 17));
  // gpuc and the runtime its trainers link.
  std::string self = llvm::sys::fs::getMainExecutable(
      "gpuc", reinterpret_cast<void *>(&mainExecutableAnchor));
  std::vector<std::string> tools = {self, GPUC_TRAINER_LIB, GPUC_RUNTIME_LIB,
                                    GPUC_CPU_DEVICE_LIB,
                                    GPUC_NO_CPU_DEVICE_LIB};
#ifdef GPUC_CUDA_PLUGIN_LIB
  tools.push_back(GPUC_CUDA_PLUGIN_LIB);
#endif
  for (const std::string &tool : tools)
    if (!hashFile(hash, tool))
      return "";
  hash.update(runtimeHeadersDigest());
  // The command line, but where the artifact goes and --time.
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == "-o" || arg == "--o") {
      ++i;
      continue;
    }
    if (arg.starts_with("-o=") || arg.starts_with("--o=") || arg == "--time" ||
        arg == "-time")
      continue;
    hash.update(arg);
    hash.update(llvm::StringRef("\0", 1));
  }
  if (!hashFile(hash, options.modelPath))
    return "";
  // The host compiler and its flags, this CPU (-march=native), NVRTC and
  // ptxas.
  std::string scratch =
      options.cacheDir + "/artifacts.version." + std::to_string(::getpid());
  llvm::sys::fs::create_directories(options.cacheDir);
  std::string cxx = compilerIdentity(options.cxx, scratch);
  if (cxx.empty())
    return "";
  hash.update(cxx + '\0' + options.cxx + '\0');
  const char *flags = getenv("GPUC_CXXFLAGS");
  hash.update(std::string(flags ? flags : "") + '\0');
  hash.update(llvm::sys::getHostCPUName().str() + '\0');
  if (options.cuda) {
    hash.update(nvrtcIdentity() + '\0');
    if (!ptxasPath().empty())
      hash.update(compilerIdentity(ptxasPath(), scratch) + '\0');
  }
  return options.cacheDir + "/artifacts/" +
         llvm::toHex(hash.final(), /*LowerCase=*/true);
}

/// Copies `from` to `to`, replacing it, with `to` executable when `from`
/// is.
static bool copyFile(const std::string &from, const std::string &to) {
  llvm::sys::fs::remove(to);
  if (llvm::sys::fs::copy_file(from, to))
    return false;
  auto permissions = llvm::sys::fs::getPermissions(from);
  if (permissions)
    llvm::sys::fs::setPermissions(to, *permissions);
  return true;
}

bool mlir::gpuc::restoreArtifact(const std::string &entry,
                                 const ArtifactOptions &options) {
  if (entry.empty())
    return false;
  auto summary = llvm::MemoryBuffer::getFile(entry + "/summary");
  auto external = llvm::MemoryBuffer::getFile(entry + "/external");
  if (!summary || !external)
    return false;
  // The external data files must hold what they held.
  llvm::SmallVector<llvm::StringRef> lines;
  (*external)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    auto [digest, path] = line.split(' ');
    if (fileDigest(path.str()) != digest)
      return false;
  }
  const std::string &dir = options.outputDir;
  if (llvm::sys::fs::create_directories(dir))
    return false;
  for (const std::string &file : artifactFiles(options)) {
    if (!copyFile(entry + "/" + file, dir + "/" + file))
      return false;
  }
  // Recently used: the last to be trimmed.
  if (llvm::Expected<llvm::sys::fs::file_t> file =
          llvm::sys::fs::openNativeFileForRead(entry + "/summary")) {
    llvm::sys::fs::setLastAccessAndModificationTime(
        *file, std::chrono::system_clock::now());
    llvm::sys::fs::closeFile(*file);
  } else {
    llvm::consumeError(file.takeError());
  }
  std::string line = (*summary)->getBuffer().str();
  std::string text;
  for (char c : line) {
    if (c == kOutputDirMarker)
      text += dir;
    else
      text += c;
  }
  llvm::outs() << text;
  return true;
}

/// What the artifacts may hold: $GPUC_ARTIFACT_CACHE_MAX bytes, else
/// kMaxArtifactCacheBytes.
static uint64_t artifactCacheLimit() {
  const char *text = getenv("GPUC_ARTIFACT_CACHE_MAX");
  if (!text || !*text)
    return kMaxArtifactCacheBytes;
  uint64_t bytes = 0;
  if (llvm::StringRef(text).getAsInteger(10, bytes)) {
    llvm::errs() << "gpuc compile: warning: GPUC_ARTIFACT_CACHE_MAX '" << text
                 << "' is not a number of bytes; keeping at most "
                 << (kMaxArtifactCacheBytes >> 30) << " GiB of artifacts\n";
    return kMaxArtifactCacheBytes;
  }
  return bytes;
}

/// Removes the least recently used entries of `artifacts` but `keep` (the
/// one just stored) until the rest hold at most artifactCacheLimit(), and
/// the temporaries of compiles killed while storing (an hour old).
static void trimArtifacts(const std::string &artifacts,
                          const std::string &keep) {
  uint64_t limit = artifactCacheLimit();
  struct Entry {
    std::string path;
    llvm::sys::TimePoint<> used;
    uint64_t bytes = 0;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(artifacts, ec), end;
       it != end && !ec; it.increment(ec)) {
    llvm::sys::fs::file_status status;
    if (it->type() != llvm::sys::fs::file_type::directory_file)
      continue;
    if (llvm::sys::path::filename(it->path()).contains(".tmp")) {
      if (!llvm::sys::fs::status(it->path(), status) &&
          std::chrono::system_clock::now() - status.getLastModificationTime() >
              std::chrono::hours(1))
        llvm::sys::fs::remove_directories(it->path());
      continue;
    }
    if (it->path() == keep ||
        llvm::sys::fs::status(it->path() + "/summary", status))
      continue;
    Entry entry{it->path(), status.getLastModificationTime()};
    std::error_code inner;
    for (llvm::sys::fs::directory_iterator file(it->path(), inner), fileEnd;
         file != fileEnd && !inner; file.increment(inner)) {
      llvm::sys::fs::file_status fileStatus;
      if (!llvm::sys::fs::status(file->path(), fileStatus))
        entry.bytes += fileStatus.getSize();
    }
    total += entry.bytes;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.used < b.used; });
  for (const Entry &entry : entries) {
    if (total <= limit)
      break;
    llvm::sys::fs::remove_directories(entry.path);
    total -= entry.bytes;
  }
}

void mlir::gpuc::storeArtifact(const std::string &entry,
                               const ArtifactOptions &options,
                               llvm::ArrayRef<std::string> externalFiles) {
  if (entry.empty())
    return;
  std::string temporary = entry + ".tmp" + std::to_string(::getpid());
  auto fail = [&](const std::string &why) {
    llvm::sys::fs::remove_directories(temporary);
    llvm::errs() << "gpuc compile: warning: cannot store the artifact in the "
                    "cache "
                 << options.cacheDir << ": " << why << "\n";
  };
  llvm::sys::fs::remove_directories(temporary);
  if (std::error_code ec = llvm::sys::fs::create_directories(temporary))
    return fail(ec.message());
  for (const std::string &file : artifactFiles(options))
    if (!copyFile(options.outputDir + "/" + file, temporary + "/" + file))
      return fail("cannot copy " + options.outputDir + "/" + file);
  std::string manifest;
  for (const std::string &file : externalFiles) {
    std::string digest = fileDigest(file);
    if (digest.empty())
      return fail("cannot read " + file);
    manifest += digest + " " + file + "\n";
  }
  std::string summary;
  llvm::StringRef line = options.summary;
  // Where the artifact came from is said anew on restore.
  for (llvm::StringRef said :
       {", CPU kernels from the cache", ", cubins from the cache"}) {
    size_t at = line.find(said);
    if (at != llvm::StringRef::npos)
      line = line.take_front(at);
  }
  line = line.rtrim(")\n");
  for (size_t i = 0; i < line.size();) {
    if (line.substr(i).starts_with(options.outputDir)) {
      summary += kOutputDirMarker;
      i += options.outputDir.size();
    } else {
      summary += line[i++];
    }
  }
  summary += ", all from the artifact cache)\n";
  for (auto [name, text] :
       {std::pair<std::string, std::string>{"external", manifest},
        {"summary", summary}}) {
    std::error_code ec;
    llvm::raw_fd_ostream out(temporary + "/" + name, ec);
    if (!ec) {
      out << text;
      out.close();
      ec = out.error();
    }
    if (ec)
      return fail(ec.message());
  }
  // A finished entry replaces an older one whole.
  llvm::sys::fs::remove_directories(entry);
  if (std::error_code ec = llvm::sys::fs::rename(temporary, entry)) {
    // A compile of the same model beside this one stored it first.
    if (llvm::sys::fs::exists(entry + "/summary")) {
      llvm::sys::fs::remove_directories(temporary);
      return;
    }
    return fail(ec.message());
  }
  trimArtifacts(llvm::sys::path::parent_path(entry).str(), entry);
}

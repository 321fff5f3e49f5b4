//===- ToolRuns.cpp - host compiler, NVRTC and ptxas runs, cached ---------===//
#include "Backend.h"

#include "gpuc/Codegen/Nvrtc.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <unistd.h>

using namespace mlir;

namespace mlir::gpuc {

bool writeFile(const std::string &path, const std::string &text) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    llvm::errs() << "gpuc compile: cannot write " << path << ": "
                 << ec.message() << "\n";
    return false;
  }
  out << text;
  return true;
}

bool installPlugin(const std::string &library, const std::string &dir,
                   const std::string &name) {
  std::string path = dir + "/" + name;
  llvm::sys::fs::remove(path);
  if (std::error_code ec = llvm::sys::fs::copy_file(library, path)) {
    llvm::errs() << "gpuc compile: cannot copy " << library << " to " << path
                 << ": " << ec.message() << "\n";
    return false;
  }
  llvm::sys::fs::setPermissions(path, llvm::sys::fs::all_read |
                                          llvm::sys::fs::all_exe |
                                          llvm::sys::fs::owner_write);
  return true;
}

/// Runs a compiler command, its output kept in `log`.
bool runTool(ArrayRef<std::string> args, const std::string &log) {
  std::string program = args[0];
  if (auto found = llvm::sys::findProgramByName(program))
    program = *found;
  else {
    llvm::errs() << "gpuc compile: cannot find the host compiler '" << args[0]
                 << "' (set CXX or --cxx)\n";
    return false;
  }
  SmallVector<StringRef> argv(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects, 0,
                                     0, &error);
  if (rc != 0) {
    llvm::errs() << "gpuc compile: '" << llvm::join(argv, " ")
                 << "' failed; its output is in " << log << "\n";
    auto buffer = llvm::MemoryBuffer::getFile(log);
    if (buffer) {
      StringRef text = (*buffer)->getBuffer();
      llvm::errs() << text.substr(text.size() > 4000 ? text.size() - 4000 : 0);
    }
    return false;
  }
  return true;
}

/// Stores `bytes` as the cache entry `entry` through a temporary and a
/// rename: a concurrent compile of the same source never sees half an entry.
/// A cache that cannot be written only costs the next compile its time.
void storeInCache(const std::string &entry, llvm::StringRef bytes,
                  llvm::StringRef what, const std::string &cacheDir) {
  std::error_code ec =
      llvm::sys::fs::create_directories(llvm::sys::path::parent_path(entry));
  std::string temporary = entry + ".tmp" + std::to_string(::getpid());
  if (!ec) {
    llvm::raw_fd_ostream out(temporary, ec);
    if (!ec) {
      out << bytes;
      out.close();
      ec = out.error();
    }
  }
  if (!ec)
    ec = llvm::sys::fs::rename(temporary, entry);
  if (ec) {
    llvm::sys::fs::remove(temporary);
    llvm::errs() << "gpuc compile: warning: cannot store " << what
                 << " in the cache " << cacheDir << ": " << ec.message()
                 << "\n";
  }
}

/// Copies the cache entry `entry` to `output` when there is one (setting
/// `cached`), else runs `command`, which writes `output`, and stores what it
/// wrote as the entry. `what` names the output in a warning.
static bool runOrReuse(ArrayRef<std::string> command, const std::string &output,
                       const std::string &entry, StringRef what,
                       const std::string &log, const std::string &cacheDir,
                       bool &cached) {
  cached = false;
  if (llvm::sys::fs::exists(entry)) {
    llvm::sys::fs::remove(output);
    if (!llvm::sys::fs::copy_file(entry, output)) {
      cached = true;
      return true;
    }
  }
  if (!runTool(command, log))
    return false;
  if (auto built = llvm::MemoryBuffer::getFile(output))
    storeInCache(entry, (*built)->getBuffer(), what, cacheDir);
  return true;
}

/// Hex SHA-256 of every runtime header a kernel source can include (their
/// names and contents): part of each cache key, so a changed header never
/// hands out an object or cubin built against the old one.
const std::string &runtimeHeadersDigest() {
  static const std::string digest = [] {
    std::vector<std::string> headers;
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator
             it(GPUC_RUNTIME_INCLUDE_DIR, ec),
         end;
         it != end && !ec; it.increment(ec))
      if (it->type() == llvm::sys::fs::file_type::regular_file)
        headers.push_back(it->path());
    std::sort(headers.begin(), headers.end());
    llvm::SHA256 hash;
    for (const std::string &header : headers)
      if (auto text = llvm::MemoryBuffer::getFile(header)) {
        hash.update(llvm::sys::path::filename(header).str() + '\0');
        hash.update((*text)->getBuffer());
      }
    return llvm::toHex(hash.final(), /*LowerCase=*/true);
  }();
  return digest;
}

/// What identifies the host compiler in a cache key: its resolved path and
/// what `--version` prints (a compiler upgrade, with its system headers,
/// changes the latter). Empty when the compiler cannot run.
std::string compilerIdentity(const std::string &cxx,
                             const std::string &scratch) {
  auto program = llvm::sys::findProgramByName(cxx);
  if (!program)
    return "";
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(scratch),
                                          StringRef(scratch)};
  int rc = llvm::sys::ExecuteAndWait(*program, {*program, "--version"},
                                     std::nullopt, redirects);
  auto text = llvm::MemoryBuffer::getFile(scratch);
  llvm::sys::fs::remove(scratch);
  if (rc != 0 || !text)
    return "";
  return *program + "\n" + (*text)->getBuffer().str();
}

/// Compiles `compile` (a host compiler command ending in `-c SOURCE -o
/// OBJECT`; SOURCE holds `text`), or copies its object from the cache. The
/// key hashes the source text, the runtime headers it can include, the
/// command, the compiler's identity and this CPU, so an identical unit
/// compiles once per machine. Sets `cached` when the object came from the
/// cache and `key` to the key ("" without a cache).
bool compileCached(ArrayRef<std::string> compile, StringRef text,
                   StringRef identity, const std::string &log,
                   const std::string &cacheDir, bool &cached,
                   std::string &key) {
  cached = false;
  key.clear();
  if (cacheDir.empty() || identity.empty())
    return runTool(compile, log);
  const std::string &object = compile.back();
  const std::string &source = compile[compile.size() - 3];
  llvm::SHA256 hash;
  hash.update(text);
  hash.update("\0" + runtimeHeadersDigest() + "\0");
  hash.update(identity);
  for (const std::string &arg : compile)
    if (arg != object && arg != source)
      hash.update(arg + '\0');
  // -march=native means this CPU: a cache shared between machines must not
  // hand one's object to another.
  hash.update(llvm::sys::getHostCPUName());
  key = llvm::toHex(hash.final(), /*LowerCase=*/true);
  return runOrReuse(compile, object, cacheDir + "/kernels/" + key + ".o",
                    "the kernels", log, cacheDir, cached);
}

/// Links the trainer (`link` names it after `-o`), or copies it from the
/// cache: the key hashes the cache keys of the kernel objects it links
/// (`objectKeys`, all non-empty), the command, the libraries it names and the
/// compiler's identity.
bool linkCached(ArrayRef<std::string> link, ArrayRef<std::string> objectKeys,
                StringRef identity, const std::string &log,
                const std::string &cacheDir) {
  bool cacheable = !cacheDir.empty() && !identity.empty() &&
                   llvm::none_of(objectKeys, [](const std::string &key) {
                     return key.empty();
                   });
  if (!cacheable)
    return runTool(link, log);
  auto output = llvm::find(link, "-o");
  assert(output != link.end() && output + 1 != link.end());
  const std::string &trainer = *(output + 1);
  llvm::SHA256 hash;
  hash.update(identity);
  for (const std::string &key : objectKeys)
    hash.update(key + '\0');
  for (const std::string &arg : link) {
    if (arg == trainer || StringRef(arg).ends_with(".o"))
      continue; // the kernels are hashed by their keys
    hash.update(arg + '\0');
    if (StringRef(arg).ends_with(".a"))
      if (auto library = llvm::MemoryBuffer::getFile(arg))
        hash.update((*library)->getBuffer());
  }
  std::string entry =
      cacheDir + "/trainers/" + llvm::toHex(hash.final(), /*LowerCase=*/true);
  bool cached = false;
  if (!runOrReuse(link, trainer, entry, "the trainer", log, cacheDir, cached))
    return false;
  if (cached)
    llvm::sys::fs::setPermissions(trainer, llvm::sys::fs::all_read |
                                               llvm::sys::fs::all_exe |
                                               llvm::sys::fs::owner_write);
  return true;
}

} // namespace mlir::gpuc

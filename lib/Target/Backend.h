//===- Backend.h - the parts of the artifact writer -------------*- C++ -*-===//
//
// What writeArtifact (ArtifactWriter.cpp) is made of: running the host
// compiler, NVRTC and ptxas through the caches (ToolRuns.cpp), the CPU
// kernels and the trainer (HostBuild.cpp), the cubins (CudaBuild.cpp) and
// the kernel report (KernelReport.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TARGET_BACKEND_H
#define GPUC_TARGET_BACKEND_H

#include "gpuc/Codegen/StepProgram.h"
#include "gpuc/Target/Artifact.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <thread>
#include <vector>

namespace mlir::gpuc {

/// Writes `text` to `path`; false (said on stderr) when it cannot.
bool writeFile(const std::string &path, const std::string &text);

/// Copies the runtime plugin `library` (a path known when gpuc was built)
/// into the artifact directory `dir` as `name`, readable and executable.
bool installPlugin(const std::string &library, const std::string &dir,
                   const std::string &name);

/// Runs a compiler command, its output kept in `log`.
bool runTool(llvm::ArrayRef<std::string> args, const std::string &log);

/// Stores `bytes` as the cache entry `entry` through a temporary and a
/// rename: a concurrent compile of the same source never sees half an entry.
/// A cache that cannot be written only costs the next compile its time.
void storeInCache(const std::string &entry, llvm::StringRef bytes,
                  llvm::StringRef what, const std::string &cacheDir);

/// Compiles `compile` (a host compiler command ending in `-c SOURCE -o
/// OBJECT`; SOURCE holds `text`), or copies its object from the cache.
/// Sets `cached` when the object came from the cache and `key` to the key
/// ("" without a cache).
bool compileCached(llvm::ArrayRef<std::string> compile, llvm::StringRef text,
                   llvm::StringRef identity, const std::string &log,
                   const std::string &cacheDir, bool &cached, std::string &key);

/// Links the trainer (`link` names it after `-o`), or copies it from the
/// cache (the key hashes the kernel objects' keys `objectKeys`, the command,
/// the libraries it names and the compiler's identity).
bool linkCached(llvm::ArrayRef<std::string> link,
                llvm::ArrayRef<std::string> objectKeys,
                llvm::StringRef identity, const std::string &log,
                const std::string &cacheDir);

/// report.json, and with --report the same on stdout.
bool writeKernelReport(const nlohmann::json &plan,
                       const ArtifactOptions &options);

/// kernels.cu compiled for options.archs (each architecture's cubin and PTX
/// written into the artifact), and the CUDA device plugin copied beside the
/// trainer. `fromCache`: every cubin came from the cache.
bool buildCudaKernels(const std::string &kernelSource, ArtifactOptions &options,
                      bool &fromCache);

/// The CPU kernels and the trainer: the kernels are split into translation
/// units compiled in parallel by the host compiler (a process per unit, on a
/// thread of its own, beside NVRTC), combined into kernels.cpu.o and linked
/// with the runtime into `train`. For --target cuda the trainer gets an
/// empty CPU kernel table (the plan says it has no CPU code).
class HostBuild {
public:
  HostBuild(const StepProgram &program, ArtifactOptions &options);
  /// Waits for the compiles still running.
  ~HostBuild();
  /// Writes the units and starts compiling them.
  bool start();
  /// Waits for the units, keeps their warnings in build.log, then combines
  /// the objects and links the trainer.
  bool finish();
  /// Whether every kernel object came from the cache.
  bool fromCache() const { return objectsFromCache; }

private:
  struct Unit {
    std::string text, source, object, log, key;
    bool ok = false, cached = false;
  };
  void compileUnits();
  bool link();

  const StepProgram &program;
  ArtifactOptions &options;
  std::vector<std::string> compileFlags, extraFlags;
  std::vector<Unit> units;
  std::string identity;
  std::thread compiler;
  bool objectsFromCache = false;
};

} // namespace mlir::gpuc

#endif // GPUC_TARGET_BACKEND_H

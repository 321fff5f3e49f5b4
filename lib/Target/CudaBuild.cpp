//===- CudaBuild.cpp - kernels.cu to cubins and PTX, cached ---------------===//
#include "Backend.h"

#include "gpuc/Codegen/Nvrtc.h"

#include "llvm/ADT/STLExtras.h"
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
#include <atomic>
#include <unistd.h>

using namespace mlir;

namespace mlir::gpuc {

namespace {

/// One architecture's cubin and PTX in a compile of kernels.cu.
struct ArchCompile {
  std::string arch;
  GpuBinary binary;
  bool ok = false, cached = false;
  std::string error;
};

/// Compiles kernels.cu for the architectures of `family`, or reads their
/// cubins and PTX from the cache. With `assemble`, NVRTC compiles the source
/// to PTX once for the family's virtual architecture (as programs cut from
/// it on up to `jobs` threads, unless `oneProgram`) and ptxas assembles
/// each cubin from it (in `dir`, in parallel, each on up to `jobs` threads);
/// without, NVRTC compiles each architecture whole. A cache key hashes the
/// source, the architecture, the family's virtual architecture, NVRTC's and
/// (`ptxasIdentity`) ptxas's identities, every runtime header the source can
/// include and `oneProgram`.
void compileFamilyCached(const std::string &source, const PtxFamily &family,
                         bool assemble, bool oneProgram, unsigned jobs,
                         const std::string &ptxasIdentity,
                         const std::string &dir, const std::string &cacheDir,
                         TimingScope &timing,
                         MutableArrayRef<ArchCompile> compiles) {
  std::vector<std::string> entries(compiles.size());
  std::vector<ArchCompile *> missing;
  for (auto [compile, entry] : llvm::zip(compiles, entries)) {
    if (!cacheDir.empty()) {
      llvm::SHA256 hash;
      hash.update(source);
      hash.update("\0" + compile.arch + "\0" + family.virtualArch + "\0" +
                  nvrtcIdentity() + "\0" + ptxasIdentity + "\0");
      hash.update(runtimeHeadersDigest());
      if (assemble && oneProgram)
        hash.update("one NVRTC program");
      entry =
          cacheDir + "/cubins/" + llvm::toHex(hash.final(), /*LowerCase=*/true);
      auto cubin = llvm::MemoryBuffer::getFile(entry + ".cubin");
      auto ptx = llvm::MemoryBuffer::getFile(entry + ".ptx");
      if (cubin && ptx) {
        compile.binary = {compile.arch, (*cubin)->getBuffer().str(),
                          (*ptx)->getBuffer().str()};
        compile.ok = compile.cached = true;
        continue;
      }
    }
    missing.push_back(&compile);
  }
  if (missing.empty())
    return;
  if (!assemble) {
    for (ArchCompile *compile : missing) {
      TimingScope scope = timing.nest("NVRTC " + compile->arch);
      compile->ok =
          compileWithNvrtc(source, compile->arch, GPUC_RUNTIME_INCLUDE_DIR,
                           compile->binary, compile->error);
    }
  } else {
    std::string ptx, error;
    {
      // NVRTC compiles a program on one thread: a large source is cut
      // into programs (NvrtcParts.cpp) compiled on up to --jobs threads,
      // their PTX merged into one module. A merge that fails falls back on
      // the whole source as one program.
      std::vector<std::string> parts = oneProgram
                                           ? std::vector<std::string>{source}
                                           : splitKernelSource(source);
      TimingScope scope = timing.nest(
          "NVRTC " + family.virtualArch + " (PTX" +
          (parts.size() > 1 ? ", " + std::to_string(parts.size()) + " parts"
                            : std::string()) +
          ")");
      std::vector<std::string> ptxs(parts.size()), errors(parts.size());
      std::vector<char> compiled(parts.size(), 0);
      std::atomic<size_t> next{0};
      std::vector<std::thread> compilers;
      for (unsigned t = 0;
           t < std::min<size_t>(std::max(jobs, 1u), parts.size()); ++t)
        compilers.emplace_back([&] {
          for (size_t i = next++; i < parts.size(); i = next++)
            compiled[i] =
                compileToPtx(parts[i], family.virtualArch,
                             GPUC_RUNTIME_INCLUDE_DIR, ptxs[i], errors[i]);
        });
      for (std::thread &compiler : compilers)
        compiler.join();
      bool ok = llvm::all_of(compiled, [](char c) { return c; });
      if (ok && !mergePartsPtx(ptxs, ptx, error)) {
        llvm::errs() << "gpuc compile: warning: " << error
                     << "; kernels.cu is compiled as one program\n";
        ok = false;
      }
      // A program NVRTC refused is compiled again whole, so that its log
      // names kernels.cu's lines; one program is not compiled twice.
      if (!ok && parts.size() == 1 && !compiled.front())
        error = errors.front();
      else if (!ok)
        ok = compileToPtx(source, family.virtualArch, GPUC_RUNTIME_INCLUDE_DIR,
                          ptx, error);
      if (!ok) {
        for (ArchCompile *compile : missing)
          compile->error = error;
        return;
      }
    }
    std::string ptxFile = dir + "/kernels." + family.virtualArch + ".ptx";
    if (!writeFile(ptxFile, ptx))
      return;
    std::vector<std::thread> assemblers;
    for (ArchCompile *compile : missing)
      assemblers.emplace_back([&, compile] {
        TimingScope scope = timing.nest("ptxas " + compile->arch);
        std::string cubinFile = dir + "/kernels." + compile->arch + ".cubin";
        std::string log = dir + "/kernels." + compile->arch + ".ptxas.log";
        // ptxas assembles a cubin's functions on up to --jobs threads: the
        // same SASS as on one thread, and on two cores in 56 % of the time
        // (a small attention model's 36 entry points).
        std::vector<std::string> command = {ptxasPath(),
                                            "-arch=" + compile->arch};
        if (jobs > 1)
          command.push_back("-split-compile=" + std::to_string(jobs));
        command.insert(command.end(), {ptxFile, "-o", cubinFile});
        if (!runTool(command, log)) {
          compile->error = "ptxas failed; its output is in " + log;
          return;
        }
        llvm::sys::fs::remove(log);
        auto cubin = llvm::MemoryBuffer::getFile(cubinFile);
        if (!cubin) {
          compile->error = "ptxas wrote no " + cubinFile;
          return;
        }
        compile->binary = {compile->arch, (*cubin)->getBuffer().str(), ptx};
        compile->ok = true;
      });
    for (std::thread &assembler : assemblers)
      assembler.join();
    llvm::sys::fs::remove(ptxFile);
  }
  for (ArchCompile *compile : missing) {
    if (!compile->ok)
      continue;
    std::string &entry = entries[compile - compiles.data()];
    if (!entry.empty()) {
      // The PTX last: a reader finds both or misses.
      storeInCache(entry + ".cubin", compile->binary.cubin, "the cubins",
                   cacheDir);
      storeInCache(entry + ".ptx", compile->binary.ptx, "the cubins", cacheDir);
    }
  }
}

} // namespace

bool buildCudaKernels(const std::string &kernelSource, ArtifactOptions &options,
                      bool &fromCache) {
  const std::string &dir = options.outputDir;
  // One PTX family at a time on a thread of its own (families are
  // independent), beside the host compiler.
  bool assemble = !ptxasPath().empty() && !options.nvrtcWhole;
  std::string ptxasIdentity;
  if (assemble && !options.cacheDir.empty())
    ptxasIdentity =
        compilerIdentity(ptxasPath(), dir + "/kernels.ptxas.version");
  std::vector<PtxFamily> families = groupByPtxFamily(options.archs, assemble);
  std::vector<std::vector<ArchCompile>> compiles(families.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < families.size(); ++i) {
    for (const std::string &arch : families[i].archs)
      compiles[i].push_back({arch});
    threads.emplace_back([&, i] {
      compileFamilyCached(kernelSource, families[i], assemble,
                          options.nvrtcOneProgram, options.jobs, ptxasIdentity,
                          dir, options.cacheDir, options.timing, compiles[i]);
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  fromCache = true;
  for (const std::vector<ArchCompile> &familyCompiles : compiles)
    for (const ArchCompile &compile : familyCompiles) {
      if (!compile.ok) {
        llvm::errs() << "gpuc compile: could not compile kernels.cu for "
                     << compile.arch << ":\n"
                     << compile.error << "\n";
        return false;
      }
      fromCache &= compile.cached;
      if (!writeFile(dir + "/kernels." + compile.arch + ".cubin",
                     compile.binary.cubin) ||
          !writeFile(dir + "/kernels." + compile.arch + ".ptx",
                     compile.binary.ptx))
        return false;
    }
    // The trainer opens the CUDA device plugin from its own directory.
#ifdef GPUC_CUDA_PLUGIN_LIB
  if (!installPlugin(GPUC_CUDA_PLUGIN_LIB, dir, "libgpuc_cuda.so"))
    return false;
#else
  llvm::errs() << "gpuc compile: warning: this gpuc was built without the "
                  "CUDA device (cuDNN or the CUDA toolkit was missing at "
                  "configure time): the cubins are written but the trainer "
                  "cannot run them\n";
#endif
  return true;
}

} // namespace mlir::gpuc

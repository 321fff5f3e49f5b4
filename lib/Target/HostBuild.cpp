//===- HostBuild.cpp - the CPU kernels and the trainer, cached ------------===//
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

namespace {

/// Splits `kernels` into at most `units` contiguous runs of about equal
/// source size, none smaller than kMinUnitBytes (each unit parses the
/// runtime headers again): the translation units of a parallel host compile.
std::vector<ArrayRef<KernelText>> splitIntoUnits(ArrayRef<KernelText> kernels,
                                                 unsigned units) {
  constexpr size_t kMinUnitBytes = 48 << 10;
  size_t total = 0;
  for (const KernelText &kernel : kernels)
    total += kernel.source.size() + kernel.cpuLaunchers.size();
  units = std::max<size_t>(
      1, std::min<size_t>(units, (total + kMinUnitBytes - 1) / kMinUnitBytes));
  std::vector<ArrayRef<KernelText>> runs;
  size_t begin = 0, done = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    done += kernels[i].source.size() + kernels[i].cpuLaunchers.size();
    // Close a run once it reaches its share of the total.
    if (runs.size() + 1 < units && done * units >= total * (runs.size() + 1)) {
      runs.push_back(kernels.slice(begin, i + 1 - begin));
      begin = i + 1;
    }
  }
  if (begin < kernels.size() || runs.empty())
    runs.push_back(kernels.slice(begin));
  return runs;
}

} // namespace

HostBuild::HostBuild(const StepProgram &program, ArtifactOptions &options)
    : program(program), options(options) {
  compileFlags = {"-O3", "-march=native",
                  // Where the CPU has 512-bit vectors, use them: GCC's
                  // tuning for AVX-512 machines otherwise keeps loops at
                  // 256 bits, and a row kernel's exponentials ran at half
                  // the lanes (no effect on a CPU without AVX-512).
                  "-mprefer-vector-width=512",
                  // sqrtf and friends need not set errno: a loop calling
                  // them may then vectorize.
                  "-fno-math-errno",
                  // Nothing reads the floating-point exception flags, so a
                  // comparison or an operation may run where its result is
                  // not taken: loops with selects (a ReLU's mask, a hard
                  // swish's gradient, maxima that keep NaN) then vectorize,
                  // which GCC refuses while a comparison might trap.
                  // Every value is the same.
                  "-fno-trapping-math", "-fopenmp", "-std=c++17", "-DGPUC_CPU",
                  "-I", GPUC_RUNTIME_INCLUDE_DIR, "-x", "c++"};
  if (GPUC_CPU_VECTOR_MATH && options.cpu)
    compileFlags.push_back("-DGPUC_CPU_VECTOR_MATH");
  // The host compiler's extra flags: a sanitized gpuc's own (its runtime is
  // sanitized), then $GPUC_CXXFLAGS; both for the compile and the link. They
  // follow gpuc's own, so that one of theirs wins (-O1 over -O3), and come
  // before `-x c++`, which would make a file among them a source.
  for (StringRef flags :
       {StringRef(GPUC_BUILD_CXXFLAGS),
        StringRef(getenv("GPUC_CXXFLAGS") ? getenv("GPUC_CXXFLAGS") : "")}) {
    SmallVector<StringRef> split;
    flags.split(split, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef flag : split)
      extraFlags.push_back(flag.str());
  }
  compileFlags.insert(llvm::find(compileFlags, "-x"), extraFlags.begin(),
                      extraFlags.end());
}

HostBuild::~HostBuild() {
  if (compiler.joinable())
    compiler.join();
}

bool HostBuild::start() {
  if (options.cpu) {
    for (ArrayRef<KernelText> run :
         splitIntoUnits(program.kernels, options.jobs))
      units.push_back({cpuKernelUnit(run)});
  }
  units.push_back({cpuKernelTable(options.cpu ? ArrayRef(program.kernels)
                                              : ArrayRef<KernelText>())});
  for (auto [i, unit] : llvm::enumerate(units)) {
    std::string stem = options.outputDir + "/kernels.cpu." + std::to_string(i);
    unit.source = stem + ".cu";
    unit.object = stem + ".o";
    unit.log = stem + ".log";
    if (!writeFile(unit.source, unit.text))
      return false;
  }
  compiler = std::thread([this] { compileUnits(); });
  return true;
}

void HostBuild::compileUnits() {
  TimingScope scope = options.timing.nest(
      llvm::formatv("host compiler: {0} units in parallel (or the cache)",
                    units.size())
          .str());
  if (!options.cacheDir.empty())
    identity = compilerIdentity(options.cxx,
                                options.outputDir + "/kernels.cpu.version");
  std::vector<std::thread> compilers;
  for (Unit &unit : units)
    compilers.emplace_back([&] {
      std::vector<std::string> compile = {options.cxx};
      compile.insert(compile.end(), compileFlags.begin(), compileFlags.end());
      compile.insert(compile.end(), {"-c", unit.source, "-o", unit.object});
      unit.ok = compileCached(compile, unit.text, identity, unit.log,
                              options.cacheDir, unit.cached, unit.key);
    });
  for (std::thread &thread : compilers)
    thread.join();
}

bool HostBuild::finish() {
  compiler.join();
  objectsFromCache = true;
  for (const Unit &unit : units) {
    if (!unit.ok)
      return false;
    objectsFromCache &= unit.cached;
  }
  // The units' logs (warnings) in build.log; on success the units go.
  std::string logs;
  for (const Unit &unit : units) {
    if (auto text = llvm::MemoryBuffer::getFile(unit.log))
      logs += (*text)->getBuffer();
    llvm::sys::fs::remove(unit.log);
    llvm::sys::fs::remove(unit.source);
  }
  if (!writeFile(options.outputDir + "/build.log", logs))
    return false;
  TimingScope phase =
      options.timing.nest("combine the objects, link the trainer");
  return link();
}

bool HostBuild::link() {
  const std::string &dir = options.outputDir;
  std::string object = dir + "/kernels.cpu.o", log = dir + "/build.log";
  std::vector<std::string> combine = {options.cxx, "-r", "-nostdlib"};
  for (const Unit &unit : units)
    combine.push_back(unit.object);
  combine.insert(combine.end(), {"-o", object});
  if (!runTool(combine, log))
    return false;
  for (const Unit &unit : units)
    llvm::sys::fs::remove(unit.object);
  std::vector<std::string> link = {options.cxx};
  link.insert(link.end(), extraFlags.begin(), extraFlags.end());
  link.insert(link.end(),
              {object, GPUC_TRAINER_LIB,
               options.cpu ? GPUC_CPU_DEVICE_LIB : GPUC_NO_CPU_DEVICE_LIB,
               GPUC_RUNTIME_LIB, "-o", dir + "/train"});
  SmallVector<StringRef> libs;
  StringRef(GPUC_TRAINER_LINK_LIBS).split(libs, ' ', -1, false);
  if (options.cpu)
    StringRef(GPUC_CPU_DEVICE_LINK_LIBS).split(libs, ' ', -1, false);
  for (StringRef lib : libs)
    link.push_back(lib.str());
  std::vector<std::string> objectKeys;
  for (const Unit &unit : units)
    objectKeys.push_back(unit.key);
  if (!linkCached(link, objectKeys, identity, log, options.cacheDir))
    return false;
  if (!options.cpu)
    llvm::sys::fs::remove(object);
  return true;
}

} // namespace mlir::gpuc

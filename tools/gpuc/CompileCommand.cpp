//===- CompileCommand.cpp - `gpuc compile`: the trainer artifact ----------===//
//
// Writes into the output directory: plan.json (buffers, arena, steps),
// kernels.cu (every kernel, one source for both targets), init.safetensors
// (initial parameters, optimizer state, constants), model.onnx (for
// --export-onnx), kernels.sm_XX.cubin/.ptx (CUDA target, NVRTC), and
// kernels.cpu.o linked with the runtime's trainer into `train` (CPU target).
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "MemoryReport.h"
#include "gpuc/Codegen/Nvrtc.h"
#include "gpuc/Codegen/StepProgram.h"
#include "gpuc/runtime/Safetensors.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ScopeExit.h"
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
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace mlir;

namespace mlir::gpuc {

static bool writeFile(const std::string &path, const std::string &text) {
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

/// Runs a compiler command, its output kept in `log`.
static bool runTool(ArrayRef<std::string> args, const std::string &log) {
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
static void storeInCache(const std::string &entry, llvm::StringRef bytes,
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
static bool compileCached(ArrayRef<std::string> compile, StringRef text,
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

/// Splits `kernels` into at most `units` contiguous runs of about equal
/// source size, none smaller than kMinUnitBytes (each unit parses the
/// runtime headers again): the translation units of a parallel host compile.
static std::vector<ArrayRef<KernelText>>
splitIntoUnits(ArrayRef<KernelText> kernels, unsigned units) {
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

/// Links the trainer (`link` names it after `-o`), or copies it from the
/// cache: the key hashes the cache keys of the kernel objects it links
/// (`objectKeys`, all non-empty), the command, the libraries it names and the
/// compiler's identity.
static bool linkCached(ArrayRef<std::string> link,
                       ArrayRef<std::string> objectKeys, StringRef identity,
                       const std::string &log, const std::string &cacheDir) {
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

/// One architecture's cubin and PTX in a compile of kernels.cu.
struct ArchCompile {
  std::string arch;
  GpuBinary binary;
  bool ok = false, cached = false;
  std::string error;
};

/// Compiles kernels.cu for the architectures of `family`, or reads their
/// cubins and PTX from the cache. With `assemble`, NVRTC compiles the source
/// to PTX once for the family's virtual architecture and ptxas assembles
/// each cubin from it (in `dir`, in parallel); without, NVRTC compiles each
/// architecture whole. A cache key hashes the source, the architecture, the
/// family's virtual architecture, NVRTC's and (`ptxasIdentity`) ptxas's
/// identities and every runtime header the source can include.
static void compileFamilyCached(const std::string &source,
                                const PtxFamily &family, bool assemble,
                                const std::string &ptxasIdentity,
                                const std::string &dir,
                                const std::string &cacheDir,
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
      TimingScope scope = timing.nest("NVRTC " + family.virtualArch + " (PTX)");
      if (!compileToPtx(source, family.virtualArch, GPUC_RUNTIME_INCLUDE_DIR,
                        ptx, error)) {
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
        if (!runTool({ptxasPath(), "-arch=" + compile->arch, ptxFile, "-o",
                      cubinFile},
                     log)) {
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

/// report.json, and with --report the same on stdout.
static bool writeReport(const nlohmann::json &plan,
                        const ArtifactOptions &options) {
  using json = nlohmann::json;
  const json &steps = plan["functions"]["train_step"]["steps"];
  json kernels = json::array();
  int64_t launches = 0, library = 0, copies = 0, bytes = 0, flops = 0;
  for (const json &s : steps) {
    const std::string &op = s["op"].get_ref<const std::string &>();
    if (op == "copy") {
      ++copies;
      continue;
    }
    flops += s.value("flops", (int64_t)0);
    if (op != "kernel") {
      ++library;
      continue;
    }
    ++launches;
    int64_t read = s["bytes_read"], written = s["bytes_written"];
    bytes += read + written;
    kernels.push_back({{"kernel", s["kernel"]},
                       {"ops", s["ops"]},
                       {"bytes_read", read},
                       {"bytes_written", written},
                       {"flops", s["flops"]}});
  }
  const json &unfused = options.unfused;
  int64_t unfusedOps = unfused.value("ops", (int64_t)0);
  int64_t unfusedBytes = unfused.value("bytes_non_gemm", (int64_t)0);
  json report = {{"function", "train_step"},
                 {"kernels", launches},
                 {"library_calls", library},
                 {"copies", copies},
                 {"launches", launches + library},
                 {"unfused_ops", unfusedOps},
                 {"bytes_non_gemm", bytes},
                 {"unfused_bytes_non_gemm", unfusedBytes},
                 {"flops", flops},
                 {"precision", options.precision},
                 {"memory", memorySummary(plan)},
                 {"per_kernel", kernels}};
  if (!writeFile(options.outputDir + "/report.json", report.dump(1)))
    return false;
  if (!options.report)
    return true;
  auto mib = [](int64_t b) { return b / 1048576.0; };
  llvm::outs() << llvm::formatv("{0,-6} {1,5} {2,10} {3,10} {4,10}  ops\n",
                                "kernel", "#ops", "read MiB", "write MiB",
                                "MFLOP");
  for (const json &k : kernels) {
    std::string ops;
    for (const json &o : k["ops"]) {
      if (ops.size() > 70) {
        ops += " ...";
        break;
      }
      ops += (ops.empty() ? "" : " ") + o.get<std::string>();
    }
    llvm::outs() << llvm::formatv(
        "{0,-6} {1,5} {2,10:f2} {3,10:f2} {4,10:f1}  {5}\n",
        k["kernel"].get<std::string>(), k["ops"].size(), mib(k["bytes_read"]),
        mib(k["bytes_written"]), k["flops"].get<int64_t>() / 1e6, ops);
  }
  llvm::outs() << llvm::formatv(
      "train_step: {0} kernels + {1} library calls = {2} launches (+{3} "
      "copies) against {4} ops unfused ({5:f2}x); non-GEMM traffic {6:f1} MiB "
      "against {7:f1} MiB unfused ({8:f2}x)\n",
      launches, library, launches + library, copies, unfusedOps,
      unfusedOps ? (double)(launches + library) / unfusedOps : 0.0, mib(bytes),
      mib(unfusedBytes), unfusedBytes ? (double)bytes / unfusedBytes : 0.0);
  if (options.precision.contains("storage"))
    llvm::outs() << "precision: "
                 << options.precision["storage"].get<std::string>()
                 << " storage, loss scaling "
                 << options.precision["loss_scale"].get<std::string>() << "\n";
  llvm::outs() << formatMemorySummary(report["memory"]);
  return true;
}

int writeArtifact(ModuleOp module, ArtifactOptions &options) {
  TimingScope phase = options.timing.nest("step program, kernel source");
  FailureOr<StepProgram> program = buildStepProgram(module);
  if (failed(program))
    return 1;
  phase.stop();
  phase = options.timing.nest("plan.json, init.safetensors, report");
  const std::string &dir = options.outputDir;
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::errs() << "gpuc compile: cannot create " << dir << ": "
                 << ec.message() << "\n";
    return 1;
  }
  program->plan["trainer"] = options.trainer;
  program->plan["targets"] = nlohmann::json::array();
  if (options.cpu)
    program->plan["targets"].push_back("cpu");
  if (options.cuda)
    program->plan["targets"].push_back("cuda");
  program->plan["model"] = llvm::sys::path::filename(options.modelPath).str();
  if (!writeFile(dir + "/plan.json", program->plan.dump(1)) ||
      !writeFile(dir + "/kernels.cu", program->kernelSource))
    return 1;
  if (!options.dumpDir.empty() &&
      (!writeFile(options.dumpDir + "/kernels.cu", program->kernelSource) ||
       !writeFile(options.dumpDir + "/plan.json", program->plan.dump(1))))
    return 1;

  std::vector<::gpuc::NamedTensor> tensors;
  // Every persistent buffer starts zeroed on every device, so all-zero
  // initial values (optimizer moments, momentum buffers, the step counter)
  // are left out: an Adam artifact's init.safetensors is then the size of
  // its parameters, not three times it.
  for (InitialTensor &t : program->initialTensors) {
    if (std::all_of(t.bytes.begin(), t.bytes.end(),
                    [](char c) { return c == 0; }))
      continue;
    tensors.push_back({t.name, t.dtype, t.shape, std::move(t.bytes)});
  }
  std::string error;
  if (!::gpuc::writeSafetensors(dir + "/init.safetensors", tensors, {},
                                error)) {
    llvm::errs() << "gpuc compile: " << error << "\n";
    return 1;
  }
  if (StringRef(options.modelPath).ends_with(".onnx")) {
    llvm::sys::fs::remove(dir + "/model.onnx");
    if (std::error_code ec =
            llvm::sys::fs::copy_file(options.modelPath, dir + "/model.onnx")) {
      llvm::errs() << "gpuc compile: cannot copy the model: " << ec.message()
                   << "\n";
      return 1;
    }
  }

  size_t kernelCount = program->plan["kernels"].size();
  if (!writeReport(program->plan, options))
    return 1;
  if (!options.memoryPicture.empty() &&
      !writeFile(options.memoryPicture, memoryPicture(program->plan)))
    return 1;
  phase.stop();
  // The trainer: with the CPU kernels for --target cpu|all; for --target
  // cuda with an empty CPU kernel table (the plan says it has no CPU code).
  // The kernels are split into translation units compiled in parallel, one
  // per job (the host compiler is a process per unit), beside NVRTC
  // compiling the cubins on this thread; their objects are combined into
  // kernels.cpu.o.
  std::string object = dir + "/kernels.cpu.o", log = dir + "/build.log";
  std::vector<std::string> compileFlags = {
      "-O3", "-march=native",
      // sqrtf and friends need not set errno: a loop calling them may then
      // vectorize.
      "-fno-math-errno", "-fopenmp", "-std=c++17", "-DGPUC_CPU", "-I",
      GPUC_RUNTIME_INCLUDE_DIR, "-x", "c++"};
  if (GPUC_CPU_VECTOR_MATH && options.cpu)
    compileFlags.push_back("-DGPUC_CPU_VECTOR_MATH");
  // The host compiler's extra flags: a sanitized gpuc's own (its runtime is
  // sanitized), then $GPUC_CXXFLAGS; both for the compile and the link.
  std::vector<std::string> extraFlags;
  for (StringRef flags :
       {StringRef(GPUC_BUILD_CXXFLAGS),
        StringRef(getenv("GPUC_CXXFLAGS") ? getenv("GPUC_CXXFLAGS") : "")}) {
    SmallVector<StringRef> split;
    flags.split(split, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef flag : split)
      extraFlags.push_back(flag.str());
  }
  compileFlags.insert(compileFlags.begin(), extraFlags.begin(),
                      extraFlags.end());
  struct HostUnit {
    std::string text, source, object, log, key;
    bool ok = false, cached = false;
  };
  std::vector<HostUnit> units;
  if (options.cpu) {
    for (ArrayRef<KernelText> run :
         splitIntoUnits(program->kernels, options.jobs))
      units.push_back({cpuKernelUnit(run)});
  }
  units.push_back({cpuKernelTable(options.cpu ? ArrayRef(program->kernels)
                                              : ArrayRef<KernelText>())});
  for (auto [i, unit] : llvm::enumerate(units)) {
    std::string stem = dir + "/kernels.cpu." + std::to_string(i);
    unit.source = stem + ".cu";
    unit.object = stem + ".o";
    unit.log = stem + ".log";
    if (!writeFile(unit.source, unit.text))
      return 1;
  }
  std::string identity;
  std::thread hostCompiler([&] {
    TimingScope scope = options.timing.nest(
        llvm::formatv("host compiler: {0} units in parallel (or the cache)",
                      units.size())
            .str());
    if (!options.cacheDir.empty())
      identity = compilerIdentity(options.cxx, dir + "/kernels.cpu.version");
    std::vector<std::thread> compilers;
    for (HostUnit &unit : units)
      compilers.emplace_back([&] {
        std::vector<std::string> compile = {options.cxx};
        compile.insert(compile.end(), compileFlags.begin(), compileFlags.end());
        compile.insert(compile.end(), {"-c", unit.source, "-o", unit.object});
        unit.ok = compileCached(compile, unit.text, identity, unit.log,
                                options.cacheDir, unit.cached, unit.key);
      });
    for (std::thread &compiler : compilers)
      compiler.join();
  });
  // Joined on every return below.
  llvm::scope_exit joinHostCompiler([&] {
    if (hostCompiler.joinable())
      hostCompiler.join();
  });
  // kernels.cu for each architecture: one PTX family at a time on a thread
  // of its own (families are independent), beside the host compiler.
  bool cubinsFromCache = options.cuda;
  if (options.cuda) {
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
        compileFamilyCached(program->kernelSource, families[i], assemble,
                            ptxasIdentity, dir, options.cacheDir,
                            options.timing, compiles[i]);
      });
    }
    for (std::thread &thread : threads)
      thread.join();
    for (const std::vector<ArchCompile> &familyCompiles : compiles)
      for (const ArchCompile &compile : familyCompiles) {
        if (!compile.ok) {
          llvm::errs() << "gpuc compile: could not compile kernels.cu for "
                       << compile.arch << ":\n"
                       << compile.error << "\n";
          return 1;
        }
        cubinsFromCache &= compile.cached;
        if (!writeFile(dir + "/kernels." + compile.arch + ".cubin",
                       compile.binary.cubin) ||
            !writeFile(dir + "/kernels." + compile.arch + ".ptx",
                       compile.binary.ptx))
          return 1;
      }
  }
  if (options.cuda) {
    // The trainer opens the CUDA device plugin from its own directory.
#ifdef GPUC_CUDA_PLUGIN_LIB
    llvm::sys::fs::remove(dir + "/libgpuc_cuda.so");
    if (std::error_code ec = llvm::sys::fs::copy_file(
            GPUC_CUDA_PLUGIN_LIB, dir + "/libgpuc_cuda.so")) {
      llvm::errs() << "gpuc compile: cannot copy the CUDA device plugin: "
                   << ec.message() << "\n";
      return 1;
    }
    llvm::sys::fs::setPermissions(dir + "/libgpuc_cuda.so",
                                  llvm::sys::fs::all_read |
                                      llvm::sys::fs::all_exe |
                                      llvm::sys::fs::owner_write);
#else
    llvm::errs() << "gpuc compile: warning: this gpuc was built without the "
                    "CUDA device (cuDNN or the CUDA toolkit was missing at "
                    "configure time): the cubins are written but the trainer "
                    "cannot run them\n";
#endif
  }
  hostCompiler.join();
  bool fromCache = true;
  for (const HostUnit &unit : units) {
    if (!unit.ok)
      return 1;
    fromCache &= unit.cached;
  }
  // The units' logs (warnings) in build.log; on success the units go.
  std::string logs;
  for (const HostUnit &unit : units) {
    if (auto text = llvm::MemoryBuffer::getFile(unit.log))
      logs += (*text)->getBuffer();
    llvm::sys::fs::remove(unit.log);
    llvm::sys::fs::remove(unit.source);
  }
  if (!writeFile(log, logs))
    return 1;
  phase = options.timing.nest("combine the objects, link the trainer");
  std::vector<std::string> combine = {options.cxx, "-r", "-nostdlib"};
  for (const HostUnit &unit : units)
    combine.push_back(unit.object);
  combine.insert(combine.end(), {"-o", object});
  if (!runTool(combine, log))
    return 1;
  for (const HostUnit &unit : units)
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
  for (const HostUnit &unit : units)
    objectKeys.push_back(unit.key);
  if (!linkCached(link, objectKeys, identity, log, options.cacheDir))
    return 1;
  phase.stop();
  if (!options.cpu)
    llvm::sys::fs::remove(object);
  llvm::raw_string_ostream summary(options.summary);
  summary << "gpuc compile: wrote " << dir << " (" << kernelCount
          << " kernels, "
          << program->plan["functions"]["train_step"]["steps"].size()
          << " steps per training step, arena "
          << program->plan["arena_bytes"].get<int64_t>() / (1 << 20) << " MiB";
  if (options.cuda)
    summary << "; cubin+PTX for " << llvm::join(options.archs, ", ");
  summary << "; trainer " << dir << "/train";
  if (fromCache)
    summary << ", CPU kernels from the cache";
  if (cubinsFromCache)
    summary << ", cubins from the cache";
  summary << ")\n";
  llvm::outs() << options.summary;
  return 0;
}

std::vector<std::string> artifactFiles(const ArtifactOptions &options) {
  std::vector<std::string> files = {"plan.json",  "report.json",
                                    "kernels.cu", "init.safetensors",
                                    "build.log",  "train"};
  if (StringRef(options.modelPath).ends_with(".onnx"))
    files.push_back("model.onnx");
  if (options.cpu)
    files.push_back("kernels.cpu.o");
  if (options.cuda) {
#ifdef GPUC_CUDA_PLUGIN_LIB
    files.push_back("libgpuc_cuda.so");
#endif
    for (const std::string &arch : options.archs) {
      files.push_back("kernels." + arch + ".cubin");
      files.push_back("kernels." + arch + ".ptx");
    }
  }
  return files;
}

} // namespace mlir::gpuc

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

/// Compiles `compile` (a host compiler command ending in `-c SOURCE -o
/// OBJECT`), or copies its object from the cache. The key is a hash of the
/// preprocessed source (so every header it includes counts), the command
/// and the compiler: an identical kernel source compiles once per machine.
/// Sets `cached` when the object came from the cache.
static bool compileCached(ArrayRef<std::string> compile,
                          const std::string &object, const std::string &log,
                          const std::string &cacheDir, bool &cached) {
  cached = false;
  if (cacheDir.empty())
    return runTool(compile, log);
  // The same command with -E instead of -c, writing the preprocessed text.
  // -P: no line markers, which would name the output directory.
  std::vector<std::string> preprocess(compile.begin(), compile.end());
  std::string preprocessed = object + ".ii", source;
  for (size_t i = 0; i < preprocess.size(); ++i) {
    if (preprocess[i] == "-c" && i + 1 < preprocess.size()) {
      preprocess[i] = "-E";
      source = preprocess[i + 1];
    }
    if (preprocess[i] == "-o" && i + 1 < preprocess.size())
      preprocess[i + 1] = preprocessed;
  }
  preprocess.push_back("-P");
  if (!runTool(preprocess, log))
    return false;
  auto text = llvm::MemoryBuffer::getFile(preprocessed);
  llvm::sys::fs::remove(preprocessed);
  if (!text) {
    llvm::errs() << "gpuc compile: cannot read " << preprocessed << "\n";
    return false;
  }
  llvm::SHA256 hash;
  hash.update((*text)->getBuffer());
  for (const std::string &arg : compile)
    if (arg != object && arg != source)
      hash.update(arg + '\0');
  // -march=native means this CPU: a cache shared between machines must not
  // hand one's object to another.
  hash.update(llvm::sys::getHostCPUName());
  std::string key = llvm::toHex(hash.final(), /*LowerCase=*/true);
  std::string entry = cacheDir + "/kernels/" + key + ".o";
  if (llvm::sys::fs::exists(entry)) {
    llvm::sys::fs::remove(object);
    if (!llvm::sys::fs::copy_file(entry, object)) {
      cached = true;
      return true;
    }
  }
  if (!runTool(compile, log))
    return false;
  if (auto built = llvm::MemoryBuffer::getFile(object))
    storeInCache(entry, (*built)->getBuffer(), "the kernels", cacheDir);
  return true;
}

/// Compiles kernels.cu for `arch` with NVRTC, or reads its cubin and PTX
/// from the cache: the key hashes the source, the architecture, NVRTC's
/// identity and every runtime header the source can include.
static bool compileCubinCached(const std::string &source,
                               const std::string &arch,
                               const std::string &cacheDir, GpuBinary &binary,
                               bool &cached, std::string &error) {
  cached = false;
  std::string entry;
  if (!cacheDir.empty()) {
    llvm::SHA256 hash;
    hash.update(source);
    hash.update("\0" + arch + "\0" + nvrtcIdentity() + "\0");
    std::vector<std::string> headers;
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator
             it(GPUC_RUNTIME_INCLUDE_DIR, ec),
         end;
         it != end && !ec; it.increment(ec))
      if (it->type() == llvm::sys::fs::file_type::regular_file)
        headers.push_back(it->path());
    std::sort(headers.begin(), headers.end());
    for (const std::string &header : headers)
      if (auto text = llvm::MemoryBuffer::getFile(header)) {
        hash.update(llvm::sys::path::filename(header).str() + '\0');
        hash.update((*text)->getBuffer());
      }
    entry =
        cacheDir + "/cubins/" + llvm::toHex(hash.final(), /*LowerCase=*/true);
    auto cubin = llvm::MemoryBuffer::getFile(entry + ".cubin");
    auto ptx = llvm::MemoryBuffer::getFile(entry + ".ptx");
    if (cubin && ptx) {
      binary.arch = arch;
      binary.cubin = (*cubin)->getBuffer().str();
      binary.ptx = (*ptx)->getBuffer().str();
      cached = true;
      return true;
    }
  }
  if (!compileWithNvrtc(source, arch, GPUC_RUNTIME_INCLUDE_DIR, binary, error))
    return false;
  if (!entry.empty()) {
    // The PTX last: a reader finds both or misses.
    storeInCache(entry + ".cubin", binary.cubin, "the cubins", cacheDir);
    storeInCache(entry + ".ptx", binary.ptx, "the cubins", cacheDir);
  }
  return true;
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
  // Its kernels compile on a thread of their own while NVRTC compiles the
  // cubins (the host compiler is a process: the two share the cores).
  std::string object = dir + "/kernels.cpu.o", log = dir + "/build.log";
  std::string source = dir + "/kernels.cu";
  if (!options.cpu) {
    source = dir + "/cpu-table.cu";
    if (!writeFile(source, "#include \"gpuc/runtime/device/Kernel.h\"\n"
                           "extern \"C\" const gpuc::CpuKernel "
                           "gpuc_cpu_kernels[] = {{nullptr, nullptr}};\n"))
      return 1;
  }
  std::vector<std::string> compile = {
      options.cxx, "-O3", "-march=native",
      // sqrtf and friends need not set errno: a loop calling them may then
      // vectorize.
      "-fno-math-errno", "-fopenmp", "-std=c++17", "-DGPUC_CPU", "-I",
      GPUC_RUNTIME_INCLUDE_DIR, "-x", "c++", "-c", source, "-o", object};
  if (GPUC_CPU_VECTOR_MATH && options.cpu)
    compile.push_back("-DGPUC_CPU_VECTOR_MATH");
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
  compile.insert(compile.begin() + 1, extraFlags.begin(), extraFlags.end());
  bool fromCache = false, hostCompiled = false;
  std::thread hostCompiler([&] {
    TimingScope scope =
        options.timing.nest("host compiler: kernels.cu (or the cache)");
    hostCompiled =
        compileCached(compile, object, log, options.cacheDir, fromCache);
  });
  // Joined on every return below.
  auto joinHostCompiler = llvm::make_scope_exit([&] {
    if (hostCompiler.joinable())
      hostCompiler.join();
  });
  bool cubinsFromCache = options.cuda;
  if (options.cuda) {
    for (const std::string &arch : options.archs) {
      phase = options.timing.nest("NVRTC " + arch + " (or the cache)");
      GpuBinary binary;
      bool cached = false;
      if (!compileCubinCached(program->kernelSource, arch, options.cacheDir,
                              binary, cached, error)) {
        llvm::errs() << "gpuc compile: NVRTC could not compile kernels.cu for "
                     << arch << ":\n"
                     << error << "\n";
        return 1;
      }
      cubinsFromCache &= cached;
      if (!writeFile(dir + "/kernels." + arch + ".cubin", binary.cubin) ||
          !writeFile(dir + "/kernels." + arch + ".ptx", binary.ptx))
        return 1;
      phase.stop();
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
  if (!hostCompiled)
    return 1;
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
  phase = options.timing.nest("link the trainer");
  if (!runTool(link, log))
    return 1;
  phase.stop();
  if (!options.cpu) {
    llvm::sys::fs::remove(source);
    llvm::sys::fs::remove(object);
  }
  llvm::outs() << "gpuc compile: wrote " << dir << " (" << kernelCount
               << " kernels, "
               << program->plan["functions"]["train_step"]["steps"].size()
               << " steps per training step, arena "
               << program->plan["arena_bytes"].get<int64_t>() / (1 << 20)
               << " MiB";
  if (options.cuda)
    llvm::outs() << "; cubin+PTX for " << llvm::join(options.archs, ", ");
  llvm::outs() << "; trainer " << dir << "/train";
  if (fromCache)
    llvm::outs() << ", CPU kernels from the cache";
  if (cubinsFromCache)
    llvm::outs() << ", cubins from the cache";
  llvm::outs() << ")\n";
  return 0;
}

} // namespace mlir::gpuc

//===- CompileCommand.cpp - gpuc compile ----------------------------------===//
#include "Driver.h"

#include "gpuc/Dialect/Gpuc/Signature.h"

using namespace mlir;

namespace mlir::gpuc::driver {

namespace {

/// The most shared memory a block of a GPU of any architecture takes (an
/// H100's 227 KiB).
constexpr int64_t kMostBlockSharedBytes = 232448;

/// The shared memory a block may take on `arch` ("sm_NN"), its own
/// declared arrays included.
int64_t blockSharedBytes(StringRef arch) {
  unsigned number = 0;
  if (arch.drop_front(3).getAsInteger(10, number))
    return 48 * 1024;
  switch (number) {
  case 70:
  case 72:
    return 96 * 1024;
  case 75:
    return 64 * 1024;
  case 80:
  case 87:
    return 163 * 1024;
  case 86:
  case 89:
  case 120:
  case 121:
    return 99 * 1024;
  default:
    return number >= 90 ? kMostBlockSharedBytes : 48 * 1024;
  }
}

/// The shared memory every one of the artifact's architectures gives a
/// block, less 1 KiB for a row kernel's own reductions; the first of them
/// that gives least in `tightest`.
int64_t stageBytesEveryArchAllows(const gpuc::ArtifactOptions &artifact,
                                  std::string &tightest) {
  int64_t least = kMostBlockSharedBytes;
  for (const std::string &arch : artifact.archs)
    if (blockSharedBytes(arch) - 1024 < least) {
      least = blockSharedBytes(arch) - 1024;
      tightest = arch;
    }
  return least;
}

/// The flags every compile needs checked before anything is read.
bool checkStepFlags() {
  if (batchSize <= 0) {
    llvm::errs() << "gpuc compile: --batch N is required (the step's shapes "
                    "are static)\n";
    return false;
  }
  if (batchSize > gpuc::kMaxDim) {
    llvm::errs() << "gpuc compile: --batch " << (int64_t)batchSize
                 << " exceeds gpuc's limit of " << gpuc::kMaxDim
                 << " per dimension\n";
    return false;
  }
  if (!ampOptions("gpuc compile") || !attentionLowering("gpuc compile") ||
      !padClasses("gpuc compile") || !convLayout("gpuc compile"))
    return false;
  if (gpuBytesInFlight < 0 || gpuBytesInFlight > 1024) {
    llvm::errs() << "gpuc compile: --gpu-bytes-in-flight "
                 << (int64_t)gpuBytesInFlight
                 << " is not from 0 to 1024 (32 by default)\n";
    return false;
  }
  if (attentionBlocksPerSm != "auto" && attentionBlocksPerSm != "1" &&
      attentionBlocksPerSm != "2") {
    llvm::errs() << "gpuc compile: --attention-blocks-per-sm '"
                 << attentionBlocksPerSm
                 << "' is not auto, 1 or 2 (auto by default: the GPU times "
                    "both)\n";
    return false;
  }
  if (attentionRowsPerWarp != 16 && attentionRowsPerWarp != 32) {
    llvm::errs() << "gpuc compile: --attention-rows-per-warp "
                 << (int64_t)attentionRowsPerWarp
                 << " is not 16 or 32 (16 by default)\n";
    return false;
  }
  if (attentionRowsPerWarp == 32 && attentionBlocksPerSm == "2") {
    llvm::errs() << "gpuc compile: --attention-rows-per-warp 32 and "
                    "--attention-blocks-per-sm 2 do not go together: two "
                    "blocks an SM cap a thread at 128 registers, fewer than "
                    "32 rows' state takes\n";
    return false;
  }
  if (attentionScoreGradients != "recomputed" &&
      attentionScoreGradients != "stored") {
    llvm::errs() << "gpuc compile: --attention-score-gradients "
                 << attentionScoreGradients
                 << " is not recomputed or stored (recomputed by default)\n";
    return false;
  }
  if (attentionLibrary != "auto" && attentionLibrary != "generated" &&
      attentionLibrary != "cudnn") {
    llvm::errs() << "gpuc compile: --attention-library " << attentionLibrary
                 << " is not auto, generated or cudnn (auto by default)\n";
    return false;
  }
  if (gpuColumnLanesOption < 8 || gpuColumnLanesOption > 256 ||
      (gpuColumnLanesOption & (gpuColumnLanesOption - 1)) != 0) {
    llvm::errs() << "gpuc compile: --gpu-column-lanes "
                 << (int64_t)gpuColumnLanesOption
                 << " is not 8, 16, 32, 64, 128 or 256 (256 by default)\n";
    return false;
  }
  if (gpuWarpRowRegisters < 0 || gpuWarpRowRegisters > 256) {
    llvm::errs() << "gpuc compile: --gpu-warp-row-registers "
                 << (int64_t)gpuWarpRowRegisters << " is not from 0 to 256 ("
                 << mlir::gpuc::kGpuWarpRowRegisters << " by default)\n";
    return false;
  }
  if (gpuRowStageBytes < 0 || gpuRowStageBytes > kMostBlockSharedBytes) {
    llvm::errs() << "gpuc compile: --gpu-row-stage-bytes "
                 << (int64_t)gpuRowStageBytes << " is not from 0 to "
                 << kMostBlockSharedBytes << " ("
                 << mlir::gpuc::kGpuRowStageBytes << " by default)\n";
    return false;
  }
  if (attentionBandRows < 0) {
    llvm::errs() << "gpuc compile: --attention-band-rows "
                 << (int64_t)attentionBandRows
                 << " is negative (0 keeps attention's GEMMs whole)\n";
    return false;
  }
  if (lossChunkRows < 0) {
    llvm::errs() << "gpuc compile: --loss-chunk-rows " << (int64_t)lossChunkRows
                 << " must be positive (or 0: chosen by the compiler)\n";
    return false;
  }
  if ((estimateRanks.getNumOccurrences() || estimateLink.getNumOccurrences()) &&
      !dataParallel) {
    llvm::errs() << "gpuc compile: --ranks and --link describe a "
                    "data-parallel run: add --data-parallel\n";
    return false;
  }
  if (estimateLink.getNumOccurrences() && !estimateRanks.getNumOccurrences()) {
    llvm::errs() << "gpuc compile: --link needs --ranks N\n";
    return false;
  }
  if (estimateRanks.getNumOccurrences() &&
      (estimateRanks < 1 || estimateRanks > 1024)) {
    llvm::errs() << "gpuc compile: --ranks " << estimateRanks
                 << " is not from 1 to 1024\n";
    return false;
  }
  if (estimateLink != "nvlink" && estimateLink != "pcie" &&
      estimateLink != "infiniband") {
    llvm::errs() << "gpuc compile: --link " << estimateLink
                 << " is not one of nvlink, pcie, infiniband\n";
    return false;
  }
  if (shardOptimizer && (!dataParallel || estimateRanks < 2)) {
    llvm::errs() << "gpuc compile: --shard-optimizer shards the optimizer "
                    "state over the ranks of a run: add --data-parallel and "
                    "--ranks N (N >= 2, the number of processes mpirun will "
                    "start)\n";
    return false;
  }
  if (syncBatchNorm && !dataParallel) {
    llvm::errs() << "gpuc compile: --sync-batch-norm needs --data-parallel\n";
    return false;
  }
  if (bucketSizeOption.getNumOccurrences() && !dataParallel) {
    llvm::errs() << "gpuc compile: --bucket-size needs --data-parallel\n";
    return false;
  }
  if (dataParallel && !gradientBucketBytes()) {
    llvm::errs() << "gpuc compile: --bucket-size " << bucketSizeOption
                 << " is not a size: give bytes with an optional unit, e.g. "
                    "25MiB\n";
    return false;
  }
  if (accumulateSteps < 1) {
    llvm::errs() << "gpuc compile: --accumulate K needs K >= 1 (micro-batches "
                    "per update), not "
                 << accumulateSteps << "\n";
    return false;
  }
  return true;
}

/// The artifact's options from the flags (target, architectures, the
/// caches, the dump directory), and the memory budget and limit in bytes;
/// false after an error.
bool artifactOptionsFromFlags(gpuc::ArtifactOptions &artifact,
                              std::optional<int64_t> &budgetBytes,
                              std::optional<int64_t> &limitBytes) {
  std::string target = targetOrDefault();
  if (target != "cpu" && target != "cuda" && target != "all") {
    llvm::errs() << "gpuc compile: --target must be cpu, cuda or all, not '"
                 << target << "'\n";
    return false;
  }
  artifact.cpu = target != "cuda";
  artifact.cuda = target != "cpu";
  if (artifact.cuda && !gpuc::nvrtcAvailable()) {
    llvm::errs() << "gpuc compile: --target " << target
                 << " needs NVRTC, which this gpuc was built without (install "
                    "the CUDA toolkit under /usr/local/cuda and rebuild)\n";
    return false;
  }
  if (!cudaArchs.empty() && !artifact.cuda) {
    llvm::errs() << "gpuc compile: --cuda-arch needs --target cuda or all\n";
    return false;
  }
  if (!cudaArchs.empty()) {
    std::vector<int> supported = gpuc::nvrtcSupportedArchs();
    std::string listed;
    for (int arch : supported)
      if (arch >= 70)
        listed += (listed.empty() ? "sm_" : ", sm_") + std::to_string(arch);
    artifact.archs.clear();
    for (const std::string &arch : cudaArchs) {
      unsigned number = 0;
      bool known = StringRef(arch).starts_with("sm_") &&
                   !StringRef(arch).drop_front(3).getAsInteger(10, number) &&
                   number >= 70 && llvm::is_contained(supported, (int)number);
      if (!known) {
        llvm::errs() << "gpuc compile: --cuda-arch '" << arch
                     << "' is not an architecture this gpuc's NVRTC compiles "
                        "for; choose from "
                     << (listed.empty() ? std::string("none (no NVRTC)")
                                        : listed)
                     << "\n";
        return false;
      }
      if (!llvm::is_contained(artifact.archs, arch))
        artifact.archs.push_back(arch);
    }
  }
  if (!memoryBudget.empty() &&
      !(budgetBytes = sizeOption("--memory-budget", memoryBudget, true)))
    return false;
  if (!memoryLimit.empty() &&
      !(limitBytes = sizeOption("--memory-limit", memoryLimit, false)))
    return false;
  if (rematSolver != "greedy" && rematSolver != "milp") {
    llvm::errs() << "gpuc compile: --remat-solver '" << rematSolver
                 << "' is not a solver: give greedy or milp\n";
    return false;
  }
  if (rematSolver == "milp" && !gpuc::haveBinaryProgramSolver()) {
    llvm::errs() << "gpuc compile: --remat-solver milp needs COIN-OR CBC, "
                    "and this gpuc was built without it: install "
                    "coinor-libcbc-dev (scripts/install-deps.sh) and "
                    "rebuild\n";
    return false;
  }
  if (artifact.cuda && gpuRowStageBytes.getNumOccurrences()) {
    std::string tightest;
    int64_t allowed = stageBytesEveryArchAllows(artifact, tightest);
    if (gpuRowStageBytes > allowed) {
      llvm::errs() << "gpuc compile: --gpu-row-stage-bytes "
                   << (int64_t)gpuRowStageBytes << " is more than a block of "
                   << tightest << " takes beside a row kernel's own ("
                   << allowed << " bytes): give at most that, or leave "
                   << tightest << " out of --cuda-arch\n";
      return false;
    }
  }
  artifact.outputDir = outputFilename;
  artifact.modelPath = inputFilename;
  artifact.nvrtcWhole = nvrtcWhole;
  artifact.nvrtcOneProgram = nvrtcOneProgram;
  artifact.dataParallel = dataParallel;
  artifact.estimateRanks = estimateRanks;
  artifact.estimateLink = estimateLink;
  artifact.cxx = !hostCompiler.empty() ? hostCompiler.getValue()
                 : getenv("CXX")       ? getenv("CXX")
                                       : "c++";
  if (!noCache) {
    if (!cacheDir.empty())
      artifact.cacheDir = cacheDir;
    else if (const char *env = getenv("GPUC_CACHE_DIR"); env && *env)
      artifact.cacheDir = env;
    else if (const char *xdg = getenv("XDG_CACHE_HOME"); xdg && *xdg)
      artifact.cacheDir = std::string(xdg) + "/gpuc";
    else if (const char *home = getenv("HOME"); home && *home)
      artifact.cacheDir = std::string(home) + "/.cache/gpuc";
  }
  artifact.jobs = compileJobs
                      ? compileJobs.getValue()
                      : std::max(1u, std::thread::hardware_concurrency());
  artifact.dumpDir = dumpDir;
  artifact.noWeights = noWeights;
  // Under mixed precision the GEMMs left in f32 (a language model's head
  // and its loss) take TF32 unless --tf32=false says otherwise: autocast
  // would run them in 16 bits, and TF32 keeps more of their precision.
  artifact.tf32 =
      tf32.getNumOccurrences() ? (bool)tf32 : precisionOption != "fp32";
  if (tf32.getNumOccurrences() && tf32 && !artifact.cuda)
    llvm::errs() << "gpuc compile: warning: --tf32 changes only the GPU's "
                    "F32 GEMMs and convolutions, and this artifact has no "
                    "GPU target (--target cuda or all)\n";
  // Under bf16 the f32 GEMMs (the head) run as autocast would run them, in
  // bf16 with f32 sums, at twice TF32's peak; --tf32 given explicitly keeps
  // its meaning.
  std::string gemms = f32Gemms;
  if (gemms != "auto" && gemms != "exact" && gemms != "tf32" &&
      gemms != "bf16") {
    llvm::errs() << "gpuc compile: --f32-gemms=" << gemms
                 << " is not a choice; use auto, exact, tf32 or bf16\n";
    return false;
  }
  if (gemms == "auto")
    gemms = precisionOption == "bf16" && !tf32.getNumOccurrences() ? "bf16"
            : artifact.tf32                                        ? "tf32"
                                                                   : "exact";
  else if (!artifact.cuda)
    llvm::errs() << "gpuc compile: warning: --f32-gemms changes only the "
                    "GPU's F32 GEMMs, and this artifact has no GPU target "
                    "(--target cuda or all)\n";
  artifact.f32GemmsBf16 = gemms == "bf16";
  if (gemms == "tf32")
    artifact.tf32 = true;
  else if (gemms == "exact" && !tf32.getNumOccurrences())
    artifact.tf32 = false;
  if (!dumpDir.empty())
    if (std::error_code ec =
            llvm::sys::fs::create_directories(dumpDir.getValue())) {
      llvm::errs() << "gpuc compile: cannot create " << dumpDir << ": "
                   << ec.message() << "\n";
      return false;
    }
  return true;
}

/// Mixed precision as report.json and the trainer record it.
nlohmann::json precisionFacts() {
  nlohmann::json precision = nlohmann::json::object();
  if (std::optional<gpuc::GpucAmpOptions> amp = ampOptions("gpuc compile")) {
    std::string mode = amp->lossScale;
    if (precisionOption == "fp32")
      mode = "none";
    else if (mode.empty())
      mode = precisionOption == "fp16" ? "dynamic" : "none";
    precision = {{"storage", precisionOption.getValue()}, {"loss_scale", mode}};
    if (mode != "none")
      precision["loss_scale_init"] = amp->lossScaleInit;
    if (mode == "dynamic")
      precision["growth_interval"] = amp->growthInterval;
  }
  return precision;
}

/// Whether the planned step fits --memory-limit or, without it, a CPU-only
/// trainer this machine's memory (a batch of 10^8 once compiled to a 305 GB
/// arena without a word); false after saying why not.
bool fitsMemoryLimit(ModuleOp module, std::optional<int64_t> limitBytes,
                     bool cuda) {
  std::optional<int64_t> limit = limitBytes;
  if (!limit && !cuda) {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && pageSize > 0)
      limit = (int64_t)pages * pageSize;
  }
  if (limit) {
    FailureOr<nlohmann::json> memory = stepMemory(module);
    if (failed(memory))
      return false;
    int64_t total = (*memory)["total"];
    int64_t arena = (*memory)["arena_bytes"].get<int64_t>();
    if (total > *limit && limitBytes) {
      llvm::errs() << llvm::formatv(
          "gpuc compile: at batch {0} the step needs {1} bytes ({2:f2} MiB: "
          "persistent {3} + arena {4}), over --memory-limit {5} bytes "
          "({6:f2} MiB); a smaller --batch, --memory-budget (recompute "
          "instead of keeping) or --max-batch-for {5} finds what fits\n",
          (int64_t)batchSize, total, total / 1048576.0, total - arena, arena,
          *limit, *limit / 1048576.0);
      return false;
    }
    if (total > *limit) {
      llvm::errs() << llvm::formatv(
          "gpuc compile: at batch {0} the step needs {1} bytes ({2:f2} GiB), "
          "more than this machine's memory ({3:f2} GiB); give a smaller "
          "--batch or a --memory-budget, or --memory-limit SIZE to compile "
          "for a machine with more\n",
          (int64_t)batchSize, total, total / 1073741824.0,
          *limit / 1073741824.0);
      return false;
    }
  }
  return true;
}

/// Whether the imported model shifts its labels itself: Hugging Face's
/// causal LMs take labels equal to their input ids and compute the loss on
/// labels[:, 1:] (the end padded with the ignored index first). A token
/// file's windows are then labelled with themselves, not with the tokens
/// that follow, which the model would shift once more.
bool modelShiftsLabels(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return false;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name = forward.getArgAttrOfType<StringAttr>(
        i, gpuc::GpucDialect::kInputAttrName);
    if (!name || name.getValue() != labelsName)
      continue;
    SmallVector<Value> work{forward.getArgument(i)};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (auto pad = dyn_cast<gpuc::PadOp>(user))
          work.push_back(pad.getResult());
        else if (auto slice = dyn_cast<gpuc::SliceOp>(user);
                 slice && slice.getStarts().size() == 2 &&
                 slice.getStarts()[1] == 1)
          return true;
      }
    }
  }
  return false;
}

/// What the trainer feeds and reads. A language model's @eval that scores
/// its tokens (gpuc-eval-token-scores, `scoredOutput` of `classes`)
/// returns their summed loss and correct count in place of its logits.
nlohmann::json trainerFacts(ModuleOp module, StringRef evalOutput,
                            StringRef noEvalReason, StringRef scoredOutput,
                            int64_t classes, bool shiftsLabels) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  std::string dataInput;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (auto name = step.getArgAttrOfType<StringAttr>(
            i, gpuc::GpucDialect::kInputAttrName))
      if (name.getValue() != labelsName && dataInput.empty())
        dataInput = name.str();
  nlohmann::json facts = {{"data_input", dataInput},
                          {"label_input", labelsName.getValue()},
                          {"loss_output", "loss"},
                          {"eval_output", evalOutput},
                          {"no_eval_reason", noEvalReason},
                          {"batch", (int64_t)batchSize},
                          {"accumulate", (int64_t)accumulateSteps},
                          {"optimizer", optimizerKind.getValue()}};
  if (shiftsLabels)
    facts["labels_shifted_by_model"] = true;
  auto eval = module.lookupSymbol<func::FuncOp>("eval");
  std::string lossSum = (scoredOutput + ".loss_sum").str();
  if (!scoredOutput.empty() && eval &&
      gpuc::findResult(eval, gpuc::GpucDialect::kOutputAttrName,
                       StringAttr::get(module.getContext(), lossSum)))
    facts["eval_scores"] = {{"loss_sum", lossSum},
                            {"correct", (scoredOutput + ".correct").str()},
                            {"classes", classes}};
  return facts;
}

} // namespace

// The compile in its order: flags, the artifact cache, import, the three
// pass managers (the report, the sweep and the plan each need the module
// between them), the memory limit, the back end.
int runCompile(int argc, char **argv) {
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions({&importCategory, &trainCategory, &compileCategory});
  // compile always builds the training step from the simplified module.
  train.setHiddenFlag(cl::Hidden);
  noSimplify.setHiddenFlag(cl::Hidden);
  inputFilename.setDescription("<model.onnx|.onnxtxt|.gdsl>");
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpuc compile: build the training step of a model and emit its "
      "trainer\n\n  gpuc compile model.onnx --batch 128 -o out/ "
      "[--optimizer adam --lr 0.001] && out/train --data DIR\n");
  if (!inputFilename.empty() && !maxBatchFor.empty())
    return runMaxBatchFor();
  if (inputFilename.empty() || outputFilename == "-") {
    llvm::errs()
        << "gpuc compile: usage: gpuc compile MODEL --batch N -o "
           "OUTDIR [--loss cross_entropy --loss-output NAME] "
           "[--optimizer sgd|adam|adamw --lr LR] [--target cpu|cuda|all]\n";
    return 1;
  }
  if (!checkStepFlags())
    return 1;
  gpuc::ArtifactOptions artifact;
  std::optional<int64_t> budgetBytes, limitBytes;
  if (!artifactOptionsFromFlags(artifact, budgetBytes, limitBytes))
    return 1;

  // --time: one tree of timers, printed to stderr when the compile ends.
  DefaultTimingManager timing;
  timing.setEnabled(timeCompile);
  timing.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope rootTiming = timing.getRootScope();
  // A compile whose inputs are all unchanged copies the artifact an earlier
  // one wrote (ArtifactCache.h); one that writes or prints more than the
  // artifact (dumps, the memory picture, the report, the remat sweep, the
  // timing tree, MLIR's own printing) runs whole.
  bool reuse = !noArtifactCache && dumpDir.empty() &&
               memoryPictureFile.empty() && !report && !rematSweep &&
               !timeCompile;
  for (int i = 1; i < argc && reuse; ++i)
    reuse = !StringRef(argv[i]).ltrim('-').starts_with("mlir");
  std::string artifactEntry;
  if (reuse) {
    artifactEntry = gpuc::artifactCacheEntry(
        std::vector<std::string>(argv + 1, argv + argc), artifact);
    if (gpuc::restoreArtifact(artifactEntry, artifact))
      return 0;
  }
  // (--memory-budget auto, 0, only recomputes pointwise kernels where that
  // lowers the peak: the lowering stays as asked.)
  if (budgetBytes && *budgetBytes > 0)
    chooseAttentionForBudget(*budgetBytes);
  // Only a compile that printed nothing but its summary is stored: a
  // restore replays no warnings.
  uint64_t errorsBefore = llvm::errs().tell();
  TimingScope importTiming = rootTiming.nest("import");
  ModelLoader loader;
  OwningOpRef<ModuleOp> module = loader.load();
  if (!module)
    return 1;
  importTiming.stop();
  bool shiftsLabels = modelShiftsLabels(*module);
  // The code generation choices the flags make, as module attributes
  // (the dumps show them).
  auto setModuleInt = [&](StringRef name, int64_t value) {
    (*module)->setAttr(
        name,
        IntegerAttr::get(IntegerType::get(module->getContext(), 64), value));
  };
  if (gpuBytesInFlight.getNumOccurrences())
    setModuleInt(gpuc::GpucDialect::kGpuBytesInFlightAttrName,
                 gpuBytesInFlight);
  if (gpuColumnLanesOption.getNumOccurrences())
    setModuleInt(gpuc::GpucDialect::kGpuColumnLanesAttrName,
                 gpuColumnLanesOption);
  // Rows a GPU block stages: as asked, else kGpuRowStageBytes within what
  // every target architecture gives a block.
  std::string tightest;
  int64_t rowStageBytes =
      gpuRowStageBytes.getNumOccurrences()
          ? (int64_t)gpuRowStageBytes
          : std::min(mlir::gpuc::kGpuRowStageBytes,
                     artifact.cuda
                         ? stageBytesEveryArchAllows(artifact, tightest)
                         : mlir::gpuc::kGpuRowStageBytes);
  if (rowStageBytes != mlir::gpuc::kGpuRowStageBytes)
    setModuleInt(gpuc::GpucDialect::kGpuRowStageBytesAttrName, rowStageBytes);
  if (gpuWarpRowRegisters.getNumOccurrences())
    setModuleInt(gpuc::GpucDialect::kGpuWarpRowRegistersAttrName,
                 gpuWarpRowRegisters);
  if (attentionRowsPerWarp.getNumOccurrences())
    setModuleInt(gpuc::GpucDialect::kAttentionRowsPerWarpAttrName,
                 attentionRowsPerWarp);
  if (attentionBlocksPerSm != "auto")
    setModuleInt(gpuc::GpucDialect::kAttentionBlocksPerSmAttrName,
                 attentionBlocksPerSm == "2" ? 2 : 1);
  if (attentionScoreGradients == "stored")
    setModuleInt(gpuc::GpucDialect::kAttentionStoredScoreGradientsAttrName, 1);
  // auto marks a CUDA artifact's attention for the device to time (a CPU
  // artifact has no cuDNN).
  if (attentionLibrary == "cudnn")
    setModuleInt(gpuc::GpucDialect::kAttentionCudnnAttrName, 1);
  else if (attentionLibrary == "auto" && targetOrDefault() != "cpu")
    setModuleInt(gpuc::GpucDialect::kAttentionCudnnAttrName, 2);
  MLIRContext &context = *loader.context;
  // Each pass manager's passes nest in a scope of their own.
  std::vector<std::unique_ptr<TimingScope>> passTimings;

  std::optional<std::string> chosenLoss = chooseLossOutput(*module);
  if (!chosenLoss)
    return 1;
  std::string lossOutput = *chosenLoss;
  std::string noEvalReason;
  std::string evalOutput = chooseEvalOutput(*module, lossOutput, noEvalReason);

  // The pipeline runs in three pass managers (the report needs the step
  // before kernels are formed, the sweep the step before remat); the dumps
  // number their passes in one sequence.
  unsigned passCount = 0;
  auto passManager = [&]() -> std::unique_ptr<PassManager> {
    auto pm = std::make_unique<PassManager>(&context);
    if (failed(applyPassManagerCLOptions(*pm)))
      return nullptr;
    if (timeCompile) {
      static const char *const stages[] = {"passes: the training step",
                                           "passes: kernels",
                                           "passes: remat and memory plan"};
      passTimings.push_back(std::make_unique<TimingScope>(
          rootTiming.nest(stages[std::min<size_t>(passTimings.size(), 2)])));
      pm->enableTiming(*passTimings.back());
    }
    if (!dumpDir.empty())
      pm->addInstrumentation(std::make_unique<DumpAfterEachPass>(
          dumpDir.getValue(), *module, &passCount));
    return pm;
  };
  std::unique_ptr<PassManager> trainingPassManager = passManager();
  if (!trainingPassManager)
    return 1;
  PassManager &pm = *trainingPassManager;
  std::string scoredOutput = scoredEvalOutput(*module, evalOutput);
  // The vocabulary, from the logits that @eval may no longer return.
  int64_t scoredClasses = 0;
  if (!scoredOutput.empty()) {
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    unsigned logits =
        *gpuc::findResult(forward, gpuc::GpucDialect::kOutputAttrName,
                          StringAttr::get(module->getContext(), scoredOutput));
    scoredClasses =
        cast<RankedTensorType>(forward.getResultTypes()[logits]).getShape()[2];
  }
  addStepPipeline(pm, lossOutput, scoredOutput);
  if (failed(pm.run(*module)))
    return 1;
  if (!passTimings.empty())
    passTimings.back()->stop();
  // The program one kernel per core op would run, for the report.
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  artifact.unfused = gpuc::unfusedCost(step);
  artifact.report = report;
  artifact.precision = precisionFacts();
  artifact.memoryPicture = memoryPictureFile;

  std::unique_ptr<PassManager> kernelPassManager = passManager();
  if (!kernelPassManager)
    return 1;
  PassManager &kernelPm = *kernelPassManager;
  addKernelPipeline(kernelPm, budgetBytes.has_value() || rematSweep);
  if (failed(kernelPm.run(*module)))
    return 1;
  if (!passTimings.empty())
    passTimings.back()->stop();
  if (rematSweep && failed(printRematSweep(*module)))
    return 1;

  // Remat and the memory plan, after the sweep has seen the fused step.
  std::unique_ptr<PassManager> planPassManager = passManager();
  if (!planPassManager)
    return 1;
  PassManager &planPm = *planPassManager;
  addPlanPipeline(planPm, budgetBytes);
  if (failed(planPm.run(*module)))
    return 1;
  if (!passTimings.empty())
    passTimings.back()->stop();
  if (!fitsMemoryLimit(*module, limitBytes, artifact.cuda))
    return 1;

  artifact.trainer = trainerFacts(*module, evalOutput, noEvalReason,
                                  scoredOutput, scoredClasses, shiftsLabels);
  artifact.timing = rootTiming.nest("back end");
  int status = gpuc::writeArtifact(*module, artifact);
  if (status == 0 && llvm::errs().tell() == errorsBefore)
    gpuc::storeArtifact(artifactEntry, artifact, loader.externalFiles);
  // Every timer stops before `timing` (declared after `artifact`) prints.
  artifact.timing = TimingScope();
  return status;
}

} // namespace mlir::gpuc::driver

//===- gpuc.cpp - the gpuc compiler driver --------------------------------===//
//
// `gpuc import MODEL -o out.mlir` reads an ONNX model (.onnx, .onnxtxt) or a
// gpuc DSL model (.gdsl) into the gpuc dialect and simplifies it. Later stages
// (train, compile) extend the same driver.
//
//===----------------------------------------------------------------------===//
#include "ArtifactCache.h"
#include "Commands.h"
#include "MemoryReport.h"
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Codegen/Nvrtc.h"
#include "gpuc/Codegen/StepProgram.h"
#include "gpuc/Frontend/DslParser.h"
#include "gpuc/Frontend/Limits.h"
#include "gpuc/Frontend/OnnxImporter.h"
#include "gpuc/InitAll.h"
#include "gpuc/Transforms/BinaryProgram.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;

namespace mlir::gpuc {
/// `gpuc run`, in RunCommand.cpp; its options are in `runCategory`.
int runInterpreterCommand(StringRef modulePath);
extern cl::OptionCategory runCategory;
} // namespace mlir::gpuc

static cl::OptionCategory
    importCategory("model options (gpuc import and gpuc compile)");

static cl::opt<std::string>
    inputFilename(cl::Positional,
                  cl::desc("<model.onnx|.onnxtxt|.gdsl> (import) or "
                           "<module.mlir> (run)"),
                  cl::cat(importCategory), cl::cat(gpuc::runCategory));
static cl::opt<std::string> outputFilename(
    "o",
    cl::desc("import: the .mlir file to write (default stdout); compile: the "
             "artifact directory"),
    cl::value_desc("path"), cl::init("-"), cl::cat(importCategory));
static cl::opt<int64_t>
    batchSize("batch",
              cl::desc("Bind the symbolic batch dimension (dimension 0 of the "
                       "inputs) to N"),
              cl::value_desc("N"), cl::init(0), cl::cat(importCategory));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Give a full static shape to an input, e.g. "
                         "--input-shape image=32x1x28x28 (repeatable)"),
                cl::value_desc("name=D0xD1x..."), cl::cat(importCategory));
static cl::opt<bool> noSimplify(
    "no-simplify",
    cl::desc("Print the module as imported, before canonicalize and CSE"),
    cl::init(false), cl::cat(importCategory));

static cl::OptionCategory
    trainCategory("training options (gpuc compile; gpuc import --train)");
static cl::opt<bool>
    train("train",
          cl::desc("Build @train_step: loss, gradients and optimizer update"),
          cl::init(false), cl::cat(trainCategory));
static cl::opt<std::string>
    lossKind("loss",
             cl::desc("Add a loss on --loss-output when the model has none: "
                      "cross_entropy or mse"),
             cl::value_desc("kind"), cl::init(""), cl::cat(trainCategory));
static cl::opt<std::string>
    lossTarget("loss-output",
               cl::desc("The model output the added loss is computed on"),
               cl::value_desc("output"), cl::init(""), cl::cat(trainCategory));
static cl::opt<std::string> labelsName(
    "labels", cl::desc("Name of the new input holding labels/targets"),
    cl::value_desc("name"), cl::init("label"), cl::cat(trainCategory));
static cl::opt<int64_t> classAxis(
    "class-axis",
    cl::desc("cross_entropy: the output axis holding the classes (default 1; "
             "-1 for the last, as language models have)"),
    cl::value_desc("axis"), cl::init(1), cl::cat(trainCategory));
static cl::opt<int64_t> accumulateSteps(
    "accumulate",
    cl::desc("gradient accumulation: add the gradients of K steps of --batch "
             "samples and update once from their mean (an effective batch of "
             "K x --batch); the trainer runs @apply_update every K steps"),
    cl::value_desc("K"), cl::init(1), cl::cat(trainCategory));
static cl::opt<std::string> precisionOption(
    "precision",
    cl::desc("fp32 (default), fp16 or bf16: the storage type of activations, "
             "their gradients and GEMM/convolution operands (f32 master "
             "weights, reductions, norms and the loss; see gpuc-amp)"),
    cl::value_desc("type"), cl::init("fp32"), cl::cat(trainCategory));
static cl::opt<std::string> lossScaleOption(
    "loss-scale",
    cl::desc("mixed precision's loss scaling, decided on the device in the "
             "step: dynamic (fp16's default), static:V or none (bf16's "
             "default)"),
    cl::value_desc("dynamic|static:V|none"), cl::init(""),
    cl::cat(trainCategory));
static cl::opt<double> lossScaleInit(
    "loss-scale-init",
    cl::desc("the dynamic loss scale's initial value (default 65536)"),
    cl::value_desc("V"), cl::init(65536.0), cl::cat(trainCategory));
static cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("dynamic loss scaling: clean steps before the scale doubles "
             "(default 2000)"),
    cl::value_desc("N"), cl::init(2000), cl::cat(trainCategory));
static cl::opt<std::string> optimizerKind("optimizer",
                                          cl::desc("sgd, adam or adamw"),
                                          cl::value_desc("kind"),
                                          cl::init("sgd"),
                                          cl::cat(trainCategory));
static cl::opt<double>
    learningRate("lr",
                 cl::desc("Default learning rate (sgd 0.01, adam/adamw 0.001)"),
                 cl::init(-1.0), cl::cat(trainCategory));
static cl::opt<double> momentumValue("momentum",
                                     cl::desc("Default SGD momentum (0.9)"),
                                     cl::init(0.9), cl::cat(trainCategory));
static cl::opt<double> dampeningValue("dampening",
                                      cl::desc("Default SGD dampening (0)"),
                                      cl::init(0.0), cl::cat(trainCategory));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                              cl::init(false), cl::cat(trainCategory));
static cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Default weight decay (sgd/adam 0, adamw 0.01)"),
                cl::init(-1.0), cl::cat(trainCategory));
static cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (0.9)"),
                             cl::init(0.9), cl::cat(trainCategory));
static cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (0.999)"),
                             cl::init(0.999), cl::cat(trainCategory));
static cl::opt<double> adamEpsilon("epsilon", cl::desc("Adam epsilon (1e-8)"),
                                   cl::init(1e-8), cl::cat(trainCategory));

static cl::OptionCategory compileCategory("gpuc compile options");
static cl::opt<std::string> codegenTarget(
    "target",
    cl::desc("compile: cpu (the trainer), cuda (NVRTC cubin + PTX for "
             "sm_80 and sm_90) or all (default: all when NVRTC is available)"),
    cl::value_desc("cpu|cuda|all"), cl::init(""), cl::cat(compileCategory));
static cl::list<std::string> cudaArchs(
    "cuda-arch",
    cl::desc("compile: the GPU architectures to build cubins (and PTX) for "
             "with the CUDA target, e.g. sm_90 for an H100 alone (default "
             "sm_80,sm_90; NVRTC compiles sm_80 and later to PTX once and "
             "ptxas assembles each)"),
    cl::value_desc("sm_XX,..."), cl::CommaSeparated, cl::cat(compileCategory));
static cl::opt<std::string>
    dumpDir("dump-dir",
            cl::desc("compile: write the IR after every pass (NN-pass.mlir), "
                     "the kernel source and the plan into DIR"),
            cl::value_desc("DIR"), cl::init(""), cl::cat(compileCategory));
static cl::opt<std::string>
    hostCompiler("cxx",
                 cl::desc("compile: the host C++ compiler for the CPU target "
                          "(default $CXX, else c++)"),
                 cl::value_desc("path"), cl::init(""),
                 cl::cat(compileCategory));

static cl::opt<std::string> cacheDir(
    "cache-dir",
    cl::desc("compile: keep compiled CPU kernels, cubins and trainers in "
             "DIR, by a hash of their source, flags and compiler, and reuse "
             "them (default $GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc, else "
             "~/.cache/gpuc)"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(compileCategory));
static cl::opt<bool>
    timeCompile("time",
                cl::desc("compile: print where the compile's time goes: "
                         "import, every pass (MLIR's pass timing), the step "
                         "program, NVRTC, the host compiler and the link"),
                cl::init(false), cl::cat(compileCategory));
static cl::opt<unsigned> compileJobs(
    "jobs",
    cl::desc("compile: host compiler processes run in parallel on the CPU "
             "kernels, each on a share of them (default: this machine's "
             "hardware threads)"),
    cl::value_desc("N"), cl::init(0), cl::cat(compileCategory));
static cl::opt<bool> nvrtcWhole(
    "nvrtc-whole",
    cl::desc("compile: one whole NVRTC compile per GPU architecture instead "
             "of one PTX per family assembled by ptxas (to compare cubins)"),
    cl::init(false), cl::Hidden, cl::cat(compileCategory));
static cl::opt<bool> noArtifactCache(
    "no-artifact-cache",
    cl::desc("compile: build the artifact even when the cache holds one from "
             "the same model, options and tools (its kernels and cubins still "
             "come from the cache)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> noCache("no-cache",
                             cl::desc("compile: compile the CPU kernels "
                                      "without the cache"),
                             cl::init(false), cl::cat(compileCategory));

static cl::opt<bool>
    report("report",
           cl::desc("compile: print each kernel of the training step (ops, "
                    "bytes read and written, FLOPs) and the totals against "
                    "one kernel per op; report.json is written either way"),
           cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> memoryPictureFile(
    "memory-picture",
    cl::desc("compile: draw the training step's arena as an SVG: each "
             "buffer over the steps it is live (x) at its arena offset (y), "
             "coloured by what it holds"),
    cl::value_desc("FILE.svg"), cl::init(""), cl::cat(compileCategory));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("compile: bound the training step's arena peak by recomputing "
             "forward values in backward (gpuc-remat): bytes, or with a unit "
             "(512MiB, 2GiB, 1.5GB); 'auto' recomputes only the pointwise "
             "kernels whose recomputation lowers the peak"),
    cl::value_desc("SIZE|auto"), cl::init(""), cl::cat(compileCategory));
static cl::opt<std::string> rematSolver(
    "remat-solver",
    cl::desc("compile: how gpuc-remat chooses what to recompute to meet "
             "--memory-budget: greedy (default; least FLOPs per byte saved), "
             "or milp (least FLOPs under a 0-1 program solved by COIN-OR "
             "CBC; slower, shows how far greedy is from optimal)"),
    cl::value_desc("greedy|milp"), cl::init("greedy"),
    cl::cat(compileCategory));
static cl::opt<bool> rematSweep(
    "remat-sweep",
    cl::desc("compile: print the arena peak and the recomputed FLOPs that "
             "gpuc-remat reaches at budgets of 100, 90, 75, 50 and 30% of "
             "the peak without it, with the greedy solver and, when gpuc "
             "has CBC, the exact one"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> maxBatchFor(
    "max-batch-for",
    cl::desc("compile: plan the step at growing batch sizes (nothing runs) "
             "and print the largest batch whose whole step (persistent "
             "buffers + arena) fits in SIZE, without and with "
             "rematerialization; --batch is not needed"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(compileCategory));
static cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("compile: refuse to compile when the whole step (persistent "
             "buffers + arena) needs more than SIZE, and say how much it "
             "needs"),
    cl::value_desc("SIZE"), cl::init(""), cl::cat(compileCategory));
static cl::opt<bool> noSchedule(
    "no-schedule",
    cl::desc("compile: keep the program order (skip gpuc-schedule, which "
             "reorders independent kernels when that lowers the peak)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool>
    noFuse("no-fuse",
           cl::desc("compile: one kernel per op (skip gpuc-fuse), to compare"),
           cl::init(false), cl::cat(compileCategory));

static const char *const kUsage =
    "gpuc: an ahead-of-time compiler for neural-network training\n\n"
    "USAGE: gpuc <command> [options]\n\n"
    "COMMANDS:\n"
    "  import   read an ONNX or DSL model into the gpuc dialect (--train\n"
    "           builds the training step)\n"
    "  compile  build the training step and emit the trainer: plan.json,\n"
    "           kernels.cu, cubins, and out/train\n"
    "  run      run a function of a .mlir module in the reference\n"
    "           interpreter on .npy inputs\n\n"
    "Run 'gpuc <command> --help' for the options of a command.\n";

/// Parses --memory-budget: "auto" (0), or bytes with an optional unit.
static std::optional<int64_t> parseMemorySize(StringRef text) {
  if (text == "auto")
    return 0;
  size_t digits = text.find_first_not_of("0123456789.");
  StringRef number = text.take_front(digits), unit = text.drop_front(digits);
  double value;
  if (number.empty() || number.getAsDouble(value) || value <= 0)
    return std::nullopt;
  static const std::pair<StringRef, double> units[] = {{"", 1},
                                                       {"B", 1},
                                                       {"KiB", 1024.0},
                                                       {"MiB", 1048576.0},
                                                       {"GiB", 1073741824.0},
                                                       {"TiB", 1099511627776.0},
                                                       {"KB", 1e3},
                                                       {"MB", 1e6},
                                                       {"GB", 1e9},
                                                       {"TB", 1e12}};
  for (auto [name, scale] : units)
    // Beyond 2^62 bytes no size is meaningful (and the conversion to
    // int64 would overflow).
    if (unit == name)
      return value * scale <= 4611686018427387904.0
                 ? std::optional<int64_t>((int64_t)(value * scale))
                 : std::nullopt;
  return std::nullopt;
}

/// Parses "name=2x3x4".
static LogicalResult parseInputShape(StringRef spec,
                                     gpuc::OnnxImportOptions &options) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || dims.empty()) {
    llvm::errs() << "gpuc: --input-shape expects name=D0xD1x..., got '" << spec
                 << "'\n";
    return failure();
  }
  std::vector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t d;
    if (part.getAsInteger(10, d) || d <= 0) {
      llvm::errs() << "gpuc: --input-shape " << spec << ": '" << part
                   << "' is not a positive dimension\n";
      return failure();
    }
    shape.push_back(d);
  }
  options.inputShapes[name.str()] = shape;
  return success();
}

/// The context a command reads a model into, with diagnostics printed
/// against the model's source.
struct ModelSession {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<SourceMgrDiagnosticHandler> diagnostics;

  ModelSession() {
    gpuc::registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    // A user's error says what is wrong and where in the model; the whole
    // function's IR after it ("see current operation") buries that.
    context->printOpOnDiagnostic(false);
    diagnostics =
        std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, context.get());
    // A diagnostic quotes its source line, unless the line is too long to
    // read (a generated or hostile model): then it says how long it is.
    context->getDiagEngine().registerHandler([this](Diagnostic &diag) {
      int64_t length = sourceLineLength(diag.getLocation());
      if (length <= kLongestQuotedLine)
        return failure(); // SourceMgrDiagnosticHandler prints it
      diagnostics->emitDiagnostic(
          diag.getLocation(),
          diag.str() + " (its source line, " + Twine(length) +
              " characters long, is not shown)",
          diag.getSeverity(), /*displaySourceLine=*/false);
      for (Diagnostic &note : diag.getNotes())
        diagnostics->emitDiagnostic(note.getLocation(), note.str(),
                                    note.getSeverity(), false);
      return success();
    });
  }

  static constexpr int64_t kLongestQuotedLine = 240;
  /// The length of the source line `loc` points into; 0 if it is not a
  /// line of a loaded buffer.
  int64_t sourceLineLength(Location loc) {
    auto file = dyn_cast<FileLineColLoc>(loc);
    if (!file)
      return 0;
    for (unsigned id = 1; id <= sourceMgr.getNumBuffers(); ++id) {
      const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(id);
      if (buffer->getBufferIdentifier() != file.getFilename().getValue())
        continue;
      llvm::SMLoc start =
          sourceMgr.FindLocForLineAndColumn(id, file.getLine(), 1);
      if (!start.isValid())
        return 0;
      StringRef rest(start.getPointer(),
                     buffer->getBufferEnd() - start.getPointer());
      return (int64_t)rest.take_until([](char c) { return c == '\n'; }).size();
    }
    return 0;
  }

  /// The model named on the command line, with --batch/--input-shape bound;
  /// null after a diagnostic.
  OwningOpRef<ModuleOp> load();
  /// The external data files load() read (an ONNX model's).
  std::vector<std::string> externalFiles;
};

/// --batch and --input-shape as import options.
static LogicalResult importOptions(gpuc::OnnxImportOptions &options) {
  if (batchSize > 0)
    options.batch = batchSize;
  for (const std::string &spec : inputShapes)
    if (failed(parseInputShape(spec, options)))
      return failure();
  return success();
}

OwningOpRef<ModuleOp> ModelSession::load() {
  gpuc::OnnxImportOptions options;
  if (failed(importOptions(options)))
    return nullptr;
  options.externalFiles = &externalFiles;
  if (StringRef(inputFilename).ends_with(".gdsl")) {
    gpuc::DslOptions dslOptions;
    dslOptions.batch = options.batch;
    return gpuc::parseDslFile(inputFilename, context.get(), sourceMgr,
                              dslOptions);
  }
  return gpuc::importOnnxFile(inputFilename, context.get(), options);
}

/// attach-loss (when --loss), autodiff, optimizer: what --train adds.
/// The gpuc-amp options the flags ask for, or nullopt after an error that
/// names the flag (none for --precision fp32).
static std::optional<gpuc::GpucAmpOptions> ampOptions(StringRef tool) {
  gpuc::GpucAmpOptions amp;
  amp.precision = precisionOption;
  if (precisionOption != "fp32" && precisionOption != "fp16" &&
      precisionOption != "bf16") {
    llvm::errs() << tool << ": --precision " << precisionOption
                 << " is not one of fp32, fp16, bf16\n";
    return std::nullopt;
  }
  StringRef mode = lossScaleOption;
  amp.lossScaleInit = lossScaleInit;
  if (mode.consume_front("static:")) {
    double value;
    if (mode.getAsDouble(value) || !(value > 0) || !std::isfinite(value)) {
      llvm::errs() << tool << ": --loss-scale static:" << mode
                   << " needs a positive finite scale, e.g. static:1024\n";
      return std::nullopt;
    }
    amp.lossScale = "static";
    amp.lossScaleInit = value;
  } else if (mode.empty() || mode == "dynamic" || mode == "none") {
    amp.lossScale = mode.str();
  } else {
    llvm::errs() << tool << ": --loss-scale " << lossScaleOption
                 << " is not one of dynamic, static:V, none\n";
    return std::nullopt;
  }
  if (!(lossScaleInit > 0) || !std::isfinite(lossScaleInit)) {
    llvm::errs() << tool << ": --loss-scale-init " << lossScaleInit
                 << " must be a positive finite number\n";
    return std::nullopt;
  }
  if (lossScaleGrowthInterval < 1) {
    llvm::errs() << tool << ": --loss-scale-growth-interval "
                 << lossScaleGrowthInterval << " must be at least 1\n";
    return std::nullopt;
  }
  amp.growthInterval = lossScaleGrowthInterval;
  bool scaling = !lossScaleOption.empty() ||
                 lossScaleInit.getNumOccurrences() > 0 ||
                 lossScaleGrowthInterval.getNumOccurrences() > 0;
  if (precisionOption == "fp32" && scaling) {
    llvm::errs() << tool
                 << ": loss scaling (--loss-scale*) needs --precision "
                    "fp16 or bf16\n";
    return std::nullopt;
  }
  return amp;
}

static void addTrainingPasses(PassManager &pm, StringRef lossOutput) {
  if (!lossKind.empty())
    pm.addPass(gpuc::createGpucAttachLoss(gpuc::GpucAttachLossOptions{
        lossKind, lossOutput.str(), labelsName, classAxis}));
  // Validated by ampOptions before any pipeline is built.
  if (precisionOption != "fp32")
    pm.addPass(gpuc::createGpucAmp(*ampOptions("gpuc")));
  pm.addPass(gpuc::createGpucAutodiff());
  gpuc::GpucOptimizerOptions opt;
  opt.kind = optimizerKind;
  opt.lr = learningRate;
  opt.momentum = momentumValue;
  opt.dampening = dampeningValue;
  opt.nesterov = nesterov;
  opt.weightDecay = weightDecay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.epsilon = adamEpsilon;
  opt.accumulate = accumulateSteps;
  pm.addPass(gpuc::createGpucOptimizer(opt));
  if (precisionOption != "fp32")
    pm.addPass(gpuc::createGpucAmpWeightCopies());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// The passes of gpuc compile, in the three stages it runs them in (the
/// report reads the step before kernels are formed, --remat-sweep the fused
/// step before remat).
static void addStepPipeline(PassManager &pm, StringRef lossOutput) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(gpuc::createGpucEvalFunction());
  addTrainingPasses(pm, lossOutput);
  pm.addPass(gpuc::createGpucDecompose());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}
/// `memoryFirst` when the step must fit a budget: gpuc-fuse then stores
/// fewer bytes at some CPU time (its memory-first option).
static void addKernelPipeline(PassManager &pm, bool memoryFirst) {
  pm.addPass(gpuc::createGpucFormKernels());
  if (!noFuse)
    pm.addPass(gpuc::createGpucFuse(gpuc::GpucFuseOptions{memoryFirst}));
  if (!noSchedule)
    pm.addPass(gpuc::createGpucSchedule());
}
static void addPlanPipeline(PassManager &pm,
                            std::optional<int64_t> arenaBudget) {
  if (arenaBudget)
    pm.addPass(gpuc::createGpucRemat(
        gpuc::GpucRematOptions{*arenaBudget, rematSolver}));
  pm.addPass(gpuc::createGpucPlanMemory());
}

static int runImport(int argc, char **argv) {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // The run and compile commands' options mean nothing here.
  for (auto &entry : cl::getRegisteredOptions())
    if ((llvm::is_contained(entry.second->Categories, &gpuc::runCategory) ||
         llvm::is_contained(entry.second->Categories, &compileCategory)) &&
        entry.second != &inputFilename)
      entry.second->setHiddenFlag(cl::Hidden);
  inputFilename.setDescription("<model.onnx|.onnxtxt|.gdsl>");
  cl::ParseCommandLineOptions(argc, argv,
                              "gpuc import: read a model into "
                              "the gpuc dialect\n");
  if (inputFilename.empty()) {
    llvm::errs() << "gpuc import: no model given; usage: gpuc import "
                    "MODEL [--batch N] -o out.mlir\n";
    return 1;
  }
  if (!ampOptions("gpuc import"))
    return 1;
  if (!train && precisionOption != "fp32") {
    llvm::errs() << "gpuc import: --precision applies to the training step; "
                    "add --train\n";
    return 1;
  }
  if (train && noSimplify) {
    llvm::errs() << "gpuc import: --train and --no-simplify do not go "
                    "together\n";
    return 1;
  }
  if (!train && (!lossKind.empty() || !lossTarget.empty())) {
    llvm::errs() << "gpuc import: --loss and --loss-output only apply with "
                    "--train\n";
    return 1;
  }
  if (!lossKind.empty() && lossTarget.empty()) {
    llvm::errs()
        << "gpuc import: --loss needs --loss-output OUTPUT, the output "
           "the loss is computed on\n";
    return 1;
  }
  if (batchSize < 0 || batchSize > gpuc::kMaxDim) {
    llvm::errs() << "gpuc import: --batch must be positive and at most "
                 << gpuc::kMaxDim << "\n";
    return 1;
  }
  ModelSession session;
  OwningOpRef<ModuleOp> module = session.load();
  if (!module)
    return 1;
  MLIRContext &context = *session.context;

  if (!noSimplify) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (train)
      addTrainingPasses(pm, lossTarget);
    if (failed(pm.run(*module)))
      return 1;
  }

  std::string error;
  auto output = openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "gpuc import: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

namespace {
/// Writes the module after every pass, numbered, for --dump-dir.
class DumpAfterEachPass : public PassInstrumentation {
public:
  DumpAfterEachPass(std::string dir, ModuleOp module, unsigned *count)
      : dir(std::move(dir)), module(module), count(count) {}
  void runAfterPass(Pass *pass, Operation *) override {
    std::string name =
        llvm::formatv("{0}/{1:D2}-{2}.mlir", dir, ++*count,
                      pass->getArgument().empty() ? pass->getName()
                                                  : pass->getArgument())
            .str();
    std::error_code ec;
    llvm::raw_fd_ostream out(name, ec);
    if (!ec)
      module.print(out);
  }

private:
  std::string dir;
  ModuleOp module;
  unsigned *count;
};

/// The names of @forward's outputs.
SmallVector<std::string> forwardOutputs(ModuleOp module) {
  SmallVector<std::string> names;
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<StringAttr>(
              i, gpuc::GpucDialect::kOutputAttrName))
        names.push_back(name.str());
  return names;
}

} // namespace

/// The loss output the step trains on: the model's own "loss" output, else
/// --loss (default cross_entropy) on --loss-output (default: the model's
/// only output). Empty after an error.
static std::optional<std::string> chooseLossOutput(ModuleOp module) {
  SmallVector<std::string> outputs = forwardOutputs(module);
  std::string lossOutput = lossTarget;
  if (llvm::is_contained(outputs, "loss"))
    return lossOutput;
  if (lossKind.empty())
    lossKind = "cross_entropy";
  if (lossOutput.empty()) {
    if (outputs.size() != 1) {
      llvm::errs() << "gpuc compile: the model has " << outputs.size()
                   << " outputs (" << llvm::join(outputs, ", ")
                   << "); name the one to train with --loss-output\n";
      return std::nullopt;
    }
    lossOutput = outputs[0];
  }
  return lossOutput;
}

/// The output the trainer evaluates (class scores, argmax against the
/// label): the one --loss was attached to, else, for a model that computes
/// its own loss, the one output the loss is computed from. Empty with
/// `why` set when there is no such single output.
static std::string chooseEvalOutput(ModuleOp module, StringRef lossOutput,
                                    std::string &why) {
  if (!lossOutput.empty())
    return lossOutput.str();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    why = "the model has no forward function";
    return "";
  }
  auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
  Value loss;
  SmallVector<std::pair<std::string, Value>> others;
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(
        i, gpuc::GpucDialect::kOutputAttrName);
    if (!name)
      continue;
    if (name.getValue() == "loss")
      loss = ret.getOperand(i);
    else
      others.push_back({name.str(), ret.getOperand(i)});
  }
  // What the loss is computed from.
  DenseSet<Value> slice;
  SmallVector<Value> worklist;
  if (loss)
    worklist.push_back(loss);
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!slice.insert(v).second)
      continue;
    if (Operation *def = v.getDefiningOp())
      llvm::append_range(worklist, def->getOperands());
  }
  SmallVector<std::string> scores;
  for (auto &[name, value] : others) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (slice.contains(value) && type && type.getRank() >= 2)
      scores.push_back(name);
  }
  if (scores.size() == 1)
    return scores[0];
  why = scores.empty()
            ? "no output of the model holds what its loss is computed from "
              "(output the class scores beside the loss to have them "
              "evaluated)"
            : "the loss is computed from several outputs (" +
                  llvm::join(scores, ", ") +
                  "); none is the obvious class "
                  "scores";
  return "";
}

/// --remat-sweep: gpuc-remat at fractions of the peak without it, each on
/// a copy of the kernel-formed module, with each solver this gpuc has.
static LogicalResult printRematSweep(ModuleOp module) {
  MLIRContext *context = module.getContext();
  struct Point {
    int64_t peak = 0, extraFlops = 0;
    bool reached = true, optimal = false;
  };
  // A budget < 0 plans without remat.
  auto plan = [&](int64_t budget, StringRef solver) -> std::optional<Point> {
    OwningOpRef<ModuleOp> copy = module.clone();
    PassManager pm(context);
    if (budget >= 0)
      pm.addPass(
          gpuc::createGpucRemat(gpuc::GpucRematOptions{budget, solver.str()}));
    pm.addPass(gpuc::createGpucPlanMemory());
    // An unreachable budget is a result of the sweep, not an error.
    ScopedDiagnosticHandler quiet(context,
                                  [](Diagnostic &) { return success(); });
    bool ok = succeeded(pm.run(*copy));
    auto step = copy->lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return std::nullopt;
    auto integer = [](DictionaryAttr dict, StringRef key) {
      auto value = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
      return value ? value.getInt() : 0;
    };
    if (budget < 0)
      return Point{integer(step->getAttrOfType<DictionaryAttr>(
                               gpuc::GpucDialect::kMemoryAttrName),
                           "arena_peak"),
                   0, ok};
    auto remat =
        step->getAttrOfType<DictionaryAttr>(gpuc::GpucDialect::kRematAttrName);
    if (!remat)
      return std::nullopt;
    auto optimal = remat.getAs<BoolAttr>("optimal");
    return Point{integer(remat, "peak"), integer(remat, "extra_flops"), ok,
                 optimal && optimal.getValue()};
  };
  std::optional<Point> base = plan(-1, "greedy");
  if (!base || !base->reached) {
    llvm::errs() << "gpuc compile: --remat-sweep needs a kernel-formed "
                    "@train_step\n";
    return failure();
  }
  SmallVector<StringRef> solvers{"greedy"};
  if (gpuc::haveBinaryProgramSolver())
    solvers.push_back("milp");
  llvm::outs() << llvm::formatv(
      "remat sweep: arena peak without remat {0:f2} MiB; per solver, the "
      "peak reached (MiB) and the recomputed MFLOP\n{1,8} {2,10}",
      base->peak / 1048576.0, "budget", "MiB");
  for (StringRef solver : solvers)
    llvm::outs() << llvm::formatv(" {0,10} {1,14}", (solver + " peak").str(),
                                  (solver + " MFLOP").str());
  llvm::outs() << "\n";
  bool anyUnreachable = false;
  for (int percent : {100, 90, 75, 50, 30}) {
    int64_t budget = base->peak * percent / 100;
    llvm::outs() << llvm::formatv("{0,7}% {1,10:f2}", percent,
                                  budget / 1048576.0);
    for (StringRef solver : solvers) {
      std::optional<Point> point = plan(budget, solver);
      if (!point)
        return failure();
      std::string flops =
          !point->reached
              ? std::string("unreachable")
              : llvm::formatv("{0:f1}{1}", point->extraFlops / 1e6,
                              solver == "milp" && !point->optimal ? "?" : "")
                    .str();
      anyUnreachable |= !point->reached;
      llvm::outs() << llvm::formatv(" {0,10:f2} {1,14}",
                                    point->peak / 1048576.0, flops);
    }
    llvm::outs() << "\n";
  }
  if (anyUnreachable)
    llvm::outs() << "(unreachable: the peak shown is the lowest reached)\n";
  if (solvers.size() == 1)
    llvm::outs() << "(the exact solver needs a gpuc built with COIN-OR CBC)\n";
  else
    llvm::outs() << "(milp: least FLOPs under the liveness model; '?': CBC's "
                    "time limit ran out before it proved optimality)\n";
  return success();
}

/// A size option's bytes, or an error naming it.
static std::optional<int64_t> sizeOption(StringRef flag, StringRef text,
                                         bool allowAuto) {
  std::optional<int64_t> bytes = parseMemorySize(text);
  if (bytes && (*bytes > 0 || allowAuto))
    return bytes;
  llvm::errs() << "gpuc compile: " << flag << " '" << text
               << "' is not a size: give bytes, optionally with a unit "
                  "(KiB, MiB, GiB, TiB, KB, MB, GB, TB), as in 512MiB"
               << (allowAuto ? ", or auto" : "") << "\n";
  return std::nullopt;
}

/// report.json's "memory" of a planned module (its step program's buffers).
static FailureOr<nlohmann::json> stepMemory(ModuleOp module) {
  FailureOr<gpuc::StepProgram> program = gpuc::buildStepProgram(module);
  if (failed(program))
    return failure();
  return gpuc::memorySummary(program->plan);
}

/// The whole step's bytes at `batch`, planned (with gpuc-remat to
/// `arenaBudget` when given), or nullopt when it cannot be planned there
/// (the budget is out of reach). Diagnostics are the caller's to show.
static std::optional<nlohmann::json>
planAtBatch(int64_t batch, std::optional<int64_t> arenaBudget, bool quiet) {
  batchSize = batch;
  ModelSession session;
  std::optional<ScopedDiagnosticHandler> silence;
  if (quiet)
    silence.emplace(session.context.get(),
                    [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = session.load();
  if (!module)
    return std::nullopt;
  std::optional<std::string> lossOutput = chooseLossOutput(*module);
  if (!lossOutput)
    return std::nullopt;
  PassManager pm(session.context.get());
  addStepPipeline(pm, *lossOutput);
  addKernelPipeline(pm, arenaBudget.has_value());
  addPlanPipeline(pm, arenaBudget);
  if (failed(pm.run(*module)))
    return std::nullopt;
  FailureOr<nlohmann::json> memory = stepMemory(*module);
  if (failed(memory))
    return std::nullopt;
  return *memory;
}

/// --max-batch-for SIZE: the largest batch whose step fits, by doubling
/// and then bisecting (the step's bytes grow with the batch).
static int runMaxBatchFor() {
  std::optional<int64_t> limit =
      sizeOption("--max-batch-for", maxBatchFor, false);
  if (!limit)
    return 1;
  // Batch 1 with diagnostics shown: a model that does not compile says so.
  std::optional<nlohmann::json> one = planAtBatch(1, std::nullopt, false);
  if (!one)
    return 1;
  auto describe = [](const nlohmann::json &m) {
    int64_t total = m["total"], arena = m["arena_bytes"];
    return llvm::formatv("{0} bytes ({1:f2} MiB: persistent {2:f2} + arena "
                         "{3:f2})",
                         total, total / 1048576.0, (total - arena) / 1048576.0,
                         arena / 1048576.0)
        .str();
  };
  llvm::outs() << llvm::formatv("max batch for {0} bytes ({1:f2} MiB):\n",
                                *limit, *limit / 1048576.0);
  constexpr int64_t kLargestBatch = int64_t(1) << 24;
  for (bool remat : {false, true}) {
    // With remat the arena may use what the persistent buffers leave.
    auto fits = [&](int64_t batch) -> std::optional<nlohmann::json> {
      std::optional<nlohmann::json> plain = planAtBatch(batch, {}, true);
      if (!plain)
        return std::nullopt;
      if ((*plain)["total"].get<int64_t>() <= *limit)
        return plain;
      if (!remat)
        return std::nullopt;
      int64_t persistent = (*plain)["total"].get<int64_t>() -
                           (*plain)["arena_bytes"].get<int64_t>();
      if (persistent >= *limit)
        return std::nullopt;
      std::optional<nlohmann::json> recomputed =
          planAtBatch(batch, *limit - persistent, true);
      if (recomputed && (*recomputed)["total"].get<int64_t>() <= *limit)
        return recomputed;
      return std::nullopt;
    };
    const char *how = remat ? "with remat   " : "without remat";
    std::optional<nlohmann::json> best = fits(1);
    if (!best) {
      llvm::outs() << "  " << how << ": none; batch 1 needs " << describe(*one)
                   << "\n";
      continue;
    }
    int64_t low = 1, high = 2;
    while (high <= kLargestBatch) {
      std::optional<nlohmann::json> at = fits(high);
      if (!at)
        break;
      low = high;
      best = at;
      high *= 2;
    }
    while (high - low > 1) {
      int64_t mid = low + (high - low) / 2;
      if (std::optional<nlohmann::json> at = fits(mid)) {
        low = mid;
        best = at;
      } else {
        high = mid;
      }
    }
    llvm::outs() << "  " << how << ": batch " << low << " needs "
                 << describe(*best);
    if (best->contains("remat"))
      llvm::outs() << llvm::formatv(
          ", recomputing {0:f1} MFLOP",
          (*best)["remat"].value("extra_flops", (int64_t)0) / 1e6);
    if (high <= kLargestBatch) {
      std::optional<nlohmann::json> above = planAtBatch(high, {}, true);
      llvm::outs() << "; batch " << high << " needs "
                   << (above ? describe(*above) : std::string("more"))
                   << (remat ? " before remat" : "");
    }
    llvm::outs() << "\n";
  }
  return 0;
}

static int runCompile(int argc, char **argv) {
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
  if (batchSize <= 0) {
    llvm::errs() << "gpuc compile: --batch N is required (the step's shapes "
                    "are static)\n";
    return 1;
  }
  if (batchSize > gpuc::kMaxDim) {
    llvm::errs() << "gpuc compile: --batch " << (int64_t)batchSize
                 << " exceeds gpuc's limit of " << gpuc::kMaxDim
                 << " per dimension\n";
    return 1;
  }
  if (!ampOptions("gpuc compile"))
    return 1;
  if (accumulateSteps < 1) {
    llvm::errs() << "gpuc compile: --accumulate K needs K >= 1 (micro-batches "
                    "per update), not "
                 << accumulateSteps << "\n";
    return 1;
  }
  gpuc::ArtifactOptions artifact;
  std::string target = codegenTarget;
  if (target.empty())
    target = gpuc::nvrtcAvailable() ? "all" : "cpu";
  if (target != "cpu" && target != "cuda" && target != "all") {
    llvm::errs() << "gpuc compile: --target must be cpu, cuda or all, not '"
                 << target << "'\n";
    return 1;
  }
  artifact.cpu = target != "cuda";
  artifact.cuda = target != "cpu";
  if (artifact.cuda && !gpuc::nvrtcAvailable()) {
    llvm::errs() << "gpuc compile: --target " << target
                 << " needs NVRTC, which this gpuc was built without (install "
                    "the CUDA toolkit under /usr/local/cuda and rebuild)\n";
    return 1;
  }
  if (!cudaArchs.empty() && !artifact.cuda) {
    llvm::errs() << "gpuc compile: --cuda-arch needs --target cuda or all\n";
    return 1;
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
        return 1;
      }
      if (!llvm::is_contained(artifact.archs, arch))
        artifact.archs.push_back(arch);
    }
  }
  std::optional<int64_t> budgetBytes, limitBytes;
  if (!memoryBudget.empty() &&
      !(budgetBytes = sizeOption("--memory-budget", memoryBudget, true)))
    return 1;
  if (!memoryLimit.empty() &&
      !(limitBytes = sizeOption("--memory-limit", memoryLimit, false)))
    return 1;
  if (rematSolver != "greedy" && rematSolver != "milp") {
    llvm::errs() << "gpuc compile: --remat-solver '" << rematSolver
                 << "' is not a solver: give greedy or milp\n";
    return 1;
  }
  if (rematSolver == "milp" && !gpuc::haveBinaryProgramSolver()) {
    llvm::errs() << "gpuc compile: --remat-solver milp needs COIN-OR CBC, "
                    "and this gpuc was built without it: install "
                    "coinor-libcbc-dev (scripts/install-deps.sh) and "
                    "rebuild\n";
    return 1;
  }
  artifact.outputDir = outputFilename;
  artifact.modelPath = inputFilename;
  artifact.nvrtcWhole = nvrtcWhole;
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
  if (!dumpDir.empty())
    if (std::error_code ec =
            llvm::sys::fs::create_directories(dumpDir.getValue())) {
      llvm::errs() << "gpuc compile: cannot create " << dumpDir << ": "
                   << ec.message() << "\n";
      return 1;
    }

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
  // Only a compile that printed nothing but its summary is stored: a
  // restore replays no warnings.
  uint64_t errorsBefore = llvm::errs().tell();
  TimingScope importTiming = rootTiming.nest("import");
  ModelSession session;
  OwningOpRef<ModuleOp> module = session.load();
  if (!module)
    return 1;
  importTiming.stop();
  MLIRContext &context = *session.context;
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
  addStepPipeline(pm, lossOutput);
  if (failed(pm.run(*module)))
    return 1;
  if (!passTimings.empty())
    passTimings.back()->stop();
  // The program one kernel per core op would run, for the report.
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  artifact.unfused = gpuc::unfusedCost(step);
  artifact.report = report;
  if (std::optional<gpuc::GpucAmpOptions> amp = ampOptions("gpuc compile")) {
    std::string mode = amp->lossScale;
    if (precisionOption == "fp32")
      mode = "none";
    else if (mode.empty())
      mode = precisionOption == "fp16" ? "dynamic" : "none";
    artifact.precision = {{"storage", precisionOption.getValue()},
                          {"loss_scale", mode}};
    if (mode != "none")
      artifact.precision["loss_scale_init"] = amp->lossScaleInit;
    if (mode == "dynamic")
      artifact.precision["growth_interval"] = amp->growthInterval;
  }
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
  // The step must fit --memory-limit or, without it, a CPU-only trainer
  // this machine's memory (a batch of 10^8 once compiled to a 305 GB arena
  // without a word).
  std::optional<int64_t> limit = limitBytes;
  if (!limit && !artifact.cuda) {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && pageSize > 0)
      limit = (int64_t)pages * pageSize;
  }
  if (limit) {
    FailureOr<nlohmann::json> memory = stepMemory(*module);
    if (failed(memory))
      return 1;
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
      return 1;
    }
    if (total > *limit) {
      llvm::errs() << llvm::formatv(
          "gpuc compile: at batch {0} the step needs {1} bytes ({2:f2} GiB), "
          "more than this machine's memory ({3:f2} GiB); give a smaller "
          "--batch or a --memory-budget, or --memory-limit SIZE to compile "
          "for a machine with more\n",
          (int64_t)batchSize, total, total / 1073741824.0,
          *limit / 1073741824.0);
      return 1;
    }
  }

  // What the trainer feeds and reads.
  std::string dataInput;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (auto name = step.getArgAttrOfType<StringAttr>(
            i, gpuc::GpucDialect::kInputAttrName))
      if (name.getValue() != labelsName && dataInput.empty())
        dataInput = name.str();
  artifact.trainer = {{"data_input", dataInput},
                      {"label_input", labelsName.getValue()},
                      {"loss_output", "loss"},
                      {"eval_output", evalOutput},
                      {"no_eval_reason", noEvalReason},
                      {"batch", (int64_t)batchSize},
                      {"accumulate", (int64_t)accumulateSteps},
                      {"optimizer", optimizerKind.getValue()}};
  artifact.timing = rootTiming.nest("back end");
  int status = gpuc::writeArtifact(*module, artifact);
  if (status == 0 && llvm::errs().tell() == errorsBefore)
    gpuc::storeArtifact(artifactEntry, artifact, session.externalFiles);
  // Every timer stops before `timing` (declared after `artifact`) prints.
  artifact.timing = TimingScope();
  return status;
}

static int runRun(int argc, char **argv) {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&gpuc::runCategory});
  inputFilename.setDescription("<module.mlir>");
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpuc run: run a function of a gpuc module in the reference "
      "interpreter\n\n  gpuc run step.mlir --input image=x.npy "
      "[--param-dir DIR] --output-dir OUT\n");
  if (inputFilename.empty()) {
    llvm::errs() << "gpuc run: no module given; usage: gpuc run "
                    "module.mlir [--func NAME] [--input name=file.npy] "
                    "--output-dir DIR\n";
    return 1;
  }
  return gpuc::runInterpreterCommand(inputFilename);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  if (argc < 2 || StringRef(argv[1]) == "--help" ||
      StringRef(argv[1]) == "-h" || StringRef(argv[1]) == "help") {
    llvm::outs() << kUsage;
    return argc < 2 ? 1 : 0;
  }
  StringRef command = argv[1];
  // The command's own options follow it; argv[0] stays the program name.
  std::string program = std::string(argv[0]) + " " + command.str();
  argv[1] = program.data();
  if (command == "import")
    return runImport(argc - 1, argv + 1);
  if (command == "run")
    return runRun(argc - 1, argv + 1);
  if (command == "compile")
    return runCompile(argc - 1, argv + 1);
  llvm::errs()
      << "gpuc: unknown command '" << command
      << "'; the commands are: import, compile, run (see gpuc --help)\n";
  return 1;
}

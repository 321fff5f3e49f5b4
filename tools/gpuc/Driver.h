//===- Driver.h - what the gpuc driver's command files share ---*- C++ -*-===//
//
// The gpuc driver: `gpuc import` (gpuc.cpp), `gpuc compile`
// (CompileCommand.cpp; --max-batch-for and --remat-sweep in
// MemoryCommands.cpp), `gpuc run` (RunCommand.cpp). The command-line options
// (Options.cpp) and the model loader and pass pipelines (Pipeline.cpp) are
// shared by the commands.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TOOLS_GPUC_DRIVER_H
#define GPUC_TOOLS_GPUC_DRIVER_H

#include "gpuc/Codegen/Cost.h"
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Codegen/Nvrtc.h"
#include "gpuc/Codegen/StepProgram.h"
#include "gpuc/Frontend/DslParser.h"
#include "gpuc/Frontend/Limits.h"
#include "gpuc/Frontend/OnnxImporter.h"
#include "gpuc/InitAll.h"
#include "gpuc/Target/Artifact.h"
#include "gpuc/Target/ArtifactCache.h"
#include "gpuc/Target/MemoryReport.h"
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

namespace mlir::gpuc {
/// `gpuc run`, in RunCommand.cpp; its options are in `runCategory`.
int runInterpreterCommand(StringRef modulePath);
extern llvm::cl::OptionCategory runCategory;
} // namespace mlir::gpuc

namespace mlir::gpuc::driver {

namespace cl = llvm::cl;

// The options of `gpuc import` and `gpuc compile` (Options.cpp).
extern cl::OptionCategory importCategory;
extern cl::opt<std::string> inputFilename;
extern cl::opt<std::string> outputFilename;
extern cl::opt<int64_t> batchSize;
extern cl::list<std::string> inputShapes;
extern cl::opt<bool> noSimplify;
extern cl::OptionCategory trainCategory;
extern cl::opt<bool> train;
extern cl::opt<std::string> lossKind;
extern cl::opt<std::string> lossTarget;
extern cl::opt<std::string> labelsName;
extern cl::opt<int64_t> classAxis;
extern cl::opt<int64_t> accumulateSteps;
extern cl::opt<bool> dataParallel;
extern cl::opt<std::string> bucketSizeOption;
extern cl::opt<int64_t> estimateRanks;
extern cl::opt<bool> shardOptimizer;
extern cl::opt<bool> syncBatchNorm;
extern cl::opt<std::string> estimateLink;
extern cl::opt<std::string> precisionOption;
extern cl::opt<std::string> lossScaleOption;
extern cl::opt<double> lossScaleInit;
extern cl::opt<int64_t> lossScaleGrowthInterval;
extern cl::list<std::string> frozenParameters;
extern cl::list<std::string> trainableParameters;
extern cl::opt<std::string> optimizerKind;
extern cl::opt<double> learningRate;
extern cl::opt<double> momentumValue;
extern cl::opt<double> dampeningValue;
extern cl::opt<bool> nesterov;
extern cl::opt<double> weightDecay;
extern cl::opt<double> beta1;
extern cl::opt<double> beta2;
extern cl::opt<double> adamEpsilon;
extern cl::OptionCategory compileCategory;
extern cl::opt<std::string> codegenTarget;
extern cl::list<std::string> cudaArchs;
extern cl::opt<std::string> dumpDir;
extern cl::opt<std::string> hostCompiler;
extern cl::opt<std::string> cacheDir;
extern cl::opt<bool> timeCompile;
extern cl::opt<unsigned> compileJobs;
extern cl::opt<bool> nvrtcWhole;
extern cl::opt<bool> nvrtcOneProgram;
extern cl::opt<bool> noArtifactCache;
extern cl::opt<bool> noWeights;
extern cl::opt<bool> tf32;
extern cl::opt<std::string> f32Gemms;
extern cl::opt<std::string> convLayoutOption;
extern cl::opt<bool> noCache;
extern cl::opt<bool> report;
extern cl::opt<std::string> memoryPictureFile;
extern cl::opt<std::string> memoryBudget;
extern cl::opt<std::string> rematSolver;
extern cl::opt<bool> rematSweep;
extern cl::opt<std::string> maxBatchFor;
extern cl::opt<std::string> memoryLimit;
extern cl::opt<bool> noSchedule;
extern cl::opt<bool> noFuse;
extern cl::opt<bool> evalLogits;
extern cl::opt<bool> noGemmEpilogues;
extern cl::opt<std::string> attentionOption;
extern cl::opt<int64_t> lossChunkRows;
extern cl::opt<int64_t> attentionBandRows;
extern cl::opt<int64_t> gpuBytesInFlight;
extern cl::opt<std::string> attentionBlocksPerSm;
extern cl::opt<int64_t> attentionRowsPerWarp;
extern cl::opt<std::string> attentionScoreGradients;
extern cl::opt<std::string> attentionLibrary;
extern cl::opt<int64_t> gpuColumnLanesOption;
extern cl::opt<int64_t> gpuRowStageBytes;
extern cl::opt<int64_t> gpuWarpRowRegisters;
extern cl::opt<std::string> padClassesOption;
extern cl::opt<std::string> headLogitsOption;

/// The context a command reads a model into, with diagnostics printed
/// against the model's source.
struct ModelLoader {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<SourceMgrDiagnosticHandler> diagnostics;

  ModelLoader() {
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

/// Writes the module after every pass, numbered, for --dump-dir.
class DumpAfterEachPass : public PassInstrumentation {
public:
  /// Constants with more elements (or resource bytes) than this are elided.
  static constexpr int64_t kLargestDumpedConstant = 4096;

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
    // A model's weights would make every dump as large as the model (a
    // GPT-2's are 1 GB each); they print as `__elided__`.
    if (!ec)
      module.print(out, OpPrintingFlags()
                            .elideLargeElementsAttrs(kLargestDumpedConstant)
                            .elideLargeResourceString(kLargestDumpedConstant));
  }

private:
  std::string dir;
  ModuleOp module;
  unsigned *count;
};

/// Parses --memory-budget: "auto" (0), or bytes with an optional unit.
std::optional<int64_t> parseMemorySize(StringRef text);
/// --bucket-size in bytes, or nullopt when it is not a positive size.
std::optional<int64_t> gradientBucketBytes();
/// --batch and --input-shape as import options.
LogicalResult importOptions(gpuc::OnnxImportOptions &options);
/// --precision and the loss-scale flags; nullopt after an error `tool` names.
/// --target as given, or its default: all where NVRTC is found, else cpu.
std::string targetOrDefault();
std::optional<gpuc::GpucAmpOptions> ampOptions(StringRef tool);
/// gpuc-decompose's attention lowering that --attention asks for (auto
/// resolved by the target), or nullopt after an error naming the flag.
std::optional<std::string> attentionLowering(StringRef tool);
/// gpuc-decompose's pad-classes that --pad-classes asks for (auto resolved
/// by the target), or nullopt after an error naming the flag.
std::optional<int64_t> padClasses(StringRef tool);
/// How convolutions hold their tensors: NCHW, NHWC, or NHWC where the
/// model has a grouped convolution (and NCHW where it has none).
enum class ConvLayout { Nchw, Nhwc, NhwcWhereGrouped };
/// The layout --conv-layout asks for (auto resolved by the target and
/// precision), or nullopt after an error naming the flag.
std::optional<ConvLayout> convLayout(StringRef tool);
/// The training passes: loss, autodiff, optimizer (and mixed precision);
/// with `scoredOutput`, @eval scores that output's tokens
/// (gpuc-eval-token-scores).
void addTrainingPasses(PassManager &pm, StringRef lossOutput,
                       StringRef scoredOutput = "");
/// The step up to kernels: @eval, the training passes, then decompose.
void addStepPipeline(PassManager &pm, StringRef lossOutput,
                     StringRef scoredOutput);
/// Kernel formation and fusion (`memoryFirst`: gpuc-fuse's memory-first).
void addKernelPipeline(PassManager &pm, bool memoryFirst);
/// Schedule, remat under `arenaBudget`, and the memory plan.
void addPlanPipeline(PassManager &pm, std::optional<int64_t> arenaBudget);
/// The names of @forward's outputs.
SmallVector<std::string> forwardOutputs(ModuleOp module);
/// The loss output the step trains on; nullopt after an error.
std::optional<std::string> chooseLossOutput(ModuleOp module);
/// The output evaluation reads, or "" with `why`.
std::string chooseEvalOutput(ModuleOp module, StringRef lossOutput,
                             std::string &why);
/// The output whose tokens @eval scores on the device: `evalOutput`, when
/// the model is a language model (its data input integer [batch, tokens],
/// `evalOutput` their [batch, tokens, classes] logits) and --eval-logits
/// is not given; else "".
std::string scoredEvalOutput(ModuleOp module, StringRef evalOutput);
/// A size flag (`flag` names it) in bytes; nullopt after an error.
std::optional<int64_t> sizeOption(StringRef flag, StringRef text,
                                  bool allowAuto);
/// The planned step's memory (report.json's "memory").
FailureOr<nlohmann::json> stepMemory(ModuleOp module);
/// --remat-sweep: budget -> (peak, recomputed FLOPs) for both solvers.
LogicalResult printRematSweep(ModuleOp module);
/// gpuc compile --max-batch-for SIZE.
int runMaxBatchFor();
/// The whole step's bytes at `batch` (report.json's "memory", plus
/// "step_flops"), planned
/// with gpuc-remat to `arenaBudget` when given; nullopt when it cannot be
/// planned (diagnostics shown unless `quiet`). When remat cannot meet
/// the budget, `rematArena` (if given) is set to the lowest arena it
/// reached.
std::optional<nlohmann::json> planAtBatch(int64_t batch,
                                          std::optional<int64_t> arenaBudget,
                                          bool quiet,
                                          int64_t *rematArena = nullptr);
/// --attention auto under --memory-budget: the fused attention when the
/// GEMM lowering's arena is over the budget and the fused one's is
/// smaller (remat then has less, or nothing, to recompute).
void chooseAttentionForBudget(int64_t budget);
/// gpuc compile.
int runCompile(int argc, char **argv);
/// gpuc import.
int runImport(int argc, char **argv);

} // namespace mlir::gpuc::driver

#endif // GPUC_TOOLS_GPUC_DRIVER_H

//===- gpuc.cpp - the gpuc compiler driver --------------------------------===//
//
// `gpuc import MODEL -o out.mlir` reads an ONNX model (.onnx, .onnxtxt) or a
// gpuc DSL model (.gdsl) into the gpuc dialect and simplifies it. Later stages
// (train, compile) extend the same driver.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Frontend/DslParser.h"
#include "gpuc/Frontend/OnnxImporter.h"
#include "gpuc/InitAll.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace mlir::gpuc {
/// `gpuc run`, in RunCommand.cpp; its options are in `runCategory`.
int runInterpreterCommand(StringRef modulePath);
extern cl::OptionCategory runCategory;
} // namespace mlir::gpuc

static cl::OptionCategory importCategory("gpuc import options");

static cl::opt<std::string>
    inputFilename(cl::Positional,
                  cl::desc("<model.onnx|.onnxtxt|.gdsl> (import) or "
                           "<module.mlir> (run)"),
                  cl::cat(importCategory), cl::cat(gpuc::runCategory));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("file"),
                                           cl::init("-"),
                                           cl::cat(importCategory));
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
    trainCategory("gpuc import training options (build @train_step)");
static cl::opt<bool>
    train("train",
          cl::desc("Build @train_step: loss, gradients and optimizer update"),
          cl::init(false), cl::cat(trainCategory));
static cl::opt<std::string>
    lossKind("loss",
             cl::desc("Add a loss on --target when the model has none: "
                      "cross_entropy or mse"),
             cl::value_desc("kind"), cl::init(""), cl::cat(trainCategory));
static cl::opt<std::string>
    lossTarget("target", cl::desc("The output the added loss is computed on"),
               cl::value_desc("output"), cl::init(""), cl::cat(trainCategory));
static cl::opt<std::string> labelsName(
    "labels", cl::desc("Name of the new input holding labels/targets"),
    cl::value_desc("name"), cl::init("label"), cl::cat(trainCategory));
static cl::opt<int64_t> classAxis(
    "class-axis",
    cl::desc("cross_entropy: the output axis holding the classes (default 1; "
             "-1 for the last, as language models have)"),
    cl::init(1), cl::cat(trainCategory));
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

static const char *const kUsage =
    "gpuc: an ahead-of-time compiler for neural-network training\n\n"
    "USAGE: gpuc <command> [options]\n\n"
    "COMMANDS:\n"
    "  import   read an ONNX or DSL model into the gpuc dialect (--train\n"
    "           builds the training step)\n"
    "  run      run a function of a .mlir module in the reference\n"
    "           interpreter on .npy inputs\n\n"
    "Run 'gpuc <command> --help' for the options of a command.\n";

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

static int runImport(int argc, char **argv) {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // The run command's options mean nothing here.
  for (auto &entry : cl::getRegisteredOptions())
    if (llvm::is_contained(entry.second->Categories, &gpuc::runCategory) &&
        entry.second != &inputFilename)
      entry.second->setHiddenFlag(cl::Hidden);
  cl::ParseCommandLineOptions(argc, argv,
                              "gpuc import: read a model into "
                              "the gpuc dialect\n");
  if (inputFilename.empty()) {
    llvm::errs() << "gpuc import: no model given; usage: gpuc import "
                    "MODEL [--batch N] -o out.mlir\n";
    return 1;
  }
  if (train && noSimplify) {
    llvm::errs() << "gpuc import: --train and --no-simplify do not go "
                    "together\n";
    return 1;
  }
  if (!train && (!lossKind.empty() || !lossTarget.empty())) {
    llvm::errs() << "gpuc import: --loss and --target only apply with "
                    "--train\n";
    return 1;
  }
  if (!lossKind.empty() && lossTarget.empty()) {
    llvm::errs() << "gpuc import: --loss needs --target OUTPUT, the output "
                    "the loss is computed on\n";
    return 1;
  }
  if (batchSize < 0) {
    llvm::errs() << "gpuc import: --batch must be positive\n";
    return 1;
  }
  gpuc::OnnxImportOptions options;
  if (batchSize > 0)
    options.batch = batchSize;
  for (const std::string &spec : inputShapes)
    if (failed(parseInputShape(spec, options)))
      return 1;

  DialectRegistry registry;
  gpuc::registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);

  OwningOpRef<ModuleOp> module;
  if (StringRef(inputFilename).ends_with(".gdsl")) {
    gpuc::DslOptions dslOptions;
    dslOptions.batch = options.batch;
    module = gpuc::parseDslFile(inputFilename, &context, sourceMgr, dslOptions);
  } else {
    module = gpuc::importOnnxFile(inputFilename, &context, options);
  }
  if (!module)
    return 1;

  if (!noSimplify) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (train) {
      if (!lossKind.empty())
        pm.addPass(gpuc::createGpucAttachLoss(gpuc::GpucAttachLossOptions{
            lossKind, lossTarget, labelsName, classAxis}));
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
      pm.addPass(gpuc::createGpucOptimizer(opt));
      pm.addPass(createCanonicalizerPass());
      pm.addPass(createCSEPass());
    }
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

static int runRun(int argc, char **argv) {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions({&gpuc::runCategory});
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
  llvm::errs() << "gpuc: unknown command '" << command
               << "'; the commands are: import, run (see gpuc --help)\n";
  return 1;
}

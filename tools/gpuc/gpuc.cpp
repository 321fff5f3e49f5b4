//===- gpuc.cpp - the gpuc compiler driver --------------------------------===//
//
// `gpuc import MODEL -o out.mlir` reads an ONNX model (.onnx, .onnxtxt) or a
// gpuc DSL model (.gdsl) into the gpuc dialect and simplifies it (--train
// adds the training step); `gpuc compile` (CompileCommand.cpp) and `gpuc
// run` (RunCommand.cpp) are dispatched from main here.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"

using namespace mlir;
using namespace mlir::gpuc::driver;
namespace cl = llvm::cl;

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

namespace mlir::gpuc::driver {

int runImport(int argc, char **argv) {
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
  ModelLoader loader;
  OwningOpRef<ModuleOp> module = loader.load();
  if (!module)
    return 1;
  MLIRContext &context = *loader.context;

  if (!noSimplify) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    pm.addPass(gpuc::createGpucFormAttention());
    pm.addPass(gpuc::createGpucFormGelu());
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

} // namespace mlir::gpuc::driver

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

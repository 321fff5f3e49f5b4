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

static cl::OptionCategory importCategory("gpuc import options");

static cl::opt<std::string>
    inputFilename(cl::Positional, cl::desc("<model.onnx|.onnxtxt|.gdsl>"),
                  cl::cat(importCategory));
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

static const char *const kUsage =
    "gpuc: an ahead-of-time compiler for neural-network training\n\n"
    "USAGE: gpuc <command> [options]\n\n"
    "COMMANDS:\n"
    "  import   read an ONNX or DSL model into the gpuc dialect\n\n"
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
  cl::ParseCommandLineOptions(argc, argv,
                              "gpuc import: read a model into "
                              "the gpuc dialect\n");
  if (inputFilename.empty()) {
    llvm::errs() << "gpuc import: no model given; usage: gpuc import "
                    "MODEL [--batch N] -o out.mlir\n";
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
  llvm::errs() << "gpuc: unknown command '" << command
               << "'; the commands are: import (see gpuc --help)\n";
  return 1;
}

//===- gpuc-conformance.cpp - import ONNX's node tests --------------------===//
//
// Runs every ONNX node test (libonnx-testdata) whose ops gpuc supports through
// the importer and prints the count imported / attempted, then each failure
// with its first diagnostic. Integer and boolean inputs, and scalars, are bound
// to the test's own data as compile-time constants: gpuc compiles static
// shapes, and those inputs are the shapes, axes and ratios of the tests.
// (Numerical checks through the interpreter come with it.)
//
//===----------------------------------------------------------------------===//
#include "gpuc/Frontend/OnnxImporter.h"
#include "gpuc/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/onnx_pb.h"

#include <set>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string>
    testRoot(cl::Positional, cl::desc("<onnx node test directory>"),
             cl::init("/usr/share/libonnx-testdata/data/node"));
static cl::opt<std::string>
    filter("filter", cl::desc("Only run tests whose name contains this"),
           cl::init(""));

static std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "Imports ONNX's node tests with gpuc\n");
  std::vector<std::string> supportedList = gpuc::getSupportedOnnxOps();
  std::set<std::string> supported(supportedList.begin(), supportedList.end());

  std::vector<std::string> tests;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(testRoot, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::fs::exists(it->path() + "/model.onnx"))
      tests.push_back(it->path());
  if (ec || tests.empty()) {
    llvm::errs() << "gpuc-conformance: no ONNX node tests under '" << testRoot
                 << "' (install Debian's libonnx-testdata)\n";
    return 1;
  }
  std::sort(tests.begin(), tests.end());

  DialectRegistry registry;
  gpuc::registerAllDialects(registry);
  int attempted = 0, imported = 0, skipped = 0;
  std::vector<std::pair<std::string, std::string>> failures;
  for (const std::string &dir : tests) {
    std::string name = llvm::sys::path::filename(dir).str();
    if (!filter.empty() && name.find(filter) == std::string::npos)
      continue;
    onnx::ModelProto model;
    if (!model.ParseFromString(readFile(dir + "/model.onnx"))) {
      failures.push_back({name, "cannot parse model.onnx"});
      ++attempted;
      continue;
    }
    bool allSupported = true;
    for (const auto &node : model.graph().node())
      allSupported &= supported.count(node.op_type()) > 0;
    if (!allSupported) {
      ++skipped;
      continue;
    }
    ++attempted;
    gpuc::OnnxImportOptions options;
    std::set<std::string> initializers;
    for (const auto &init : model.graph().initializer())
      initializers.insert(init.name());
    int index = 0;
    for (const auto &input : model.graph().input()) {
      if (initializers.count(input.name()))
        continue;
      const auto &type = input.type().tensor_type();
      bool isFloat = type.elem_type() == onnx::TensorProto::FLOAT ||
                     type.elem_type() == onnx::TensorProto::FLOAT16 ||
                     type.elem_type() == onnx::TensorProto::BFLOAT16;
      bool isScalar = type.has_shape() && type.shape().dim_size() == 0;
      std::string data = readFile(dir + "/test_data_set_0/input_" +
                                  std::to_string(index++) + ".pb");
      if ((!isFloat || isScalar) && !data.empty())
        options.constantInputs[input.name()] = data;
    }
    MLIRContext context(registry);
    std::string firstError;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      if (firstError.empty() && d.getSeverity() == DiagnosticSeverity::Error)
        firstError = d.str();
      return success();
    });
    auto module = gpuc::importOnnxFile(dir + "/model.onnx", &context, options);
    if (module)
      ++imported;
    else
      failures.push_back({name, firstError});
  }
  llvm::outs() << "ONNX node tests: imported " << imported << " of "
               << attempted << " attempted (" << skipped
               << " skipped: they use ops gpuc does not support)\n";
  for (auto &[name, message] : failures)
    llvm::outs() << "FAILED " << name << ": " << message << "\n";
  return 0;
}

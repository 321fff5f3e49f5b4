//===- RunCommand.cpp - `gpuc run`: the reference interpreter on .npy -----===//
//
// Binds each argument of the function from its role: inputs from --input
// files, parameters from --param-dir (else their initial values), the RNG key
// from --seed/--step, hyperparameters from --hyper (else their defaults).
// Writes each result to --output-dir as NAME.npy, where parameter updates are
// named by their symbol, so that the output directory of one step is the
// --param-dir of the next.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"
#include "gpuc/InitAll.h"
#include "gpuc/Interpreter/Interpreter.h"
#include "gpuc/runtime/Npy.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <map>

using namespace mlir;
using namespace mlir::gpuc;
namespace cl = llvm::cl;

namespace mlir::gpuc {
cl::OptionCategory runCategory("gpuc run options");
int runInterpreterCommand(StringRef modulePath);
} // namespace mlir::gpuc

static cl::opt<std::string>
    funcName("func",
             cl::desc("The function to run (default: train_step if the "
                      "module has one, else forward)"),
             cl::value_desc("name"), cl::init(""), cl::cat(runCategory));
static cl::list<std::string>
    inputFiles("input", cl::desc("An input from a .npy file (repeatable)"),
               cl::value_desc("name=file.npy"), cl::cat(runCategory));
static cl::opt<std::string> paramDir(
    "param-dir",
    cl::desc("Read parameters (and optimizer state) from DIR/<symbol>.npy "
             "where present; the others take their initial values"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(runCategory));
static cl::opt<std::string>
    outputDir("output-dir", cl::desc("Write every result as DIR/<name>.npy"),
              cl::value_desc("DIR"), cl::init("."), cl::cat(runCategory));
static cl::opt<int64_t> seed("seed", cl::desc("RNG seed (dropout)"),
                             cl::init(0), cl::cat(runCategory));
static cl::opt<int64_t> stepNumber("step",
                                   cl::desc("Step number in the RNG key"),
                                   cl::init(0), cl::cat(runCategory));
static cl::list<std::string>
    hyperValues("hyper",
                cl::desc("A hyperparameter value, e.g. --hyper lr=0.1 "
                         "(repeatable)"),
                cl::value_desc("name=value"), cl::cat(runCategory));
static cl::opt<bool>
    exact("exact",
          cl::desc("Keep every value in double instead of rounding each op's "
                   "result to its element type"),
          cl::init(false), cl::cat(runCategory));

static int fail(const std::string &message) {
  llvm::errs() << "gpuc run: " << message << "\n";
  return 1;
}

/// Converts a .npy array to the argument type, checking shape and kind.
static FailureOr<HostTensor> toTensor(const ::gpuc::NpyArray &array,
                                      RankedTensorType type,
                                      const std::string &what,
                                      std::string &error) {
  if (ArrayRef<int64_t>(array.shape) != type.getShape()) {
    std::string shape;
    for (int64_t d : array.shape)
      shape += std::to_string(d) + "x";
    error = what + " has shape " +
            (shape.empty() ? "()" : shape.substr(0, shape.size() - 1)) +
            " but the function expects " + formatShape(type.getShape());
    return failure();
  }
  bool fileIsFloat = array.dtype[1] == 'f';
  if (fileIsFloat && !isa<FloatType>(type.getElementType())) {
    error = what + " holds floats (" + array.dtype +
            ") but the function expects integers";
    return failure();
  }
  HostTensor t(type.getShape(), type.getElementType());
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data[i] = roundToType(array.at(i), type.getElementType());
  return t;
}

static std::string dtypeFor(Type type) {
  if (type.isInteger(64))
    return "<i8";
  if (type.isInteger(32))
    return "<i4";
  if (type.isInteger(1))
    return "|b1";
  return "<f4"; // f32, and f16/bf16 widened
}

// gpuc run, in the order a user reads its output: the module, the inputs
// and parameters bound to arguments, the run, the results written.
int mlir::gpuc::runInterpreterCommand(StringRef modulePath) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(modulePath, sourceMgr, &context);
  if (!module)
    return 1;
  std::string name = funcName;
  if (name.empty())
    name = module->lookupSymbol("train_step") ? "train_step" : "forward";
  auto func = module->lookupSymbol<func::FuncOp>(name);
  if (!func)
    return fail(modulePath.str() + " has no function @" + name);

  std::map<std::string, std::string> inputs;
  for (const std::string &spec : inputFiles) {
    auto [key, path] = StringRef(spec).split('=');
    if (key.empty() || path.empty())
      return fail("--input expects name=file.npy, got '" + spec + "'");
    inputs[key.str()] = path.str();
  }
  std::map<std::string, double> hypers;
  for (const std::string &spec : hyperValues) {
    auto [key, text] = StringRef(spec).split('=');
    double v;
    if (key.empty() || text.getAsDouble(v))
      return fail("--hyper expects name=number, got '" + spec + "'");
    hypers[key.str()] = v;
  }

  std::vector<HostTensor> args;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    std::string role = describeArgument(func, i);
    std::string error;
    if (func.getArgAttr(i, GpucDialect::kInputAttrName)) {
      auto it = inputs.find(role);
      if (it == inputs.end())
        return fail("@" + name + " needs input '" + role + "': pass --input " +
                    role + "=FILE.npy");
      ::gpuc::NpyArray array;
      if (!::gpuc::readNpy(it->second, array, error))
        return fail(error);
      FailureOr<HostTensor> t = toTensor(
          array, type, "input '" + role + "' (" + it->second + ")", error);
      if (failed(t))
        return fail(error);
      args.push_back(std::move(*t));
      inputs.erase(it);
    } else if (ParameterOp param = getArgumentParameter(func, i)) {
      std::string path;
      if (!paramDir.empty()) {
        llvm::SmallString<256> p(paramDir);
        llvm::sys::path::append(p, param.getSymName() + ".npy");
        if (llvm::sys::fs::exists(p))
          path = p.str().str();
      }
      if (path.empty()) {
        if (std::optional<std::string> why =
                missingElements(param.getInitialValue()))
          return fail(llvm::formatv("@{0}'s initial value {1}: give its "
                                    "values as {0}.npy in --param-dir",
                                    param.getSymName(), *why)
                          .str());
        args.push_back(HostTensor::fromAttr(param.getInitialValue()));
        continue;
      }
      ::gpuc::NpyArray array;
      if (!::gpuc::readNpy(path, array, error))
        return fail(error);
      FailureOr<HostTensor> t = toTensor(array, type, path, error);
      if (failed(t))
        return fail(error);
      args.push_back(std::move(*t));
    } else if (func.getArgAttr(i, GpucDialect::kRngAttrName)) {
      HostTensor key(type.getShape(), type.getElementType());
      key.data = {(double)seed, (double)stepNumber};
      args.push_back(std::move(key));
    } else if (func.getArgAttr(i, GpucDialect::kHyperAttrName)) {
      double value = 0.0;
      auto it = hypers.find(role);
      if (it != hypers.end()) {
        value = it->second;
        hypers.erase(it);
      } else if (auto d = func.getArgAttrOfType<FloatAttr>(
                     i, GpucDialect::kDefaultAttrName)) {
        value = d.getValueAsDouble();
      } else {
        return fail("@" + name + " needs hyperparameter '" + role +
                    "': pass --hyper " + role + "=VALUE");
      }
      args.push_back(HostTensor(type.getShape(), type.getElementType(),
                                roundToType(value, type.getElementType())));
    } else {
      return fail("argument " + std::to_string(i) + " of @" + name +
                  " has no role attribute (gpuc.input, gpuc.param, gpuc.rng "
                  "or gpuc.hyper), so it cannot be bound");
    }
  }
  for (auto &[key, path] : inputs)
    return fail("@" + name + " has no input named '" + key + "'");
  for (auto &[key, value] : hypers)
    return fail("@" + name + " has no hyperparameter named '" + key + "'");

  InterpreterOptions options;
  options.roundToElementType = !exact;
  FailureOr<std::vector<HostTensor>> results = interpret(func, args, options);
  if (failed(results))
    return 1;
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create " + outputDir + ": " + ec.message());
  for (auto [i, t] : llvm::enumerate(*results)) {
    llvm::SmallString<256> p(outputDir);
    llvm::sys::path::append(p, describeResult(func, i) + ".npy");
    std::string error;
    if (!::gpuc::writeNpy(std::string(p),
                          ::gpuc::makeNpy(dtypeFor(t.elementType),
                                          std::vector<int64_t>(t.shape.begin(),
                                                               t.shape.end()),
                                          t.data),
                          error))
      return fail(error);
  }
  return 0;
}

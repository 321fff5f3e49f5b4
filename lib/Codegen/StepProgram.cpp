//===- StepProgram.cpp - a module's steps as kernels, calls and copies ----===//
#include "gpuc/Codegen/StepProgram.h"
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::gpuc;
using json = nlohmann::json;

namespace {

std::string dtypeOf(Type type) {
  if (type.isF32())
    return "F32";
  if (type.isInteger(64))
    return "I64";
  if (type.isInteger(32))
    return "I32";
  if (type.isInteger(8))
    return "I8";
  if (type.isInteger(1))
    return "BOOL";
  if (type.isF16())
    return "F16";
  if (type.isBF16())
    return "BF16";
  return "";
}

struct Buffer {
  std::string name;
  std::string kind; // param, state, constant, input, hyper, rng, transient
  RankedTensorType type;
  int64_t bytes = 0;
  int64_t offset = -1; // transient only
  json extra = json::object();
};

class Lowering {
public:
  explicit Lowering(ModuleOp module) : module(module) {}
  FailureOr<StepProgram> run();

private:
  int persistent(StringRef name, StringRef kind, RankedTensorType type);
  int transient(Value value);
  /// The buffer split row kernels keep their partial reductions in (one,
  /// persistent, as large as the largest needs).
  int kernelWorkspace(int64_t bytes);
  LogicalResult lowerFunction(func::FuncOp func);
  FailureOr<json> libraryCall(Operation *op);
  LogicalResult initialValue(StringRef name, ElementsAttr attr);

  ModuleOp module;
  std::vector<Buffer> buffers;
  llvm::StringMap<int> persistentByName;
  DenseMap<Value, int> bufferOf;
  StepProgram program;
  std::string kernels, launchers, table;
  llvm::StringMap<std::string> kernelByBody;
  json kernelList = json::array();
  unsigned kernelCount = 0;
  unsigned constantCount = 0;
};

int Lowering::persistent(StringRef name, StringRef kind,
                         RankedTensorType type) {
  auto it = persistentByName.find(name);
  if (it != persistentByName.end())
    return it->second;
  Buffer b;
  b.name = name.str();
  b.kind = kind.str();
  b.type = type;
  b.bytes = type.getNumElements() * elementBytes(type.getElementType());
  buffers.push_back(b);
  persistentByName[name] = buffers.size() - 1;
  return buffers.size() - 1;
}

int Lowering::transient(Value value) {
  Buffer b;
  b.kind = "transient";
  b.type = cast<RankedTensorType>(value.getType());
  b.bytes = b.type.getNumElements() * elementBytes(b.type.getElementType());
  b.name = llvm::formatv("t{0}", buffers.size()).str();
  buffers.push_back(b);
  return buffers.size() - 1;
}

int Lowering::kernelWorkspace(int64_t bytes) {
  MLIRContext *context = module.getContext();
  int id =
      persistent("kernel.partials", "workspace",
                 RankedTensorType::get({1}, IntegerType::get(context, 64)));
  Buffer &b = buffers[id];
  if (bytes > b.bytes) {
    b.type =
        RankedTensorType::get({(bytes + 7) / 8}, IntegerType::get(context, 64));
    b.bytes = b.type.getNumElements() * 8;
  }
  return id;
}

LogicalResult Lowering::initialValue(StringRef name, ElementsAttr attr) {
  HostTensor tensor = HostTensor::fromAttr(attr);
  InitialTensor init;
  init.name = name.str();
  init.dtype = dtypeOf(tensor.elementType);
  init.shape.assign(tensor.shape.begin(), tensor.shape.end());
  int64_t size = elementBytes(tensor.elementType);
  init.bytes.resize(tensor.numElements() * size);
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    char *at = init.bytes.data() + i * size;
    double d = tensor.data[i];
    if (tensor.elementType.isF32()) {
      float f = (float)d;
      memcpy(at, &f, 4);
    } else if (auto half = dyn_cast<FloatType>(tensor.elementType);
               half && half.getWidth() == 16) {
      // The bits of the value rounded to nearest even (exact: the host
      // tensor already holds a value of this type).
      bool losesInfo;
      APFloat f(d);
      f.convert(half.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      uint16_t bits = f.bitcastToAPInt().getZExtValue();
      memcpy(at, &bits, 2);
    } else if (tensor.elementType.isInteger(64)) {
      int64_t v = (int64_t)d;
      memcpy(at, &v, 8);
    } else if (tensor.elementType.isInteger(32)) {
      int32_t v = (int32_t)d;
      memcpy(at, &v, 4);
    } else {
      *at = d != 0;
    }
  }
  program.initialTensors.push_back(std::move(init));
  return success();
}

json shapeJson(ArrayRef<int64_t> shape) {
  return json(std::vector<int64_t>(shape.begin(), shape.end()));
}
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

FailureOr<json> Lowering::libraryCall(Operation *op) {
  json step;
  auto buf = [&](Value v) { return bufferOf.lookup(v); };
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    ArrayRef<int64_t> a = shapeOf(mm.getLhs()), b = shapeOf(mm.getRhs()),
                      c = shapeOf(mm.getResult());
    size_t r = c.size();
    int64_t m = c[r - 2], n = c[r - 1];
    int64_t k = mm.getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
    int64_t batch = getNumElements(c) / (m * n);
    // The operands' and the result's element type (one type: the ops
    // verify it); f16/bf16 accumulate in f32 on every device.
    step = {{"op", "gemm"},
            {"dtype", dtypeOf(getElementTypeOrSelf(mm.getResult().getType()))},
            {"a", buf(mm.getLhs())},
            {"b", buf(mm.getRhs())},
            {"c", buf(mm.getResult())},
            {"batch", batch},
            {"m", m},
            {"n", n},
            {"k", k},
            {"trans_a", mm.getTransposeLhs()},
            {"trans_b", mm.getTransposeRhs()},
            {"stride_a", getNumElements(a) == m * k ? 0 : m * k},
            {"stride_b", getNumElements(b) == k * n ? 0 : k * n}};
    return step;
  }
  auto conv = [&](StringRef name, Value x, Value w, Value y,
                  ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                  ArrayRef<int64_t> dilations, int64_t groups) {
    return json{{"op", name.str()},
                {"dtype", dtypeOf(getElementTypeOrSelf(y.getType()))},
                {"x", buf(x)},
                {"w", buf(w)},
                {"y", buf(y)},
                {"x_shape", shapeJson(shapeOf(x))},
                {"w_shape", shapeJson(shapeOf(w))},
                {"y_shape", shapeJson(shapeOf(y))},
                {"strides", shapeJson(strides)},
                {"pads", shapeJson(pads)},
                {"dilations", shapeJson(dilations)},
                {"groups", groups}};
  };
  if (auto c = dyn_cast<Conv2DOp>(op))
    return conv("conv2d", c.getInput(), c.getFilter(), c.getResult(),
                c.getStrides(), c.getPads(), c.getDilations(), c.getGroups());
  if (auto c = dyn_cast<Conv2DBackwardInputOp>(op))
    return conv("conv2d_backward_input", c.getResult(), c.getFilter(),
                c.getGradOutput(), c.getStrides(), c.getPads(),
                c.getDilations(), c.getGroups());
  if (auto c = dyn_cast<Conv2DBackwardFilterOp>(op))
    return conv("conv2d_backward_filter", c.getInput(), c.getResult(),
                c.getGradOutput(), c.getStrides(), c.getPads(),
                c.getDilations(), c.getGroups());
  return op->emitOpError() << "is not a library call";
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  json steps = json::array(), inputs = json::object(), outputs = json::object();
  bufferOf.clear();

  // Arguments: persistent buffers shared by every function.
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
            i, GpucDialect::kParamAttrName)) {
      auto param = module.lookupSymbol<ParameterOp>(ref.getAttr());
      bool isNew = !persistentByName.count(ref.getValue());
      int id = persistent(ref.getValue(),
                          param.getTrainable() ? "param" : "state", type);
      if (param->hasAttr(GpucDialect::kOptimizerStateAttrName))
        buffers[id].extra["optimizer"] = true;
      if (isNew &&
          failed(initialValue(ref.getValue(), param.getInitialValue())))
        return failure();
      bufferOf[arg] = id;
    } else if (auto name = func.getArgAttrOfType<StringAttr>(
                   i, GpucDialect::kInputAttrName)) {
      bufferOf[arg] = persistent("input." + name.str(), "input", type);
      // Functions share an input by name, so they must agree on its type
      // (mixed precision stores an input in 16 bits only where every
      // function reads it that way).
      if (buffers[bufferOf[arg]].type != type)
        return func.emitError()
               << "input '" << name.getValue() << "' is " << type
               << " here but " << buffers[bufferOf[arg]].type
               << " in another function; they share one buffer";
      inputs[name.str()] = bufferOf[arg];
    } else if (auto name = func.getArgAttrOfType<StringAttr>(
                   i, GpucDialect::kHyperAttrName)) {
      int id = persistent("hyper." + name.str(), "hyper", type);
      if (auto d = func.getArgAttrOfType<FloatAttr>(
              i, GpucDialect::kDefaultAttrName))
        buffers[id].extra["default"] = d.getValueAsDouble();
      bufferOf[arg] = id;
    } else if (func.getArgAttr(i, GpucDialect::kRngAttrName)) {
      bufferOf[arg] = persistent("rng", "rng", type);
    } else {
      return func.emitError() << "argument #" << i
                              << " has no role (gpuc.param, gpuc.input, "
                                 "gpuc.hyper or gpuc.rng)";
    }
  }

  // Every result's place comes from the memory plan (gpuc-plan-memory).
  Block &body = func.getBody().front();
  auto memory =
      func->getAttrOfType<DictionaryAttr>(GpucDialect::kMemoryAttrName);
  if (!memory || !memory.getAs<IntegerAttr>("arena_peak"))
    return func.emitError()
           << "has no memory plan; run gpuc-plan-memory before lowering";
  auto define = [&](Operation *op) -> LogicalResult {
    auto slots = op->getAttrOfType<ArrayAttr>(GpucDialect::kSlotsAttrName);
    if (!slots || slots.size() != op->getNumResults())
      return op->emitOpError()
             << "has no slot in the memory plan; run gpuc-plan-memory "
                "before lowering";
    for (auto [result, attr] : llvm::zip(op->getResults(), slots)) {
      auto slot = cast<SlotAttr>(attr);
      if (FlatSymbolRefAttr param = slot.getParam()) {
        auto it = persistentByName.find(param.getValue());
        if (it == persistentByName.end())
          return op->emitOpError() << "is planned into " << param
                                   << ", which is no argument of the step";
        bufferOf[result] = it->second;
        continue;
      }
      int id = transient(result);
      buffers[id].offset = slot.getOffset();
      bufferOf[result] = id;
    }
    return success();
  };
  unsigned position = 0;
  int forwardEnd = -1;
  if (auto end = memory.getAs<IntegerAttr>("forward_end"))
    forwardEnd = end.getInt();
  int forwardSteps = -1;
  for (Operation &op : body) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (!op.use_empty()) {
        std::string name = llvm::formatv("const.{0}", constantCount++).str();
        int id = persistent(name, "constant",
                            cast<RankedTensorType>(constant.getType()));
        if (failed(initialValue(name, constant.getValue())))
          return failure();
        bufferOf[constant.getResult()] = id;
      }
    } else if (isAlias(&op)) {
      bufferOf[op.getResult(0)] = bufferOf.lookup(op.getOperand(0));
    } else if (auto fusion = dyn_cast<FusionOp>(op)) {
      if (failed(define(fusion)))
        return failure();
      std::string name = llvm::formatv("k{0}", kernelCount).str();
      FailureOr<EmittedKernel> kernel = emitKernel(fusion, name);
      if (failed(kernel))
        return failure();
      // Identical kernels (same body, same shapes) are emitted once.
      auto [it, inserted] = kernelByBody.try_emplace(kernel->key, name);
      if (inserted) {
        ++kernelCount;
        kernels += kernel->source + "\n";
        launchers += kernel->cpuLauncher;
        for (int64_t launch = 0; launch < kernel->launches; ++launch) {
          table += llvm::formatv("    {{\"{0}\", &gpuc_cpu_{0}},\n",
                                 kernel->launchName(launch));
          kernelList.push_back({{"name", kernel->launchName(launch)},
                                {"grid", kernel->grid},
                                {"block", 256}});
        }
      }
      kernel->name = it->second;
      json args = json::array();
      for (Value input : fusion.getInputs())
        args.push_back(bufferOf.lookup(input));
      for (Value result : fusion.getResults())
        args.push_back(bufferOf.lookup(result));
      if (kernel->workspaceBytes > 0)
        args.push_back(kernelWorkspace(kernel->workspaceBytes));
      // What the report shows for this launch.
      json ops = json::array();
      int64_t flops = 0, bytesRead = 0, bytesWritten = 0;
      for (Operation &inner : fusion.getBodyBlock().without_terminator()) {
        if (isa<ConstantOp>(inner))
          continue;
        ops.push_back(inner.getName().stripDialect().str());
        flops += flopsOf(&inner);
      }
      // (An operand the kernel only writes over, a parameter's new 16-bit
      // copy, is not read.)
      for (auto [input, arg] :
           llvm::zip(fusion.getInputs(), fusion.getBodyBlock().getArguments()))
        if (!arg.use_empty())
          bytesRead += tensorBytes(input);
      for (Value result : fusion.getResults())
        bytesWritten += tensorBytes(result);
      // A split row kernel's launches share its figures equally (each reads
      // the row once; the last one writes the results).
      int64_t launches = kernel->launches;
      for (int64_t launch = 0; launch < launches; ++launch) {
        json step = {{"op", "kernel"},
                     {"kernel", kernel->launchName(launch)},
                     {"args", args},
                     {"grid", kernel->grid},
                     {"ops", ops},
                     {"flops", flops / launches},
                     {"bytes_read", bytesRead / launches},
                     {"bytes_written", bytesWritten / launches}};
        if (launches > 1)
          step["launch"] = json::array({launch, launches});
        steps.push_back(step);
      }
    } else if (isLibraryCall(&op)) {
      if (failed(define(&op)))
        return failure();
      FailureOr<json> step = libraryCall(&op);
      if (failed(step))
        return failure();
      (*step)["flops"] = flopsOf(&op);
      steps.push_back(*step);
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        int src = bufferOf.lookup(value);
        if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
                i, GpucDialect::kUpdateAttrName)) {
          int dst = persistentByName.lookup(ref.getValue());
          if (dst != src)
            steps.push_back({{"op", "copy"},
                             {"src", src},
                             {"dst", dst},
                             {"bytes", buffers[dst].bytes}});
        } else if (auto name = func.getResultAttrOfType<StringAttr>(
                       i, GpucDialect::kOutputAttrName)) {
          outputs[name.str()] = src;
        }
      }
    } else {
      return op.emitOpError()
             << "cannot be lowered to the step program (run gpuc-decompose "
                "and gpuc-form-kernels first)";
    }
    if ((int)position == forwardEnd)
      forwardSteps = steps.size();
    ++position;
  }
  json entry = {{"inputs", inputs}, {"outputs", outputs}, {"steps", steps}};
  // Steps [0, forward_steps) are the forward pass (for the memory picture).
  if (forwardSteps >= 0)
    entry["forward_steps"] = forwardSteps;
  for (StringRef key : {"arena_peak", "lower_bound", "kept_for_backward"})
    if (auto value = memory.getAs<IntegerAttr>(key))
      entry[key.str()] = value.getInt();
  if (auto remat =
          func->getAttrOfType<DictionaryAttr>(GpucDialect::kRematAttrName)) {
    json summary = json::object();
    for (NamedAttribute a : remat)
      if (auto value = dyn_cast<IntegerAttr>(a.getValue()))
        summary[a.getName().str()] = value.getInt();
    entry["remat"] = summary;
  }
  program.plan["functions"][func.getSymName().str()] = entry;
  return success();
}
FailureOr<StepProgram> Lowering::run() {
  bool any = false;
  int64_t arenaBytes = 0;
  for (StringRef name : {"train_step", "apply_update", "eval"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    any = true;
    // Each function has an arena of its own: they never run together.
    if (failed(lowerFunction(func)))
      return failure();
    arenaBytes = std::max(
        arenaBytes,
        program.plan["functions"][name.str()]["arena_peak"].get<int64_t>());
  }
  if (!any)
    return module.emitError()
           << "the module has neither @train_step nor @eval to compile";

  json list = json::array();
  for (auto [id, b] : llvm::enumerate(buffers)) {
    json entry = {{"id", id},
                  {"name", b.name},
                  {"kind", b.kind},
                  {"dtype", dtypeOf(b.type.getElementType())},
                  {"shape", shapeJson(b.type.getShape())},
                  {"bytes", b.bytes}};
    if (b.offset >= 0)
      entry["offset"] = b.offset;
    entry.update(b.extra);
    list.push_back(entry);
  }
  program.plan["version"] = 1;
  program.plan["buffers"] = list;
  program.plan["arena_bytes"] = arenaBytes;
  program.plan["kernels"] = kernelList;
  program.kernelSource =
      "// Generated by gpuc: one kernel per gpuc.fusion of the step program.\n"
      "#include \"gpuc/runtime/device/Kernel.h\"\n\n" +
      kernels + "#ifdef GPUC_CPU\n" + launchers +
      "\nextern \"C\" const gpuc::CpuKernel gpuc_cpu_kernels[] = {\n" + table +
      "    {nullptr, nullptr}};\n#endif\n";
  return std::move(program);
}
} // namespace

FailureOr<StepProgram> mlir::gpuc::buildStepProgram(ModuleOp module) {
  return Lowering(module).run();
}

//===- OnnxImporter.cpp - ONNX graphs into the gpuc dialect ---------------===//
//
// One handler per ONNX op, keyed by op type and by the schema versions
// ("since version") whose semantics it implements. Shapes are static: every
// result type comes from gpuc's own shape inference and is cross-checked
// against ONNX's. Ops are built with createOrFold, so shape arithmetic
// (Shape -> Gather -> Concat -> Reshape) folds to constants as it is imported.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Frontend/OnnxImporter.h"
#include "Importer.h"
#include "OnnxModelLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace mlir::gpuc::onnx_import {

FailureOr<Type>
OnnxImporter::convertElementType(int32_t onnxType,
                                 function_ref<InFlightDiagnostic()> emit) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
  // DOUBLE computes in float32 (a training step has no float64 kernels);
  // its data is rounded to float32 as it is read.
  case onnx::TensorProto::DOUBLE:
    return Type(Float32Type::get(context));
  // 8- and 16-bit integers (images stored as bytes) are read as INT32,
  // exactly; the importer lets only data movement and Cast read them (see
  // kNarrowIntegerReaders), where no arithmetic would wrap differently.
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT16:
    return Type(IntegerType::get(context, 32));
  case onnx::TensorProto::FLOAT16:
    return Type(Float16Type::get(context));
  case onnx::TensorProto::BFLOAT16:
    return Type(BFloat16Type::get(context));
  case onnx::TensorProto::INT64:
    return Type(IntegerType::get(context, 64));
  case onnx::TensorProto::INT32:
    return Type(IntegerType::get(context, 32));
  case onnx::TensorProto::BOOL:
    return Type(IntegerType::get(context, 1));
  default:
    break;
  }
  const auto *descriptor = onnx::TensorProto::DataType_descriptor();
  const auto *value = descriptor->FindValueByNumber(onnxType);
  return emit() << "element type "
                << (value ? value->name() : std::to_string(onnxType))
                << " is not supported (gpuc supports FLOAT, FLOAT16, "
                   "BFLOAT16, INT64, INT32 and BOOL, DOUBLE as FLOAT, and "
                   "UINT8, INT8, UINT16 and INT16 as INT32)";
}

FailureOr<RankedTensorType>
OnnxImporter::convertTensorType(const onnx::TensorProto &tensor,
                                function_ref<InFlightDiagnostic()> emit) {
  FailureOr<Type> elementType = convertElementType(tensor.data_type(), emit);
  if (failed(elementType))
    return failure();
  Shape shape(tensor.dims().begin(), tensor.dims().end());
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return emit() << "tensor '" << tensor.name()
                  << "' has a negative dimension";
  return RankedTensorType::get(shape, *elementType);
}

/// The tensor's contents in MLIR's dense layout (little-endian, one byte per
/// i1), from raw_data, the typed fields, or external data.
FailureOr<std::string>
OnnxImporter::readTensorBytes(const onnx::TensorProto &tensor,
                              RankedTensorType type,
                              function_ref<InFlightDiagnostic()> emit) {
  int64_t n = type.getNumElements();
  Type et = type.getElementType();
  // DOUBLE data is read as stored, then rounded to the float32 of `type`;
  // 8- and 16-bit integers in raw_data are widened to the INT32 of `type`
  // (the typed field, int32_data, already holds them as int32).
  const bool narrow = tensor.data_type() == onnx::TensorProto::DOUBLE;
  const int32_t dataType = tensor.data_type();
  const size_t smallWidth =
      !tensor.has_raw_data() &&
              tensor.data_location() != onnx::TensorProto::EXTERNAL
          ? 0
      : dataType == onnx::TensorProto::UINT8 ||
              dataType == onnx::TensorProto::INT8
          ? 1
      : dataType == onnx::TensorProto::UINT16 ||
              dataType == onnx::TensorProto::INT16
          ? 2
          : 0;
  size_t width = narrow            ? 8
                 : smallWidth      ? smallWidth
                 : et.isInteger(1) ? 1
                                   : et.getIntOrFloatBitWidth() / 8;
  std::string bytes;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    ExternalData data;
    std::string error;
    if (!resolveExternalData(tensor, llvm::sys::path::parent_path(path).str(),
                             data, error))
      return emit() << error;
    if (data.length != (int64_t)(n * width))
      return emit() << "external data of tensor '" << tensor.name() << "' has "
                    << data.length << " bytes where its shape needs "
                    << n * width;
    auto buffer =
        llvm::MemoryBuffer::getFileSlice(data.file, data.length, data.offset);
    if (!buffer)
      return emit() << "cannot read external data '" << data.file
                    << "' of tensor '" << tensor.name() << "'";
    bytes = (*buffer)->getBuffer().str();
  } else if (tensor.has_raw_data()) {
    bytes = tensor.raw_data();
  } else {
    auto append = [&](const auto &field, size_t elemBytes) {
      for (auto v : field) {
        uint64_t bits = 0;
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, float>)
          std::memcpy(&bits, &v, 4);
        else if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>)
          std::memcpy(&bits, &v, 8);
        else
          bits = static_cast<uint64_t>(v);
        bytes.append(reinterpret_cast<const char *>(&bits), elemBytes);
      }
    };
    switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      append(tensor.float_data(), 4);
      break;
    case onnx::TensorProto::DOUBLE:
      append(tensor.double_data(), 8);
      break;
    case onnx::TensorProto::INT64:
      append(tensor.int64_data(), 8);
      break;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::INT16:
      append(tensor.int32_data(), 4);
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      append(tensor.int32_data(), 2);
      break;
    case onnx::TensorProto::BOOL:
      append(tensor.int32_data(), 1);
      break;
    default:
      break;
    }
  }
  if (bytes.size() != static_cast<size_t>(n) * width)
    return emit() << "tensor '" << tensor.name() << "' holds " << bytes.size()
                  << " bytes of data but its type " << type << " needs "
                  << n * width;
  if (smallWidth) {
    bool isSigned = dataType == onnx::TensorProto::INT8 ||
                    dataType == onnx::TensorProto::INT16;
    std::string widened(n * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      if (smallWidth == 1)
        v = isSigned ? (int32_t)(int8_t)bytes[i] : (int32_t)(uint8_t)bytes[i];
      else {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + i * 2, 2);
        v = isSigned ? (int32_t)(int16_t)bits : (int32_t)bits;
      }
      std::memcpy(widened.data() + i * 4, &v, 4);
    }
    return widened;
  }
  if (narrow) {
    std::string rounded(n * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      float f = static_cast<float>(d);
      std::memcpy(rounded.data() + i * 4, &f, 4);
    }
    return rounded;
  }
  return bytes;
}

FailureOr<DenseElementsAttr>
OnnxImporter::convertTensor(const onnx::TensorProto &tensor,
                            RankedTensorType type,
                            function_ref<InFlightDiagnostic()> emit) {
  // raw_data already in MLIR's layout (FLOAT, FLOAT16, BFLOAT16, INT32,
  // INT64) becomes the attribute without an intermediate copy: a model's
  // parameters are most of its bytes.
  int32_t dataType = tensor.data_type();
  bool storedAsIs = dataType == onnx::TensorProto::FLOAT ||
                    dataType == onnx::TensorProto::FLOAT16 ||
                    dataType == onnx::TensorProto::BFLOAT16 ||
                    dataType == onnx::TensorProto::INT32 ||
                    dataType == onnx::TensorProto::INT64;
  if (storedAsIs && tensor.has_raw_data() &&
      tensor.data_location() != onnx::TensorProto::EXTERNAL &&
      tensor.raw_data().size() ==
          (size_t)type.getNumElements() *
              type.getElementType().getIntOrFloatBitWidth() / 8 &&
      llvm::endianness::native == llvm::endianness::little)
    return DenseElementsAttr::getFromRawBuffer(
        type,
        ArrayRef<char>(tensor.raw_data().data(), tensor.raw_data().size()));
  FailureOr<std::string> bytes = readTensorBytes(tensor, type, emit);
  if (failed(bytes))
    return failure();
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : *bytes)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(bytes->data(), bytes->size()));
}

std::optional<Shape> OnnxImporter::getConstantInts(Value v) {
  DenseIntElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  Shape result;
  for (const APInt &i : attr.getValues<APInt>())
    result.push_back(i.getBitWidth() == 1 ? i.getZExtValue()
                                          : i.getSExtValue());
  return result;
}

std::optional<double> OnnxImporter::getConstantFloat(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  Attribute element = attr.getValues<Attribute>()[0];
  if (auto f = dyn_cast<FloatAttr>(element))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(element))
    return static_cast<double>(i.getValue().getSExtValue());
  return std::nullopt;
}

FailureOr<Shape> OnnxImporter::requireConstantInts(Node &node, unsigned input,
                                                   StringRef what) {
  std::optional<Shape> ints = getConstantInts(node.in(input));
  if (!ints)
    return nodeError(node) << what << " (input " << input << ", '"
                           << node.proto.input(input)
                           << "') must be a compile-time constant; gpuc "
                              "compiles static shapes";
  return *ints;
}

FailureOr<Shape> OnnxImporter::normalizeAxes(Node &node, ArrayRef<int64_t> axes,
                                             int64_t rank) {
  Shape result;
  for (int64_t axis : axes) {
    FailureOr<int64_t> a =
        gpuc::normalizeAxis(axis, rank, [&] { return nodeError(node); });
    if (failed(a))
      return failure();
    result.push_back(*a);
  }
  llvm::sort(result);
  if (std::adjacent_find(result.begin(), result.end()) != result.end())
    return nodeError(node) << "repeated axis";
  return result;
}

const llvm::StringMap<OpRule> &OnnxImporter::rules() {
  using I = OnnxImporter;
  static const llvm::StringMap<OpRule> table = {
      {"Abs", {&I::importUnary<AbsOp>, {6, 13}}},
      {"Add", {&I::importBinary<AddOp>, {7, 13, 14}}},
      {"And", {&I::importAnd, {7}}},
      {"AveragePool", {&I::importAveragePool, {7, 10, 11}}},
      {"BatchNormalization", {&I::importBatchNormalization, {9, 14, 15}}},
      {"Celu", {&I::importActivation, {12}}},
      {"Cast", {&I::importCast, {6, 9, 13}}},
      {"CastLike", {&I::importCastLike, {15}}},
      {"Clip", {&I::importClip, {6, 11, 12, 13}}},
      {"Concat", {&I::importConcat, {4, 11, 13}}},
      {"Constant", {&I::importConstant, {1, 9, 11, 12, 13}}},
      {"ConstantOfShape", {&I::importConstantOfShape, {9}}},
      {"Conv", {&I::importConv, {1, 11}}},
      {"CumSum", {&I::importCumSum, {11, 14}}},
      {"ConvTranspose", {&I::importConvTranspose, {1, 11}}},
      {"Cos", {&I::importUnary<CosOp>, {7}}},
      {"Div", {&I::importBinary<DivOp>, {7, 13, 14}}},
      {"Dropout", {&I::importDropout, {12, 13}}},
      {"Einsum", {&I::importEinsum, {12}}},
      {"Elu", {&I::importActivation, {6}}},
      {"Equal", {&I::importCompare<ComparePredicate::eq>, {11, 13}}},
      {"Erf", {&I::importUnary<ErfOp>, {9, 13}}},
      {"Exp", {&I::importUnary<ExpOp>, {6, 13}}},
      {"Expand", {&I::importExpand, {8, 13}}},
      {"Flatten", {&I::importFlatten, {1, 9, 11, 13}}},
      {"Gather", {&I::importGather, {1, 11, 13}}},
      {"GatherElements", {&I::importGatherElements, {11, 13}}},
      {"GatherND", {&I::importGatherND, {11, 12, 13}}},
      {"Gemm", {&I::importGemm, {11, 13}}},
      {"GRU", {&I::importRecurrent, {7, 14}}},
      {"GlobalAveragePool", {&I::importGlobalAveragePool, {1}}},
      {"GlobalMaxPool", {&I::importGlobalMaxPool, {1}}},
      {"Greater", {&I::importCompare<ComparePredicate::gt>, {9, 13}}},
      {"GreaterOrEqual", {&I::importCompare<ComparePredicate::ge>, {12, 16}}},
      {"HardSigmoid", {&I::importActivation, {6}}},
      {"HardSwish", {&I::importActivation, {14}}},
      {"Identity", {&I::importIdentity, {1, 13, 14, 16}}},
      {"InstanceNormalization", {&I::importInstanceNormalization, {1, 6}}},
      {"IsNaN", {&I::importIsNaN, {9, 13}}},
      {"LSTM", {&I::importRecurrent, {7, 14}}},
      {"LayerNormalization", {&I::importLayerNormalization, {17}}},
      {"LeakyRelu", {&I::importActivation, {6, 16}}},
      {"Less", {&I::importCompare<ComparePredicate::lt>, {9, 13}}},
      {"LessOrEqual", {&I::importCompare<ComparePredicate::le>, {12, 16}}},
      {"Log", {&I::importUnary<LogOp>, {6, 13}}},
      {"LogSoftmax", {&I::importSoftmaxLike<LogSoftmaxOp>, {13}}},
      {"MatMul", {&I::importMatMul, {9, 13}}},
      {"Max", {&I::importVariadic<MaxOp>, {12, 13}}},
      {"MaxPool", {&I::importMaxPool, {8, 10, 11, 12}}},
      {"Min", {&I::importVariadic<MinOp>, {12, 13}}},
      {"Mod", {&I::importMod, {10, 13}}},
      {"Mul", {&I::importBinary<MulOp>, {7, 13, 14}}},
      {"Neg", {&I::importUnary<NegOp>, {6, 13}}},
      {"Not", {&I::importNot, {1}}},
      {"NegativeLogLikelihoodLoss", {&I::importClassLoss<NllLossOp>, {12, 13}}},
      {"Pad", {&I::importPad, {11, 13}}},
      {"Pow", {&I::importPow, {12, 13, 15}}},
      {"PRelu", {&I::importPRelu, {9, 16}}},
      {"RNN", {&I::importRecurrent, {7, 14}}},
      {"Range", {&I::importRange, {11}}},
      {"Reciprocal", {&I::importUnary<ReciprocalOp>, {6, 13}}},
      {"ReduceMax", {&I::importReduceAttrAxes<ReduceMaxOp>, {11, 12, 13}}},
      {"ReduceMean", {&I::importReduceAttrAxes<ReduceMeanOp>, {11, 13}}},
      {"ReduceSum", {&I::importReduceSum, {11, 13}}},
      {"Relu", {&I::importUnary<ReluOp>, {6, 13, 14}}},
      {"Reshape", {&I::importReshape, {5, 13, 14}}},
      {"Resize", {&I::importResize, {10, 11, 13}}},
      {"ScatterND", {&I::importScatterND, {11, 13, 16, 18}}},
      {"Selu", {&I::importActivation, {6}}},
      {"Shape", {&I::importShape, {1, 13, 15}}},
      {"Sigmoid", {&I::importUnary<SigmoidOp>, {6, 13}}},
      {"Sin", {&I::importUnary<SinOp>, {7}}},
      {"Slice", {&I::importSlice, {10, 11, 13}}},
      {"Softmax", {&I::importSoftmaxLike<SoftmaxOp>, {13}}},
      {"SoftmaxCrossEntropyLoss",
       {&I::importClassLoss<CrossEntropyOp>, {12, 13}}},
      {"Softplus", {&I::importActivation, {1}}},
      {"Softsign", {&I::importActivation, {1}}},
      {"Split", {&I::importSplit, {2, 11, 13, 18}}},
      {"Sqrt", {&I::importUnary<SqrtOp>, {6, 13}}},
      {"Squeeze", {&I::importSqueeze, {1, 11, 13}}},
      {"Sub", {&I::importBinary<SubOp>, {7, 13, 14}}},
      {"Sum", {&I::importVariadic<AddOp>, {8, 13}}},
      {"Tanh", {&I::importUnary<TanhOp>, {6, 13}}},
      {"ThresholdedRelu", {&I::importActivation, {10}}},
      {"Tile", {&I::importTile, {6, 13}}},
      {"Transpose", {&I::importTranspose, {1, 13}}},
      {"Trilu", {&I::importTrilu, {14}}},
      {"Unsqueeze", {&I::importUnsqueeze, {1, 11, 13}}},
      {"Where", {&I::importWhere, {9, 16}}},
  };
  return table;
}

/// "4x8" or "?x8" from an ONNX type, for messages.
static std::string formatOnnxShape(const onnx::TypeProto &type) {
  std::string s;
  for (const auto &d : type.tensor_type().shape().dim()) {
    if (!s.empty())
      s += "x";
    s += d.has_dim_value() ? std::to_string(d.dim_value()) : "?";
  }
  return s.empty() ? "scalar" : s;
}

LogicalResult OnnxImporter::checkAgainstOnnxShape(Node &node, unsigned i,
                                                  Value v) {
  const onnx::TypeProto *type = onnxTypes.lookup(node.proto.output(i));
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape())
    return success();
  const auto &dims = type->tensor_type().shape().dim();
  ArrayRef<int64_t> ours = shapeOf(v);
  bool differs = dims.size() != static_cast<int>(ours.size());
  for (int d = 0; !differs && d < dims.size(); ++d)
    differs = dims[d].has_dim_value() && dims[d].dim_value() != ours[d];
  if (!differs)
    return success();
  return nodeError(node) << "gpuc computes shape " << formatShape(ours)
                         << " for output '" << node.proto.output(i)
                         << "' but ONNX shape inference says "
                         << formatOnnxShape(*type)
                         << " (a gpuc bug: please report it with the model)";
}

LogicalResult OnnxImporter::importNode(const onnx::NodeProto &proto,
                                       int index) {
  std::string name = proto.name().empty()
                         ? proto.op_type() + "_" + std::to_string(index)
                         : proto.name();
  Location loc = NameLoc::get(StringAttr::get(context, name), fileLoc());
  Node node{
      proto, name, gpuc::getOnnxSinceVersion(proto.op_type(), opset), loc, {}};
  if (!proto.domain().empty() && proto.domain() != "ai.onnx")
    return nodeError(node) << "ops of domain '" << proto.domain()
                           << "' are not supported (only the default ONNX "
                              "domain is)";
  auto rule = rules().find(proto.op_type());
  if (rule == rules().end()) {
    std::vector<std::string> ops = gpuc::getSupportedOnnxOps();
    return nodeError(node) << "ONNX op '" << proto.op_type()
                           << "' is not supported by gpuc; supported ops: "
                           << llvm::join(ops, ", ");
  }
  if (!llvm::is_contained(rule->second.sinceVersions, node.sinceVersion)) {
    auto versions = llvm::map_range(rule->second.sinceVersions,
                                    [](int v) { return std::to_string(v); });
    return nodeError(node) << "version " << node.sinceVersion << " of "
                           << proto.op_type()
                           << " is not supported (gpuc implements versions "
                           << llvm::join(versions, ", ")
                           << "); re-export the model with opset 13 to 17";
  }
  // 8- and 16-bit integers are read as INT32: only ops that move data or
  // cast it may read them (arithmetic would not wrap around as theirs does).
  static const std::set<std::string> kNarrowIntegerReaders = {
      "Cast",      "Identity",  "Reshape", "Flatten", "Squeeze",
      "Unsqueeze", "Transpose", "Slice",   "Gather",  "Concat",
      "Shape",     "Expand",    "Tile",    "Split"};
  if (!kNarrowIntegerReaders.count(proto.op_type()))
    for (const std::string &input : proto.input()) {
      int32_t type = input.empty() ? -1 : onnxElementType(input);
      if (type != onnx::TensorProto::UINT8 && type != onnx::TensorProto::INT8 &&
          type != onnx::TensorProto::UINT16 && type != onnx::TensorProto::INT16)
        continue;
      return nodeError(node)
             << "input '" << input << "' is "
             << onnx::TensorProto::DataType_Name(
                    static_cast<onnx::TensorProto::DataType>(type))
             << ", which gpuc reads as INT32 and lets only Cast and data "
                "movement (Reshape, Transpose, Slice, Gather, Concat, ...) "
                "read: "
             << proto.op_type()
             << " on INT32 would not wrap around as it does on the narrow "
                "type; Cast the input to FLOAT (or INT32) first";
    }
  for (const std::string &input : proto.input()) {
    if (input.empty()) {
      node.inputs.push_back(Value());
      continue;
    }
    Value v = values.lookup(input);
    if (!v)
      return nodeError(node) << "input '" << input << "' is not defined";
    node.inputs.push_back(v);
  }
  Block *block = builder.getInsertionBlock();
  Operation *last = builder.getInsertionPoint() == block->begin()
                        ? nullptr
                        : &*std::prev(builder.getInsertionPoint());
  if (failed((this->*rule->second.handler)(node)))
    return failure();
  // The ops built for the node must verify: a handler relies on ONNX's type
  // rules, which a hostile model can break (an Einsum of f64 and f16 inputs
  // passes ONNX's checker). The verifier's complaint is reported as the
  // node's, with its inputs' types.
  for (Operation *op = last ? last->getNextNode() : &block->front();
       op && op != &*builder.getInsertionPoint(); op = op->getNextNode()) {
    std::string complaint;
    LogicalResult verified = success();
    {
      ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
        if (complaint.empty())
          complaint = diag.str();
        return success();
      });
      verified = verify(op, /*verifyRecursively=*/true);
    }
    if (failed(verified)) {
      InFlightDiagnostic diag = nodeError(node);
      diag << "its inputs cannot be imported together (" << complaint
           << "); input types:";
      for (Value input : node.inputs)
        if (input)
          diag << " " << input.getType();
      return diag;
    }
  }
  for (int i = 0; i < proto.output_size(); ++i) {
    const std::string &output = proto.output(i);
    if (output.empty())
      continue;
    Value v = values.lookup(output);
    if (!v) {
      if (usedNames.count(output))
        return nodeError(node)
               << "output " << i << " ('" << output << "') is not supported";
      continue;
    }
    if (failed(checkAgainstOnnxShape(node, i, v)))
      return failure();
  }
  return success();
}

// The graph walk in ONNX's order: inputs, initializers, nodes, outputs,
// then the training signature; each stage reads the value table the
// previous ones filled.
OwningOpRef<ModuleOp> OnnxImporter::run() {
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset == 0 || opset > kMaxOpset) {
    modelError() << "the model imports default-domain opset " << opset
                 << "; gpuc supports opsets up to " << kMaxOpset
                 << " (re-export with opset_version between 13 and 17)";
    return nullptr;
  }
  const onnx::GraphProto &graph = model.graph();
  for (const auto &info : graph.value_info())
    onnxTypes[info.name()] = &info.type();
  for (const auto &info : graph.output())
    onnxTypes[info.name()] = &info.type();
  for (const auto &info : graph.input())
    onnxTypes[info.name()] = &info.type();
  for (const auto &init : graph.initializer())
    initializerTypes[init.name()] = init.data_type();
  // (An empty name marks an optional input left out: it names no value.)
  for (const auto &node : graph.node())
    for (const auto &input : node.input())
      if (!input.empty())
        usedNames.insert(input);
  for (const auto &output : graph.output())
    usedNames.insert(output.name());

  // Owned from here on: every error return below destroys it.
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc());
  module = *owned;
  builder.setInsertionPointToEnd(module.getBody());

  // Graph inputs first, then one argument per parameter.
  std::set<std::string> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  SmallVector<Type> argTypes;
  SmallVector<NamedAttribute> argAttrs;
  SmallVector<std::string> argNames;
  SmallVector<DictionaryAttr> argAttrDicts;
  for (const auto &input : graph.input()) {
    if (initializerNames.count(input.name()))
      continue;
    auto emit = [&] {
      return modelError() << "graph input '" << input.name() << "': ";
    };
    FailureOr<Type> elementType =
        convertElementType(input.type().tensor_type().elem_type(), emit);
    if (failed(elementType))
      return nullptr;
    Shape shape;
    for (const auto &d : input.type().tensor_type().shape().dim())
      shape.push_back(d.dim_value());
    argTypes.push_back(RankedTensorType::get(shape, *elementType));
    argNames.push_back(input.name());
    argAttrDicts.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kInputAttrName, builder.getStringAttr(input.name()))));
  }
  // Float initializers of rank >= 1 are parameters (arguments of the step);
  // everything else (shape vectors, scalars, and a Resize's roi and scales,
  // which are its geometry) is a constant.
  std::set<std::string> geometry;
  for (const auto &node : graph.node())
    if (node.op_type() == "Resize")
      for (int i = 1; i < std::min(node.input_size(), 3); ++i)
        geometry.insert(node.input(i));
  SmallVector<std::pair<std::string, DenseElementsAttr>> constants;
  SmallVector<ParameterOp> params;
  std::map<std::string, SmallVector<Attribute>> aliasesOf;
  std::map<std::string, bool> bufferSaved;
  for (const onnx::StringStringEntryProto &entry : model.metadata_props()) {
    if (entry.key() == kBuffersKey) {
      SmallVector<StringRef> lines;
      StringRef(entry.value()).split(lines, '\n', -1, /*KeepEmpty=*/false);
      for (StringRef line : lines) {
        auto [name, saved] = line.split(' ');
        bufferSaved[name.str()] = saved == "saved";
      }
    }
    if (entry.key() != kTiedParametersKey)
      continue;
    SmallVector<StringRef> lines;
    StringRef(entry.value()).split(lines, '\n', -1, /*KeepEmpty=*/false);
    for (StringRef line : lines) {
      auto [alias, kept] = line.split(' ');
      aliasesOf[kept.str()].push_back(builder.getStringAttr(alias));
    }
  }
  for (const auto &init : graph.initializer()) {
    auto emit = [&] {
      return modelError() << "initializer '" << init.name() << "': ";
    };
    FailureOr<RankedTensorType> type = convertTensorType(init, emit);
    if (failed(type))
      return nullptr;
    if (!isa<FloatType>(type->getElementType()) || type->getRank() == 0 ||
        geometry.count(init.name())) {
      FailureOr<DenseElementsAttr> value = convertTensor(init, *type, emit);
      if (failed(value))
        return nullptr;
      constants.push_back({init.name(), *value});
      continue;
    }
    FailureOr<std::string> bytes = readTensorBytes(init, *type, emit);
    if (failed(bytes))
      return nullptr;
    ParameterOp param = createParameter(
        builder, NameLoc::get(builder.getStringAttr(init.name()), fileLoc()),
        init.name(), *type, ArrayRef<char>(bytes->data(), bytes->size()),
        /*trainable=*/true);
    // A buffer of the exported module is never trained (a batch norm's
    // running statistics become the step's state at their op's import).
    auto buffer = bufferSaved.find(init.name());
    if (buffer != bufferSaved.end()) {
      param.setTrainable(false);
      param->setAttr(GpucDialect::kFrozenAttrName,
                     builder.getStringAttr("a buffer of the exported module "
                                           "(PyTorch trains only its "
                                           "parameters)"));
      if (!buffer->second)
        param->setAttr(GpucDialect::kUnsavedBufferAttrName,
                       builder.getUnitAttr());
    }
    auto aliases = aliasesOf.find(init.name());
    if (aliases != aliasesOf.end())
      param->setAttr(GpucDialect::kAliasesAttrName,
                     builder.getArrayAttr(aliases->second));
    params.push_back(param);
    argTypes.push_back(*type);
    argNames.push_back(init.name());
    argAttrDicts.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kParamAttrName, FlatSymbolRefAttr::get(param))));
  }

  auto func = func::FuncOp::create(builder, fileLoc(), "forward",
                                   builder.getFunctionType(argTypes, {}));
  func.setAllArgAttrs(argAttrDicts);
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [i, name] : llvm::enumerate(argNames))
    values[name] = entry->getArgument(i);
  size_t firstParam = argNames.size() - params.size();
  for (auto [i, param] : llvm::enumerate(params))
    paramOfArg[entry->getArgument(firstParam + i)] = param;
  for (auto &[name, value] : constants)
    values[name] = ConstantOp::create(
        builder, NameLoc::get(builder.getStringAttr(name), fileLoc()), value);

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index)))
      return nullptr;

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (const auto &output : graph.output()) {
    Value v = values.lookup(output.name());
    if (!v) {
      modelError() << "graph output '" << output.name()
                   << "' is not produced by any node";
      return nullptr;
    }
    results.push_back(v);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kOutputAttrName, builder.getStringAttr(output.name()))));
  }
  for (auto &[param, value] : updates) {
    results.push_back(value);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kUpdateAttrName, FlatSymbolRefAttr::get(param))));
  }
  func::ReturnOp::create(builder, fileLoc(), results);
  func.setFunctionType(builder.getFunctionType(entry->getArgumentTypes(),
                                               ValueRange(results).getTypes()));
  if (rngKey) {
    argAttrDicts.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        GpucDialect::kRngAttrName, builder.getUnitAttr())));
    func.setAllArgAttrs(argAttrDicts);
  }
  func.setAllResultAttrs(resultAttrs);

  // On failure `owned` erases the module (erasing it here as well freed it
  // twice: found by the ONNX fuzz target).
  if (failed(verify(module)))
    return nullptr;
  return owned;
}

} // namespace mlir::gpuc::onnx_import

using namespace mlir;
using namespace mlir::gpuc;
using mlir::gpuc::onnx_import::OnnxImporter;

std::vector<std::string> mlir::gpuc::getSupportedOnnxOps() {
  std::vector<std::string> ops;
  for (const auto &entry : OnnxImporter::rules())
    ops.push_back(entry.getKey().str());
  std::sort(ops.begin(), ops.end());
  return ops;
}

OwningOpRef<ModuleOp>
mlir::gpuc::importOnnxFile(StringRef path, MLIRContext *context,
                           const OnnxImportOptions &options) {
  context->loadDialect<GpucDialect, func::FuncDialect>();
  onnx::ModelProto model;
  std::string error;
  if (!gpuc::loadOnnxModel(path.str(), options, model, error)) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << error;
    return nullptr;
  }
  return OnnxImporter(context, path, model).run();
}

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
#include "OnnxModelLoader.h"
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Frontend/Limits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// The highest default-domain opset that libonnx 1.12 defines.
constexpr int kMaxOpset = 17;

/// One ONNX node being imported.
struct Node {
  const onnx::NodeProto &proto;
  std::string name;
  int sinceVersion;
  Location loc;
  SmallVector<Value> inputs;

  Value in(unsigned i) const { return i < inputs.size() ? inputs[i] : Value(); }
  const onnx::AttributeProto *attr(StringRef attrName) const {
    for (const auto &a : proto.attribute())
      if (a.name() == attrName)
        return &a;
    return nullptr;
  }
  int64_t getInt(StringRef attrName, int64_t dflt) const {
    const auto *a = attr(attrName);
    return a ? a->i() : dflt;
  }
  double getFloat(StringRef attrName, double dflt) const {
    const auto *a = attr(attrName);
    return a ? a->f() : dflt;
  }
  std::string getString(StringRef attrName, StringRef dflt) const {
    const auto *a = attr(attrName);
    return a ? a->s() : dflt.str();
  }
  std::optional<Shape> getInts(StringRef attrName) const {
    const auto *a = attr(attrName);
    if (!a)
      return std::nullopt;
    return Shape(a->ints().begin(), a->ints().end());
  }
};

class OnnxImporter;
using Handler = LogicalResult (OnnxImporter::*)(Node &);

struct OpRule {
  Handler handler;
  /// The schema versions whose semantics the handler implements.
  SmallVector<int> sinceVersions;
};

class OnnxImporter {
public:
  OnnxImporter(MLIRContext *context, StringRef path,
               const onnx::ModelProto &model)
      : context(context), builder(context), tensors(builder), path(path.str()),
        model(model) {}

  OwningOpRef<ModuleOp> run();

  static const llvm::StringMap<OpRule> &rules();

private:
  //===--- diagnostics
  //-----------------------------------------------------===//
  Location fileLoc() {
    return FileLineColLoc::get(context, path, /*line=*/0, /*column=*/0);
  }
  InFlightDiagnostic modelError() { return emitError(fileLoc()); }
  InFlightDiagnostic nodeError(const Node &node) {
    return emitError(node.loc)
           << "node '" << node.name << "' (" << node.proto.op_type()
           << ", opset " << opset << "): ";
  }

  //===--- types and values
  //------------------------------------------------===//
  FailureOr<Type> convertElementType(int32_t onnxType,
                                     function_ref<InFlightDiagnostic()> emit);
  FailureOr<DenseElementsAttr>
  convertTensor(const onnx::TensorProto &tensor, RankedTensorType type,
                function_ref<InFlightDiagnostic()>);
  FailureOr<std::string> readTensorBytes(const onnx::TensorProto &tensor,
                                         RankedTensorType type,
                                         function_ref<InFlightDiagnostic()>);
  FailureOr<RankedTensorType>
  convertTensorType(const onnx::TensorProto &tensor,
                    function_ref<InFlightDiagnostic()> emit);

  static RankedTensorType typeOf(Value v) { return TensorBuilder::typeOf(v); }
  static ArrayRef<int64_t> shapeOf(Value v) {
    return TensorBuilder::shapeOf(v);
  }
  static RankedTensorType withShape(Value v, ArrayRef<int64_t> shape) {
    return TensorBuilder::withShape(v, shape);
  }
  Value constantF(Location loc, Type elementType, double value) {
    return tensors.scalar(loc, elementType, value);
  }
  Value splatLike(Location loc, Value like, double value) {
    return tensors.splatLike(loc, like, value);
  }
  Value broadcastTo(Location loc, Value v, ArrayRef<int64_t> shape) {
    return tensors.broadcastTo(loc, v, shape);
  }
  Value reshape(Location loc, Value v, ArrayRef<int64_t> shape) {
    return tensors.reshape(loc, v, shape);
  }
  FailureOr<SmallVector<Value>> broadcastAll(Node &node,
                                             ArrayRef<Value> operands) {
    return tensors.broadcastAll(node.loc, operands,
                                [&] { return nodeError(node); });
  }
  /// The value as integers if it is a compile-time constant.
  std::optional<Shape> getConstantInts(Value v);
  std::optional<double> getConstantFloat(Value v);
  FailureOr<Shape> requireConstantInts(Node &node, unsigned input,
                                       StringRef what);
  /// Normalizes each axis against `rank`, reporting errors at the node.
  FailureOr<Shape> normalizeAxes(Node &node, ArrayRef<int64_t> axes,
                                 int64_t rank);

  void setOutput(Node &node, unsigned i, Value v) {
    if (static_cast<int>(i) < node.proto.output_size() &&
        !node.proto.output(i).empty())
      values[node.proto.output(i)] = v;
  }

  LogicalResult importNode(const onnx::NodeProto &proto, int index);
  LogicalResult checkAgainstOnnxShape(Node &node, unsigned i, Value v);

  //===--- handlers
  //----------------------------------------------------------===//
  template <typename OpTy> LogicalResult importUnary(Node &node);
  template <typename OpTy> LogicalResult importBinary(Node &node);
  template <typename OpTy> LogicalResult importVariadic(Node &node);
  template <ComparePredicate P> LogicalResult importCompare(Node &node);
  template <typename OpTy> LogicalResult importReduceAttrAxes(Node &node);
  LogicalResult
  importReduce(Node &node, Value input, std::optional<Shape> axes,
               bool keepDims, bool noopWithEmptyAxes,
               function_ref<Value(Type, Value, Shape, bool)> make);
  LogicalResult importIdentity(Node &node);
  LogicalResult importActivation(Node &node);
  LogicalResult importClip(Node &node);
  LogicalResult importPRelu(Node &node);
  LogicalResult importRange(Node &node);
  LogicalResult importTrilu(Node &node);
  LogicalResult importSplit(Node &node);
  LogicalResult importTile(Node &node);
  LogicalResult importRecurrent(Node &node);
  LogicalResult importPow(Node &node);
  LogicalResult importWhere(Node &node);
  LogicalResult importCast(Node &node);
  LogicalResult importConstant(Node &node);
  LogicalResult importConstantOfShape(Node &node);
  LogicalResult importShape(Node &node);
  LogicalResult importGather(Node &node);
  LogicalResult importReshape(Node &node);
  LogicalResult importFlatten(Node &node);
  LogicalResult importTranspose(Node &node);
  LogicalResult importUnsqueeze(Node &node);
  LogicalResult importSqueeze(Node &node);
  LogicalResult importSlice(Node &node);
  LogicalResult importConcat(Node &node);
  LogicalResult importExpand(Node &node);
  LogicalResult importPad(Node &node);
  LogicalResult importInstanceNormalization(Node &node);
  LogicalResult importGlobalMaxPool(Node &node);
  LogicalResult importEinsum(Node &node);
  LogicalResult importResize(Node &node);
  LogicalResult importMatMul(Node &node);
  LogicalResult importGemm(Node &node);
  LogicalResult importConv(Node &node);
  LogicalResult importConvTranspose(Node &node);
  LogicalResult importMaxPool(Node &node);
  LogicalResult importAveragePool(Node &node);
  LogicalResult importGlobalAveragePool(Node &node);
  LogicalResult importBatchNormalization(Node &node);
  LogicalResult importLayerNormalization(Node &node);
  LogicalResult importDropout(Node &node);
  template <typename OpTy> LogicalResult importSoftmaxLike(Node &node);
  LogicalResult importReduceSum(Node &node);
  template <typename OpTy> LogicalResult importClassLoss(Node &node);

  /// Window geometry shared by Conv and the pools: pads after auto_pad and
  /// ceil_mode are applied.
  FailureOr<Shape> windowPads(Node &node, ArrayRef<int64_t> inputShape,
                              ArrayRef<int64_t> kernel,
                              ArrayRef<int64_t> strides,
                              ArrayRef<int64_t> dilations, bool ceilMode,
                              bool lifted);
  /// A 1-D window op runs as the 2-D one over [N, C, 1, L]: its input and
  /// its attributes gain a leading spatial axis of extent 1.
  /// With a `filter` (Conv, ConvTranspose), it is lifted alike and its
  /// spatial extent is the kernel (checked against kernel_shape).
  struct Window {
    Value input, filter;
    bool lifted = false;
    Shape kernel, strides, dilations;
  };
  FailureOr<Window> windowOf(Node &node, Value x, StringRef what,
                             Value filter = {});
  /// `y` plus a per-channel `bias` (none: `y`).
  FailureOr<Value> addChannelBias(Node &node, Value y, Value bias);
  Value unlift(const Window &window, Location loc, Value y) {
    if (!window.lifted)
      return y;
    ArrayRef<int64_t> s = shapeOf(y);
    return reshape(loc, y, {s[0], s[1], s[3]});
  }

  MLIRContext *context;
  OpBuilder builder;
  TensorBuilder tensors;
  std::string path;
  const onnx::ModelProto &model;
  int opset = 0;
  llvm::StringMap<Value> values;
  /// Shapes and element types that ONNX shape inference found, by value name.
  llvm::StringMap<const onnx::TypeProto *> onnxTypes;
  /// The element type of each initializer, by name.
  llvm::StringMap<int32_t> initializerTypes;
  /// Names used by later nodes or as graph outputs.
  std::set<std::string> usedNames;

  /// The ONNX element type of the value `name` (-1 when unknown).
  int32_t onnxElementType(StringRef name) const {
    if (auto it = initializerTypes.find(name); it != initializerTypes.end())
      return it->second;
    const onnx::TypeProto *type = onnxTypes.lookup(name);
    return type && type->has_tensor_type() ? type->tensor_type().elem_type()
                                           : -1;
  }
  /// Which parameter (by symbol name) a function argument holds.
  DenseMap<Value, ParameterOp> paramOfArg;
  /// Buffers written back by the step, in order of first write.
  SmallVector<std::pair<ParameterOp, Value>> updates;
  /// The step's (seed, step) random key, an argument added by the first
  /// training-mode Dropout; each Dropout gets its own stream.
  Value rngKey;
  int64_t dropoutStreams = 0;
  ModuleOp module;
};

} // namespace

//===----------------------------------------------------------------------===//
// Tensors and types
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::importIdentity(Node &node) {
  setOutput(node, 0, node.in(0));
  return success();
}

template <typename OpTy> LogicalResult OnnxImporter::importUnary(Node &node) {
  Value x = node.in(0);
  setOutput(node, 0, builder.createOrFold<OpTy>(node.loc, x.getType(), x));
  return success();
}

template <typename OpTy> LogicalResult OnnxImporter::importBinary(Node &node) {
  if (typeOf(node.in(0)).getElementType() !=
      typeOf(node.in(1)).getElementType())
    return nodeError(node) << "operand element types differ";
  auto operands = broadcastAll(node, {node.in(0), node.in(1)});
  if (failed(operands))
    return failure();
  Value a = (*operands)[0], b = (*operands)[1];
  setOutput(node, 0, builder.createOrFold<OpTy>(node.loc, a.getType(), a, b));
  return success();
}

template <typename OpTy>
LogicalResult OnnxImporter::importVariadic(Node &node) {
  auto operands = broadcastAll(node, node.inputs);
  if (failed(operands))
    return failure();
  Value acc = operands->front();
  for (Value v : llvm::drop_begin(*operands))
    acc = builder.createOrFold<OpTy>(node.loc, acc.getType(), acc, v);
  setOutput(node, 0, acc);
  return success();
}

template <ComparePredicate P>
LogicalResult OnnxImporter::importCompare(Node &node) {
  auto operands = broadcastAll(node, {node.in(0), node.in(1)});
  if (failed(operands))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<CompareOp>(node.loc, P, (*operands)[0],
                                            (*operands)[1]));
  return success();
}

LogicalResult OnnxImporter::importPow(Node &node) {
  Value base = node.in(0), exponent = node.in(1);
  if (typeOf(exponent).getElementType() != typeOf(base).getElementType())
    exponent = builder.createOrFold<CastOp>(
        node.loc,
        RankedTensorType::get(shapeOf(exponent), typeOf(base).getElementType()),
        exponent);
  auto operands = broadcastAll(node, {base, exponent});
  if (failed(operands))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<PowOp>(node.loc, (*operands)[0].getType(),
                                        (*operands)[0], (*operands)[1]));
  return success();
}

LogicalResult OnnxImporter::importWhere(Node &node) {
  auto operands = broadcastAll(node, node.inputs);
  if (failed(operands))
    return failure();
  Value onTrue = (*operands)[1];
  setOutput(node, 0,
            builder.createOrFold<SelectOp>(node.loc, onTrue.getType(),
                                           (*operands)[0], onTrue,
                                           (*operands)[2]));
  return success();
}

LogicalResult OnnxImporter::importCast(Node &node) {
  FailureOr<Type> to =
      convertElementType(node.getInt("to", 0), [&] { return nodeError(node); });
  if (failed(to))
    return failure();
  Value x = node.in(0);
  setOutput(node, 0,
            builder.createOrFold<CastOp>(
                node.loc, RankedTensorType::get(shapeOf(x), *to), x));
  return success();
}

//===----------------------------------------------------------------------===//
// Activations composed of core ops (their gradients come from those ops)
//===----------------------------------------------------------------------===//

/// Max(lo, min(hi, x)) elementwise, for scalars lo and hi. (One op per
/// statement here and below: the order of a call's argument evaluation
/// would otherwise decide the order of ops in the IR.)
static Value clamp(ExprBuilder &B, Value x, double lo, double hi) {
  Value upper = B.splat(x, hi);
  Value below = B.minimum(x, upper);
  Value lower = B.splat(x, lo);
  return B.maximum(below, lower);
}

/// log(1 + exp(x)), as relu(x) + log(1 + exp(-|x|)): exp never overflows.
static Value softplus(ExprBuilder &B, Value x) {
  Value magnitude = B.abs(x);
  Value decay = B.exp(B.neg(magnitude));
  Value one = B.splat(x, 1.0);
  Value tail = B.log(B.add(one, decay));
  Value relu = B.relu(x);
  return B.add(relu, tail);
}

/// alpha * (exp(x) - 1).
static Value expm1Scaled(ExprBuilder &B, Value x, double alpha) {
  Value e = B.exp(x);
  Value one = B.splat(x, 1.0);
  return B.scale(B.sub(e, one), alpha);
}

LogicalResult OnnxImporter::importActivation(Node &node) {
  Value x = node.in(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "takes a floating-point input, not "
                           << typeOf(x).getElementType();
  ExprBuilder B(builder, node.loc);
  StringRef op = node.proto.op_type();
  auto compareWith = [&](ComparePredicate predicate, double c) {
    Value constant = B.splat(x, c);
    return B.cmp(predicate, x, constant);
  };
  Value y;
  if (op == "LeakyRelu") {
    Value negative = compareWith(ComparePredicate::lt, 0.0);
    Value scaled = B.scale(x, node.getFloat("alpha", 0.01));
    y = B.select(negative, scaled, x);
  } else if (op == "Elu") {
    Value negative = compareWith(ComparePredicate::lt, 0.0);
    Value e = expm1Scaled(B, x, node.getFloat("alpha", 1.0));
    y = B.select(negative, e, x);
  } else if (op == "Selu") {
    double alpha = node.getFloat("alpha", 1.67326319217681884765625);
    double gamma = node.getFloat("gamma", 1.05070102214813232421875);
    Value positive = compareWith(ComparePredicate::gt, 0.0);
    Value e = expm1Scaled(B, x, alpha);
    y = B.scale(B.select(positive, x, e), gamma);
  } else if (op == "Celu") {
    double alpha = node.getFloat("alpha", 1.0);
    if (alpha == 0)
      return nodeError(node) << "alpha must not be 0";
    Value e = expm1Scaled(B, B.scale(x, 1.0 / alpha), alpha);
    Value zero = B.splat(x, 0.0);
    Value negativePart = B.minimum(e, zero);
    Value relu = B.relu(x);
    y = B.add(relu, negativePart);
  } else if (op == "ThresholdedRelu") {
    Value above =
        compareWith(ComparePredicate::gt, node.getFloat("alpha", 1.0));
    y = B.where(above, x);
  } else if (op == "HardSigmoid") {
    Value scaled = B.scale(x, node.getFloat("alpha", 0.2));
    Value beta = B.splat(x, node.getFloat("beta", 0.5));
    y = clamp(B, B.add(scaled, beta), 0.0, 1.0);
  } else if (op == "HardSwish") {
    Value scaled = B.scale(x, 1.0 / 6.0);
    Value half = B.splat(x, 0.5);
    Value gate = clamp(B, B.add(scaled, half), 0.0, 1.0);
    y = B.mul(x, gate);
  } else if (op == "Softplus") {
    y = softplus(B, x);
  } else if (op == "Softsign") {
    Value magnitude = B.abs(x);
    Value one = B.splat(x, 1.0);
    y = B.div(x, B.add(one, magnitude));
  } else {
    return nodeError(node) << "is not an activation the importer composes";
  }
  setOutput(node, 0, y);
  return success();
}

LogicalResult OnnxImporter::importClip(Node &node) {
  Value x = node.in(0);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "takes a floating-point input, not "
                           << typeOf(x).getElementType();
  Value y = x;
  // Opset 6: attributes; 11 on: optional scalar inputs.
  auto bound = [&](unsigned input, StringRef attr) -> FailureOr<Value> {
    if (opset < 11) {
      if (!node.attr(attr))
        return Value();
      return splatLike(node.loc, x, node.getFloat(attr, 0.0));
    }
    Value v = node.in(input);
    if (!v)
      return Value();
    if (!shapeOf(v).empty() && getNumElements(shapeOf(v)) != 1)
      return nodeError(node) << attr << " (input " << input
                             << ") must be a scalar, not " << typeOf(v);
    if (typeOf(v).getElementType() != typeOf(x).getElementType())
      return nodeError(node) << attr << " has element type "
                             << typeOf(v).getElementType() << ", not the "
                             << "input's " << typeOf(x).getElementType();
    return broadcastTo(node.loc, reshape(node.loc, v, {}), shapeOf(x));
  };
  FailureOr<Value> lo = bound(1, "min"), hi = bound(2, "max");
  if (failed(lo) || failed(hi))
    return failure();
  if (*lo)
    y = builder.createOrFold<MaxOp>(node.loc, y.getType(), y, *lo);
  if (*hi)
    y = builder.createOrFold<MinOp>(node.loc, y.getType(), y, *hi);
  setOutput(node, 0, y);
  return success();
}

LogicalResult OnnxImporter::importPRelu(Node &node) {
  Value x = node.in(0), slope = node.in(1);
  if (!isa<FloatType>(typeOf(x).getElementType()) ||
      typeOf(slope).getElementType() != typeOf(x).getElementType())
    return nodeError(node) << "takes floating-point x and slope of one type";
  // The slope broadcasts to x (unidirectionally).
  FailureOr<Shape> shape = inferBroadcastShape(shapeOf(x), shapeOf(slope),
                                               [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  if (*shape != shapeOf(x))
    return nodeError(node) << "slope " << typeOf(slope)
                           << " does not broadcast to x " << typeOf(x);
  ExprBuilder B(builder, node.loc);
  Value zero = B.splat(x, 0.0);
  Value negative = B.cmp(ComparePredicate::lt, x, zero);
  Value slopes = broadcastTo(node.loc, slope, *shape);
  Value scaled = B.mul(slopes, x);
  setOutput(node, 0, B.select(negative, scaled, x));
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes: Range, Trilu, Split, Tile
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::importRange(Node &node) {
  Type type = typeOf(node.in(0)).getElementType();
  std::optional<double> start = getConstantFloat(node.in(0)),
                        limit = getConstantFloat(node.in(1)),
                        delta = getConstantFloat(node.in(2));
  if (!start || !limit || !delta)
    return nodeError(node) << "start, limit and delta must be compile-time "
                              "constant scalars; gpuc compiles static shapes";
  if (*delta == 0)
    return nodeError(node) << "delta must not be 0";
  double steps = std::ceil((*limit - *start) / *delta);
  if (!(steps <= (double)kMaxElements))
    return nodeError(node) << "would have " << steps << " elements (at most "
                           << kMaxElements << ")";
  int64_t n = std::max<int64_t>(0, (int64_t)steps);
  auto resultType = RankedTensorType::get({n}, type);
  DenseElementsAttr values;
  if (isa<FloatType>(type)) {
    SmallVector<APFloat> v;
    for (int64_t i = 0; i < n; ++i) {
      APFloat f(*start + i * *delta);
      bool lost;
      f.convert(cast<FloatType>(type).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &lost);
      v.push_back(f);
    }
    values = DenseElementsAttr::get(resultType, v);
  } else if (type.isInteger(32) || type.isInteger(64)) {
    SmallVector<APInt> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(APInt(type.getIntOrFloatBitWidth(),
                        (int64_t)*start + i * (int64_t)*delta,
                        /*isSigned=*/true));
    values = DenseElementsAttr::get(resultType, v);
  } else {
    return nodeError(node) << "element type " << type << " is not supported";
  }
  setOutput(node, 0, ConstantOp::create(builder, node.loc, values));
  return success();
}

LogicalResult OnnxImporter::importTrilu(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  if (rank < 2)
    return nodeError(node) << "needs a tensor of rank 2 or more, not "
                           << typeOf(x);
  int64_t k = 0;
  if (node.in(1)) {
    FailureOr<Shape> given = requireConstantInts(node, 1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return nodeError(node) << "k must be a scalar";
    k = given->front();
  }
  bool upper = node.getInt("upper", 1) != 0;
  // Keep (i, j) where j - i >= k (upper) or j - i <= k (lower).
  ExprBuilder B(builder, node.loc);
  auto indexType = RankedTensorType::get(shape, builder.getI64Type());
  Value row = IotaOp::create(builder, node.loc, indexType, rank - 2);
  Value column = IotaOp::create(builder, node.loc, indexType, rank - 1);
  Value offset = B.sub(column, row);
  Value diagonal = B.splat(offset, (double)k);
  Value keep = B.cmp(upper ? ComparePredicate::ge : ComparePredicate::le,
                     offset, diagonal);
  setOutput(node, 0, B.where(keep, x));
  return success();
}

LogicalResult OnnxImporter::importSplit(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  FailureOr<int64_t> axis = gpuc::normalizeAxis(
      node.getInt("axis", 0), shape.size(), [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  int64_t dim = shape[*axis];
  int64_t outputs = node.proto.output_size();
  Shape sizes;
  if (opset < 13 && node.getInts("split")) {
    sizes = *node.getInts("split");
  } else if (opset >= 13 && node.in(1)) {
    FailureOr<Shape> given = requireConstantInts(node, 1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else {
    // Equal parts; from opset 18 `num_outputs`, the last part smaller when
    // the axis does not divide.
    int64_t parts = node.getInt("num_outputs", outputs);
    if (parts < 1 || parts != outputs)
      return nodeError(node)
             << "num_outputs " << parts << " for " << outputs << " outputs";
    int64_t each = opset >= 18 ? (dim + parts - 1) / parts : dim / parts;
    if (opset < 18 && dim % parts)
      return nodeError(node)
             << "axis " << *axis << " of " << dim << " does not split into "
             << parts << " equal parts";
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= each)
      sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return nodeError(node) << "split sizes must not be negative";
    total += s;
  }
  if ((int64_t)sizes.size() != outputs || total != dim)
    return nodeError(node) << "split sizes ["
                           << llvm::join(
                                  llvm::map_range(sizes,
                                                  [](int64_t s) {
                                                    return std::to_string(s);
                                                  }),
                                  ", ")
                           << "] do not cover axis " << *axis << " of " << dim
                           << " in " << outputs << " outputs";
  int64_t start = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    Shape starts(shape.size(), 0), limits(shape), steps(shape.size(), 1);
    starts[*axis] = start;
    limits[*axis] = start + size;
    Shape part(shape);
    part[*axis] = size;
    setOutput(node, i,
              builder.createOrFold<SliceOp>(node.loc, withShape(x, part), x,
                                            starts, limits, steps));
    start += size;
  }
  return success();
}

LogicalResult OnnxImporter::importTile(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  FailureOr<Shape> repeats = requireConstantInts(node, 1, "repeats");
  if (failed(repeats))
    return failure();
  if (repeats->size() != shape.size())
    return nodeError(node) << "repeats has " << repeats->size()
                           << " entries for a tensor of rank " << shape.size();
  // [d0, d1, ...] -> [1, d0, 1, d1, ...] -> [r0, d0, r1, d1, ...]
  //   -> [r0 * d0, r1 * d1, ...]
  Shape interleaved, broadcast, tiled;
  for (auto [d, r] : llvm::zip(shape, *repeats)) {
    if (r < 0)
      return nodeError(node) << "repeats must not be negative";
    if (d && r > kMaxElements / d)
      return nodeError(node)
             << "tiles a dimension of " << d << " " << r << " times: too large";
    interleaved.append({1, d});
    broadcast.append({r, d});
    tiled.push_back(r * d);
  }
  FailureOr<Shape> checked = inferBroadcastShape(
      interleaved, broadcast, [&] { return nodeError(node); });
  if (failed(checked) || getNumElements(tiled) > kMaxElements)
    return failed(checked)
               ? failure()
               : (LogicalResult)(nodeError(node) << "the result is too large");
  Value v = broadcastTo(node.loc, reshape(node.loc, x, interleaved), broadcast);
  setOutput(node, 0, reshape(node.loc, v, tiled));
  return success();
}

//===----------------------------------------------------------------------===//
// Recurrent layers (RNN, GRU, LSTM), unrolled over the static sequence
//===----------------------------------------------------------------------===//

namespace {
/// An activation of a recurrent op, by its ONNX name, with the scaling
/// values it consumed from activation_alpha/activation_beta.
struct RecurrentActivation {
  std::string name;
  double alpha = 0, beta = 0;
};
} // namespace

/// How many of activation_alpha/activation_beta an activation takes, and
/// their defaults (those of the ONNX ops of the same name).
static std::optional<std::pair<int, std::pair<double, double>>>
recurrentActivationParams(StringRef lowerName) {
  using P = std::pair<int, std::pair<double, double>>;
  if (lowerName == "sigmoid" || lowerName == "tanh" || lowerName == "relu" ||
      lowerName == "softsign" || lowerName == "softplus")
    return P{0, {0, 0}};
  if (lowerName == "leakyrelu")
    return P{1, {0.01, 0}};
  if (lowerName == "thresholdedrelu" || lowerName == "elu")
    return P{1, {1.0, 0}};
  if (lowerName == "hardsigmoid")
    return P{2, {0.2, 0.5}};
  if (lowerName == "affine" || lowerName == "scaledtanh")
    return P{2, {1.0, lowerName == "affine" ? 0.0 : 1.0}};
  return std::nullopt;
}

static Value applyRecurrentActivation(ExprBuilder &B,
                                      const RecurrentActivation &act, Value x) {
  StringRef name = act.name;
  if (name == "sigmoid")
    return SigmoidOp::create(B.b, B.loc, x.getType(), x);
  if (name == "tanh")
    return TanhOp::create(B.b, B.loc, x.getType(), x);
  if (name == "relu")
    return B.relu(x);
  if (name == "softsign") {
    Value magnitude = B.abs(x);
    Value one = B.splat(x, 1.0);
    return B.div(x, B.add(one, magnitude));
  }
  if (name == "softplus")
    return softplus(B, x);
  if (name == "leakyrelu" || name == "elu") {
    Value zero = B.splat(x, 0.0);
    Value negative = B.cmp(ComparePredicate::lt, x, zero);
    Value other =
        name == "elu" ? expm1Scaled(B, x, act.alpha) : B.scale(x, act.alpha);
    return B.select(negative, other, x);
  }
  if (name == "thresholdedrelu") {
    Value threshold = B.splat(x, act.alpha);
    return B.where(B.cmp(ComparePredicate::gt, x, threshold), x);
  }
  if (name == "hardsigmoid") {
    Value shifted = B.add(B.scale(x, act.alpha), B.splat(x, act.beta));
    return clamp(B, shifted, 0.0, 1.0);
  }
  if (name == "affine")
    return B.add(B.scale(x, act.alpha), B.splat(x, act.beta));
  // scaledtanh
  Value inner = B.scale(x, act.beta);
  return B.scale(TanhOp::create(B.b, B.loc, inner.getType(), inner), act.alpha);
}

LogicalResult OnnxImporter::importRecurrent(Node &node) {
  StringRef op = node.proto.op_type();
  const bool lstm = op == "LSTM", gru = op == "GRU";
  const int64_t gates = lstm ? 4 : gru ? 3 : 1;
  const unsigned actsPerDirection = lstm ? 3 : gru ? 2 : 1;
  Value x = node.in(0), w = node.in(1), r = node.in(2), bias = node.in(3),
        seqLens = node.in(4), h0 = node.in(5);
  Value c0 = lstm ? node.in(6) : Value(), peep = lstm ? node.in(7) : Value();
  Location loc = node.loc;
  if (!x || !w || !r)
    return nodeError(node) << "needs the inputs X, W and R";
  Type et = typeOf(x).getElementType();
  if (!isa<FloatType>(et))
    return nodeError(node) << "takes floating-point X, not " << et;
  std::string direction = node.getString("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return nodeError(node) << "unknown direction '" << direction
                           << "' (forward, reverse or bidirectional)";
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  int64_t layout = node.getInt("layout", 0);
  if (layout != 0 && layout != 1)
    return nodeError(node) << "layout must be 0 or 1, not " << layout;
  if (shapeOf(x).size() != 3)
    return nodeError(node) << "X must have rank 3 ("
                           << (layout ? "[batch, seq, input]"
                                      : "[seq, batch, input]")
                           << "), not " << typeOf(x);
  auto transpose = [&](Value v, ArrayRef<int64_t> perm) -> Value {
    Shape shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(v)[p]);
    return builder.createOrFold<TransposeOp>(loc, withShape(v, shape), v, perm);
  };
  if (layout == 1)
    x = transpose(x, {1, 0, 2});
  const int64_t seq = shapeOf(x)[0], batch = shapeOf(x)[1],
                inputSize = shapeOf(x)[2];
  // The sequence is unrolled: an empty one has no step to take its final
  // state from (found by the ONNX fuzz target).
  if (seq < 1)
    return nodeError(node) << "X is " << typeOf(x)
                           << ": a recurrent layer needs a sequence of at "
                              "least one step";
  ArrayRef<int64_t> wShape = shapeOf(w);
  if (wShape.size() != 3 || wShape[0] != dirs || wShape[2] != inputSize ||
      wShape[1] % gates != 0)
    return nodeError(node) << "W must be [" << dirs << ", " << gates
                           << " x hidden_size, " << inputSize << "], not "
                           << typeOf(w);
  const int64_t hidden = node.getInt("hidden_size", wShape[1] / gates);
  if (hidden <= 0 || wShape[1] != gates * hidden)
    return nodeError(node) << "hidden_size " << hidden << " does not match W "
                           << typeOf(w);
  auto expect = [&](Value v, StringRef what, Shape shape) -> LogicalResult {
    if (!v || (shapeOf(v) == ArrayRef<int64_t>(shape) &&
               typeOf(v).getElementType() == et))
      return success();
    return nodeError(node) << what << " must be "
                           << RankedTensorType::get(shape, et) << ", not "
                           << typeOf(v);
  };
  Shape stateShape =
      layout ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  if (failed(expect(r, "R", {dirs, gates * hidden, hidden})) ||
      failed(expect(bias, "B", {dirs, 2 * gates * hidden})) ||
      failed(expect(h0, "initial_h", stateShape)) ||
      failed(expect(c0, "initial_c", stateShape)) ||
      failed(expect(peep, "P", {dirs, 3 * hidden})))
    return failure();
  if (seqLens && (shapeOf(seqLens) != ArrayRef<int64_t>{batch} ||
                  !typeOf(seqLens).getElementType().isInteger()))
    return nodeError(node) << "sequence_lens must be integers of shape ["
                           << batch << "], not " << typeOf(seqLens);
  if (layout == 1) {
    if (h0)
      h0 = transpose(h0, {1, 0, 2});
    if (c0)
      c0 = transpose(c0, {1, 0, 2});
  }

  // Activations: f, g (and h) per direction; the alphas and betas are
  // consumed in order by the activations that take them.
  SmallVector<RecurrentActivation> acts;
  if (const auto *a = node.attr("activations")) {
    for (const std::string &s : a->strings())
      acts.push_back({StringRef(s).lower()});
    if ((int64_t)acts.size() != actsPerDirection * dirs)
      return nodeError(node)
             << "activations names " << acts.size() << " functions; " << op
             << " with " << dirs << " direction(s) takes "
             << actsPerDirection * dirs;
  } else {
    const char *defaults[] = {"sigmoid", "tanh", "tanh"};
    for (int64_t d = 0; d < dirs; ++d)
      for (unsigned i = 0; i < actsPerDirection; ++i)
        acts.push_back({lstm || gru ? defaults[i] : "tanh"});
  }
  SmallVector<double> alphas, betas;
  if (const auto *a = node.attr("activation_alpha"))
    alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto *a = node.attr("activation_beta"))
    betas.assign(a->floats().begin(), a->floats().end());
  size_t nextAlpha = 0, nextBeta = 0;
  for (RecurrentActivation &act : acts) {
    auto params = recurrentActivationParams(act.name);
    if (!params)
      return nodeError(node)
             << "activation '" << act.name << "' is not supported";
    act.alpha = params->second.first;
    act.beta = params->second.second;
    if (params->first >= 1 && nextAlpha < alphas.size())
      act.alpha = alphas[nextAlpha++];
    if (params->first >= 2 && nextBeta < betas.size())
      act.beta = betas[nextBeta++];
  }
  std::optional<double> clip;
  if (node.attr("clip")) {
    clip = node.getFloat("clip", 0);
    if (!(*clip > 0))
      return nodeError(node) << "clip must be positive, not " << *clip;
  }
  const bool inputForget = lstm && node.getInt("input_forget", 0);
  const bool linearBeforeReset = gru && node.getInt("linear_before_reset", 0);

  ExprBuilder B(builder, loc);
  auto slice = [&](Value v, int64_t axis, int64_t start, int64_t size) {
    Shape shape(shapeOf(v)), starts(shape.size(), 0), limits(shape),
        steps(shape.size(), 1);
    starts[axis] = start;
    limits[axis] = start + size;
    shape[axis] = size;
    return builder.createOrFold<SliceOp>(loc, withShape(v, shape), v, starts,
                                         limits, steps);
  };
  // a [m, k] times b [n, k] transposed.
  auto matmulT = [&](Value a, Value b) {
    Shape shape{shapeOf(a)[0], shapeOf(b)[0]};
    return builder.createOrFold<MatmulOp>(loc, withShape(a, shape), a, b, false,
                                          true);
  };
  auto concat = [&](ArrayRef<Value> parts, int64_t axis) -> Value {
    if (parts.size() == 1)
      return parts.front();
    Shape shape(shapeOf(parts.front()));
    shape[axis] = 0;
    for (Value p : parts)
      shape[axis] += shapeOf(p)[axis];
    return builder.createOrFold<ConcatOp>(loc, withShape(parts.front(), shape),
                                          parts, axis);
  };
  // Clip bounds the gates' inputs, not the output activation of the cell.
  auto gateActivation = [&](const RecurrentActivation &act, Value v) {
    if (clip)
      v = clamp(B, v, -*clip, *clip);
    return applyRecurrentActivation(B, act, v);
  };
  const Shape state{batch, hidden};
  Value zeros = broadcastTo(loc, constantF(loc, et, 0.0), state);
  // Steps at or past a batch entry's length keep its state and output 0.
  Value lengths;
  if (seqLens)
    lengths = broadcastTo(loc, reshape(loc, seqLens, {batch, 1}), state);

  SmallVector<Value> outputs, finalH, finalC;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const RecurrentActivation *act = &acts[d * actsPerDirection];
    Value wd = reshape(loc, slice(w, 0, d, 1), {gates * hidden, inputSize});
    Value rd = reshape(loc, slice(r, 0, d, 1), {gates * hidden, hidden});
    // Every step's input projection in one GEMM, with the biases that add
    // outside the recurrence.
    Value xw = matmulT(reshape(loc, x, {seq * batch, inputSize}), wd);
    Value resetBias; // GRU with linear_before_reset: Rbh, inside r * (...)
    if (bias) {
      Value bd = reshape(loc, slice(bias, 0, d, 1), {2 * gates * hidden});
      Value wb = slice(bd, 0, 0, gates * hidden);
      Value rb = slice(bd, 0, gates * hidden, gates * hidden);
      Value both = B.add(wb, rb);
      if (linearBeforeReset) {
        Value parts[] = {slice(both, 0, 0, 2 * hidden),
                         slice(wb, 0, 2 * hidden, hidden)};
        both = concat(parts, 0);
        resetBias = broadcastTo(
            loc, reshape(loc, slice(rb, 0, 2 * hidden, hidden), {1, hidden}),
            state);
      }
      xw = B.add(xw, broadcastTo(loc, reshape(loc, both, {1, gates * hidden}),
                                 shapeOf(xw)));
    }
    xw = reshape(loc, xw, {seq, batch, gates * hidden});
    auto initial = [&](Value given) {
      return given ? reshape(loc, slice(given, 0, d, 1), state) : zeros;
    };
    Value h = initial(h0), c = lstm ? initial(c0) : Value();
    Value peepI, peepO, peepF;
    if (peep) {
      Value pd = reshape(loc, slice(peep, 0, d, 1), {3 * hidden});
      auto part = [&](int64_t k) {
        return broadcastTo(
            loc, reshape(loc, slice(pd, 0, k * hidden, hidden), {1, hidden}),
            state);
      };
      peepI = part(0), peepO = part(1), peepF = part(2);
    }
    Value rUpdateReset, rCandidate; // GRU without linear_before_reset
    if (gru && !linearBeforeReset) {
      rUpdateReset = slice(rd, 0, 0, 2 * hidden);
      rCandidate = slice(rd, 0, 2 * hidden, hidden);
    }
    SmallVector<Value> ys(seq);
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t t = reverse ? seq - 1 - s : s;
      Value xt = reshape(loc, slice(xw, 0, t, 1), {batch, gates * hidden});
      auto gate = [&](Value v, int64_t k) {
        return slice(v, 1, k * hidden, hidden);
      };
      Value hNew, cNew;
      if (lstm) {
        // Gates in ONNX's order: input, output, forget, cell.
        Value pre = B.add(xt, matmulT(h, rd));
        Value in = gate(pre, 0), out = gate(pre, 1), forget = gate(pre, 2),
              cell = gate(pre, 3);
        if (peep) {
          in = B.add(in, B.mul(peepI, c));
          forget = B.add(forget, B.mul(peepF, c));
        }
        in = gateActivation(act[0], in);
        if (inputForget) {
          Value one = B.splat(in, 1.0);
          forget = B.sub(one, in);
        } else {
          forget = gateActivation(act[0], forget);
        }
        cell = gateActivation(act[1], cell);
        Value kept = B.mul(forget, c);
        cNew = B.add(kept, B.mul(in, cell));
        if (peep)
          out = B.add(out, B.mul(peepO, cNew));
        out = gateActivation(act[0], out);
        hNew = B.mul(out, applyRecurrentActivation(B, act[2], cNew));
      } else if (gru) {
        // Gates in ONNX's order: update, reset, candidate.
        Value hr = matmulT(h, linearBeforeReset ? rd : rUpdateReset);
        Value update = gateActivation(act[0], B.add(gate(xt, 0), gate(hr, 0)));
        Value reset = gateActivation(act[0], B.add(gate(xt, 1), gate(hr, 1)));
        Value recurrent;
        if (linearBeforeReset) {
          recurrent = gate(hr, 2);
          if (resetBias)
            recurrent = B.add(recurrent, resetBias);
          recurrent = B.mul(reset, recurrent);
        } else {
          recurrent = matmulT(B.mul(reset, h), rCandidate);
        }
        Value candidate = gateActivation(act[1], B.add(gate(xt, 2), recurrent));
        Value one = B.splat(update, 1.0);
        Value fresh = B.mul(B.sub(one, update), candidate);
        hNew = B.add(fresh, B.mul(update, h));
      } else {
        hNew = gateActivation(act[0], B.add(xt, matmulT(h, rd)));
      }
      if (lengths) {
        Value step = B.splat(lengths, (double)t);
        Value live = B.cmp(ComparePredicate::lt, step, lengths);
        ys[t] = B.where(live, hNew);
        hNew = B.select(live, hNew, h);
        if (lstm)
          cNew = B.select(live, cNew, c);
      } else {
        ys[t] = hNew;
      }
      h = hNew;
      c = cNew;
    }
    for (Value &y : ys)
      y = reshape(loc, y, {1, 1, batch, hidden});
    outputs.push_back(concat(ys, 0));
    finalH.push_back(reshape(loc, h, {1, batch, hidden}));
    if (lstm)
      finalC.push_back(reshape(loc, c, {1, batch, hidden}));
  }
  Value y = concat(outputs, 1), yh = concat(finalH, 0);
  Value yc = lstm ? concat(finalC, 0) : Value();
  if (layout == 1) {
    y = transpose(y, {2, 0, 1, 3});
    yh = transpose(yh, {1, 0, 2});
    if (yc)
      yc = transpose(yc, {1, 0, 2});
  }
  setOutput(node, 0, y);
  setOutput(node, 1, yh);
  if (yc)
    setOutput(node, 2, yc);
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::importConstant(Node &node) {
  auto emit = [&] { return nodeError(node); };
  DenseElementsAttr value;
  Type f32 = Float32Type::get(context), i64 = IntegerType::get(context, 64);
  if (const auto *a = node.attr("value")) {
    FailureOr<RankedTensorType> type = convertTensorType(a->t(), emit);
    if (failed(type))
      return failure();
    FailureOr<DenseElementsAttr> attr = convertTensor(a->t(), *type, emit);
    if (failed(attr))
      return failure();
    value = *attr;
  } else if (const auto *a = node.attr("value_float")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, f32),
                                   FloatAttr::get(f32, a->f()));
  } else if (const auto *a = node.attr("value_floats")) {
    SmallVector<float> fs(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(fs.size())}, f32),
        ArrayRef<float>(fs));
  } else if (const auto *a = node.attr("value_int")) {
    value = DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                   IntegerAttr::get(i64, a->i()));
  } else if (const auto *a = node.attr("value_ints")) {
    Shape is(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(is.size())}, i64),
        ArrayRef<int64_t>(is));
  } else {
    return nodeError(node) << "only tensor, float(s) and int(s) constants are "
                              "supported (not sparse or string ones)";
  }
  setOutput(node, 0, ConstantOp::create(builder, node.loc, value));
  return success();
}

LogicalResult OnnxImporter::importConstantOfShape(Node &node) {
  FailureOr<Shape> shape = requireConstantInts(node, 0, "the shape");
  if (failed(shape))
    return failure();
  auto emit = [&] { return nodeError(node); };
  Type elementType = Float32Type::get(context);
  Attribute element = FloatAttr::get(elementType, 0.0);
  if (const auto *a = node.attr("value")) {
    FailureOr<RankedTensorType> type = convertTensorType(a->t(), emit);
    if (failed(type))
      return failure();
    FailureOr<DenseElementsAttr> attr = convertTensor(a->t(), *type, emit);
    if (failed(attr) || attr->getNumElements() != 1)
      return failure();
    elementType = type->getElementType();
    element = attr->getValues<Attribute>()[0];
  }
  setOutput(node, 0,
            ConstantOp::create(
                builder, node.loc,
                DenseElementsAttr::get(
                    RankedTensorType::get(*shape, elementType), element)));
  return success();
}

LogicalResult OnnxImporter::importShape(Node &node) {
  ArrayRef<int64_t> shape = shapeOf(node.in(0));
  int64_t rank = shape.size();
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  int64_t start = clampIndex(node.getInt("start", 0));
  int64_t end = clampIndex(node.getInt("end", rank));
  Shape dims(shape.begin() + start, shape.begin() + std::max(start, end));
  auto type = RankedTensorType::get({static_cast<int64_t>(dims.size())},
                                    IntegerType::get(context, 64));
  setOutput(node, 0,
            ConstantOp::create(builder, node.loc,
                               DenseElementsAttr::get(type, ArrayRef(dims))));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::importGather(Node &node) {
  Value data = node.in(0), indices = node.in(1);
  FailureOr<int64_t> axis =
      gpuc::normalizeAxis(node.getInt("axis", 0), shapeOf(data).size(),
                          [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  FailureOr<Shape> shape = inferGatherShape(
      shapeOf(data), shapeOf(indices), *axis, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<GatherOp>(node.loc, withShape(data, *shape),
                                           data, indices, *axis));
  return success();
}

LogicalResult OnnxImporter::importReshape(Node &node) {
  Value x = node.in(0);
  FailureOr<Shape> requested = requireConstantInts(node, 1, "the shape");
  if (failed(requested))
    return failure();
  bool allowZero = node.getInt("allowzero", 0) != 0;
  Shape shape = *requested;
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == 0 && !allowZero) {
      if (i >= shapeOf(x).size())
        return nodeError(node)
               << "shape entry " << i << " is 0 (copy) but the input has rank "
               << shapeOf(x).size();
      d = shapeOf(x)[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return nodeError(node) << "more than one -1 in the shape";
      inferred = i;
      continue;
    }
    if (d < 0)
      return nodeError(node) << "invalid dimension " << d << " in the shape";
    known *= d;
  }
  int64_t total = getNumElements(shapeOf(x));
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return nodeError(node)
             << "cannot reshape " << formatShape(shapeOf(x)) << " into ["
             << llvm::join(llvm::map_range(
                               *requested,
                               [](int64_t d) { return std::to_string(d); }),
                           ", ")
             << "]";
    shape[inferred] = total / known;
  } else if (known != total) {
    return nodeError(node) << "cannot reshape " << formatShape(shapeOf(x))
                           << " (" << total << " elements) into "
                           << formatShape(shape) << " (" << known
                           << " elements)";
  }
  setOutput(node, 0, reshape(node.loc, x, shape));
  return success();
}

LogicalResult OnnxImporter::importFlatten(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  int64_t axis = node.getInt("axis", 1);
  if (axis < -rank || axis > rank)
    return nodeError(node) << "axis " << axis << " is out of range for rank "
                           << rank;
  if (axis < 0)
    axis += rank;
  Shape result = {getNumElements(shape.take_front(axis)),
                  getNumElements(shape.drop_front(axis))};
  setOutput(node, 0, reshape(node.loc, x, result));
  return success();
}

LogicalResult OnnxImporter::importTranspose(Node &node) {
  Value x = node.in(0);
  int64_t rank = shapeOf(x).size();
  Shape perm;
  if (std::optional<Shape> given = node.getInts("perm"))
    perm = *given;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  FailureOr<Shape> shape =
      inferTransposeShape(shapeOf(x), perm, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<TransposeOp>(node.loc, withShape(x, *shape), x,
                                              perm));
  return success();
}

LogicalResult OnnxImporter::importUnsqueeze(Node &node) {
  Value x = node.in(0);
  Shape axes;
  if (node.sinceVersion >= 13) {
    FailureOr<Shape> given = requireConstantInts(node, 1, "the axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    axes = node.getInts("axes").value_or(Shape());
  }
  int64_t outRank = shapeOf(x).size() + axes.size();
  FailureOr<Shape> normalized = normalizeAxes(node, axes, outRank);
  if (failed(normalized))
    return failure();
  Shape shape;
  auto in = shapeOf(x).begin();
  for (int64_t i = 0; i < outRank; ++i)
    shape.push_back(llvm::is_contained(*normalized, i) ? 1 : *in++);
  setOutput(node, 0, reshape(node.loc, x, shape));
  return success();
}

LogicalResult OnnxImporter::importSqueeze(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> inShape = shapeOf(x);
  std::optional<Shape> axes;
  if (node.sinceVersion >= 13) {
    if (node.in(1)) {
      FailureOr<Shape> given = requireConstantInts(node, 1, "the axes");
      if (failed(given))
        return failure();
      axes = *given;
    }
  } else {
    axes = node.getInts("axes");
  }
  Shape squeezed;
  if (axes) {
    FailureOr<Shape> normalized = normalizeAxes(node, *axes, inShape.size());
    if (failed(normalized))
      return failure();
    squeezed = *normalized;
    for (int64_t a : squeezed)
      if (inShape[a] != 1)
        return nodeError(node)
               << "cannot squeeze axis " << a << " of size " << inShape[a];
  } else {
    for (auto [i, d] : llvm::enumerate(inShape))
      if (d == 1)
        squeezed.push_back(i);
  }
  Shape shape;
  for (auto [i, d] : llvm::enumerate(inShape))
    if (!llvm::is_contained(squeezed, static_cast<int64_t>(i)))
      shape.push_back(d);
  setOutput(node, 0, reshape(node.loc, x, shape));
  return success();
}

LogicalResult OnnxImporter::importSlice(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> inShape = shapeOf(x);
  int64_t rank = inShape.size();
  FailureOr<Shape> starts = requireConstantInts(node, 1, "starts");
  FailureOr<Shape> ends = requireConstantInts(node, 2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  Shape axes, steps;
  if (node.in(3)) {
    FailureOr<Shape> given = requireConstantInts(node, 3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  }
  if (node.in(4)) {
    FailureOr<Shape> given = requireConstantInts(node, 4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return nodeError(node) << "starts, ends, axes and steps differ in length";

  Shape sliceStarts(rank, 0), sliceLimits(inShape), sliceSteps(rank, 1);
  // Axes with a negative step are taken with a gather of explicit indices.
  SmallVector<std::pair<int64_t, Shape>> reversed;
  for (size_t k = 0; k < axes.size(); ++k) {
    FailureOr<int64_t> axis =
        gpuc::normalizeAxis(axes[k], rank, [&] { return nodeError(node); });
    if (failed(axis))
      return failure();
    int64_t dim = inShape[*axis], step = steps[k];
    if (step == 0)
      return nodeError(node) << "slice step must not be 0";
    int64_t start = (*starts)[k], end = (*ends)[k];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      sliceStarts[*axis] = start;
      sliceLimits[*axis] = std::max(start, end);
      sliceSteps[*axis] = step;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      Shape indices;
      for (int64_t i = start; i > end; i += step)
        indices.push_back(i);
      reversed.push_back({*axis, indices});
    }
  }
  FailureOr<Shape> shape =
      inferSliceShape(inShape, sliceStarts, sliceLimits, sliceSteps,
                      [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  Value result = builder.createOrFold<SliceOp>(
      node.loc, withShape(x, *shape), x, sliceStarts, sliceLimits, sliceSteps);
  for (auto &[axis, indices] : reversed) {
    auto indexType = RankedTensorType::get(
        {static_cast<int64_t>(indices.size())}, IntegerType::get(context, 64));
    Value idx = ConstantOp::create(
        builder, node.loc,
        DenseElementsAttr::get(indexType, ArrayRef(indices)));
    Shape gathered(shapeOf(result));
    gathered[axis] = indices.size();
    result = builder.createOrFold<GatherOp>(
        node.loc, withShape(result, gathered), result, idx, axis);
  }
  setOutput(node, 0, result);
  return success();
}

LogicalResult OnnxImporter::importConcat(Node &node) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : node.inputs)
    shapes.push_back(shapeOf(v));
  FailureOr<int64_t> axis =
      gpuc::normalizeAxis(node.getInt("axis", 0), shapes.front().size(),
                          [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  FailureOr<Shape> shape =
      inferConcatShape(shapes, *axis, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<ConcatOp>(
                node.loc, withShape(node.in(0), *shape), node.inputs, *axis));
  return success();
}

LogicalResult OnnxImporter::importExpand(Node &node) {
  Value x = node.in(0);
  FailureOr<Shape> requested = requireConstantInts(node, 1, "the shape");
  if (failed(requested))
    return failure();
  FailureOr<Shape> shape = inferBroadcastShape(shapeOf(x), *requested,
                                               [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0, broadcastTo(node.loc, x, *shape));
  return success();
}

/// y = (x - mean) / sqrt(var + epsilon) * scale + B over each sample's and
/// channel's spatial axes (GroupNorm, as PyTorch exports it, is a Reshape to
/// [N, groups, -1], this with unit scale, and a Reshape back).
LogicalResult OnnxImporter::importInstanceNormalization(Node &node) {
  Value x = node.in(0), scale = node.in(1), bias = node.in(2);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 3 || !isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "needs a floating-point N x C x D1 ... input, "
                              "not "
                           << typeOf(x);
  for (auto [what, v] : {std::pair{"scale", scale}, {"B", bias}})
    if (!v || shapeOf(v) != ArrayRef<int64_t>{shape[1]} ||
        typeOf(v).getElementType() != typeOf(x).getElementType())
      return nodeError(node) << what << " must be a vector of the input's "
                             << shape[1] << " channels";
  ExprBuilder B(builder, node.loc);
  Normalized n = normalize(B, x, axisRange(2, shape.size()),
                           node.getFloat("epsilon", 1e-5));
  Value scaled = B.mul(
      n.xhat, broadcastTo(node.loc, B.channelView(scale, shape.size()), shape));
  setOutput(
      node, 0,
      B.add(scaled,
            broadcastTo(node.loc, B.channelView(bias, shape.size()), shape)));
  return success();
}

LogicalResult OnnxImporter::importGlobalMaxPool(Node &node) {
  Value x = node.in(0);
  int64_t rank = shapeOf(x).size();
  if (rank < 3)
    return nodeError(node) << "input must be N x C x spatial...";
  ExprBuilder B(builder, node.loc);
  setOutput(node, 0, B.max(x, axisRange(2, rank), /*keepDims=*/true));
  return success();
}

/// Pad's edge and reflect modes: each padded axis in turn, its new border
/// elements gathered from the tensor by constant indices and concatenated
/// on either side.
static Value padByGather(ExprBuilder &B, Value x, int64_t axis, int64_t low,
                         int64_t high, bool reflect) {
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  int64_t n = shape[axis];
  auto source = [&](int64_t j) -> int64_t {
    if (!reflect)
      return std::clamp<int64_t>(j, 0, n - 1);
    return j < 0 ? -j : (j >= n ? 2 * (n - 1) - j : j);
  };
  auto border = [&](int64_t begin, int64_t count) -> Value {
    SmallVector<int64_t> indices;
    for (int64_t j = begin; j < begin + count; ++j)
      indices.push_back(source(j));
    auto type = RankedTensorType::get({count}, B.b.getI64Type());
    Value idx = ConstantOp::create(
        B.b, B.loc, DenseElementsAttr::get(type, ArrayRef<int64_t>(indices)));
    Shape result(shape);
    result[axis] = count;
    return GatherOp::create(B.b, B.loc, TensorBuilder::withShape(x, result), x,
                            idx, axis);
  };
  SmallVector<Value> parts;
  if (low)
    parts.push_back(border(-low, low));
  parts.push_back(x);
  if (high)
    parts.push_back(border(n, high));
  if (parts.size() == 1)
    return x;
  Shape result(shape);
  result[axis] += low + high;
  return ConcatOp::create(B.b, B.loc, TensorBuilder::withShape(x, result),
                          parts, axis);
}

LogicalResult OnnxImporter::importPad(Node &node) {
  Value x = node.in(0);
  std::string mode = node.getString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return nodeError(node) << "mode '" << mode
                           << "' is not supported (constant, edge, reflect)";
  FailureOr<Shape> pads = requireConstantInts(node, 1, "the pads");
  if (failed(pads))
    return failure();
  int64_t rank = shapeOf(x).size();
  if (static_cast<int64_t>(pads->size()) != 2 * rank)
    return nodeError(node) << "needs " << 2 * rank << " pads, got "
                           << pads->size();
  if (llvm::any_of(*pads, [](int64_t p) { return p < 0; }))
    return nodeError(node) << "negative pads (cropping) are not supported";
  if (mode != "constant") {
    ExprBuilder B(builder, node.loc);
    Value y = x;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = shapeOf(x)[d], low = (*pads)[d], high = (*pads)[rank + d];
      if (!low && !high)
        continue;
      if (n == 0 || (mode == "reflect" && std::max(low, high) > n - 1))
        return nodeError(node)
               << "cannot " << mode << "-pad axis " << d << " of " << n
               << " by " << low << " and " << high;
      y = padByGather(B, y, d, low, high, mode == "reflect");
    }
    setOutput(node, 0, y);
    return success();
  }
  double value = 0.0;
  if (node.in(2)) {
    std::optional<double> given = getConstantFloat(node.in(2));
    if (!given)
      return nodeError(node) << "the constant value must be a compile-time "
                                "constant";
    value = *given;
  }
  Shape low(pads->begin(), pads->begin() + rank);
  Shape high(pads->begin() + rank, pads->end());
  FailureOr<Shape> shape =
      inferPadShape(shapeOf(x), low, high, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0,
            builder.createOrFold<PadOp>(node.loc, withShape(x, *shape), x, low,
                                        high, builder.getF64FloatAttr(value)));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and windows
//===----------------------------------------------------------------------===//

LogicalResult OnnxImporter::importMatMul(Node &node) {
  Value a = node.in(0), b = node.in(1);
  Location loc = node.loc;
  bool vectorA = shapeOf(a).size() == 1, vectorB = shapeOf(b).size() == 1;
  if (vectorA)
    a = reshape(loc, a, {1, shapeOf(a)[0]});
  if (vectorB)
    b = reshape(loc, b, {shapeOf(b)[0], 1});
  ArrayRef<int64_t> sa = shapeOf(a), sb = shapeOf(b);
  if (sa.empty() || sb.empty())
    return nodeError(node) << "MatMul operands must not be scalars";
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k)
    return nodeError(node) << "contracting dimensions differ: "
                           << formatShape(shapeOf(node.in(0))) << " x "
                           << formatShape(shapeOf(node.in(1)));
  Value product;
  Shape resultShape;
  if (sb.size() == 2 && sa.size() > 2) {
    // A weight shared by all batch entries: one 2-D GEMM over the folded
    // batch instead of a broadcast copy of the weight.
    Shape batch(sa.drop_back(2));
    Value flat = reshape(loc, a, {getNumElements(batch) * m, k});
    Value prod2d = builder.createOrFold<MatmulOp>(
        loc, withShape(a, {getNumElements(batch) * m, n}), flat, b, false,
        false);
    resultShape = batch;
    resultShape.append({m, n});
    product = reshape(loc, prod2d, resultShape);
  } else {
    FailureOr<Shape> batch = inferBroadcastShape(
        sa.drop_back(2), sb.drop_back(2), [&] { return nodeError(node); });
    if (failed(batch))
      return failure();
    Shape fullA = *batch, fullB = *batch;
    fullA.append({m, k});
    fullB.append({k, n});
    a = broadcastTo(loc, a, fullA);
    b = broadcastTo(loc, b, fullB);
    resultShape = *batch;
    resultShape.append({m, n});
    product = builder.createOrFold<MatmulOp>(loc, withShape(a, resultShape), a,
                                             b, false, false);
  }
  // Drop the dimensions that numpy semantics added for 1-D operands.
  Shape finalShape(resultShape);
  if (vectorB)
    finalShape.pop_back();
  if (vectorA)
    finalShape.erase(finalShape.end() - (vectorB ? 1 : 2));
  setOutput(node, 0, reshape(loc, product, finalShape));
  return success();
}

/// Einsum as transposes, reductions and batched GEMMs: the operands are
/// contracted left to right, each pair as [batch, M, K] x [batch, K, N] over
/// the labels they share, keeping the labels a later operand or the output
/// needs. A label repeated within one operand (a diagonal) is refused.
LogicalResult OnnxImporter::importEinsum(Node &node) {
  std::string equation;
  for (char c : node.getString("equation", ""))
    if (c != ' ')
      equation.push_back(c);
  if (node.inputs.empty())
    return nodeError(node) << "needs at least one input";
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  SmallVector<std::string> terms;
  for (StringRef t : llvm::split(StringRef(lhs), ','))
    terms.push_back(t.str());
  if (terms.size() != node.inputs.size())
    return nodeError(node) << "equation '" << equation << "' names "
                           << terms.size() << " operands, the node has "
                           << node.inputs.size();
  // Labels as integers: letters by their code, the dimensions an ellipsis
  // stands for as 256 + their position from the right.
  int64_t ellipsisRank = 0;
  SmallVector<SmallVector<int64_t>> labels;
  auto parse = [&](StringRef term, int64_t rank,
                   SmallVector<int64_t> &out) -> LogicalResult {
    size_t dots = term.find("...");
    StringRef before = term.substr(0, dots),
              after = dots == StringRef::npos ? "" : term.substr(dots + 3);
    int64_t letters = before.size() + after.size();
    int64_t covered = dots == StringRef::npos ? 0 : rank - letters;
    if (covered < 0 || (dots == StringRef::npos && letters != rank))
      return nodeError(node)
             << "term '" << term << "' does not match rank " << rank;
    for (StringRef part : {before, after}) {
      for (char c : part)
        if (!llvm::isAlpha(c))
          return nodeError(node) << "'" << c << "' is not a label";
      if (part.data() == after.data())
        for (int64_t i = covered - 1; i >= 0; --i)
          out.push_back(256 + i);
      for (char c : part)
        out.push_back(c);
      if (dots == StringRef::npos)
        break;
    }
    ellipsisRank = std::max(ellipsisRank, covered);
    return success();
  };
  for (auto [term, v] : llvm::zip(terms, node.inputs)) {
    labels.emplace_back();
    if (failed(parse(term, shapeOf(v).size(), labels.back())))
      return failure();
    for (size_t i = 0; i < labels.back().size(); ++i)
      if (llvm::count(labels.back(), labels.back()[i]) > 1)
        return nodeError(node) << "a label repeated within a term (a "
                                  "diagonal) is not supported";
  }
  // Each label's extent (extents of 1 broadcast).
  std::map<int64_t, int64_t> extent;
  for (auto [ls, v] : llvm::zip(labels, node.inputs))
    for (auto [l, d] : llvm::zip(ls, shapeOf(v))) {
      int64_t &e = extent.try_emplace(l, d).first->second;
      if (e != d && e != 1 && d != 1)
        return nodeError(node) << "label '" << (l < 256 ? (char)l : '.')
                               << "' has extents " << e << " and " << d;
      e = std::max(e, d);
    }
  SmallVector<int64_t> output;
  if (arrow != std::string::npos) {
    std::string rhs = equation.substr(arrow + 2);
    size_t dots = rhs.find("...");
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (i == dots) {
        for (int64_t k = ellipsisRank - 1; k >= 0; --k)
          output.push_back(256 + k);
        i += 2;
        continue;
      }
      if (!extent.count(rhs[i]))
        return nodeError(node)
               << "output label '" << rhs[i] << "' is in no input";
      output.push_back(rhs[i]);
    }
  } else {
    // Implicit output: the ellipsis, then the labels used once, in order.
    for (int64_t k = ellipsisRank - 1; k >= 0; --k)
      output.push_back(256 + k);
    std::map<int64_t, int> uses;
    for (auto &ls : labels)
      for (int64_t l : ls)
        ++uses[l];
    for (auto [l, count] : uses)
      if (l < 256 && count == 1)
        output.push_back(l);
  }

  ExprBuilder B(builder, node.loc);
  Location loc = node.loc;
  auto transpose = [&](Value v, SmallVector<int64_t> &ls,
                       ArrayRef<int64_t> order) -> Value {
    Shape perm, shape;
    for (int64_t l : order) {
      int64_t at = llvm::find(ls, l) - ls.begin();
      perm.push_back(at);
      shape.push_back(shapeOf(v)[at]);
    }
    ls.assign(order.begin(), order.end());
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      return v;
    return builder.createOrFold<TransposeOp>(loc, withShape(v, shape), v, perm);
  };
  // Sums the labels of `v` that `keep` does not hold.
  auto sumOut = [&](Value v, SmallVector<int64_t> &ls,
                    function_ref<bool(int64_t)> keep) -> Value {
    Shape axes;
    SmallVector<int64_t> kept;
    for (auto [i, l] : llvm::enumerate(ls))
      (keep(l) ? kept : axes).push_back(keep(l) ? l : (int64_t)i);
    ls = kept;
    return B.sum(v, axes, /*keepDims=*/false);
  };
  auto expandTo = [&](Value v, ArrayRef<int64_t> ls) {
    Shape shape;
    for (int64_t l : ls)
      shape.push_back(extent[l]);
    return broadcastTo(loc, v, shape);
  };
  auto size = [&](ArrayRef<int64_t> ls) {
    int64_t n = 1;
    for (int64_t l : ls)
      n *= extent[l];
    return n;
  };

  Value acc = node.in(0);
  SmallVector<int64_t> accLabels = labels[0];
  auto neededAfter = [&](int64_t l, size_t operand) {
    if (llvm::is_contained(output, l))
      return true;
    for (size_t j = operand + 1; j < labels.size(); ++j)
      if (llvm::is_contained(labels[j], l))
        return true;
    return false;
  };
  acc = sumOut(acc, accLabels, [&](int64_t l) { return neededAfter(l, 0); });
  for (size_t j = 1; j < node.inputs.size(); ++j) {
    Value other = node.in(j);
    SmallVector<int64_t> otherLabels = labels[j];
    other = sumOut(other, otherLabels, [&](int64_t l) {
      return neededAfter(l, j) || llvm::is_contained(accLabels, l);
    });
    SmallVector<int64_t> batch, left, right, contracted;
    for (int64_t l : accLabels)
      (llvm::is_contained(otherLabels, l)
           ? (neededAfter(l, j) ? batch : contracted)
           : left)
          .push_back(l);
    for (int64_t l : otherLabels)
      if (!llvm::is_contained(accLabels, l))
        right.push_back(l);
    SmallVector<int64_t> aOrder(batch), bOrder(batch);
    aOrder.append(left);
    aOrder.append(contracted);
    bOrder.append(contracted);
    bOrder.append(right);
    Value a = expandTo(transpose(acc, accLabels, aOrder), aOrder);
    Value b = expandTo(transpose(other, otherLabels, bOrder), bOrder);
    int64_t nb = size(batch), m = size(left), k = size(contracted),
            n = size(right);
    if (getNumElements({nb, m, n}) > kMaxElements)
      return nodeError(node) << "an intermediate product is too large";
    a = reshape(loc, a, {nb, m, k});
    b = reshape(loc, b, {nb, k, n});
    Value product = builder.createOrFold<MatmulOp>(
        loc, withShape(a, {nb, m, n}), a, b, false, false);
    accLabels = batch;
    accLabels.append(left);
    accLabels.append(right);
    Shape shape;
    for (int64_t l : accLabels)
      shape.push_back(extent[l]);
    acc = reshape(loc, product, shape);
  }
  acc = sumOut(acc, accLabels,
               [&](int64_t l) { return llvm::is_contained(output, l); });
  acc = expandTo(transpose(acc, accLabels, output), output);
  setOutput(node, 0, acc);
  return success();
}

/// Resize as separable gathers: along each resized axis, every output
/// coordinate reads 1 (nearest), 2 (linear) or 4 (cubic) input positions
/// with constant weights, computed here from the coordinate transformation
/// ONNX specifies; positions outside the input read its edge.
LogicalResult OnnxImporter::importResize(Node &node) {
  Value x = node.in(0);
  ArrayRef<int64_t> inShape = shapeOf(x);
  int64_t rank = inShape.size();
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return nodeError(node) << "takes a floating-point input, not " << typeOf(x);
  std::string mode = node.getString("mode", "nearest");
  std::string transform =
      node.getString("coordinate_transformation_mode",
                     opset < 11 ? "asymmetric" : "half_pixel");
  std::string nearestMode =
      node.getString("nearest_mode", "round_prefer_floor");
  double cubicA = node.getFloat("cubic_coeff_a", -0.75);
  bool excludeOutside = node.getInt("exclude_outside", 0);
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return nodeError(node) << "unknown mode '" << mode << "'";
  if (transform == "tf_crop_and_resize")
    return nodeError(node) << "coordinate_transformation_mode "
                              "'tf_crop_and_resize' is not supported";
  if (transform != "half_pixel" && transform != "pytorch_half_pixel" &&
      transform != "align_corners" && transform != "asymmetric" &&
      transform != "tf_half_pixel_for_nn")
    return nodeError(node) << "unknown coordinate_transformation_mode '"
                           << transform << "'";
  // Opset 10: (X, scales); 11 on: (X, roi, scales, sizes).
  Value scalesInput = opset < 11 ? node.in(1) : node.in(2);
  Value sizesInput = opset < 11 ? Value() : node.in(3);
  SmallVector<double> scales(rank, 1.0);
  Shape outShape(inShape);
  if (sizesInput && getNumElements(shapeOf(sizesInput)) > 0) {
    FailureOr<Shape> sizes = requireConstantInts(node, 3, "sizes");
    if (failed(sizes))
      return failure();
    if ((int64_t)sizes->size() != rank)
      return nodeError(node)
             << "sizes has " << sizes->size() << " entries for rank " << rank;
    for (int64_t d = 0; d < rank; ++d) {
      if ((*sizes)[d] < 1 || (*sizes)[d] > kMaxElements)
        return nodeError(node) << "size " << (*sizes)[d] << " of axis " << d
                               << " is out of range";
      outShape[d] = (*sizes)[d];
      scales[d] = (double)outShape[d] / inShape[d];
    }
  } else if (scalesInput) {
    DenseElementsAttr attr;
    if (!matchPattern(scalesInput, m_Constant(&attr)) ||
        !isa<FloatType>(attr.getElementType()))
      return nodeError(node) << "scales must be a compile-time constant "
                                "float tensor; gpuc compiles static shapes";
    SmallVector<double> given;
    for (APFloat f : attr.getValues<APFloat>())
      given.push_back(f.convertToDouble());
    if ((int64_t)given.size() != rank)
      return nodeError(node)
             << "scales has " << given.size() << " entries for rank " << rank;
    for (int64_t d = 0; d < rank; ++d) {
      double out = std::floor(inShape[d] * given[d]);
      if (!(given[d] > 0) || !(out >= 1) || out > (double)kMaxElements)
        return nodeError(node) << "scale " << given[d] << " of axis " << d
                               << " is out of range";
      scales[d] = given[d];
      outShape[d] = (int64_t)out;
    }
  } else {
    return nodeError(node) << "needs scales or sizes";
  }
  if (getNumElements(outShape) > kMaxElements)
    return nodeError(node) << "the result " << formatShape(outShape)
                           << " is too large";

  ExprBuilder B(builder, node.loc);
  Value y = x;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = inShape[d], out = outShape[d];
    double scale = scales[d];
    if (out == in && scale == 1.0)
      continue;
    // ONNX measures the resized length unrounded (in x scale), as its
    // reference implementation does.
    double length = scale * in;
    auto original = [&](int64_t i) -> double {
      if (transform == "align_corners")
        return length == 1 ? 0.0 : i * double(in - 1) / (length - 1);
      if (transform == "asymmetric")
        return i / scale;
      if (transform == "tf_half_pixel_for_nn")
        return (i + 0.5) / scale;
      if (transform == "pytorch_half_pixel" && length == 1)
        return -0.5;
      return (i + 0.5) / scale - 0.5;
    };
    // taps[t][i]: the input position and weight of tap t for output i.
    int64_t taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    SmallVector<SmallVector<int64_t>> index(taps, SmallVector<int64_t>(out));
    SmallVector<SmallVector<double>> weight(taps, SmallVector<double>(out));
    auto clampIndex = [&](int64_t j) {
      return std::clamp<int64_t>(j, 0, in - 1);
    };
    for (int64_t i = 0; i < out; ++i) {
      double xo = original(i);
      if (mode == "nearest") {
        double f = std::floor(xo), frac = xo - f;
        int64_t j;
        if (nearestMode == "floor")
          j = (int64_t)f;
        else if (nearestMode == "ceil")
          j = (int64_t)std::ceil(xo);
        else if (nearestMode == "round_prefer_ceil")
          j = (int64_t)(frac >= 0.5 ? f + 1 : f);
        else if (nearestMode == "round_prefer_floor")
          j = (int64_t)(frac > 0.5 ? f + 1 : f);
        else
          return nodeError(node)
                 << "unknown nearest_mode '" << nearestMode << "'";
        index[0][i] = clampIndex(j);
        weight[0][i] = 1.0;
        continue;
      }
      double f = std::floor(xo), r = xo - f;
      int64_t base = (int64_t)f;
      SmallVector<double> w;
      if (mode == "linear") {
        w = {1 - r, r};
      } else {
        double A = cubicA;
        auto near = [&](double t) {
          return ((A + 2) * t - (A + 3)) * t * t + 1;
        };
        auto far = [&](double t) {
          return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
        };
        w = {far(r + 1), near(r), near(1 - r), far(2 - r)};
        base -= 1;
      }
      double total = 0;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t j = base + t;
        if (excludeOutside && (j < 0 || j >= in))
          w[t] = 0;
        total += w[t];
      }
      for (int64_t t = 0; t < taps; ++t) {
        index[t][i] = clampIndex(base + t);
        weight[t][i] = excludeOutside && total != 0 ? w[t] / total : w[t];
      }
    }
    Shape resized(shapeOf(y));
    resized[d] = out;
    Shape weightShape(rank, 1);
    weightShape[d] = out;
    Value sum;
    for (int64_t t = 0; t < taps; ++t) {
      auto indexType = RankedTensorType::get({out}, builder.getI64Type());
      Value idx = ConstantOp::create(
          builder, node.loc,
          DenseElementsAttr::get(indexType, ArrayRef<int64_t>(index[t])));
      Value tap =
          GatherOp::create(builder, node.loc, withShape(y, resized), y, idx, d);
      if (mode != "nearest") {
        Type et = typeOf(y).getElementType();
        auto weightType = RankedTensorType::get(weightShape, et);
        SmallVector<APFloat> values;
        for (double v : weight[t]) {
          APFloat f(v);
          bool lost;
          f.convert(cast<FloatType>(et).getFloatSemantics(),
                    APFloat::rmNearestTiesToEven, &lost);
          values.push_back(f);
        }
        Value w = ConstantOp::create(
            builder, node.loc, DenseElementsAttr::get(weightType, values));
        tap = B.mul(tap, broadcastTo(node.loc, w, resized));
      }
      sum = sum ? B.add(sum, tap) : tap;
    }
    y = sum;
  }
  setOutput(node, 0, y);
  return success();
}

LogicalResult OnnxImporter::importGemm(Node &node) {
  Value a = node.in(0), b = node.in(1), c = node.in(2);
  bool transA = node.getInt("transA", 0), transB = node.getInt("transB", 0);
  double alpha = node.getFloat("alpha", 1.0), beta = node.getFloat("beta", 1.0);
  FailureOr<Shape> shape = inferMatmulShape(
      shapeOf(a), shapeOf(b), transA, transB, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  Value y = builder.createOrFold<MatmulOp>(node.loc, withShape(a, *shape), a, b,
                                           transA, transB);
  Type et = typeOf(a).getElementType();
  if (alpha != 1.0)
    y = builder.createOrFold<MulOp>(
        node.loc, y.getType(), y,
        broadcastTo(node.loc, constantF(node.loc, et, alpha), *shape));
  if (c && beta != 0.0) {
    if (!isBroadcastableTo(shapeOf(c), *shape))
      return nodeError(node)
             << "C of shape " << formatShape(shapeOf(c))
             << " does not broadcast to the product's " << formatShape(*shape);
    Value bias = broadcastTo(node.loc, c, *shape);
    if (beta != 1.0)
      bias = builder.createOrFold<MulOp>(
          node.loc, bias.getType(), bias,
          broadcastTo(node.loc, constantF(node.loc, et, beta), *shape));
    y = builder.createOrFold<AddOp>(node.loc, y.getType(), y, bias);
  }
  setOutput(node, 0, y);
  return success();
}

FailureOr<Shape> OnnxImporter::windowPads(Node &node,
                                          ArrayRef<int64_t> inputShape,
                                          ArrayRef<int64_t> kernel,
                                          ArrayRef<int64_t> strides,
                                          ArrayRef<int64_t> dilations,
                                          bool ceilMode, bool lifted) {
  std::string autoPad = node.getString("auto_pad", "NOTSET");
  Shape pads = node.getInts("pads").value_or(Shape(4, 0));
  // A 1-D window's [begin, end] for the lifted [1, L] window.
  if (lifted && pads.size() == 2)
    pads = {0, pads[0], 0, pads[1]};
  if (pads.size() != 4)
    return nodeError(node) << "expects 4 pads for a 2-D window, got "
                           << pads.size();
  if (autoPad == "VALID") {
    pads.assign(4, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int i = 0; i < 2; ++i) {
      int64_t in = inputShape[2 + i];
      int64_t out = (in + strides[i] - 1) / strides[i];
      int64_t span = dilations[i] * (kernel[i] - 1) + 1;
      int64_t total = std::max<int64_t>((out - 1) * strides[i] + span - in, 0);
      int64_t small = total / 2, large = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : large;
      pads[2 + i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return nodeError(node) << "unknown auto_pad '" << autoPad << "'";
  }
  if (ceilMode) {
    // Extra padding at the end turns the floor of the output size into the
    // ceiling; it never changes a maximum or an average that excludes padding.
    for (int i = 0; i < 2; ++i) {
      int64_t span = dilations[i] * (kernel[i] - 1) + 1;
      int64_t padded = inputShape[2 + i] + pads[i] + pads[2 + i];
      int64_t rem = (padded - span) % strides[i];
      if (padded >= span && rem != 0) {
        int64_t out = (padded - span + strides[i] - 1) / strides[i] + 1;
        // PyTorch and ONNX drop a last window that starts in the padding.
        if ((out - 1) * strides[i] >= inputShape[2 + i] + pads[i])
          continue;
        pads[2 + i] += strides[i] - rem;
      }
    }
  }
  return pads;
}

FailureOr<OnnxImporter::Window>
OnnxImporter::windowOf(Node &node, Value x, StringRef what, Value filter) {
  Window window;
  int64_t rank = shapeOf(x).size();
  if (rank != 3 && rank != 4)
    return nodeError(node) << "only 1-D and 2-D " << what
                           << " (an input of rank 3 or 4) are supported, not "
                           << typeOf(x);
  window.lifted = rank == 3;
  window.input = x;
  if (window.lifted) {
    ArrayRef<int64_t> s = shapeOf(x);
    window.input = reshape(node.loc, x, {s[0], s[1], 1, s[2]});
  }
  auto attr = [&](StringRef name, Shape dflt) -> FailureOr<Shape> {
    std::optional<Shape> given = node.getInts(name);
    if (!given)
      return dflt;
    if ((int64_t)given->size() != rank - 2)
      return nodeError(node) << name << " has " << given->size()
                             << " entries for " << rank - 2 << " spatial axes";
    if (window.lifted)
      given->insert(given->begin(), 1);
    return *given;
  };
  FailureOr<Shape> kernel = attr("kernel_shape", {});
  FailureOr<Shape> strides = attr("strides", {1, 1});
  FailureOr<Shape> dilations = attr("dilations", {1, 1});
  if (failed(kernel) || failed(strides) || failed(dilations))
    return failure();
  window.kernel = *kernel;
  window.strides = *strides;
  window.dilations = *dilations;
  if (filter) {
    if ((int64_t)shapeOf(filter).size() != rank)
      return nodeError(node) << "the filter " << typeOf(filter)
                             << " does not have the input's rank";
    ArrayRef<int64_t> s = shapeOf(filter);
    window.filter = window.lifted
                        ? reshape(node.loc, filter, {s[0], s[1], 1, s[2]})
                        : filter;
    Shape extent(shapeOf(window.filter).drop_front(2));
    if (!window.kernel.empty() && window.kernel != extent)
      return nodeError(node)
             << "kernel_shape does not match the filter's shape";
    window.kernel = extent;
  }
  return window;
}

FailureOr<Value> OnnxImporter::addChannelBias(Node &node, Value y, Value bias) {
  if (!bias)
    return y;
  ArrayRef<int64_t> shape = shapeOf(y);
  if (shapeOf(bias) != ArrayRef<int64_t>{shape[1]})
    return nodeError(node) << "bias must have shape " << shape[1];
  Value b = reshape(node.loc, bias, {1, shape[1], 1, 1});
  return builder.createOrFold<AddOp>(node.loc, y.getType(), y,
                                     broadcastTo(node.loc, b, shape));
}

LogicalResult OnnxImporter::importConv(Node &node) {
  FailureOr<Window> window =
      windowOf(node, node.in(0), "convolutions", node.in(1));
  if (failed(window))
    return failure();
  Value x = window->input, w = window->filter;
  const Shape &kernel = window->kernel;
  Shape strides = window->strides, dilations = window->dilations;
  int64_t groups = node.getInt("group", 1);
  FailureOr<Shape> pads = windowPads(node, shapeOf(x), kernel, strides,
                                     dilations, false, window->lifted);
  if (failed(pads))
    return failure();
  FailureOr<Shape> shape =
      inferConv2DShape(shapeOf(x), shapeOf(w), strides, *pads, dilations,
                       groups, [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  FailureOr<Value> y = addChannelBias(
      node,
      builder.createOrFold<Conv2DOp>(node.loc, withShape(x, *shape), x, w,
                                     strides, *pads, dilations, groups),
      node.in(2));
  if (failed(y))
    return failure();
  setOutput(node, 0, unlift(*window, node.loc, *y));
  return success();
}

/// ConvTranspose is the gradient of a convolution with respect to its
/// input: conv2d_backward_input of X with W, whose result is the
/// convolution's input shape (its gradient rule makes it trainable).
LogicalResult OnnxImporter::importConvTranspose(Node &node) {
  FailureOr<Window> window =
      windowOf(node, node.in(0), "transposed convolutions", node.in(1));
  if (failed(window))
    return failure();
  Value x = window->input, w = window->filter;
  const Shape &kernel = window->kernel;
  int64_t spatial = shapeOf(node.in(0)).size() - 2;
  int64_t groups = node.getInt("group", 1);
  ArrayRef<int64_t> in = shapeOf(x), ws = shapeOf(w);
  if (groups < 1 || in[1] % groups || ws[0] != in[1])
    return nodeError(node) << "the filter " << typeOf(w) << " does not fit "
                           << in[1] << " input channels in " << groups
                           << " group(s) (ConvTranspose's filter is "
                              "C_in x C_out/group x kH x kW)";
  const Shape &strides = window->strides, &dilations = window->dilations;
  for (int64_t i = 0; i < 2; ++i)
    if (strides[i] < 1 || dilations[i] < 1 || kernel[i] < 1)
      return nodeError(node) << "strides, dilations and the kernel must be "
                                "positive";
  auto lifted = [&](StringRef name, int64_t dflt) -> FailureOr<Shape> {
    Shape v = node.getInts(name).value_or(Shape(spatial, dflt));
    if ((int64_t)v.size() != spatial)
      return nodeError(node) << name << " has " << v.size() << " entries for "
                             << spatial << " spatial axes";
    if (window->lifted)
      v.insert(v.begin(), dflt);
    return v;
  };
  FailureOr<Shape> outputPadding = lifted("output_padding", 0);
  if (failed(outputPadding))
    return failure();
  std::string autoPad = node.getString("auto_pad", "NOTSET");
  Shape pads(4, 0), outSize(2);
  std::optional<Shape> outputShape;
  if (node.getInts("output_shape")) {
    FailureOr<Shape> given = lifted("output_shape", 1);
    if (failed(given))
      return failure();
    outputShape = *given;
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    outputShape = Shape{in[2] * strides[0], in[3] * strides[1]};
  }
  for (int64_t i = 0; i < 2; ++i) {
    int64_t span = dilations[i] * (kernel[i] - 1) + 1;
    int64_t full = strides[i] * (in[2 + i] - 1) + (*outputPadding)[i] + span;
    if ((*outputPadding)[i] < 0 ||
        (*outputPadding)[i] >= std::max(strides[i], dilations[i]))
      return nodeError(node) << "output_padding must be less than the stride "
                                "or the dilation";
    if (outputShape) {
      // A larger output_shape than the full one extends the end as
      // output_padding does (the forward check below bounds it).
      int64_t total = std::max<int64_t>(full - (*outputShape)[i], 0);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[2 + i] = total - pads[i];
      outSize[i] = (*outputShape)[i];
    } else {
      if (autoPad != "NOTSET" && autoPad != "VALID")
        return nodeError(node) << "unknown auto_pad '" << autoPad << "'";
      if (std::optional<Shape> p = node.getInts("pads");
          p && autoPad == "NOTSET") {
        if ((int64_t)p->size() != 2 * spatial)
          return nodeError(node)
                 << "expects " << 2 * spatial << " pads, got " << p->size();
        pads = spatial == 1 ? Shape{0, (*p)[0], 0, (*p)[1]} : *p;
      }
      outSize[i] = full - pads[i] - pads[2 + i];
    }
    if (pads[i] < 0 || pads[2 + i] < 0 || outSize[i] < 1)
      return nodeError(node)
             << "the pads leave no output along spatial axis " << i;
  }
  Shape shape{in[0], ws[1] * groups, outSize[0], outSize[1]};
  if (getNumElements(shape) > kMaxElements)
    return nodeError(node) << "the result " << formatShape(shape)
                           << " is too large";
  // The convolution that this one is the input gradient of must map the
  // result's shape back to X's.
  FailureOr<Shape> forward =
      inferConv2DShape(shape, ws, strides, pads, dilations, groups,
                       [&] { return nodeError(node); });
  if (failed(forward))
    return failure();
  if (*forward != in)
    return nodeError(node) << "output " << formatShape(shape)
                           << " does not convolve back to the input "
                           << formatShape(in);
  FailureOr<Value> y =
      addChannelBias(node,
                     builder.createOrFold<Conv2DBackwardInputOp>(
                         node.loc, withShape(x, shape), x, w, strides, pads,
                         dilations, groups),
                     node.in(2));
  if (failed(y))
    return failure();
  setOutput(node, 0, unlift(*window, node.loc, *y));
  return success();
}

LogicalResult OnnxImporter::importMaxPool(Node &node) {
  FailureOr<Window> window = windowOf(node, node.in(0), "pooling");
  if (failed(window))
    return failure();
  Value x = window->input;
  if (node.proto.output_size() > 1 && !node.proto.output(1).empty() &&
      usedNames.count(node.proto.output(1)))
    return nodeError(node) << "the Indices output is not supported";
  if (node.getInt("storage_order", 0) != 0)
    return nodeError(node) << "storage_order 1 is not supported";
  Shape kernel = window->kernel, strides = window->strides,
        dilations = window->dilations;
  if (kernel.size() != 2)
    return nodeError(node) << "needs kernel_shape";
  if (dilations != Shape{1, 1})
    return nodeError(node) << "dilated pooling is not supported";
  FailureOr<Shape> pads =
      windowPads(node, shapeOf(x), kernel, strides, dilations,
                 node.getInt("ceil_mode", 0), window->lifted);
  if (failed(pads))
    return failure();
  FailureOr<Shape> shape = inferPool2DShape(shapeOf(x), kernel, strides, *pads,
                                            [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(
      node, 0,
      unlift(*window, node.loc,
             builder.createOrFold<MaxPool2DOp>(node.loc, withShape(x, *shape),
                                               x, kernel, strides, *pads)));
  return success();
}

LogicalResult OnnxImporter::importAveragePool(Node &node) {
  FailureOr<Window> window = windowOf(node, node.in(0), "pooling");
  if (failed(window))
    return failure();
  Value x = window->input;
  Shape kernel = window->kernel, strides = window->strides;
  if (kernel.size() != 2)
    return nodeError(node) << "needs kernel_shape";
  bool countPad = node.getInt("count_include_pad", 0);
  bool ceilMode = node.getInt("ceil_mode", 0);
  if (ceilMode && countPad)
    return nodeError(node) << "ceil_mode together with count_include_pad is "
                              "not supported";
  FailureOr<Shape> pads = windowPads(node, shapeOf(x), kernel, strides, {1, 1},
                                     ceilMode, window->lifted);
  if (failed(pads))
    return failure();
  FailureOr<Shape> shape = inferPool2DShape(shapeOf(x), kernel, strides, *pads,
                                            [&] { return nodeError(node); });
  if (failed(shape))
    return failure();
  setOutput(node, 0,
            unlift(*window, node.loc,
                   builder.createOrFold<AvgPool2DOp>(
                       node.loc, withShape(x, *shape), x, kernel, strides,
                       *pads, countPad)));
  return success();
}

LogicalResult OnnxImporter::importGlobalAveragePool(Node &node) {
  Value x = node.in(0);
  int64_t rank = shapeOf(x).size();
  if (rank < 3)
    return nodeError(node) << "input must be N x C x spatial...";
  Shape axes = llvm::to_vector(llvm::seq<int64_t>(2, rank));
  Shape shape = inferReduceShape(shapeOf(x), axes, true);
  setOutput(node, 0,
            builder.createOrFold<ReduceMeanOp>(node.loc, withShape(x, shape), x,
                                               axes, true));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult
OnnxImporter::importReduce(Node &node, Value input, std::optional<Shape> axes,
                           bool keepDims, bool noopWithEmptyAxes,
                           function_ref<Value(Type, Value, Shape, bool)> make) {
  int64_t rank = shapeOf(input).size();
  if (!axes || axes->empty()) {
    if (noopWithEmptyAxes) {
      setOutput(node, 0, input);
      return success();
    }
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  FailureOr<Shape> normalized = normalizeAxes(node, *axes, rank);
  if (failed(normalized))
    return failure();
  Shape shape = inferReduceShape(shapeOf(input), *normalized, keepDims);
  setOutput(node, 0,
            make(withShape(input, shape), input, *normalized, keepDims));
  return success();
}

template <typename OpTy>
LogicalResult OnnxImporter::importReduceAttrAxes(Node &node) {
  return importReduce(
      node, node.in(0), node.getInts("axes"), node.getInt("keepdims", 1), false,
      [&](Type t, Value in, Shape axes, bool keep) {
        return builder.createOrFold<OpTy>(node.loc, t, in, axes, keep);
      });
}

LogicalResult OnnxImporter::importReduceSum(Node &node) {
  if (node.sinceVersion < 13)
    return importReduceAttrAxes<ReduceSumOp>(node);
  std::optional<Shape> axes;
  if (node.in(1)) {
    FailureOr<Shape> given = requireConstantInts(node, 1, "the axes");
    if (failed(given))
      return failure();
    axes = *given;
  }
  return importReduce(node, node.in(0), axes, node.getInt("keepdims", 1),
                      node.getInt("noop_with_empty_axes", 0),
                      [&](Type t, Value in, Shape axes, bool keep) {
                        return builder.createOrFold<ReduceSumOp>(
                            node.loc, t, in, axes, keep);
                      });
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult OnnxImporter::importSoftmaxLike(Node &node) {
  Value x = node.in(0);
  FailureOr<int64_t> axis =
      gpuc::normalizeAxis(node.getInt("axis", -1), shapeOf(x).size(),
                          [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  setOutput(node, 0, OpTy::create(builder, node.loc, x, *axis));
  return success();
}

LogicalResult OnnxImporter::importLayerNormalization(Node &node) {
  Value x = node.in(0), scale = node.in(1), bias = node.in(2);
  FailureOr<int64_t> axis =
      gpuc::normalizeAxis(node.getInt("axis", -1), shapeOf(x).size(),
                          [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  double epsilon = node.getFloat("epsilon", 1e-5);
  auto outputUsed = [&](int i) {
    return node.proto.output_size() > i &&
           usedNames.count(node.proto.output(i));
  };
  if (outputUsed(1) || outputUsed(2)) {
    // The saved statistics, as core ops: mean and 1/sqrt(var + eps) over the
    // normalized axes, kept as size-1 dimensions.
    Location loc = node.loc;
    Shape axes = llvm::to_vector(llvm::seq<int64_t>(*axis, shapeOf(x).size()));
    Shape statShape = inferReduceShape(shapeOf(x), axes, true);
    Value mean = ReduceMeanOp::create(builder, loc, withShape(x, statShape), x,
                                      axes, true);
    Value centered = builder.createOrFold<SubOp>(
        loc, x.getType(), x, broadcastTo(loc, mean, shapeOf(x)));
    Value squared =
        builder.createOrFold<MulOp>(loc, x.getType(), centered, centered);
    Value var = ReduceMeanOp::create(builder, loc, withShape(x, statShape),
                                     squared, axes, true);
    Value eps = broadcastTo(
        loc, constantF(loc, typeOf(x).getElementType(), epsilon), statShape);
    Value invStd = builder.createOrFold<RsqrtOp>(
        loc, var.getType(),
        builder.createOrFold<AddOp>(loc, var.getType(), var, eps));
    setOutput(node, 1, mean);
    setOutput(node, 2, invStd);
  }
  Shape normalized(shapeOf(x).drop_front(*axis));
  if (!isBroadcastableTo(shapeOf(scale), normalized))
    return nodeError(node) << "Scale of shape " << formatShape(shapeOf(scale))
                           << " does not broadcast to the normalized shape "
                           << formatShape(normalized);
  scale = broadcastTo(node.loc, scale, normalized);
  if (!bias)
    bias = splatLike(node.loc, scale, 0.0);
  else if (!isBroadcastableTo(shapeOf(bias), normalized))
    return nodeError(node) << "B does not broadcast to the normalized shape";
  bias = broadcastTo(node.loc, bias, normalized);
  setOutput(node, 0,
            LayerNormOp::create(builder, node.loc, x, scale, bias, *axis,
                                builder.getF64FloatAttr(epsilon)));
  return success();
}

LogicalResult OnnxImporter::importBatchNormalization(Node &node) {
  Value x = node.in(0), scale = node.in(1), bias = node.in(2),
        mean = node.in(3), var = node.in(4);
  double epsilon = node.getFloat("epsilon", 1e-5);
  double momentum = node.getFloat("momentum", 0.9);
  bool training = node.sinceVersion >= 14 && node.getInt("training_mode", 0);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2)
    return nodeError(node) << "input must have a channel axis";
  if (!training) {
    // Inference: y = (x - mean) / sqrt(var + eps) * scale + bias, per channel.
    Shape channelShape(shape.size(), 1);
    channelShape[1] = shape[1];
    auto perChannel = [&](Value v) {
      return broadcastTo(node.loc, reshape(node.loc, v, channelShape), shape);
    };
    Location loc = node.loc;
    Value eps =
        broadcastTo(loc, constantF(loc, typeOf(var).getElementType(), epsilon),
                    shapeOf(var));
    Value invStd = builder.createOrFold<RsqrtOp>(
        loc, var.getType(),
        builder.createOrFold<AddOp>(loc, var.getType(), var, eps));
    Value centered =
        builder.createOrFold<SubOp>(loc, x.getType(), x, perChannel(mean));
    Value y = builder.createOrFold<MulOp>(loc, x.getType(), centered,
                                          perChannel(invStd));
    y = builder.createOrFold<MulOp>(loc, x.getType(), y, perChannel(scale));
    y = builder.createOrFold<AddOp>(loc, x.getType(), y, perChannel(bias));
    setOutput(node, 0, y);
    return success();
  }
  // PyTorch keeps the unbiased variance in its running statistics while ONNX
  // specifies the population one; a model exported by PyTorch trains as it
  // did there.
  bool unbiased = model.producer_name() == "pytorch";
  auto op =
      BatchNormTrainOp::create(builder, node.loc, x, scale, bias, mean, var,
                               builder.getF64FloatAttr(epsilon),
                               builder.getF64FloatAttr(momentum), unbiased);
  setOutput(node, 0, op.getResult());
  setOutput(node, 1, op.getNewRunningMean());
  setOutput(node, 2, op.getNewRunningVar());
  // Running statistics held in the model's initializers are state of the
  // step: written back every step, never trained.
  for (auto [stat, updated] : {std::pair{mean, op.getNewRunningMean()},
                               {var, op.getNewRunningVar()}}) {
    ParameterOp param = paramOfArg.lookup(stat);
    if (!param)
      continue;
    param.setTrainable(false);
    updates.push_back({param, updated});
  }
  return success();
}

LogicalResult OnnxImporter::importDropout(Node &node) {
  Value x = node.in(0);
  double ratio = 0.5;
  if (node.in(1)) {
    std::optional<double> given = getConstantFloat(node.in(1));
    if (!given)
      return nodeError(node) << "the ratio must be a compile-time constant";
    ratio = *given;
  }
  bool training = false;
  if (node.in(2)) {
    std::optional<double> given = getConstantFloat(node.in(2));
    if (!given)
      return nodeError(node) << "training_mode must be a compile-time constant";
    training = *given != 0.0;
  }
  if (!(ratio >= 0.0 && ratio < 1.0))
    return nodeError(node) << "ratio " << ratio << " must be in [0, 1)";
  bool maskUsed =
      node.proto.output_size() > 1 && usedNames.count(node.proto.output(1));
  if (!training || ratio == 0.0) {
    setOutput(node, 0, x);
    if (maskUsed)
      setOutput(
          node, 1,
          ConstantOp::create(builder, node.loc,
                             DenseElementsAttr::get(
                                 RankedTensorType::get(
                                     shapeOf(x), IntegerType::get(context, 1)),
                                 true)));
    return success();
  }
  if (maskUsed)
    return nodeError(node) << "the mask output of training-mode Dropout is not "
                              "supported (gpuc recomputes masks instead)";
  if (!rngKey)
    rngKey = builder.getInsertionBlock()->addArgument(
        RankedTensorType::get({2}, builder.getI64Type()), node.loc);
  setOutput(node, 0,
            DropoutOp::create(builder, node.loc, x.getType(), x, rngKey,
                              builder.getF64FloatAttr(ratio),
                              dropoutStreams++));
  return success();
}

template <typename OpTy>
LogicalResult OnnxImporter::importClassLoss(Node &node) {
  Value input = node.in(0), labels = node.in(1);
  if (node.in(2))
    return nodeError(node) << "class weights are not supported";
  std::string reductionName = node.getString("reduction", "mean");
  std::optional<Reduction> reduction = symbolizeReduction(reductionName);
  if (!reduction)
    return nodeError(node) << "unknown reduction '" << reductionName << "'";
  IntegerAttr ignoreIndex;
  if (node.attr("ignore_index"))
    ignoreIndex = builder.getI64IntegerAttr(node.getInt("ignore_index", 0));
  ArrayRef<int64_t> shape = shapeOf(input);
  if (shape.size() < 2)
    return nodeError(node) << "input must be N x C (x d1...), got "
                           << formatShape(shape);
  Shape resultShape;
  if (*reduction == Reduction::none) {
    resultShape.push_back(shape[0]);
    resultShape.append(shape.begin() + 2, shape.end());
  }
  Value loss = OpTy::create(builder, node.loc, withShape(input, resultShape),
                            input, labels, *reduction, ignoreIndex);
  setOutput(node, 0, loss);
  if (node.proto.output_size() > 1 && usedNames.count(node.proto.output(1))) {
    if constexpr (std::is_same_v<OpTy, CrossEntropyOp>)
      setOutput(node, 1, LogSoftmaxOp::create(builder, node.loc, input, 1));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

const llvm::StringMap<OpRule> &OnnxImporter::rules() {
  using I = OnnxImporter;
  static const llvm::StringMap<OpRule> table = {
      {"Abs", {&I::importUnary<AbsOp>, {6, 13}}},
      {"Add", {&I::importBinary<AddOp>, {7, 13, 14}}},
      {"AveragePool", {&I::importAveragePool, {7, 10, 11}}},
      {"BatchNormalization", {&I::importBatchNormalization, {9, 14, 15}}},
      {"Celu", {&I::importActivation, {12}}},
      {"Cast", {&I::importCast, {6, 9, 13}}},
      {"Clip", {&I::importClip, {6, 11, 12, 13}}},
      {"Concat", {&I::importConcat, {4, 11, 13}}},
      {"Constant", {&I::importConstant, {1, 9, 11, 12, 13}}},
      {"ConstantOfShape", {&I::importConstantOfShape, {9}}},
      {"Conv", {&I::importConv, {1, 11}}},
      {"ConvTranspose", {&I::importConvTranspose, {1, 11}}},
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
      {"Mul", {&I::importBinary<MulOp>, {7, 13, 14}}},
      {"Neg", {&I::importUnary<NegOp>, {6, 13}}},
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
      {"Selu", {&I::importActivation, {6}}},
      {"Shape", {&I::importShape, {1, 13, 15}}},
      {"Sigmoid", {&I::importUnary<SigmoidOp>, {6, 13}}},
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

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

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

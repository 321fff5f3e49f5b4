//===- Importer.h - the ONNX importer's core, shared by op families -------===//
//
// The importer is a graph walk over an ONNX model (OnnxImporter.cpp) and one
// handler per op, keyed by op type and by the schema versions ("since
// version") whose semantics it implements (the op table, rules()). The
// handlers live in one file per op family: Elementwise.cpp (arithmetic and
// activations), Shapes.cpp (constants, shape ops and data movement),
// Contractions.cpp (GEMMs, einsum, convolutions, pooling), Reductions.cpp,
// Composites.cpp (softmax, norms, dropout, losses) and Recurrent.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_FRONTEND_ONNX_IMPORTER_H
#define GPUC_FRONTEND_ONNX_IMPORTER_H

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

#include "OnnxModelLoader.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace mlir::gpuc::onnx_import {

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
  LogicalResult importCastLike(Node &node);
  LogicalResult importIsNaN(Node &node);
  // Folded at import (FoldedAtImport.cpp).
  FailureOr<DenseElementsAttr> requireConstant(Node &node, Value v);
  /// Both operands, broadcast to one shape, as constants.
  LogicalResult requireConstantOperands(Node &node, DenseElementsAttr &a,
                                        DenseElementsAttr &b);
  LogicalResult importNot(Node &node);
  LogicalResult importAnd(Node &node);
  LogicalResult importCumSum(Node &node);
  LogicalResult scanCumSum(Node &node, int64_t axis, bool exclusive,
                           bool reverse);
  LogicalResult importGatherND(Node &node);
  LogicalResult gatherRowsAtConstantTuples(Node &node,
                                           DenseElementsAttr indices);
  /// GatherND's tuple length (the indices' last dimension), checked.
  FailureOr<int64_t> gatherNDDepth(Node &node, DenseElementsAttr indices,
                                   ArrayRef<int64_t> dataShape);
  /// Each of `indices`' tuples of `depth` as an offset into the elements of
  /// `dataShape`, each index checked (a negative one counts from the end).
  FailureOr<SmallVector<int64_t>> indexTupleOffsets(Node &node,
                                                    DenseElementsAttr indices,
                                                    ArrayRef<int64_t> dataShape,
                                                    int64_t depth);
  LogicalResult importScatterND(Node &node);
  LogicalResult importMod(Node &node);
  LogicalResult importConstant(Node &node);
  LogicalResult importConstantOfShape(Node &node);
  LogicalResult importShape(Node &node);
  LogicalResult importGather(Node &node);
  LogicalResult importGatherElements(Node &node);
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

//===----------------------------------------------------------------------===//
// Helpers shared by more than one op family
//===----------------------------------------------------------------------===//

/// `x` clamped to [lo, hi].
Value clamp(ExprBuilder &B, Value x, double lo, double hi);
/// log(1 + exp(x)), computed without overflow.
Value softplus(ExprBuilder &B, Value x);
/// alpha * (exp(x) - 1).
Value expm1Scaled(ExprBuilder &B, Value x, double alpha);

//===----------------------------------------------------------------------===//
// Member templates the op table instantiates
//===----------------------------------------------------------------------===//

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

template <typename OpTy>
LogicalResult OnnxImporter::importReduceAttrAxes(Node &node) {
  return importReduce(
      node, node.in(0), node.getInts("axes"), node.getInt("keepdims", 1), false,
      [&](Type t, Value in, Shape axes, bool keep) {
        return builder.createOrFold<OpTy>(node.loc, t, in, axes, keep);
      });
}

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

} // namespace mlir::gpuc::onnx_import

#endif // GPUC_FRONTEND_ONNX_IMPORTER_H

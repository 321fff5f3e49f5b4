//===- GpucOps.cpp - verifiers and type inference of gpuc ops -------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/GemmGeometry.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Dialect/Gpuc/StoredElements.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;

#include "gpuc/Dialect/Gpuc/GpucEnums.cpp.inc"
#include "gpuc/Dialect/Gpuc/GpucInterfaces.cpp.inc"

/// Checks the result shape of `op` against what the operands imply.
static LogicalResult verifyResultShape(Operation *op, FailureOr<Shape> expected,
                                       Value result) {
  if (failed(expected))
    return failure();
  if (shapeOf(result) != ArrayRef<int64_t>(*expected))
    return op->emitOpError()
           << "result shape " << formatShape(shapeOf(result))
           << " does not match the expected " << formatShape(*expected);
  return success();
}

//===----------------------------------------------------------------------===//
// ParameterOp
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getInitialValue().getType() != getType())
    return emitOpError() << "initial value has type "
                         << getInitialValue().getType()
                         << " but the parameter is " << getType();
  if (getTrainable() && !isa<FloatType>(getTensorType().getElementType()))
    return emitOpError() << "only floating-point parameters can be trainable";
  // An elided value (a dump's weights) is a shape without values, which
  // passes may still transform; a blob of the wrong size is never right.
  if (!isElided(getInitialValue()))
    if (std::optional<std::string> why = missingElements(getInitialValue()))
      return emitOpError() << "initial value " << *why;
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  if (!isElided(getValue()))
    if (std::optional<std::string> why = missingElements(getValue()))
      return emitOpError() << "value " << *why;
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult
CompareOp::inferReturnTypes(MLIRContext *context, std::optional<Location>,
                            ValueRange operands, DictionaryAttr,
                            OpaqueProperties, RegionRange,
                            SmallVectorImpl<Type> &inferredReturnTypes) {
  auto lhs = cast<RankedTensorType>(operands[0].getType());
  inferredReturnTypes.push_back(
      RankedTensorType::get(lhs.getShape(), IntegerType::get(context, 1)));
  return success();
}

LogicalResult SelectOp::verify() {
  if (shapeOf(getCond()) != shapeOf(getResult()))
    return emitOpError() << "condition shape "
                         << formatShape(shapeOf(getCond()))
                         << " differs from the value shape "
                         << formatShape(shapeOf(getResult()));
  return success();
}

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError() << "changes the shape from "
                         << formatShape(shapeOf(getInput())) << " to "
                         << formatShape(shapeOf(getResult()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename ReduceOp> static LogicalResult verifyReduce(ReduceOp op) {
  auto emitError = [&] { return op.emitOpError(); };
  ArrayRef<int64_t> input = shapeOf(op.getInput());
  if (failed(verifyAxes(op.getAxes(), input.size(), emitError)))
    return failure();
  return verifyResultShape(
      op, inferReduceShape(input, op.getAxes(), op.getKeepDims()),
      op.getResult());
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (getNumElements(shapeOf(getInput())) !=
      getNumElements(shapeOf(getResult())))
    return emitOpError() << "cannot reshape "
                         << formatShape(shapeOf(getInput())) << " ("
                         << getNumElements(shapeOf(getInput()))
                         << " elements) into "
                         << formatShape(shapeOf(getResult())) << " ("
                         << getNumElements(shapeOf(getResult()))
                         << " elements)";
  return success();
}

LogicalResult TransposeOp::verify() {
  return verifyResultShape(*this,
                           inferTransposeShape(shapeOf(getInput()), getPerm(),
                                               [&] { return emitOpError(); }),
                           getResult());
}

LogicalResult BroadcastOp::verify() {
  if (!isBroadcastableTo(shapeOf(getInput()), shapeOf(getResult())))
    return emitOpError() << "cannot broadcast "
                         << formatShape(shapeOf(getInput())) << " to "
                         << formatShape(shapeOf(getResult()));
  return success();
}

LogicalResult SliceOp::verify() {
  return verifyResultShape(*this,
                           inferSliceShape(shapeOf(getInput()), getStarts(),
                                           getLimits(), getStrides(),
                                           [&] { return emitOpError(); }),
                           getResult());
}

LogicalResult PadOp::verify() {
  return verifyResultShape(*this,
                           inferPadShape(shapeOf(getInput()), getLow(),
                                         getHigh(),
                                         [&] { return emitOpError(); }),
                           getResult());
}

LogicalResult ConcatOp::verify() {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value in : getInputs())
    shapes.push_back(shapeOf(in));
  return verifyResultShape(
      *this, inferConcatShape(shapes, getAxis(), [&] { return emitOpError(); }),
      getResult());
}

LogicalResult GatherOp::verify() {
  if (getElementTypeOrSelf(getData().getType()) !=
      getElementTypeOrSelf(getResult().getType()))
    return emitOpError() << "result element type differs from the data's";
  return verifyResultShape(*this,
                           inferGatherShape(shapeOf(getData()),
                                            shapeOf(getIndices()), getAxis(),
                                            [&] { return emitOpError(); }),
                           getResult());
}

//===----------------------------------------------------------------------===//
// Contractions and windows
//===----------------------------------------------------------------------===//

SmallVector<int64_t> MatmulOp::readShape(unsigned i) {
  return i == 0 ? windowedShape(shapeOf(getLhs()), getLhsWindowAttr())
                : windowedShape(shapeOf(getRhs()), getRhsWindowAttr());
}

LogicalResult MatmulOp::verify() {
  for (unsigned i : {0u, 1u}) {
    ColumnsAttr window = i == 0 ? getLhsWindowAttr() : getRhsWindowAttr();
    if (!window)
      continue;
    Value operand = i == 0 ? getLhs() : getRhs();
    ArrayRef<int64_t> stored = shapeOf(operand);
    if (stored.empty() ||
        window.getOffset() + window.getWidth() > stored.back())
      return emitOpError() << (i == 0 ? "lhs" : "rhs") << " window " << window
                           << " reads past the rows of " << operand.getType();
  }
  FailureOr<GemmGeometry> geometry = inferGemmGeometry(
      readShape(0), readShape(1), getTransposeLhs(), getTransposeRhs(),
      getLhsPerm(), getRhsPerm(), getResultPerm(),
      [&] { return emitOpError(); },
      gemmWindow(shapeOf(getLhs()), getLhsWindowAttr()),
      gemmWindow(shapeOf(getRhs()), getRhsWindowAttr()));
  if (failed(geometry))
    return failure();
  Type element = getElementTypeOrSelf(getLhs().getType());
  if (getElementTypeOrSelf(getRhs().getType()) != element)
    return emitOpError() << "operands have element types " << element << " and "
                         << getElementTypeOrSelf(getRhs().getType());
  Type resultElement = getElementTypeOrSelf(getResult().getType());
  if (resultElement != element &&
      !(resultElement.isF32() && (element.isF16() || element.isBF16())))
    return emitOpError() << "result element type " << resultElement
                         << " is neither the operands' (" << element
                         << ") nor f32 for f16/bf16 operands";
  if (Value acc = getAcc()) {
    if (acc.getType() != getResult().getType())
      return emitOpError() << "accumulates into " << acc.getType()
                           << " but its result is " << getResult().getType();
    if (!getResultPerm().empty())
      return emitOpError() << "accumulates into a result with a layout";
  }
  if (Value bias = getBias()) {
    auto resultType = cast<RankedTensorType>(getResult().getType());
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 ||
        biasType.getDimSize(0) != resultType.getShape().back() ||
        biasType.getElementType() != resultElement)
      return emitOpError() << "bias " << biasType
                           << " is not a vector over the result's last "
                              "dimension of its element type ("
                           << resultType << ")";
    if (getAcc() || !getResultPerm().empty())
      return emitOpError()
             << "adds a bias to a result that accumulates or has a layout";
  }
  if (failed(verifyTriangle(geometry->m)))
    return failure();
  return verifyResultShape(*this, geometry->result, getResult());
}

/// A triangle is a causal one (strict, so every row keeps its diagonal) of
/// a square matrix stored as the product reads or writes it, cut into
/// bands of at least one row.
LogicalResult MatmulOp::verifyTriangle(int64_t rows) {
  std::optional<ComparePredicate> lhs = getLhsTriangle(),
                                  result = getResultTriangle();
  if (!lhs && !result) {
    if (getBands())
      return emitOpError() << "is cut into bands but has no triangle";
    return success();
  }
  if (lhs && result)
    return emitOpError() << "has a triangle on both its lhs and its result";
  ComparePredicate predicate = lhs ? *lhs : *result;
  if (predicate != ComparePredicate::gt && predicate != ComparePredicate::lt)
    return emitOpError() << "has a triangle '"
                         << stringifyComparePredicate(predicate)
                         << "'; a triangle is gt or lt";
  StringRef which = lhs ? "lhs" : "result";
  if (lhs ? !getLhsPerm().empty() || getLhsWindow() : !getResultPerm().empty())
    return emitOpError() << "has a triangle on its " << which
                         << ", which has a layout";
  if (getAcc() || getBias())
    return emitOpError() << "has a triangle and accumulates or adds a bias";
  ArrayRef<int64_t> shape = shapeOf(lhs ? getLhs() : getResult());
  if (shape[shape.size() - 2] != shape.back())
    return emitOpError() << "has a triangle on its " << which
                         << ", whose matrix is not square";
  std::optional<int64_t> bands = getBands();
  if (!bands || *bands < 2 || *bands > rows)
    return emitOpError() << "has a triangle but not 2 to " << rows
                         << " bands of its product's rows";
  return success();
}

LogicalResult Conv2DOp::verify() {
  return verifyResultShape(
      *this,
      inferConv2DShape(shapeOf(getInput()), shapeOf(getFilter()), getStrides(),
                       getPads(), getDilations(), getGroups(),
                       getChannelsLast(), [&] { return emitOpError(); }),
      getResult());
}

template <typename PoolOp> static LogicalResult verifyPool(PoolOp op) {
  return verifyResultShape(op,
                           inferPool2DShape(shapeOf(op.getInput()),
                                            op.getKernel(), op.getStrides(),
                                            op.getPads(), op.getChannelsLast(),
                                            [&] { return op.emitOpError(); }),
                           op.getResult());
}

LogicalResult MaxPool2DOp::verify() { return verifyPool(*this); }
LogicalResult AvgPool2DOp::verify() { return verifyPool(*this); }

//===----------------------------------------------------------------------===//
// Gradient helpers
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  int64_t rank = shapeOf(getResult()).size();
  if (getDim() < 0 || getDim() >= rank)
    return emitOpError() << "dim " << getDim() << " is out of range for rank "
                         << rank;
  return success();
}

LogicalResult ScatterAddOp::verify() {
  if (getElementTypeOrSelf(getUpdates().getType()) !=
      getElementTypeOrSelf(getResult().getType()))
    return emitOpError() << "result element type differs from the updates'";
  // The updates are what gather would take out of a result-shaped tensor.
  FailureOr<Shape> expected =
      inferGatherShape(shapeOf(getResult()), shapeOf(getIndices()), getAxis(),
                       [&] { return emitOpError(); });
  if (failed(expected))
    return failure();
  if (shapeOf(getUpdates()) != ArrayRef<int64_t>(*expected))
    return emitOpError() << "updates shape "
                         << formatShape(shapeOf(getUpdates()))
                         << " does not match the expected "
                         << formatShape(*expected)
                         << " (what gather would take from the result)";
  return success();
}

void RowGroupsOp::group(ArrayRef<int64_t> rowOf, int64_t rows,
                        SmallVectorImpl<int64_t> &offsets,
                        SmallVectorImpl<int64_t> &order) {
  // A counting sort, as the kernel does it: counts, their prefix sums, then
  // each position placed after the earlier ones of its row.
  offsets.assign(rows + 1, 0);
  order.assign(rowOf.size(), 0);
  for (int64_t k : rowOf)
    ++offsets[k + 1];
  for (int64_t k = 0; k < rows; ++k)
    offsets[k + 1] += offsets[k];
  SmallVector<int64_t> next(offsets.begin(), offsets.end() - 1);
  for (auto [position, k] : llvm::enumerate(rowOf))
    order[next[k]++] = position;
}

LogicalResult RowGroupsOp::verify() {
  int64_t n = getNumElements(shapeOf(getIndices())), rows = getRows();
  // Offsets and positions are i32: what a step's tokens and a vocabulary
  // need, at half the bytes of i64.
  if (rows < 1 || rows >= INT32_MAX)
    return emitOpError() << "rows " << rows << " is outside [1, " << INT32_MAX
                         << ")";
  if (n >= INT32_MAX)
    return emitOpError() << n << " indices do not fit i32 positions";
  if (shapeOf(getOffsets()) != ArrayRef<int64_t>{rows + 1})
    return emitOpError() << "offsets shape "
                         << formatShape(shapeOf(getOffsets()))
                         << " is not [rows + 1] = [" << rows + 1 << "]";
  if (shapeOf(getOrder()) != ArrayRef<int64_t>{n})
    return emitOpError() << "order shape " << formatShape(shapeOf(getOrder()))
                         << " is not [" << n << "], one per index";
  return success();
}

LogicalResult AllReduceOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  for (Value operand : operands)
    inferredReturnTypes.push_back(operand.getType());
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "reduces nothing: it needs at least one tensor";
  if (getBucket() < 0)
    return emitOpError() << "bucket " << getBucket() << " is negative";
  if (getInputs().getTypes() != getResults().getTypes())
    return emitOpError() << "results must have the operands' types";
  return success();
}

int64_t mlir::gpuc::shardElements(int64_t elements, int64_t ranks) {
  return (elements + ranks - 1) / ranks;
}

std::optional<int64_t> mlir::gpuc::collectiveBucket(Operation *op) {
  if (auto o = dyn_cast<AllReduceOp>(op))
    return o.getBucket();
  if (auto o = dyn_cast<ReduceScatterOp>(op))
    return o.getBucket();
  if (auto o = dyn_cast<AllGatherOp>(op))
    return o.getBucket();
  return std::nullopt;
}

/// The checks shared by the ops that cut tensors into `ranks` shards:
/// `whole[k]` and `shards[k]` have one element type, and `shards[k]` is
/// 1-D with shardElements(n, ranks) elements.
static LogicalResult verifyShards(Operation *op, int64_t ranks, TypeRange whole,
                                  TypeRange shards) {
  if (ranks < 1)
    return op->emitOpError() << "ranks " << ranks << " must be at least 1";
  if (whole.empty())
    return op->emitOpError() << "has no tensor: it needs at least one";
  if (whole.size() != shards.size())
    return op->emitOpError() << "has " << whole.size() << " whole tensors but "
                             << shards.size() << " shards";
  for (auto [k, types] : llvm::enumerate(llvm::zip(whole, shards))) {
    auto [w, s] = types;
    auto wt = cast<RankedTensorType>(w), st = cast<RankedTensorType>(s);
    int64_t expected = shardElements(wt.getNumElements(), ranks);
    if (wt.getElementType() != st.getElementType() || st.getRank() != 1 ||
        st.getDimSize(0) != expected)
      return op->emitOpError()
             << "shard #" << k << " is " << st << ", but a shard of " << wt
             << " over " << ranks << " ranks is "
             << RankedTensorType::get({expected}, wt.getElementType());
  }
  return success();
}

static LogicalResult verifyBucket(Operation *op, int64_t bucket) {
  if (bucket < 0)
    return op->emitOpError() << "bucket " << bucket << " is negative";
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyBucket(*this, getBucket())))
    return failure();
  return verifyShards(*this, getRanks(), getInputs().getTypes(),
                      getResults().getTypes());
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyBucket(*this, getBucket())))
    return failure();
  return verifyShards(*this, getRanks(), getResults().getTypes(),
                      getInputs().getTypes());
}

LogicalResult RankShardOp::verify() {
  return verifyShards(*this, getRanks(), getInput().getType(),
                      getResult().getType());
}

LogicalResult SegmentSumOp::verify() {
  if (getElementTypeOrSelf(getUpdates().getType()) !=
      getElementTypeOrSelf(getResult().getType()))
    return emitOpError() << "result element type differs from the updates'";
  ArrayRef<int64_t> updates = shapeOf(getUpdates()),
                    result = shapeOf(getResult());
  int64_t axis = getAxis(), rank = result.size();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << rank;
  if (shapeOf(getOffsets()).size() != 1 || shapeOf(getOrder()).size() != 1)
    return emitOpError() << "offsets and order must be 1-D";
  int64_t rows = result[axis], n = shapeOf(getOrder())[0];
  if (shapeOf(getOffsets())[0] != rows + 1)
    return emitOpError() << "offsets shape "
                         << formatShape(shapeOf(getOffsets()))
                         << " is not [rows + 1] = [" << rows + 1 << "]";
  Shape expected(result);
  expected[axis] = n;
  if (updates != ArrayRef<int64_t>(expected))
    return emitOpError() << "updates shape " << formatShape(updates)
                         << " does not match the expected "
                         << formatShape(expected)
                         << " (the result's, with one entry per position "
                            "along the axis)";
  return success();
}

LogicalResult Conv2DBackwardInputOp::verify() {
  return verifyResultShape(
      *this,
      inferConv2DShape(shapeOf(getResult()), shapeOf(getFilter()), getStrides(),
                       getPads(), getDilations(), getGroups(),
                       getChannelsLast(), [&] { return emitOpError(); }),
      getGradOutput());
}

LogicalResult Conv2DBackwardFilterOp::verify() {
  return verifyResultShape(
      *this,
      inferConv2DShape(shapeOf(getInput()), shapeOf(getResult()), getStrides(),
                       getPads(), getDilations(), getGroups(),
                       getChannelsLast(), [&] { return emitOpError(); }),
      getGradOutput());
}

/// A window position `ky * kernel[1] + kx` must fit the index type.
static LogicalResult verifyWindowIndexType(Operation *op, Value indices,
                                           ArrayRef<int64_t> kernel) {
  Type type = getElementTypeOrSelf(indices.getType());
  if (kernel.size() == 2 && type.isInteger(8) && kernel[0] * kernel[1] > 127)
    return op->emitOpError() << "window positions of a " << kernel[0] << "x"
                             << kernel[1] << " kernel do not fit i8; use i32";
  return success();
}

LogicalResult MaxPool2DArgmaxOp::verify() {
  if (failed(verifyResultShape(*this,
                               inferPool2DShape(shapeOf(getInput()),
                                                getKernel(), getStrides(),
                                                getPads(), getChannelsLast(),
                                                [&] { return emitOpError(); }),
                               getResult())))
    return failure();
  return verifyWindowIndexType(*this, getResult(), getKernel());
}

LogicalResult MaxPool2DBackwardOp::verify() {
  if (getElementTypeOrSelf(getResult().getType()) !=
      getElementTypeOrSelf(getGradOutput().getType()))
    return emitOpError("result and grad_output element types differ");
  if (shapeOf(getIndices()) != shapeOf(getGradOutput()))
    return emitOpError() << "indices shape "
                         << formatShape(shapeOf(getIndices()))
                         << " differs from grad_output shape "
                         << formatShape(shapeOf(getGradOutput()));
  if (failed(verifyResultShape(*this,
                               inferPool2DShape(shapeOf(getResult()),
                                                getKernel(), getStrides(),
                                                getPads(), getChannelsLast(),
                                                [&] { return emitOpError(); }),
                               getGradOutput())))
    return failure();
  return verifyWindowIndexType(*this, getIndices(), getKernel());
}

LogicalResult AvgPool2DBackwardOp::verify() {
  return verifyResultShape(*this,
                           inferPool2DShape(shapeOf(getResult()), getKernel(),
                                            getStrides(), getPads(),
                                            getChannelsLast(),
                                            [&] { return emitOpError(); }),
                           getGradOutput());
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

template <typename AxisOp> static LogicalResult verifyAxisOp(AxisOp op) {
  int64_t rank = shapeOf(op.getInput()).size();
  if (op.getAxis() < 0 || op.getAxis() >= rank)
    return op.emitOpError()
           << "axis " << op.getAxis() << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxisOp(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxisOp(*this); }

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError() << "ratio " << ratio << " must be in [0, 1)";
  if (getStream() < 0)
    return emitOpError() << "stream must be non-negative";
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyAxisOp(*this)))
    return failure();
  ArrayRef<int64_t> normalized = shapeOf(getInput()).drop_front(getAxis());
  if (shapeOf(getScale()) != normalized)
    return emitOpError() << "scale and bias must have the normalized shape "
                         << formatShape(normalized) << ", got "
                         << formatShape(shapeOf(getScale()));
  if (getEpsilon().convertToDouble() <= 0.0)
    return emitOpError() << "epsilon must be positive";
  return success();
}

LogicalResult BatchNormTrainOp::verify() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.size() < 2)
    return emitOpError() << "input must have a channel axis (rank >= 2)";
  ArrayRef<int64_t> scale = shapeOf(getScale());
  if (scale.size() != 1 || scale[0] != input[1])
    return emitOpError() << "scale, bias and statistics must have shape "
                         << input[1] << " (the channel count), got "
                         << formatShape(scale);
  if (getEpsilon().convertToDouble() <= 0.0)
    return emitOpError() << "epsilon must be positive";
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0.0 && momentum <= 1.0))
    return emitOpError() << "momentum must be in [0, 1]";
  return success();
}

/// Loss results are scalars unless the reduction is `none`, when they have
/// `perSampleShape`.
static LogicalResult verifyLossResult(Operation *op, Reduction reduction,
                                      ArrayRef<int64_t> perSampleShape,
                                      Value result) {
  Shape expected;
  if (reduction == Reduction::none)
    expected.assign(perSampleShape.begin(), perSampleShape.end());
  return verifyResultShape(op, expected, result);
}

template <typename LossOp> static LogicalResult verifyClassLoss(LossOp op) {
  ArrayRef<int64_t> input = shapeOf(op.getInput());
  ArrayRef<int64_t> labels = shapeOf(op.getLabels());
  if (input.size() < 2)
    return op.emitOpError()
           << "input must be N x C (x d1...), got " << formatShape(input);
  Shape expectedLabels = {input[0]};
  expectedLabels.append(input.begin() + 2, input.end());
  if (labels != ArrayRef<int64_t>(expectedLabels))
    return op.emitOpError()
           << "labels must have shape " << formatShape(expectedLabels)
           << ", got " << formatShape(labels);
  if (getElementTypeOrSelf(op.getResult().getType()) !=
      getElementTypeOrSelf(op.getInput().getType()))
    return op.emitOpError() << "result element type differs from the input's";
  return verifyLossResult(op, op.getReduction(), expectedLabels,
                          op.getResult());
}

LogicalResult CrossEntropyOp::verify() { return verifyClassLoss(*this); }
LogicalResult NllLossOp::verify() { return verifyClassLoss(*this); }

/// The operands of a language model's head ops: input `N x C`, weight
/// `V x C`, labels `N`, bias `V`, one float type.
template <typename OpTy> static LogicalResult verifyLinearHead(OpTy op) {
  ArrayRef<int64_t> input = shapeOf(op.getInput());
  ArrayRef<int64_t> weight = shapeOf(op.getWeight());
  if (input.size() != 2 || weight.size() != 2)
    return op.emitOpError()
           << "input must be N x C and weight V x C, got " << formatShape(input)
           << " and " << formatShape(weight);
  if (input[1] != weight[1])
    return op.emitOpError()
           << "input has " << input[1]
           << " features but the weight's rows have " << weight[1];
  if (shapeOf(op.getLabels()) != ArrayRef<int64_t>{input[0]})
    return op.emitOpError()
           << "labels must have shape " << formatShape({input[0]}) << ", got "
           << formatShape(shapeOf(op.getLabels()));
  Type element = getElementTypeOrSelf(op.getInput().getType());
  if (getElementTypeOrSelf(op.getWeight().getType()) != element)
    return op.emitOpError() << "input and weight element types differ";
  if (Value bias = op.getBias()) {
    if (shapeOf(bias) != ArrayRef<int64_t>{weight[0]})
      return op.emitOpError()
             << "bias must have shape " << formatShape({weight[0]}) << ", got "
             << formatShape(shapeOf(bias));
    if (getElementTypeOrSelf(bias.getType()) != element)
      return op.emitOpError() << "bias element type differs from the input's";
  }
  return success();
}

/// The operands a linear cross-entropy and its gradient share, and the loss.
template <typename OpTy> static LogicalResult verifyLinearLoss(OpTy op) {
  if (failed(verifyLinearHead(op)))
    return failure();
  if (op.getReduction() == Reduction::none)
    return op.emitOpError() << "needs reduction mean or sum (the per-sample "
                               "losses of a chunked head are not kept)";
  // The loss of 16-bit logits is summed in f32.
  Type element = getElementTypeOrSelf(op.getInput().getType());
  Type lossElement = getElementTypeOrSelf(op.getResult().getType());
  if (lossElement != element &&
      !(lossElement.isF32() && (element.isF16() || element.isBF16())))
    return op.emitOpError() << "result element type " << lossElement
                            << " is neither the input's (" << element
                            << ") nor f32 for f16/bf16 inputs";
  return verifyResultShape(op, Shape{}, op.getResult());
}

LogicalResult LinearCrossEntropyOp::verify() { return verifyLinearLoss(*this); }

LogicalResult LinearTokenScoresOp::verify() {
  if (failed(verifyLinearHead(*this)) ||
      failed(verifyResultShape(*this, Shape{}, getLossSum())))
    return failure();
  // Sums over rows: f32 for 16-bit inputs.
  Type element = getElementTypeOrSelf(getInput().getType());
  Type expected = element.getIntOrFloatBitWidth() < 32
                      ? Type(Float32Type::get(getContext()))
                      : element;
  if (getElementTypeOrSelf(getLossSum().getType()) != expected)
    return emitOpError() << "loss_sum must be a scalar of " << expected
                         << " (f32 for f16/bf16 inputs), not "
                         << getLossSum().getType();
  if (getCorrect().getType() != getLossSum().getType())
    return emitOpError() << "correct must have loss_sum's type "
                         << getLossSum().getType();
  // Counted in f32: larger counts would skip integers.
  if (shapeOf(getInput())[0] > (int64_t(1) << 24))
    return emitOpError() << "counts at most 2^24 rows in a float, not "
                         << shapeOf(getInput())[0];
  return success();
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyLinearLoss(*this)) ||
      failed(verifyResultShape(*this, Shape{}, getResultGrad())))
    return failure();
  if (getResultGrad().getType() != getResult().getType())
    return emitOpError() << "result_grad must have the loss's type "
                         << getResult().getType();
  if (bool(getBias()) != bool(getBiasGrad()))
    return emitOpError() << "has a bias gradient exactly when it has a bias";
  if (getBias() && getBias().getType() != getBiasGrad().getType())
    return emitOpError() << "bias_grad must have the bias's type";
  return success();
}

LogicalResult MseLossOp::verify() {
  if (getInput().getType() != getTarget().getType())
    return emitOpError() << "input and target types differ: "
                         << getInput().getType() << " vs "
                         << getTarget().getType();
  if (getElementTypeOrSelf(getResult().getType()) !=
      getElementTypeOrSelf(getInput().getType()))
    return emitOpError() << "result element type differs from the input's";
  return verifyLossResult(*this, getReduction(), shapeOf(getInput()),
                          getResult());
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

void FusionOp::build(OpBuilder &builder, OperationState &state,
                     TypeRange resultTypes, ValueRange inputs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

LogicalResult FusionOp::verify() {
  Block &block = getBodyBlock();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size() << " inputs but its "
                         << "body takes " << block.getNumArguments()
                         << " arguments";
  for (auto [i, input, arg] :
       llvm::enumerate(getInputs(), block.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError() << "input #" << i << " has type " << input.getType()
                           << " but the body argument has " << arg.getType();
  if (getResults().empty())
    return emitOpError() << "writes nothing: a kernel must yield a value";
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().getTypes() != getResults().getTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from its results";
  for (Operation &op : block.without_terminator())
    if (isa<MatmulOp, Conv2DOp, Conv2DBackwardInputOp, Conv2DBackwardFilterOp,
            FusionOp>(op) ||
        op.getDialect() != getOperation()->getDialect())
      return op.emitOpError()
             << "cannot be part of a generated kernel (library calls and "
                "non-gpuc ops run outside gpuc.fusion)";
  return success();
}

#define GET_OP_CLASSES
#include "gpuc/Dialect/Gpuc/GpucOps.cpp.inc"

//===----------------------------------------------------------------------===//
// AttentionOp, AttentionGradOp
//===----------------------------------------------------------------------===//

/// The checks both attention ops share: operand shapes, the mask's
/// broadcast, the row statistics, and the attributes.
SmallVector<int64_t, 4> mlir::gpuc::attentionShape(Value tensor, bool bthd) {
  SmallVector<int64_t, 4> shape(shapeOf(tensor));
  if (bthd && shape.size() == 4)
    std::swap(shape[1], shape[2]);
  return shape;
}

std::array<int64_t, 3> mlir::gpuc::attentionStrides(Value tensor, bool bthd) {
  ArrayRef<int64_t> s = shapeOf(tensor);
  int64_t row = bthd ? s[2] * s[3] : s[3];
  int64_t head = bthd ? s[3] : s[2] * s[3];
  return {s[1] * s[2] * s[3], head, row};
}

std::optional<ColumnWindow> mlir::gpuc::columnWindow(Value operand) {
  auto reshape = operand.getDefiningOp<ReshapeOp>();
  auto slice =
      (reshape ? reshape.getInput() : operand).getDefiningOp<SliceOp>();
  if (!slice)
    return std::nullopt;
  ArrayRef<int64_t> stored = shapeOf(slice.getInput()),
                    columns = shapeOf(slice.getResult()),
                    read = shapeOf(operand);
  size_t rank = stored.size();
  if (rank == 0)
    return std::nullopt;
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                    strides = slice.getStrides();
  for (size_t d = 0; d < rank; ++d)
    if (strides[d] != 1 ||
        (d + 1 < rank && (starts[d] != 0 || limits[d] != stored[d])))
      return std::nullopt;
  // The reshape keeps the leading dimensions and splits the columns.
  if (read.size() < rank || read.take_front(rank - 1) != columns.drop_back())
    return std::nullopt;
  ArrayRef<int64_t> split = read.drop_front(rank - 1);
  int64_t width = 1;
  for (int64_t d : split)
    width *= d;
  if (width != columns.back())
    return std::nullopt;
  return ColumnWindow{slice.getInput(), starts[rank - 1],
                      SmallVector<int64_t>(split)};
}

int64_t ColumnWindow::rowWidth() const { return shapeOf(stored).back(); }

std::optional<AttentionRowWindow>
mlir::gpuc::attentionRowWindow(Value operand) {
  // [B, T, C] -> [B, T, H, D] with C = H * D.
  std::optional<ColumnWindow> window = columnWindow(operand);
  if (!window || !operand.getDefiningOp<ReshapeOp>() ||
      shapeOf(window->stored).size() != 3 || window->shape.size() != 2)
    return std::nullopt;
  return AttentionRowWindow{window->stored, window->offset, window->rowWidth(),
                            window->shape[1]};
}

std::optional<AttentionRowWindow>
mlir::gpuc::attentionGradientWindow(Value gradient) {
  if (!gradient.hasOneUse())
    return std::nullopt;
  auto merge = dyn_cast<ReshapeOp>(*gradient.user_begin());
  if (!merge || !merge.getResult().hasOneUse())
    return std::nullopt;
  ArrayRef<int64_t> heads = shapeOf(gradient), rows = shapeOf(merge);
  if (heads.size() != 4 || rows.size() != 3 || heads[0] != rows[0] ||
      heads[1] != rows[1])
    return std::nullopt;
  auto concat = dyn_cast<ConcatOp>(*merge.getResult().user_begin());
  if (!concat || concat.getAxis() != 2)
    return std::nullopt;
  int64_t offset = 0;
  for (Value input : concat.getInputs()) {
    if (input == merge.getResult())
      break;
    offset += shapeOf(input).back();
  }
  return AttentionRowWindow{concat.getResult(), offset,
                            shapeOf(concat.getResult()).back(), heads[3]};
}

ConcatOp mlir::gpuc::joinedAttentionGradients(ValueRange gradients) {
  Value joined;
  for (Value gradient : gradients) {
    std::optional<AttentionRowWindow> window =
        attentionGradientWindow(gradient);
    if (!window || (joined && window->stored != joined))
      return {};
    joined = window->stored;
  }
  auto concat = joined ? joined.getDefiningOp<ConcatOp>() : ConcatOp();
  if (!concat || concat.getInputs().size() != gradients.size())
    return {};
  return concat;
}

std::array<int64_t, 3> AttentionRowWindow::strides() const {
  return {shapeOf(stored)[1] * width, headWidth, width};
}

static LogicalResult verifyAttention(Operation *op, Value query, Value key,
                                     Value value, Value result, Value logsumexp,
                                     Value mask, Value rngKey, double scale,
                                     double fill, double dropout, bool bthd,
                                     std::optional<ComparePredicate> triangle) {
  SmallVector<int64_t, 4> q = attentionShape(query, bthd),
                          k = attentionShape(key, bthd),
                          v = attentionShape(value, bthd);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return op->emitOpError()
           << "query, key and value must be rank 4 [batch, heads, rows, "
              "width], got "
           << formatShape(q) << ", " << formatShape(k) << ", "
           << formatShape(v);
  Type element = getElementTypeOrSelf(query.getType());
  if (getElementTypeOrSelf(key.getType()) != element ||
      getElementTypeOrSelf(value.getType()) != element ||
      getElementTypeOrSelf(result.getType()) != element)
    return op->emitOpError()
           << "query, key, value and result must share one element type";
  // Grouped-query attention: the key and value heads may be fewer, each
  // read by a group of query heads (query head h reads key head h / (H /
  // key heads)).
  if (k[0] != q[0] || k[1] <= 0 || q[1] % k[1] != 0 || k[3] != q[3])
    return op->emitOpError() << "key " << formatShape(k) << " must be [" << q[0]
                             << ", heads dividing " << q[1] << ", keys, "
                             << q[3] << "] for query " << formatShape(q);
  if (v[0] != q[0] || v[1] != k[1] || v[2] != k[2])
    return op->emitOpError()
           << "value " << formatShape(v) << " must be [" << q[0] << ", " << k[1]
           << ", " << k[2] << ", width] for key " << formatShape(k);
  // (Shapes as read: under `bthd` each rank-4 tensor is stored [batch,
  // rows, heads, width].)
  SmallVector<int64_t> expected = {q[0], bthd ? q[2] : q[1], bthd ? q[1] : q[2],
                                   v[3]};
  if (shapeOf(result) != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "result shape " << formatShape(shapeOf(result)) << " is not "
           << (bthd ? "[batch, query rows, heads, value width] = "
                    : "[batch, heads, query rows, value width] = ")
           << formatShape(expected);
  if (shapeOf(logsumexp) != ArrayRef<int64_t>(q).take_front(3))
    return op->emitOpError()
           << "logsumexp shape " << formatShape(shapeOf(logsumexp))
           << " is not [batch, heads, query rows] = "
           << formatShape(ArrayRef<int64_t>(q).take_front(3));
  if (mask) {
    ArrayRef<int64_t> m = shapeOf(mask);
    SmallVector<int64_t> scores = {q[0], q[1], q[2], k[2]};
    bool broadcasts = m.size() == 4;
    for (size_t d = 0; broadcasts && d < 4; ++d)
      broadcasts = m[d] == 1 || m[d] == scores[d];
    if (!broadcasts)
      return op->emitOpError()
             << "mask " << formatShape(m) << " does not broadcast to the "
             << "scores " << formatShape(scores)
             << " (rank 4, each dimension 1 or the scores')";
  }
  if (triangle &&
      (*triangle == ComparePredicate::eq || *triangle == ComparePredicate::ne))
    return op->emitOpError() << "mask_triangle must be lt, le, gt or ge, not "
                             << stringifyComparePredicate(*triangle);
  if (!std::isfinite(scale))
    return op->emitOpError() << "scale must be finite";
  if (std::isnan(fill) || fill == INFINITY)
    return op->emitOpError() << "fill must be finite or -inf";
  if (!(dropout >= 0.0 && dropout < 1.0))
    return op->emitOpError() << "dropout " << dropout << " is outside [0, 1)";
  if ((dropout > 0.0) != (bool)rngKey)
    return op->emitOpError()
           << "dropout needs an rng key, and an rng key needs dropout > 0";
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifyAttention(
      *this, getQuery(), getKey(), getValue(), getResult(), getLogsumexp(),
      getMask(), getRngKey(), getScale().convertToDouble(),
      getFill().convertToDouble(), getDropout().convertToDouble(), getBthd(),
      getMaskTriangle());
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttention(
      *this, getQuery(), getKey(), getValue(), getResult(), getLogsumexp(),
      getMask(), getRngKey(), getScale().convertToDouble(),
      getFill().convertToDouble(), getDropout().convertToDouble(), getBthd(),
      getMaskTriangle());
}

//===- FoldedAtImport.cpp - masks' and positions' ops, mostly folded ------===//
//
// Exporters compute some values from shapes alone, and gpuc compiles static
// shapes. Hugging Face's models build their attention masks from positions:
// a range, a cumulative sum (which tells packed sequences apart), a gather
// of index pairs, Not and And of comparisons; PyTorch's export of
// nn.MultiheadAttention takes a remainder of sizes; torchvision's Swin
// Transformer numbers its shifted windows' regions by assigning to slices
// of a zero mask (ScatterND). These ops are folded into constants at
// import, and refused where an operand is computed from the inputs, but
// for what padding masks and positions take: Not and And of booleans the
// inputs make become selects; GatherND of such data at constant index
// tuples, a gather of its rows; CumSum of them (RoBERTa's positions count
// the tokens that are not padding), a scan of shifted adds. GatherElements
// is a gather of any data at constant indices (Hugging Face's BERT picks
// its token types from a buffer at the positions).
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "gpuc/Dialect/Gpuc/FoldedConstants.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::gpuc;
using namespace mlir::gpuc::onnx_import;

/// Whether `v` is computed from the step's arguments (the model's inputs
/// and parameters), not from constants alone.
static bool readsArguments(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value next = work.pop_back_val();
    if (!seen.insert(next).second)
      continue;
    Operation *def = next.getDefiningOp();
    if (!def)
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

FailureOr<DenseElementsAttr> OnnxImporter::requireConstant(Node &node,
                                                           Value v) {
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)))
    return attr;
  InFlightDiagnostic error = nodeError(node);
  error << node.proto.op_type()
        << " is folded at import, so its operands must be constants (a mask "
           "built from shapes); ";
  if (v && !readsArguments(v))
    return error << "this one is built from constants, but through values "
                    "past what import folds ("
                 << foldedElementsLimit(Float32Type::get(v.getContext()))
                 << " elements, "
                 << foldedElementsLimit(IntegerType::get(v.getContext(), 1))
                 << " booleans)";
  return error << "this one is computed from the model's inputs (of such "
                  "values gpuc runs what padding masks and positions take: "
                  "Not and And of booleans, CumSum, GatherND at constant "
                  "index tuples)";
}

LogicalResult OnnxImporter::requireConstantOperands(Node &node,
                                                    DenseElementsAttr &a,
                                                    DenseElementsAttr &b) {
  auto operands = broadcastAll(node, {node.in(0), node.in(1)});
  if (failed(operands))
    return failure();
  FailureOr<DenseElementsAttr> lhs = requireConstant(node, (*operands)[0]);
  if (failed(lhs))
    return failure();
  FailureOr<DenseElementsAttr> rhs = requireConstant(node, (*operands)[1]);
  if (failed(rhs))
    return failure();
  a = *lhs;
  b = *rhs;
  return success();
}

/// Whether `v` is a value the model's inputs make, which a fold cannot
/// read (a padding mask), rather than a constant or one made from them.
static bool computedFromInputs(Value v) {
  DenseElementsAttr attr;
  return v && !matchPattern(v, m_Constant(&attr)) && readsArguments(v);
}

LogicalResult OnnxImporter::importNot(Node &node) {
  Value in = node.in(0);
  if (computedFromInputs(in)) {
    // A padding mask's complement: select(x, false, true).
    if (!getElementTypeOrSelf(in).isInteger(1))
      return nodeError(node) << "Not takes booleans";
    setOutput(node, 0,
              SelectOp::create(builder, node.loc, in.getType(), in,
                               splatLike(node.loc, in, 0.0),
                               splatLike(node.loc, in, 1.0)));
    return success();
  }
  FailureOr<DenseElementsAttr> x = requireConstant(node, in);
  if (failed(x))
    return failure();
  if (!x->getElementType().isInteger(1))
    return nodeError(node) << "Not takes booleans";
  SmallVector<bool> result;
  for (bool b : x->getValues<bool>())
    result.push_back(!b);
  setOutput(node, 0,
            ConstantOp::create(builder, node.loc,
                               DenseElementsAttr::get(x->getType(), result)));
  return success();
}

LogicalResult OnnxImporter::importAnd(Node &node) {
  if (computedFromInputs(node.in(0)) || computedFromInputs(node.in(1))) {
    // A padding mask and'ed with a causal one: select(a, b, false).
    auto operands = broadcastAll(node, {node.in(0), node.in(1)});
    if (failed(operands))
      return failure();
    Value a = (*operands)[0], b = (*operands)[1];
    if (!getElementTypeOrSelf(a).isInteger(1) ||
        !getElementTypeOrSelf(b).isInteger(1))
      return nodeError(node) << "And takes booleans";
    setOutput(node, 0,
              SelectOp::create(builder, node.loc, a.getType(), a, b,
                               splatLike(node.loc, a, 0.0)));
    return success();
  }
  DenseElementsAttr a, b;
  if (failed(requireConstantOperands(node, a, b)))
    return failure();
  if (!a.getElementType().isInteger(1) || !b.getElementType().isInteger(1))
    return nodeError(node) << "And takes booleans";
  SmallVector<bool> result;
  for (auto [x, y] : llvm::zip(a.getValues<bool>(), b.getValues<bool>()))
    result.push_back(x && y);
  setOutput(node, 0,
            ConstantOp::create(builder, node.loc,
                               DenseElementsAttr::get(a.getType(), result)));
  return success();
}

/// `v` moved `by` places along `axis` (towards the end, or the start when
/// `by` is negative), zeros where it has nothing.
static Value shiftAlong(OpBuilder &builder, Location loc, Value v, int64_t axis,
                        int64_t by) {
  auto type = cast<RankedTensorType>(v.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t n = shape[axis], magnitude = std::abs(by);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1), low(shape.size(), 0), high(shape.size(), 0);
  SmallVector<int64_t> kept(shape);
  kept[axis] = n - magnitude;
  if (by > 0) {
    limits[axis] = n - magnitude;
    low[axis] = magnitude;
  } else {
    starts[axis] = magnitude;
    high[axis] = magnitude;
  }
  Value part = builder.createOrFold<SliceOp>(loc, type.clone(kept), v, starts,
                                             limits, strides);
  return builder.createOrFold<PadOp>(loc, type, part, low, high,
                                     builder.getF64FloatAttr(0.0));
}

/// CumSum of values the model's inputs make (RoBERTa's positions count the
/// tokens that are not padding): a scan in log2(n) steps, each adding the
/// running sums moved 1, 2, 4, ... places along the axis (backwards for
/// `reverse`), then moved one more for `exclusive`. Integers sum exactly;
/// floats in that tree's order, and the pads, slices and adds carry their
/// gradient.
LogicalResult OnnxImporter::scanCumSum(Node &node, int64_t axis, bool exclusive,
                                       bool reverse) {
  Value x = node.in(0);
  Type et = getElementTypeOrSelf(x);
  if (!isa<FloatType>(et) && !et.isInteger(32) && !et.isInteger(64))
    return nodeError(node) << "CumSum takes numbers, not " << et;
  int64_t n = shapeOf(x)[axis], direction = reverse ? -1 : 1;
  ExprBuilder B(builder, node.loc);
  Value sums = x;
  for (int64_t by = 1; by < n; by *= 2)
    sums =
        B.add(sums, shiftAlong(builder, node.loc, sums, axis, direction * by));
  if (exclusive && n > 0)
    sums = shiftAlong(builder, node.loc, sums, axis, direction);
  setOutput(node, 0, sums);
  return success();
}

LogicalResult OnnxImporter::importCumSum(Node &node) {
  FailureOr<Shape> axisValue = requireConstantInts(node, 1, "axis");
  if (failed(axisValue))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(node.in(0));
  if (shape.empty())
    return nodeError(node) << "a scalar has no axis to sum along";
  if (axisValue->size() != 1)
    return nodeError(node) << "axis must be one integer";
  FailureOr<int64_t> axis = gpuc::normalizeAxis(
      (*axisValue)[0], shape.size(), [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  if (computedFromInputs(node.in(0)))
    return scanCumSum(node, *axis, node.getInt("exclusive", 0) != 0,
                      node.getInt("reverse", 0) != 0);
  FailureOr<DenseElementsAttr> x = requireConstant(node, node.in(0));
  if (failed(x))
    return failure();
  bool exclusive = node.getInt("exclusive", 0) != 0;
  bool reverse = node.getInt("reverse", 0) != 0;
  Type et = x->getElementType();
  bool isFloat = isa<FloatType>(et);
  if (!isFloat && !et.isInteger(32) && !et.isInteger(64))
    return nodeError(node) << "CumSum is folded for numbers only";
  // Sums in the element type, one element after another (as ONNX's
  // reference does): floats round as they would at run time.
  SmallVector<APFloat> floats;
  SmallVector<int64_t> ints;
  if (isFloat)
    llvm::append_range(floats, x->getValues<APFloat>());
  else
    for (const APInt &v : x->getValues<APInt>())
      ints.push_back(v.getSExtValue());
  int64_t count = isFloat ? (int64_t)floats.size() : (int64_t)ints.size();
  SmallVector<APFloat> floatSums(floats);
  SmallVector<int64_t> intSums(ints.size());
  Shape strides = stridesOf(shape);
  int64_t length = shape[*axis], stride = strides[*axis];
  for (int64_t i = 0; i < count; ++i) {
    if ((i / stride) % length != 0)
      continue; // each line along the axis once, from its first element
    APFloat floatSum =
        isFloat ? APFloat::getZero(floats[i].getSemantics()) : APFloat(0.0);
    int64_t intSum = 0;
    for (int64_t k = 0; k < length; ++k) {
      int64_t at = reverse ? length - 1 - k : k;
      int64_t index = i + at * stride;
      if (!exclusive) {
        if (isFloat)
          floatSum.add(floats[index], APFloat::rmNearestTiesToEven);
        else
          intSum += ints[index];
      }
      if (isFloat)
        floatSums[index] = floatSum;
      else
        intSums[index] = intSum;
      if (exclusive) {
        if (isFloat)
          floatSum.add(floats[index], APFloat::rmNearestTiesToEven);
        else
          intSum += ints[index];
      }
    }
  }
  DenseElementsAttr folded;
  if (isFloat) {
    folded = DenseElementsAttr::get(x->getType(), floatSums);
  } else {
    SmallVector<APInt> values;
    for (int64_t v : intSums)
      values.push_back(APInt(et.getIntOrFloatBitWidth(), v, /*isSigned=*/true));
    folded = DenseElementsAttr::get(x->getType(), values);
  }
  setOutput(node, 0, ConstantOp::create(builder, node.loc, folded));
  return success();
}

FailureOr<int64_t> OnnxImporter::gatherNDDepth(Node &node,
                                               DenseElementsAttr indices,
                                               ArrayRef<int64_t> dataShape) {
  ArrayRef<int64_t> indexShape = indices.getType().getShape();
  if (indexShape.empty())
    return nodeError(node) << "indices must have rank at least 1";
  int64_t depth = indexShape.back();
  if (depth < 1 || depth > (int64_t)dataShape.size())
    return nodeError(node) << "the indices' last dimension (" << depth
                           << ") must be in [1, " << dataShape.size() << "]";
  return depth;
}

FailureOr<SmallVector<int64_t>>
OnnxImporter::indexTupleOffsets(Node &node, DenseElementsAttr indices,
                                ArrayRef<int64_t> dataShape, int64_t depth) {
  SmallVector<int64_t> where;
  for (const APInt &v : indices.getValues<APInt>())
    where.push_back(v.getSExtValue());
  if (indices.isSplat())
    where.assign(indices.getNumElements(), where.front());
  Shape strides = stridesOf(dataShape);
  SmallVector<int64_t> offsets;
  for (size_t tuple = 0; tuple + depth <= where.size(); tuple += depth) {
    int64_t offset = 0;
    for (int64_t d = 0; d < depth; ++d) {
      int64_t i = where[tuple + d];
      if (i < -dataShape[d] || i >= dataShape[d])
        return nodeError(node) << "index " << i << " past dimension " << d
                               << " of size " << dataShape[d];
      offset += (i < 0 ? i + dataShape[d] : i) * strides[d];
    }
    offsets.push_back(offset);
  }
  return offsets;
}

/// GatherND of data computed from the inputs at constant index tuples (a
/// padding mask read at each (batch, key) pair): a gather, along the first
/// axis, of the data with its `depth` leading dimensions merged, at each
/// tuple's row of those.
LogicalResult
OnnxImporter::gatherRowsAtConstantTuples(Node &node,
                                         DenseElementsAttr indices) {
  Value data = node.in(0);
  ArrayRef<int64_t> dataShape = shapeOf(data);
  ArrayRef<int64_t> indexShape = indices.getType().getShape();
  FailureOr<int64_t> depth = gatherNDDepth(node, indices, dataShape);
  if (failed(depth))
    return failure();
  FailureOr<SmallVector<int64_t>> offsets =
      indexTupleOffsets(node, indices, dataShape, *depth);
  if (failed(offsets))
    return failure();
  // A tuple's row of the data's first `depth` dimensions, merged.
  int64_t rowCount = getNumElements(dataShape.take_front(*depth));
  int64_t rowSize = getNumElements(dataShape.drop_front(*depth));
  SmallVector<APInt> rows;
  for (int64_t offset : *offsets)
    rows.push_back(APInt(64, offset / rowSize, /*isSigned=*/true));
  Shape merged{rowCount};
  llvm::append_range(merged, dataShape.drop_front(*depth));
  Value table = reshape(node.loc, data, merged);
  auto rowType =
      RankedTensorType::get(indexShape.drop_back(), builder.getI64Type());
  Value at = ConstantOp::create(builder, node.loc,
                                DenseElementsAttr::get(rowType, rows));
  Shape resultShape(indexShape.drop_back());
  llvm::append_range(resultShape, dataShape.drop_front(*depth));
  setOutput(node, 0,
            GatherOp::create(builder, node.loc, withShape(data, resultShape),
                             table, at, 0));
  return success();
}

LogicalResult OnnxImporter::importGatherND(Node &node) {
  if (computedFromInputs(node.in(0)) && node.getInt("batch_dims", 0) == 0) {
    FailureOr<DenseElementsAttr> indices = requireConstant(node, node.in(1));
    if (failed(indices))
      return failure();
    return gatherRowsAtConstantTuples(node, *indices);
  }
  FailureOr<DenseElementsAttr> data = requireConstant(node, node.in(0));
  FailureOr<DenseElementsAttr> indices =
      failed(data) ? data : requireConstant(node, node.in(1));
  if (failed(indices))
    return failure();
  if (node.getInt("batch_dims", 0) != 0)
    return nodeError(node) << "batch_dims other than 0 are not supported";
  ArrayRef<int64_t> dataShape = data->getType().getShape();
  ArrayRef<int64_t> indexShape = indices->getType().getShape();
  FailureOr<int64_t> checkedDepth = gatherNDDepth(node, *indices, dataShape);
  if (failed(checkedDepth))
    return failure();
  int64_t depth = *checkedDepth;
  // Result: the indices' leading dimensions, then the data's past depth.
  Shape resultShape(indexShape.drop_back());
  llvm::append_range(resultShape, dataShape.drop_front(depth));
  auto type = RankedTensorType::get(resultShape, data->getElementType());
  if (!withinFoldLimit(type))
    return nodeError(node) << "GatherND's result of " << type.getNumElements()
                           << " elements is past what import folds ("
                           << foldedElementsLimit(type.getElementType()) << ")";
  // Each index tuple's offset into the data, checked once.
  FailureOr<SmallVector<int64_t>> offsets =
      indexTupleOffsets(node, *indices, dataShape, depth);
  if (failed(offsets))
    return failure();
  size_t leading = indexShape.size() - 1;
  Shape tupleStrides = stridesOf(indexShape.drop_back());
  Shape sliceStrides = stridesOf(dataShape.drop_front(depth));
  DenseElementsAttr folded =
      moveElements(*data, type, [&](ArrayRef<int64_t> index) {
        int64_t tuple = 0, within = 0;
        for (size_t d = 0; d < leading; ++d)
          tuple += index[d] * tupleStrides[d];
        for (size_t d = leading; d < index.size(); ++d)
          within += index[d] * sliceStrides[d - leading];
        return (*offsets)[tuple] + within;
      });
  if (!folded)
    return nodeError(node) << "GatherND could not be folded";
  setOutput(node, 0, ConstantOp::create(builder, node.loc, folded));
  return success();
}

LogicalResult OnnxImporter::importGatherElements(Node &node) {
  Value data = node.in(0), indexValue = node.in(1);
  ArrayRef<int64_t> dataShape = shapeOf(data), indexShape = shapeOf(indexValue);
  if (dataShape.empty())
    return nodeError(node) << "GatherElements takes data of rank 1 or more";
  FailureOr<int64_t> axis =
      gpuc::normalizeAxis(node.getInt("axis", 0), dataShape.size(),
                          [&] { return nodeError(node); });
  if (failed(axis))
    return failure();
  if (indexShape.size() != dataShape.size())
    return nodeError(node) << "indices of rank " << indexShape.size()
                           << " into data of rank " << dataShape.size();
  for (auto [d, size] : llvm::enumerate(indexShape))
    if ((int64_t)d != *axis && size > dataShape[d])
      return nodeError(node) << "indices of shape " << formatShape(indexShape)
                             << " past data of shape " << formatShape(dataShape)
                             << " in dimension " << d;
  // Data of one value (RoBERTa's token types, zeros, picked at the
  // positions it counts from the tokens) is that value wherever it is
  // picked, whatever the indices.
  DenseElementsAttr indices, splat;
  if (matchPattern(data, m_Constant(&splat)) && splat.isSplat()) {
    auto type = RankedTensorType::get(indexShape, splat.getElementType());
    setOutput(node, 0,
              ConstantOp::create(builder, node.loc, splat.resizeSplat(type)));
    return success();
  }
  if (!matchPattern(indexValue, m_Constant(&indices)))
    return nodeError(node)
           << "GatherElements takes indices known at import (constants, or "
              "computed from shapes); these are computed from the model's "
              "inputs";
  // Each index's element's offset into the data, checked here, and the
  // data gathered at them (any data: its gradient adds back at each offset
  // as a gather's does).
  if (!withinFoldLimit(indices.getType()))
    return nodeError(node) << "GatherElements' " << indices.getNumElements()
                           << " indices are past what import folds ("
                           << foldedElementsLimit(indices.getElementType())
                           << ")";
  SmallVector<int64_t> given;
  for (const APInt &v : indices.getValues<APInt>())
    given.push_back(v.getSExtValue());
  Shape dataStrides = stridesOf(dataShape),
        indexStrides = stridesOf(indexShape);
  int64_t size = dataShape[*axis];
  SmallVector<APInt> offsets;
  for (auto [at, index] : llvm::enumerate(given)) {
    if (index < -size || index >= size)
      return nodeError(node) << "index " << index << " past dimension " << *axis
                             << " of size " << size;
    int64_t offset = 0;
    for (size_t d = 0; d < indexShape.size(); ++d) {
      int64_t coordinate = ((int64_t)at / indexStrides[d]) % indexShape[d];
      if ((int64_t)d == *axis)
        coordinate = index < 0 ? index + size : index;
      offset += coordinate * dataStrides[d];
    }
    offsets.push_back(APInt(64, offset, /*isSigned=*/true));
  }
  auto offsetType = RankedTensorType::get(indexShape, builder.getI64Type());
  Value at = ConstantOp::create(builder, node.loc,
                                DenseElementsAttr::get(offsetType, offsets));
  Value flat = reshape(node.loc, data, {getNumElements(dataShape)});
  setOutput(node, 0,
            builder.createOrFold<GatherOp>(
                node.loc, withShape(data, indexShape), flat, at, 0));
  return success();
}

LogicalResult OnnxImporter::importScatterND(Node &node) {
  FailureOr<DenseElementsAttr> data = requireConstant(node, node.in(0));
  FailureOr<DenseElementsAttr> indices =
      failed(data) ? data : requireConstant(node, node.in(1));
  FailureOr<DenseElementsAttr> updates =
      failed(indices) ? indices : requireConstant(node, node.in(2));
  if (failed(updates))
    return failure();
  std::string reduction = node.getString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return nodeError(node) << "reduction '" << reduction
                           << "' is not one of none, add, mul, max, min";
  Type et = data->getElementType();
  if (updates->getElementType() != et)
    return nodeError(node) << "updates of " << updates->getElementType()
                           << " into data of " << et;
  bool isFloat = isa<FloatType>(et);
  if (reduction != "none" && !isFloat &&
      !(isa<IntegerType>(et) && et.getIntOrFloatBitWidth() > 1))
    return nodeError(node) << "reduction '" << reduction
                           << "' takes numbers, not " << et;
  ArrayRef<int64_t> dataShape = data->getType().getShape();
  ArrayRef<int64_t> indexShape = indices->getType().getShape();
  FailureOr<int64_t> depth = gatherNDDepth(node, *indices, dataShape);
  if (failed(depth))
    return failure();
  // Updates: one slice of the data past `depth` for each index tuple.
  Shape expected(indexShape.drop_back());
  llvm::append_range(expected, dataShape.drop_front(*depth));
  if (updates->getType().getShape() != ArrayRef<int64_t>(expected))
    return nodeError(node) << "updates of shape "
                           << formatShape(updates->getType().getShape())
                           << " where the indices and data make "
                           << formatShape(expected);
  // Both bounded, so are the tuples (a splat's may be any number).
  for (DenseElementsAttr bounded : {*data, *updates})
    if (!withinFoldLimit(bounded.getType()))
      return nodeError(node)
             << "ScatterND's " << (bounded == *data ? "data" : "updates")
             << " hold " << bounded.getType().getNumElements()
             << " elements, past what import folds (" << foldedElementsLimit(et)
             << ")";
  FailureOr<SmallVector<int64_t>> offsets =
      indexTupleOffsets(node, *indices, dataShape, *depth);
  if (failed(offsets))
    return failure();
  int64_t sliceSize = getNumElements(dataShape.drop_front(*depth));
  // Tuples in order, each writing (or reducing into) its slice: the last of
  // repeated tuples wins under `none`, as in ONNX's reference.
  auto scatter = [&](auto values, auto combine) {
    using Element = typename decltype(values)::value_type;
    auto result = llvm::to_vector(data->getValues<Element>());
    for (auto [tuple, offset] : llvm::enumerate(*offsets))
      for (int64_t k = 0; k < sliceSize; ++k)
        result[offset + k] =
            combine(result[offset + k], values[tuple * sliceSize + k]);
    return DenseElementsAttr::get(data->getType(), result);
  };
  DenseElementsAttr folded;
  if (isFloat) {
    auto values = llvm::to_vector(updates->getValues<APFloat>());
    folded = scatter(values, [&](APFloat old, const APFloat &v) {
      if (reduction == "add")
        old.add(v, APFloat::rmNearestTiesToEven);
      else if (reduction == "mul")
        old.multiply(v, APFloat::rmNearestTiesToEven);
      else if (reduction == "max")
        old = llvm::maximum(old, v);
      else if (reduction == "min")
        old = llvm::minimum(old, v);
      else
        old = v;
      return old;
    });
  } else {
    auto values = llvm::to_vector(updates->getValues<APInt>());
    folded = scatter(values, [&](APInt old, const APInt &v) {
      if (reduction == "add")
        return old + v;
      if (reduction == "mul")
        return old * v;
      if (reduction == "max")
        return old.sge(v) ? old : v;
      if (reduction == "min")
        return old.sle(v) ? old : v;
      return v;
    });
  }
  setOutput(node, 0, ConstantOp::create(builder, node.loc, folded));
  return success();
}

LogicalResult OnnxImporter::importMod(Node &node) {
  DenseElementsAttr a, b;
  if (failed(requireConstantOperands(node, a, b)))
    return failure();
  Type et = a.getElementType();
  if (!et.isInteger(32) && !et.isInteger(64))
    return nodeError(node) << "Mod is folded for integers only";
  // fmod = 1: the sign of the dividend (C's %); fmod = 0: of the divisor
  // (Python's %).
  bool fmod = node.getInt("fmod", 0) != 0;
  SmallVector<APInt> result;
  for (auto [x, y] : llvm::zip(a.getValues<APInt>(), b.getValues<APInt>())) {
    int64_t n = x.getSExtValue(), d = y.getSExtValue();
    if (d == 0)
      return nodeError(node) << "Mod by zero";
    int64_t r = d == -1 ? 0 : n % d;
    if (!fmod && r != 0 && ((r < 0) != (d < 0)))
      r += d;
    result.push_back(APInt(et.getIntOrFloatBitWidth(), r, /*isSigned=*/true));
  }
  setOutput(node, 0,
            ConstantOp::create(builder, node.loc,
                               DenseElementsAttr::get(a.getType(), result)));
  return success();
}

//===- Shapes.cpp - ONNX constants, shapes and data movement --------------===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

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
  if (axes && !axes->empty() && inShape.empty())
    return nodeError(node) << "a scalar has no axis to squeeze";
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

/// Resize as separable gathers: along each resized axis, every output
/// coordinate reads 1 (nearest), 2 (linear) or 4 (cubic) input positions
/// with constant weights, computed here from the coordinate transformation
/// ONNX specifies; positions outside the input read its edge.
// The attribute checks, the coordinate transformation and the gathers
// follow ONNX's Resize specification step by step; one function, in its
// order, so each step can be read against it.
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

} // namespace mlir::gpuc::onnx_import

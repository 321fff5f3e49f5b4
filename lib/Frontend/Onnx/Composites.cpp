//===- Composites.cpp - ONNX softmax, norms, dropout and losses -----------===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

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
    param->removeAttr(GpucDialect::kFrozenAttrName);
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

} // namespace mlir::gpuc::onnx_import

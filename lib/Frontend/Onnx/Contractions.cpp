//===- Contractions.cpp - ONNX GEMMs, einsum, convolutions and pooling ----===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

LogicalResult OnnxImporter::importGlobalMaxPool(Node &node) {
  Value x = node.in(0);
  int64_t rank = shapeOf(x).size();
  if (rank < 3)
    return nodeError(node) << "input must be N x C x spatial...";
  ExprBuilder B(builder, node.loc);
  setOutput(node, 0, B.max(x, axisRange(2, rank), /*keepDims=*/true));
  return success();
}

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
// Parsing the equation, checking it and contracting pairwise share the
// label tables built at the top; kept in one function for that.
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

} // namespace mlir::gpuc::onnx_import

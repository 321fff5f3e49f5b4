//===- Recurrent.cpp - ONNX RNN, GRU and LSTM, unrolled over the sequence -===//
#include "Importer.h"

namespace mlir::gpuc::onnx_import {

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

// One function for RNN, GRU and LSTM: they share the attribute checks, the
// input projection and the step loop, and differ only in their gates; the
// gates are small branches of the step (long, because the three ops are).
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

} // namespace mlir::gpuc::onnx_import

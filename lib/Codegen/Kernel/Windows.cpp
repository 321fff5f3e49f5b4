//===- Windows.cpp - pooling windows and their gradients ------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

Window windowOf(Operation *op) {
  Window w = llvm::TypeSwitch<Operation *, Window>(op)
                 .Case<MaxPool2DOp, MaxPool2DArgmaxOp, MaxPool2DBackwardOp>(
                     [](auto p) -> Window {
                       return {p.getKernel(), p.getStrides(), p.getPads()};
                     })
                 .Case<AvgPool2DOp, AvgPool2DBackwardOp>([](auto p) -> Window {
                   return {p.getKernel(), p.getStrides(), p.getPads(),
                           p.getCountIncludePad()};
                 });
  bool channelsLast =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case<MaxPool2DOp, MaxPool2DArgmaxOp, MaxPool2DBackwardOp,
                AvgPool2DOp, AvgPool2DBackwardOp>(
              [](auto p) { return p.getChannelsLast(); });
  if (channelsLast) {
    w.rowAxis = 1;
    w.columnAxis = 2;
  }
  return w;
}

/// `coords` (an element's, in its tensor's layout) with the row and column
/// replaced: the same image and channel at another position.
static SmallVector<std::string> atPosition(ArrayRef<std::string> coords,
                                           const Window &w,
                                           const std::string &row,
                                           const std::string &column) {
  SmallVector<std::string> moved(coords);
  moved[w.rowAxis] = row;
  moved[w.columnAxis] = column;
  return moved;
}

std::string Emitter::windowCount(const std::string &top,
                                 const std::string &left, const Window &w,
                                 ArrayRef<int64_t> in) {
  // The positions of the window starting at (top, left) that count: inside
  // the input, or inside the padded input with count_include_pad.
  int64_t bottom = in[w.rowAxis] + (w.countIncludePad ? w.pads[2] : 0);
  int64_t right = in[w.columnAxis] + (w.countIncludePad ? w.pads[3] : 0);
  auto start = [&](const std::string &c) {
    return w.countIncludePad ? c : "gpuc::maxInt<gidx>(" + c + ", 0)";
  };
  return index(llvm::formatv("(gpuc::minInt<gidx>({0} + {1}, {2}) - {3}) * "
                             "(gpuc::minInt<gidx>({4} + {5}, {6}) - {7})",
                             top, w.kernel[0], bottom, start(top), left,
                             w.kernel[1], right, start(left)));
}

/// The max_pool2d (or max_pool2d_argmax) beside `op` in its kernel: the
/// other half of the same scan, or null.
Operation *maxPoolTwin(Operation *op) {
  auto same = [&](auto a, auto b) {
    return a.getInput() == b.getInput() && a.getKernel() == b.getKernel() &&
           a.getStrides() == b.getStrides() && a.getPads() == b.getPads() &&
           a.getChannelsLast() == b.getChannelsLast();
  };
  for (Operation *user : op->getOperand(0).getUsers()) {
    if (user->getBlock() != op->getBlock())
      continue;
    if (auto max = dyn_cast<MaxPool2DOp>(op))
      if (auto argmax = dyn_cast<MaxPool2DArgmaxOp>(user);
          argmax && same(max, argmax))
        return argmax;
    if (auto argmax = dyn_cast<MaxPool2DArgmaxOp>(op))
      if (auto max = dyn_cast<MaxPool2DOp>(user); max && same(max, argmax))
        return max;
  }
  return nullptr;
}

FailureOr<std::string> Emitter::pool(Operation *op, Value v,
                                     const std::string &idx) {
  Window w = windowOf(op);
  Value input = op->getOperand(0);
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(v);
  // Max pooling and its argmax over the same windows share one scan: each
  // input is loaded (or computed) once, and the twin's value is remembered
  // at this index. The argmax tracks the first maximum's position in the
  // window: the first position inside the input wins until a later one is
  // strictly greater.
  Operation *twin = maxPoolTwin(op);
  Operation *maxOp = isa<MaxPool2DOp>(op) ? op : twin;
  Operation *argmaxOp = isa<MaxPool2DArgmaxOp>(op) ? op : twin;
  SmallVector<std::string> coords = unravel(idx, out);
  std::string acc = fresh("acc"), best = fresh("best"),
              bestAt = fresh("bestAt");
  if (argmaxOp)
    line(llvm::formatv("float {0} = -INFINITY; int {1} = -1;", best, bestAt));
  // A maximum is exact in float; a sum accumulates in gpuc::Accumulator.
  if (maxOp || !argmaxOp)
    line(llvm::formatv("{0} {1} = {2};", maxOp ? "float" : "gpuc::Accumulator",
                       acc, maxOp ? "-INFINITY" : "0"));
  std::string top = index(llvm::formatv("{0} * {1} - {2}", coords[w.rowAxis],
                                        w.strides[0], w.pads[0]));
  std::string left = index(llvm::formatv(
      "{0} * {1} - {2}", coords[w.columnAxis], w.strides[1], w.pads[1]));
  // An axis without padding whose last window ends inside the input needs
  // no bounds check: the window loop then has a fixed trip count without
  // branches, which the host compiler unrolls and vectorizes.
  int64_t spatial[2] = {w.rowAxis, w.columnAxis};
  auto inside = [&](int axis) {
    return w.pads[axis] == 0 &&
           (out[spatial[axis]] - 1) * w.strides[axis] + w.kernel[axis] <=
               in[spatial[axis]];
  };
  std::string ky = fresh("ky"), kx = fresh("kx");
  open(llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", ky, w.kernel[0]));
  std::string iy = index(top + " + " + ky);
  if (!inside(0))
    line(llvm::formatv("if ({0} < 0 || {0} >= {1}) continue;", iy,
                       in[w.rowAxis]));
  open(llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", kx, w.kernel[1]));
  std::string ix = index(left + " + " + kx);
  if (!inside(1))
    line(llvm::formatv("if ({0} < 0 || {0} >= {1}) continue;", ix,
                       in[w.columnAxis]));
  FailureOr<std::string> x =
      at(input, raveled(atPosition(coords, w, iy, ix), in));
  if (failed(x))
    return failure();
  if (argmaxOp) {
    // Without a branch: which position of a window holds its maximum is
    // data, and a jump on it mispredicts on the CPU.
    std::string take = fresh("take");
    line(llvm::formatv("const bool {0} = {1} < 0 || {2} > {3};", take, bestAt,
                       *x, best));
    line(llvm::formatv("{0} = gpuc::selectFloat({1}, {2}, {0});", best, take,
                       *x));
    line(llvm::formatv("{0} = {1} ? (int)({2} * {3} + {4}) : {0};", bestAt,
                       take, ky, w.kernel[1], kx));
  }
  if (maxOp)
    line(llvm::formatv("{0} = gpuc::selectFloat({1} > {0}, {1}, {0});", acc,
                       *x));
  else if (!argmaxOp)
    line(llvm::formatv("{0} += {1};", acc, *x));
  close();
  close();
  std::string argmaxReg, maxReg;
  if (argmaxOp) {
    Value result = argmaxOp->getResult(0);
    argmaxReg =
        define(result, llvm::formatv("({0})({1} < 0 ? 0 : {1})",
                                     registerCType(elementOf(result)), bestAt)
                           .str());
  }
  if (maxOp)
    maxReg = define(maxOp->getResult(0), "(float)" + acc);
  if (twin)
    remember(twin->getResult(0), idx, twin == argmaxOp ? argmaxReg : maxReg);
  if (argmaxOp || maxOp)
    return op == argmaxOp ? argmaxReg : maxReg;
  // Every window inside the input counts all its positions.
  std::string divisor = inside(0) && inside(1)
                            ? std::to_string(w.kernel[0] * w.kernel[1])
                            : windowCount(top, left, w, in);
  return define(v, llvm::formatv("(float)({0} / (gpuc::Accumulator)({1} > 0 ? "
                                 "{1} : 1))",
                                 acc, divisor)
                       .str());
}

FailureOr<std::string> Emitter::poolBackward(Operation *op, Value v,
                                             const std::string &idx) {
  // dx at (p, h, w) gathers the gradient of every window that contains it:
  // windows oy in [ceil((h + pad - k + 1) / s), floor((h + pad) / s)]. Max
  // pooling's gradient goes to the position its `indices` names.
  Window w = windowOf(op);
  auto maxOp = dyn_cast<MaxPool2DBackwardOp>(op);
  Value dy = maxOp ? maxOp.getGradOutput() : op->getOperand(0);
  ArrayRef<int64_t> in = shapeOf(v), out = shapeOf(dy);
  SmallVector<std::string> coords = unravel(idx, in);
  const std::string &h = coords[w.rowAxis], &x = coords[w.columnAxis];
  // Windows that tile the input exactly (stride = kernel, no padding, the
  // output covering every row and column): the one window holding (h, x)
  // is known without a search and needs no bounds checks.
  bool tiles = maxOp && llvm::all_of(llvm::seq(0, 4),
                                     [&](int i) { return w.pads[i] == 0; });
  int64_t spatial[2] = {w.rowAxis, w.columnAxis};
  for (int a = 0; tiles && a < 2; ++a)
    tiles = w.strides[a] == w.kernel[a] &&
            out[spatial[a]] * w.kernel[a] == in[spatial[a]];
  if (tiles) {
    std::string oy = index(llvm::formatv("{0} / {1}", h, w.kernel[0]));
    std::string ox = index(llvm::formatv("{0} / {1}", x, w.kernel[1]));
    std::string o = raveled(atPosition(coords, w, oy, ox), out);
    FailureOr<std::string> position = at(maxOp.getIndices(), o);
    FailureOr<std::string> g = at(dy, o);
    if (failed(position) || failed(g))
      return failure();
    return define(v, llvm::formatv("gpuc::selectFloat((int){0} == ({1} - {2} "
                                   "* {3}) * {4} + ({5} - {6} * {4}), {7}, "
                                   "0.0f)",
                                   *position, h, oy, w.kernel[0], w.kernel[1],
                                   x, ox, *g)
                         .str());
  }
  std::string acc = fresh("acc");
  line("gpuc::Accumulator " + acc + " = 0;");
  auto range = [&](const std::string &c, int axis, std::string &lo,
                   std::string &hi) {
    int64_t k = w.kernel[axis], s = w.strides[axis], pad = w.pads[axis];
    // Smallest o with o*s - pad + k - 1 >= c, largest with o*s - pad <= c.
    lo = index(llvm::formatv(
        "gpuc::maxInt<gidx>(0, ({0} + {1} - {2} + {3} - 1) / {3})", c, pad,
        k - 1, s));
    hi = index(llvm::formatv("gpuc::minInt<gidx>({0} - 1, ({1} + {2}) / {3})",
                             out[spatial[axis]], c, pad, s));
  };
  std::string loY, hiY, loX, hiX;
  range(h, 0, loY, hiY);
  range(x, 1, loX, hiX);
  std::string oy = fresh("oy"), ox = fresh("ox");
  open(llvm::formatv("for (gidx {0} = {1}; {0} <= {2}; ++{0})", oy, loY, hiY));
  open(llvm::formatv("for (gidx {0} = {1}; {0} <= {2}; ++{0})", ox, loX, hiX));
  std::string top =
      index(llvm::formatv("{0} * {1} - {2}", oy, w.strides[0], w.pads[0]));
  std::string left =
      index(llvm::formatv("{0} * {1} - {2}", ox, w.strides[1], w.pads[1]));
  std::string o = raveled(atPosition(coords, w, oy, ox), out);
  FailureOr<std::string> g = at(dy, o);
  if (failed(g))
    return failure();
  if (maxOp) {
    FailureOr<std::string> position = at(maxOp.getIndices(), o);
    if (failed(position))
      return failure();
    line(llvm::formatv("if ((int){0} == ({1} - {2}) * {3} + {4} - {5}) {6} += "
                       "{7};",
                       *position, h, top, w.kernel[1], x, left, acc, *g));
  } else {
    std::string count = windowCount(top, left, w, in);
    line(llvm::formatv("{0} += {1} / (gpuc::Accumulator)({2} > 0 ? {2} : 1);",
                       acc, *g, count));
  }
  close();
  close();
  return define(v, "(float)" + acc);
}

} // namespace mlir::gpuc::kernel_emitter

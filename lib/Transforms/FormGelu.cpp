//===- FormGelu.cpp - GELU as exporters spell it, as one op ---------------===//
//
// Below opset 20 ONNX has no GELU, so PyTorch exports `nn.GELU()` as
// `x / sqrt(2)`, an erf, `+ 1` and two products, and GPT-2's tanh
// approximation as seven ops. As that chain, backward differentiates each
// link (two more quotients, each a dozen instructions a GPU thread issues
// per element, in kernels that run at their instruction rate rather than at
// the memory's). As one gpuc.gelu it differentiates as one, and its kernel
// computes the function as PyTorch's own GELU does.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Constants.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFORMGELU
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// The tanh approximation's constants: sqrt(2 / pi) and the cube's weight.
constexpr double kTanhScale = 0.79788456080286535588;
constexpr double kTanhCube = 0.044715;

/// Whether a constant is `want` as exporters write it: rounded to f32.
bool near(std::optional<double> value, double want) {
  return value && std::abs(*value - want) <= 1e-6 * std::abs(want);
}

/// The one op that reads `v`, or null.
Operation *onlyUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// For a product `op` with `v` as one factor, the other factor; else null.
Value otherFactor(Operation *op, Value v) {
  if (!isa_and_nonnull<MulOp>(op))
    return {};
  if (op->getOperand(0) == v)
    return op->getOperand(1);
  if (op->getOperand(1) == v)
    return op->getOperand(0);
  return {};
}

/// Whether `v` is `x` cubed: `pow(x, 3)`, `(x * x) * x` or `x * (x * x)`.
bool isCube(Value v, Value x) {
  Operation *def = v.getDefiningOp();
  if (auto pow = dyn_cast_or_null<PowOp>(def))
    return pow.getLhs() == x && near(splatOf(pow.getRhs()), 3.0);
  Value square = otherFactor(def, x);
  if (!square)
    return false;
  return otherFactor(square.getDefiningOp(), x) == x;
}

/// Given `t` (the erf or the tanh of a GELU of `x`), the op that completes
/// `x * 0.5 * (1 + t)` (in any order and association of its products),
/// with every intermediate value read by the chain alone; else null.
Operation *halfXTimesOnePlus(Value t, Value x) {
  Operation *add = onlyUser(t);
  if (!isa_and_nonnull<AddOp>(add))
    return nullptr;
  Value one = add->getOperand(add->getOperand(0) == t ? 1 : 0);
  if (!near(splatOf(one), 1.0))
    return nullptr;
  Value sum = add->getResult(0);
  Operation *first = onlyUser(sum);
  if (!first)
    return nullptr;
  Value base;
  // (x * (1 + t)) * 0.5
  if (otherFactor(first, sum) == x) {
    Operation *second = onlyUser(first->getResult(0));
    if (second && near(scaleOf(second->getResult(0), base), 0.5) &&
        base == first->getResult(0))
      return second;
    return nullptr;
  }
  // (0.5 * x) * (1 + t)
  if (Value factor = otherFactor(first, sum))
    if (near(scaleOf(factor, base), 0.5) && base == x)
      return first;
  // (0.5 * (1 + t)) * x
  if (!near(scaleOf(first->getResult(0), base), 0.5) || base != sum)
    return nullptr;
  Operation *second = onlyUser(first->getResult(0));
  return otherFactor(second, first->getResult(0)) == x ? second : nullptr;
}

/// Replaces `root` by gpuc.gelu of `x`, when the two have one type.
LogicalResult replaceWithGelu(PatternRewriter &rewriter, Operation *root,
                              Value x, bool tanh) {
  if (!root || root->getResult(0).getType() != x.getType())
    return failure();
  rewriter.replaceOp(root, GeluOp::create(rewriter, root->getLoc(), x, tanh));
  return success();
}

/// x * 0.5 * (1 + erf(x / sqrt(2))).
struct FormErfGelu : OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ErfOp erf,
                                PatternRewriter &rewriter) const override {
    double scale = 1.0;
    Value x = stripScale(erf.getInput(), scale);
    if (x == erf.getInput() || !near(scale, M_SQRT1_2))
      return failure();
    return replaceWithGelu(rewriter, halfXTimesOnePlus(erf.getResult(), x), x,
                           false);
  }
};

/// x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
struct FormTanhGelu : OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TanhOp tanh,
                                PatternRewriter &rewriter) const override {
    double scale = 1.0;
    Value inner = stripScale(tanh.getInput(), scale);
    auto add = inner.getDefiningOp<AddOp>();
    if (inner == tanh.getInput() || !near(scale, kTanhScale) || !add ||
        !inner.hasOneUse())
      return failure();
    for (int side = 0; side < 2; ++side) {
      Value x = add->getOperand(side), cube;
      Value weighted = add->getOperand(1 - side);
      if (!weighted.hasOneUse() || !near(scaleOf(weighted, cube), kTanhCube) ||
          !isCube(cube, x))
        continue;
      return replaceWithGelu(rewriter, halfXTimesOnePlus(tanh.getResult(), x),
                             x, true);
    }
    return failure();
  }
};

struct FormGelu : gpuc::impl::GpucFormGeluBase<FormGelu> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FormErfGelu, FormTanhGelu>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};
} // namespace

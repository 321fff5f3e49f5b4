//===- FormAttention.cpp - scaled dot-product attention as one op ---------===//
//
// Exporters spell attention as a chain of a GEMM, a scale, a mask, a softmax,
// perhaps a dropout, and a second GEMM. As that chain, backward keeps the
// [B, H, Tq, Tk] weights and codegen can only run it as GEMMs around row
// kernels. As one gpuc.attention, the gradient recomputes the weights from
// per-row statistics, and gpuc-decompose picks the lowering (GEMMs, or a
// fused kernel that never stores a weight).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Constants.h"
#include "gpuc/Transforms/Passes.h"
#include "gpuc/Transforms/TriangularMask.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFORMATTENTION
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// An additive mask's fill at or below which a score plus the fill is the
/// fill in f32 for every score below 2^70 in magnitude.
constexpr double kLowestAdditiveFill = -1e30;

/// The mask of the scores `v`: a select with a constant fill, or the
/// addition of a constant of zeros and one very low fill.
struct Mask {
  Value cond;             // i1, as the select reads it (maybe a broadcast)
  DenseElementsAttr bias; // or the additive constant
  double fill = -INFINITY;
  bool keeps = false;
};

/// Whether adding `value` to a score is a mask's fill.
bool isAdditiveFill(double value) {
  return value == -INFINITY || value <= kLowestAdditiveFill;
}

/// `v` (through broadcasts) as a select of zeros and an additive fill: the
/// mask Hugging Face adds, where it is too large to fold into one constant
/// (a causal mask over a batch at a context of 1,024 is 16M elements).
std::optional<Mask> additiveSelect(Value v) {
  while (auto broadcast = v.getDefiningOp<BroadcastOp>())
    v = broadcast.getInput();
  auto select = v.getDefiningOp<SelectOp>();
  if (!select)
    return std::nullopt;
  std::optional<double> onTrue = splatOf(select.getOnTrue());
  std::optional<double> onFalse = splatOf(select.getOnFalse());
  if (!onTrue || !onFalse)
    return std::nullopt;
  if (*onTrue == 0 && isAdditiveFill(*onFalse))
    return Mask{select.getCond(), nullptr, *onFalse, /*keeps=*/true};
  if (*onFalse == 0 && isAdditiveFill(*onTrue))
    return Mask{select.getCond(), nullptr, *onTrue, /*keeps=*/false};
  return std::nullopt;
}

Value stripMask(Value v, std::optional<Mask> &mask) {
  Operation *def = v.getDefiningOp();
  if (!def || !def->hasOneUse())
    return v;
  if (auto select = dyn_cast<SelectOp>(def)) {
    if (std::optional<double> fill = splatOf(select.getOnTrue())) {
      mask = Mask{select.getCond(), nullptr, *fill, false};
      return select.getOnFalse();
    }
    if (std::optional<double> fill = splatOf(select.getOnFalse())) {
      mask = Mask{select.getCond(), nullptr, *fill, true};
      return select.getOnTrue();
    }
    return v;
  }
  if (auto add = dyn_cast<AddOp>(def)) {
    for (int side = 0; side < 2; ++side) {
      if (std::optional<Mask> added = additiveSelect(def->getOperand(side))) {
        mask = added;
        return def->getOperand(1 - side);
      }
      DenseElementsAttr c = constantOf(def->getOperand(side));
      if (!c || !isa<FloatType>(c.getElementType()))
        continue;
      // Zeros and one fill: -inf, or a value so low that adding it to a
      // score gives the fill itself (Hugging Face adds the lowest float,
      // whose spacing, 2^104, is past any score), as a select would.
      std::optional<double> fill;
      bool zerosAndFill =
          llvm::all_of(c.getValues<APFloat>(), [&](const APFloat &x) {
            if (x.isZero())
              return true;
            double value = x.convertToDouble();
            if (!isAdditiveFill(value) || (fill && *fill != value))
              return false;
            fill = value;
            return true;
          });
      if (!zerosAndFill)
        continue;
      if (fill)
        mask = Mask{Value(), c, *fill, false};
      return def->getOperand(1 - side);
    }
  }
  return v;
}

/// PyTorch's dynamo exporter writes scaled_dot_product_attention's weights
/// as `where(isnan(p), 0, p)` of the softmax p: NaN only where a row masks
/// every key with -inf, or a score is NaN. Returns p, with `guarded` set,
/// when the guard is that and nothing else reads p.
Value stripNanGuard(Value weights, bool &guarded) {
  auto select = weights.getDefiningOp<SelectOp>();
  if (!select || !select->hasOneUse() ||
      !llvm::is_contained({0.0}, splatOf(select.getOnTrue()).value_or(1.0)))
    return weights;
  Value p = select.getOnFalse();
  auto isNan = select.getCond().getDefiningOp<CompareOp>();
  if (!isNan || isNan.getPredicate() != ComparePredicate::ne ||
      isNan.getLhs() != p || isNan.getRhs() != p || !isNan->hasOneUse())
    return weights;
  for (Operation *user : p.getUsers())
    if (user != select && user != isNan)
      return weights;
  guarded = true;
  return p;
}

/// Whether a triangular mask `cond` (true keeps a score where `keeps`)
/// keeps at least one key of every row. A row's kept keys are an interval
/// at one end of it: its first or last key is kept, or none is.
bool triangleKeepsAKeyInEveryRow(Value cond, bool keeps) {
  std::optional<TriangularMask> triangle = matchTriangularMask(cond);
  if (!triangle)
    return false;
  ArrayRef<int64_t> shape = shapeOf(cond);
  int64_t queries = shape[shape.size() - 2], keys = shape.back();
  for (int64_t q = 0; q < queries; ++q)
    if (keys == 0 ||
        (holdsComparison<int64_t>(triangle->keyVsQuery, 0, q) != keeps &&
         holdsComparison<int64_t>(triangle->keyVsQuery, keys - 1, q) != keeps))
      return false;
  return true;
}

/// Whether a constant mask keeps at least one key of every row.
bool keepsAKeyInEveryRow(const Mask &mask) {
  DenseElementsAttr masked = mask.bias;
  SmallVector<bool> bits;
  if (masked) {
    for (const APFloat &x : masked.getValues<APFloat>())
      bits.push_back(!x.isZero());
  } else {
    Value cond = mask.cond;
    if (auto b = cond.getDefiningOp<BroadcastOp>())
      cond = b.getInput();
    masked = constantOf(cond);
    if (!masked)
      return triangleKeepsAKeyInEveryRow(cond, mask.keeps);
    for (bool bit : masked.getValues<bool>())
      bits.push_back(bit != mask.keeps);
  }
  ArrayRef<int64_t> shape = masked.getType().getShape();
  int64_t keys = shape.empty() ? 1 : shape.back();
  for (size_t row = 0; row < bits.size(); row += keys)
    if (llvm::all_of(ArrayRef(bits).slice(row, keys), [](bool b) { return b; }))
      return false;
  return true;
}

/// `v` with leading 1s up to rank 4 (a reshape, which costs nothing).
Value toRank4(TensorBuilder &tb, Location loc, Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() == 4)
    return v;
  SmallVector<int64_t> wide(4 - shape.size(), 1);
  wide.append(shape.begin(), shape.end());
  return tb.reshape(loc, v, wide);
}

/// Whether `transpose` swaps the last two dimensions only.
bool swapsLastTwo(TransposeOp transpose) {
  ArrayRef<int64_t> perm = transpose.getPerm();
  int64_t rank = perm.size();
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return false;
  return rank >= 2 && perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

/// The last two dimensions of `v` swapped. Where `v` is such a swap itself,
/// or a reshape of leading dimensions of one (PyTorch's decomposition of
/// scaled_dot_product_attention transposes keys that `repeat_kv` had
/// expanded), the swap undoes it instead of adding a transpose.
Value swapLastTwo(TensorBuilder &tb, PatternRewriter &rewriter, Location loc,
                  Value v) {
  if (auto transpose = v.getDefiningOp<TransposeOp>();
      transpose && swapsLastTwo(transpose))
    return transpose.getInput();
  if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    auto transpose = reshape.getInput().getDefiningOp<TransposeOp>();
    ArrayRef<int64_t> in = shapeOf(reshape.getInput()), out = shapeOf(v);
    if (transpose && swapsLastTwo(transpose) && in.size() >= 2 &&
        out.size() >= 2 && in.take_back(2) == out.take_back(2)) {
      SmallVector<int64_t> shape(out);
      std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
      return tb.reshape(loc, transpose.getInput(), shape);
    }
  }
  ArrayRef<int64_t> shape = shapeOf(v);
  SmallVector<int64_t> perm, swapped(shape);
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    perm.push_back(d);
  std::swap(perm[shape.size() - 1], perm[shape.size() - 2]);
  std::swap(swapped[shape.size() - 1], swapped[shape.size() - 2]);
  return TransposeOp::create(
      rewriter, loc,
      RankedTensorType::get(swapped, getElementTypeOrSelf(v.getType())), v,
      perm);
}

/// `v` ([B, H, T, D]) as grouped-query attention's key or value rows: a
/// tensor x of [B, Hk, T, D] whose every head is repeated H / Hk times in
/// a row, as Hugging Face's `repeat_kv` spells it (x reshaped to [B, Hk, 1,
/// T, D], broadcast to [B, Hk, g, T, D], reshaped to [B, Hk * g, T, D]).
/// None where `v` is not such an expansion.
std::optional<Value> groupedHeads(TensorBuilder &tb, Location loc, Value v) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  auto expand =
      merge ? merge.getInput().getDefiningOp<BroadcastOp>() : BroadcastOp();
  if (!expand)
    return std::nullopt;
  ArrayRef<int64_t> rows = shapeOf(v), expanded = shapeOf(expand);
  SmallVector<int64_t> input(shapeOf(expand.getInput()));
  if (rows.size() != 4 || expanded.size() != 5 || input.size() > 5)
    return std::nullopt;
  input.insert(input.begin(), 5 - input.size(), 1);
  if (expanded[0] != rows[0] || expanded[1] * expanded[2] != rows[1] ||
      expanded[3] != rows[2] || expanded[4] != rows[3] || input[2] != 1 ||
      input[0] != expanded[0] || input[1] != expanded[1] ||
      input[3] != expanded[3] || input[4] != expanded[4])
    return std::nullopt;
  return tb.reshape(loc, expand.getInput(),
                    {expanded[0], expanded[1], expanded[3], expanded[4]});
}

/// A constant mask at its smallest shape that broadcasts to it: each
/// dimension along which every slice is the same becomes 1 (canonicalize
/// folds a broadcast of a padding mask into a constant of the scores'
/// size; the kernels read the small one through zero strides).
Value shrinkConstantMask(PatternRewriter &rewriter, Location loc, Value mask) {
  auto constant = mask.getDefiningOp<ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements)
    return mask;
  SmallVector<int64_t> shape(elements.getType().getShape());
  SmallVector<bool> bits(elements.getValues<bool>());
  bool shrunk = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    int64_t inner = 1;
    for (size_t e = d + 1; e < shape.size(); ++e)
      inner *= shape[e];
    int64_t outer = (int64_t)bits.size() / (shape[d] * inner);
    bool uniform = true;
    for (int64_t o = 0; o < outer && uniform; ++o)
      for (int64_t i = 0; i < shape[d] && uniform; ++i)
        for (int64_t r = 0; r < inner && uniform; ++r)
          uniform = bits[(o * shape[d] + i) * inner + r] ==
                    bits[o * shape[d] * inner + r];
    if (!uniform)
      continue;
    SmallVector<bool> kept;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < inner; ++r)
        kept.push_back(bits[o * shape[d] * inner + r]);
    bits = std::move(kept);
    shape[d] = 1;
    shrunk = true;
  }
  if (!shrunk)
    return mask;
  auto type = RankedTensorType::get(shape, rewriter.getI1Type());
  return ConstantOp::create(rewriter, loc, type,
                            DenseElementsAttr::get(type, bits));
}

/// Rooted at the GEMM of the weights with the values.
struct FormAttentionPattern : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp pv,
                                PatternRewriter &rewriter) const override {
    int64_t rank = shapeOf(pv.getResult()).size();
    if ((rank != 3 && rank != 4) || pv.getTransposeLhs())
      return failure();
    Value weights = pv.getLhs();
    DropoutOp dropout = weights.getDefiningOp<DropoutOp>();
    if (dropout) {
      if (!dropout->hasOneUse())
        return failure();
      weights = dropout.getInput();
    }
    bool nanGuard = false;
    weights = stripNanGuard(weights, nanGuard);
    auto softmax = weights.getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxis() != rank - 1 ||
        (!nanGuard && !softmax->hasOneUse()))
      return failure();

    // scores = after * mask(before * Q K^T)
    double after = 1.0, before = 1.0;
    std::optional<Mask> mask;
    Value scores = stripScale(softmax.getInput(), after);
    scores = stripMask(scores, mask);
    scores = stripScale(scores, before);
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk || !qk->hasOneUse())
      return failure();
    double scale = after * before;
    // PyTorch's export of scaled_dot_product_attention scales Q and K^T.
    Value q = stripScale(qk.getLhs(), scale);
    Value k = stripScale(qk.getRhs(), scale);
    // The guard zeroes a row that masks every key with -inf; the kernels
    // do not: such a mask is left to the GEMMs.
    if (nanGuard && mask && mask->fill == -INFINITY &&
        !keepsAKeyInEveryRow(*mask))
      return failure();
    if (mask) {
      if (mask->fill == -INFINITY ? !(after > 0) : false)
        return failure();
      mask->fill *= after;
      if (std::isnan(mask->fill) || mask->fill == INFINITY)
        return failure();
    }
    if (!std::isfinite(scale))
      return failure();

    Location loc = pv.getLoc();
    TensorBuilder tb(rewriter);
    rewriter.setInsertionPoint(pv);
    if (qk.getTransposeLhs())
      q = swapLastTwo(tb, rewriter, loc, q);
    if (!qk.getTransposeRhs())
      k = swapLastTwo(tb, rewriter, loc, k);
    Value v = pv.getRhs();
    if (pv.getTransposeRhs())
      v = swapLastTwo(tb, rewriter, loc, v);
    q = toRank4(tb, loc, q);
    k = toRank4(tb, loc, k);
    v = toRank4(tb, loc, v);
    // Grouped-query attention reads the key and value heads unexpanded.
    std::optional<Value> groupedKeys = groupedHeads(tb, loc, k);
    std::optional<Value> groupedValues = groupedHeads(tb, loc, v);
    if (groupedKeys && groupedValues &&
        shapeOf(*groupedKeys)[1] == shapeOf(*groupedValues)[1]) {
      k = *groupedKeys;
      v = *groupedValues;
    }

    Value maskValue;
    if (mask && mask->cond) {
      maskValue = mask->cond;
      if (auto b = maskValue.getDefiningOp<BroadcastOp>())
        maskValue = b.getInput();
      maskValue =
          toRank4(tb, loc, shrinkConstantMask(rewriter, loc, maskValue));
    } else if (mask) {
      // The additive constant as a boolean: true where it is the fill.
      SmallVector<bool> bits;
      for (const APFloat &x : mask->bias.getValues<APFloat>())
        bits.push_back(!x.isZero());
      auto type = RankedTensorType::get(mask->bias.getType().getShape(),
                                        rewriter.getI1Type());
      maskValue =
          toRank4(tb, loc,
                  shrinkConstantMask(
                      rewriter, loc,
                      ConstantOp::create(rewriter, loc, type,
                                         DenseElementsAttr::get(type, bits))));
    }

    ArrayRef<int64_t> qs = shapeOf(q), vs = shapeOf(v);
    Type element = getElementTypeOrSelf(pv.getType());
    auto resultType =
        RankedTensorType::get({qs[0], qs[1], qs[2], vs[3]}, element);
    auto lseType =
        RankedTensorType::get(qs.take_front(3), rewriter.getF32Type());
    auto attention = AttentionOp::create(
        rewriter, loc, resultType, lseType, q, k, v, maskValue,
        dropout ? dropout.getRngKey() : Value(),
        rewriter.getF64FloatAttr(scale),
        rewriter.getF64FloatAttr(mask ? mask->fill : -INFINITY),
        mask && mask->keeps ? rewriter.getUnitAttr() : UnitAttr(),
        ComparePredicateAttr(),
        rewriter.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble()
                                         : 0.0),
        rewriter.getI64IntegerAttr(dropout ? dropout.getStream() : 0));
    Value result = attention.getResult();
    if (rank == 3)
      result = tb.reshape(loc, result, shapeOf(pv.getResult()));
    rewriter.replaceOp(pv, result);
    return success();
  }
};

struct FormAttention : gpuc::impl::GpucFormAttentionBase<FormAttention> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FormAttentionPattern>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};
} // namespace

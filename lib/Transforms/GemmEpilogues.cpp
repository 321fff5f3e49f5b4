//===- GemmEpilogues.cpp - what a GEMM adds to its product as it stores it ===//
//
// A linear layer is a matmul and the broadcast add of its bias. As ops of
// their own the add is part of the next kernel, or a kernel of its own
// where nothing else reads the product elementwise (attention's fused
// query-key-value projection, whose slices feed the attention). A GEMM
// library adds a bias vector to every row of its result as it stores it
// (cuBLASLt's bias epilogue; the CPU device adds it after oneDNN's GEMM), so
// the add becomes the matmul's `bias` operand.
//
// Only where that rounds no differently: an f32 product plus an f32 bias,
// or a 16-bit product widened, plus a bias, and stored in the product's
// type again (autocast's linear layer: the bias in the product's type,
// added to the f32 sums, rounded once). A 16-bit product whose sum with the
// bias flows on in f32 (into a GELU) keeps its add: storing the sum in 16
// bits would round it where the program does not.
//
// A sum of products (backward's sum of the input gradients of projections
// that read one value) becomes GEMMs that each add their product to the sum
// so far (`plus`: beta = 1 in oneDNN and cuBLASLt).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCGEMMEPILOGUES
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// The vector a broadcast spreads over the last dimension of its result
/// (its input with every other dimension 1), or null.
Value biasVector(Value v) {
  auto broadcast = v.getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return {};
  Value input = broadcast.getInput();
  ArrayRef<int64_t> in = TensorBuilder::shapeOf(input),
                    out = TensorBuilder::shapeOf(broadcast.getResult());
  if (in.empty() || in.back() != out.back() || in.back() == 1)
    return {};
  if (!llvm::all_of(in.drop_back(), [](int64_t d) { return d == 1; }))
    return {};
  return input;
}

/// The product under `v` = [cast(] [reshape(] matmul [)] [)], each link
/// read by the next alone, with `widened` set where the cast widens a
/// 16-bit product to f32; null where `v` is not such a chain or the matmul
/// cannot take a bias.
MatmulOp productUnder(Value v, bool &widened) {
  widened = false;
  auto onlyUse = [](Value x) { return x.hasOneUse(); };
  if (auto cast = v.getDefiningOp<CastOp>()) {
    Type from = getElementTypeOrSelf(cast.getInput().getType());
    if (!(from.isF16() || from.isBF16()) ||
        !getElementTypeOrSelf(v.getType()).isF32() || !onlyUse(cast.getInput()))
      return {};
    widened = true;
    v = cast.getInput();
  }
  if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    // The bias spans the product's columns: the reshape keeps them.
    if (TensorBuilder::shapeOf(reshape.getInput()).back() !=
            TensorBuilder::shapeOf(v).back() ||
        !onlyUse(reshape.getInput()))
      return {};
    v = reshape.getInput();
  }
  auto mm = v.getDefiningOp<MatmulOp>();
  if (!mm || mm.getAcc() || mm.getBias() || !mm.getResultPerm().empty() ||
      mm.getLhsTriangle() || mm.getResultTriangle() || !onlyUse(mm.getResult()))
    return {};
  Type product = getElementTypeOrSelf(mm.getResult().getType());
  if (widened ? product.isF32() : !product.isF32())
    return {};
  return mm;
}

struct FoldBiasIntoMatmul : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      Value bias = biasVector(add->getOperand(1 - side));
      bool widened;
      MatmulOp mm = productUnder(add->getOperand(side), widened);
      if (!bias || !mm)
        continue;
      Type product = getElementTypeOrSelf(mm.getResult().getType());
      // A widened product's sum must only be stored back in its type.
      SmallVector<CastOp> stores;
      if (widened) {
        for (Operation *user : add->getUsers()) {
          auto store = dyn_cast<CastOp>(user);
          if (!store ||
              getElementTypeOrSelf(store.getResult().getType()) != product)
            return rewriter.notifyMatchFailure(add, "the sum flows on in f32");
          stores.push_back(store);
        }
        if (stores.empty())
          return failure();
      }
      // At the add, which the bias (maybe computed after the product) and
      // the product's operands all reach.
      rewriter.setInsertionPoint(add);
      Location loc = add.getLoc();
      int64_t columns = TensorBuilder::shapeOf(bias).back();
      if (TensorBuilder::shapeOf(bias).size() != 1)
        bias = ReshapeOp::create(
            rewriter, loc,
            RankedTensorType::get({columns}, getElementTypeOrSelf(bias)), bias);
      if (getElementTypeOrSelf(bias.getType()) != product)
        bias = CastOp::create(rewriter, loc,
                              RankedTensorType::get({columns}, product), bias);
      auto biased = MatmulOp::create(
          rewriter, mm.getLoc(), mm.getResult().getType(), mm.getLhs(),
          mm.getRhs(), /*acc=*/Value(), bias, mm.getTransposeLhs(),
          mm.getTransposeRhs(), mm.getLhsPerm(), mm.getRhsPerm(),
          mm.getResultPerm(), mm.getLhsWindowAttr(), mm.getRhsWindowAttr(),
          /*lhs_triangle=*/nullptr, /*result_triangle=*/nullptr,
          /*bands=*/nullptr);
      auto asShapeOf = [&](Value like) -> Value {
        if (like.getType() == biased.getType())
          return biased;
        return ReshapeOp::create(rewriter, loc, like.getType(), biased);
      };
      if (!widened) {
        rewriter.replaceOp(add, asShapeOf(add.getResult()));
      } else {
        for (CastOp store : stores)
          rewriter.replaceOp(store, asShapeOf(store.getResult()));
        rewriter.eraseOp(add);
      }
      return success();
    }
    return failure();
  }
};

/// Whether `v` is a product that only `add` reads, stored as it is computed
/// (no layout, triangle or bias): a term a later GEMM can accumulate onto.
bool isSummedProduct(Value v, AddOp add) {
  auto mm = v.getDefiningOp<MatmulOp>();
  return mm && v.hasOneUse() && *v.getUsers().begin() == add &&
         v.getType() == add.getType() && !mm.getBias() &&
         mm.getResultPerm().empty() && !mm.getResultTriangle() &&
         !mm.getLhsTriangle() && !mm.getBands();
}

/// add(p, q) of two products: q accumulated onto p (`plus`, beta = 1 in
/// the libraries), which the memory plan places over p. Backward sums the
/// input gradients of projections that read one value (Llama's query, key
/// and value, its MLP's gate and up) this way: each GEMM wrote its term and
/// a kernel read them all to write their sum, where each GEMM now adds its
/// term to the sum so far as it stores it. Each term joins the sum unrounded
/// (its f32 sums plus the stored sum, rounded once), where the adds rounded
/// each product and then each sum.
struct AccumulateSummedProducts : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      Value sum = add->getOperand(side), term = add->getOperand(1 - side);
      if (!isSummedProduct(sum, add) || !isSummedProduct(term, add))
        continue;
      auto mm = term.getDefiningOp<MatmulOp>();
      if (mm.getAcc())
        continue;
      // At the add, which both products reach.
      rewriter.setInsertionPoint(add);
      rewriter.replaceOpWithNewOp<MatmulOp>(
          add, mm.getResult().getType(), mm.getLhs(), mm.getRhs(), sum,
          /*bias=*/Value(), mm.getTransposeLhs(), mm.getTransposeRhs(),
          mm.getLhsPerm(), mm.getRhsPerm(), /*result_perm=*/ArrayRef<int64_t>{},
          mm.getLhsWindowAttr(), mm.getRhsWindowAttr(),
          /*lhs_triangle=*/nullptr, /*result_triangle=*/nullptr,
          /*bands=*/nullptr);
      rewriter.eraseOp(mm);
      return success();
    }
    return failure();
  }
};

struct GpucGemmEpilogues
    : gpuc::impl::GpucGemmEpiloguesBase<GpucGemmEpilogues> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldBiasIntoMatmul, AccumulateSummedProducts>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

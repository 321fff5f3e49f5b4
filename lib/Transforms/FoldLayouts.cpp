//===- FoldLayouts.cpp - transposes around GEMMs as strides ---------------===//
//
// Attention splits a token's row into heads and merges them back with
// transposes: [B, T, H, D] <-> [B, H, T, D]. As ops of their own they are
// kernels that only copy (GPT-2 124M's step moved 288 MiB through them). A
// GEMM library reads and writes matrices at any leading dimension and a
// batch at any stride, so a transpose that feeds a matmul, or that is the
// only reader of one, becomes the matmul's layout (lhs_perm, rhs_perm,
// result_perm) wherever GemmGeometry can express it, and the copy is gone.
// So does a slice of a wider tensor's columns that only matmuls read (a
// fused query-key-value projection's query, key and value): each product
// reads its window in place (lhs_window, rhs_window), its rows the stored
// row's width apart.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GemmGeometry.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFOLDLAYOUTS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// `outer` applied after `inner`, as one permutation: transpose(transpose(x,
/// inner), outer) is transpose(x, compose(inner, outer)). An empty `outer`
/// is the identity.
SmallVector<int64_t> compose(ArrayRef<int64_t> inner, ArrayRef<int64_t> outer) {
  if (outer.empty())
    return SmallVector<int64_t>(inner);
  SmallVector<int64_t> perm;
  for (int64_t o : outer)
    perm.push_back(inner[o]);
  return perm;
}

bool isIdentity(ArrayRef<int64_t> perm) {
  return llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()));
}

/// Whether every reader of `v` is a matmul, through reshapes: the readers
/// that can take a column window of what `v` slices.
bool onlyMultiplied(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *user) {
    if (auto r = dyn_cast<ReshapeOp>(user))
      return onlyMultiplied(r.getResult());
    return isa<MatmulOp>(user);
  });
}

/// A matmul operand as the library reads it: a stored tensor, maybe a
/// window of its columns, through a permutation.
struct Operand {
  Value value;
  SmallVector<int64_t> perm;
  ColumnsAttr window;

  SmallVector<int64_t> readShape() const {
    return windowedShape(shapeOf(value), window);
  }
  GemmWindow geometryWindow() const {
    return gemmWindow(shapeOf(value), window);
  }
};

struct FoldLayoutsIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Operand lhs{op.getLhs(), SmallVector<int64_t>(op.getLhsPerm()),
                op.getLhsWindowAttr()};
    Operand rhs{op.getRhs(), SmallVector<int64_t>(op.getRhsPerm()),
                op.getRhsWindowAttr()};
    SmallVector<int64_t> resultPerm(op.getResultPerm());
    Type resultType = op.getResult().getType();
    TransposeOp resultTranspose;
    auto silent = [] { return InFlightDiagnostic(); };
    // A candidate layout is taken when the libraries can still run it.
    auto expressible = [&](const Operand &l, const Operand &r,
                           ArrayRef<int64_t> cp) {
      auto norm = [](ArrayRef<int64_t> p) {
        return isIdentity(p) ? ArrayRef<int64_t>() : p;
      };
      return succeeded(inferGemmGeometry(
          l.readShape(), r.readShape(), op.getTransposeLhs(),
          op.getTransposeRhs(), norm(l.perm), norm(r.perm), norm(cp), silent,
          l.geometryWindow(), r.geometryWindow()));
    };
    bool changed = false;
    // A transpose feeding an operand becomes its permutation, and then a
    // slice of a wider tensor's columns its window (a window is read as
    // stored: it takes no transpose beneath it).
    // A triangle is of the matrix as stored: its lhs or result keeps no
    // layout.
    for (Operand *operand : {&lhs, &rhs}) {
      if (operand == &lhs && op.getLhsTriangle())
        continue;
      Operand candidate = *operand;
      auto t = candidate.window ? TransposeOp()
                                : candidate.value.getDefiningOp<TransposeOp>();
      if (t) {
        candidate.value = t.getInput();
        candidate.perm = compose(t.getPerm(), operand->perm);
        if (operand == &lhs ? expressible(candidate, rhs, resultPerm)
                            : expressible(lhs, candidate, resultPerm)) {
          *operand = candidate;
          changed = true;
        }
      }
      if (operand->window)
        continue;
      std::optional<ColumnWindow> window = columnWindow(operand->value);
      if (!window)
        continue;
      Value sliced = operand->value.getDefiningOp<ReshapeOp>()
                         ? operand->value.getDefiningOp()->getOperand(0)
                         : operand->value;
      if (!onlyMultiplied(sliced))
        continue;
      candidate = *operand;
      candidate.value = window->stored;
      candidate.window =
          ColumnsAttr::get(op.getContext(), window->offset, window->shape);
      if (operand == &lhs ? expressible(candidate, rhs, resultPerm)
                          : expressible(lhs, candidate, resultPerm)) {
        *operand = candidate;
        changed = true;
      }
    }
    if (op.getResult().hasOneUse() && !op.getAcc() && !op.getBias() &&
        !op.getResultTriangle()) {
      if (auto t = dyn_cast<TransposeOp>(*op.getResult().user_begin())) {
        SmallVector<int64_t> stored = resultPerm;
        if (stored.empty())
          llvm::append_range(
              stored, llvm::seq<int64_t>(0, shapeOf(op.getResult()).size()));
        SmallVector<int64_t> perm = compose(stored, t.getPerm());
        if (expressible(lhs, rhs, perm)) {
          resultPerm = perm;
          resultType = t.getResult().getType();
          resultTranspose = t;
          changed = true;
        }
      }
    }
    if (!changed)
      return failure();
    auto norm = [](SmallVector<int64_t> &p) {
      if (isIdentity(p))
        p.clear();
    };
    norm(lhs.perm);
    norm(rhs.perm);
    norm(resultPerm);
    auto folded = MatmulOp::create(
        rewriter, op.getLoc(), resultType, lhs.value, rhs.value, op.getAcc(),
        op.getBias(), op.getTransposeLhs(), op.getTransposeRhs(), lhs.perm,
        rhs.perm, resultPerm, lhs.window, rhs.window, op.getLhsTriangleAttr(),
        op.getResultTriangleAttr(), op.getBandsAttr());
    folded->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    if (resultTranspose) {
      rewriter.replaceOp(resultTranspose, folded.getResult());
      rewriter.eraseOp(op);
    } else {
      rewriter.replaceOp(op, folded.getResult());
    }
    return success();
  }
};

/// Whether `v` is a head split or merge ([B, T, H, D] <-> [B, H, T, D]).
TransposeOp swapsHeads(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && llvm::equal(t.getPerm(), ArrayRef<int64_t>{0, 2, 1, 3})
             ? t
             : TransposeOp();
}

/// Whether every reader of `v` is a head merge (or one of `also`).
bool onlyMerged(Value v, ArrayRef<Operation *> also = {}) {
  return llvm::all_of(v.getUsers(), [&](Operation *user) {
    return llvm::is_contained(also, user) || swapsHeads(user->getResult(0));
  });
}

/// Whether `op` is elementwise work, whose kernel reads or writes through
/// a head split or merge beside it (a fused transpose) at no cost.
bool isElementwise(Operation *op) {
  return op && op->hasTrait<OpTrait::Elementwise>();
}

/// Whether an attention operand `v` can be read as stored [B, T, H, D]: a
/// head split (whose input is stored so), or elementwise work (rotary
/// positions on the split heads), whose kernel then writes it so.
bool readableAsRows(Value v) {
  return swapsHeads(v) || isElementwise(v.getDefiningOp());
}

/// Whether a gradient `g` can be stored [B, T, H, D]: every reader merges
/// the heads, or is elementwise work (the rotary positions' gradient)
/// that reads it through a head split it fuses.
bool storableAsRows(Value g) {
  return llvm::all_of(g.getUsers(), [](Operation *user) {
    return swapsHeads(user->getResult(0)) ||
           (!isa<TransposeOp>(user) && isElementwise(user));
  });
}

/// `v`'s dimensions 1 and 2 swapped (a head split or merge), right after
/// `v`.
Value swappedHeads(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[1], shape[2]);
  OpBuilder b(v.getContext());
  b.setInsertionPointAfterValue(v);
  return TransposeOp::create(b, v.getLoc(), type.clone(shape), v,
                             ArrayRef<int64_t>{0, 2, 1, 3})
      .getResult();
}

/// `v` swapped to [B, T, H, D]: a head split's input, else a head merge of
/// it (which its producer's kernel fuses).
Value asRows(Value v) {
  if (TransposeOp split = swapsHeads(v))
    return split.getInput();
  return swappedHeads(v);
}

/// `v` as stored [B, T, H, D]: its readers that merged the heads read it
/// now; any other reader (elementwise) reads a head split of it, but those
/// in `also`, which read it as stored.
void storeMerged(Value v, ArrayRef<Operation *> also = {}) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[1], shape[2]);
  v.setType(type.clone(shape));
  Value split;
  for (OpOperand &use : llvm::make_early_inc_range(v.getUses())) {
    if (llvm::is_contained(also, use.getOwner()))
      continue;
    if (auto t = dyn_cast<TransposeOp>(use.getOwner())) {
      t.getResult().replaceAllUsesWith(v);
      t.erase();
      continue;
    }
    if (!split)
      split = swappedHeads(v);
    use.set(split);
  }
}

/// An attention whose query, key and value are head splits and whose
/// result only a head merge reads (and its gradients, the same way) takes
/// the bthd layout: the fused kernel reads and writes the projections' own
/// [B, T, H, D] rows. Forward and gradient change together, since the
/// gradient reads the forward's result. An operand that elementwise work
/// computes from its head split (Llama's rotary positions on the queries
/// and keys) is stored [B, T, H, D] by that work's kernel instead, and a
/// gradient elementwise work reads is read through a head split that its
/// kernel fuses: the result and its gradient then need no transposes.
void foldAttentionLayout(AttentionOp forward) {
  if (forward.getBthd())
    return;
  SmallVector<Operation *> grads;
  for (Operation *user : forward.getResult().getUsers())
    if (auto grad = dyn_cast<AttentionGradOp>(user)) {
      if (grad.getQuery() != forward.getQuery() ||
          grad.getKey() != forward.getKey() ||
          grad.getValue() != forward.getValue() ||
          grad.getResult() != forward.getResult() || grad.getBthd() ||
          !swapsHeads(grad.getResultGrad()) ||
          !storableAsRows(grad.getQueryGrad()) ||
          !storableAsRows(grad.getKeyGrad()) ||
          !storableAsRows(grad.getValueGrad()))
        return;
      if (!llvm::is_contained(grads, grad))
        grads.push_back(grad);
    }
  if (!readableAsRows(forward.getQuery()) ||
      !readableAsRows(forward.getKey()) ||
      !readableAsRows(forward.getValue()) ||
      !onlyMerged(forward.getResult(), grads))
    return;
  auto split = [](OpOperand &operand) { operand.set(asRows(operand.get())); };
  split(forward.getQueryMutable());
  split(forward.getKeyMutable());
  split(forward.getValueMutable());
  forward.setBthd(true);
  storeMerged(forward.getResult(), grads);
  for (Operation *op : grads) {
    auto grad = cast<AttentionGradOp>(op);
    grad.getQueryMutable().assign(forward.getQuery());
    grad.getKeyMutable().assign(forward.getKey());
    grad.getValueMutable().assign(forward.getValue());
    split(grad.getResultGradMutable());
    grad.setBthd(true);
    for (Value g : grad->getResults())
      storeMerged(g);
  }
}

/// The positions of `shape`'s dimensions other than 1.
SmallVector<int64_t> nonUnitDims(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> dims;
  for (auto [i, d] : llvm::enumerate(shape))
    if (d != 1)
      dims.push_back(i);
  return dims;
}

/// A reshape that only inserts or removes dimensions of 1.
bool movesOnlyUnits(ReshapeOp r) {
  ArrayRef<int64_t> in = shapeOf(r.getInput()), out = shapeOf(r.getResult());
  SmallVector<int64_t> a, b;
  for (int64_t d : in)
    if (d != 1)
      a.push_back(d);
  for (int64_t d : out)
    if (d != 1)
      b.push_back(d);
  return a == b;
}

/// transpose(x, perm) viewed as `target` (the same dimensions but for 1s)
/// is transpose(reshape(x), result) with the 1s where `target` has them:
/// the reshape is free, and the transpose then meets the op beside it.
/// Returns the reshaped shape of x and the permutation.
std::pair<SmallVector<int64_t>, SmallVector<int64_t>>
unitsOutside(ArrayRef<int64_t> x, ArrayRef<int64_t> perm,
             ArrayRef<int64_t> target) {
  SmallVector<int64_t> xs = nonUnitDims(x), os = nonUnitDims(target);
  SmallVector<int64_t> transposed;
  for (int64_t p : perm)
    transposed.push_back(x[p]);
  SmallVector<int64_t> ts = nonUnitDims(transposed);
  SmallVector<int64_t> shape(target.size(), 1), result;
  for (size_t i = 0; i < target.size(); ++i)
    result.push_back(i);
  for (size_t k = 0; k < xs.size(); ++k)
    shape[os[k]] = x[xs[k]];
  for (size_t j = 0; j < ts.size(); ++j) {
    size_t k = llvm::find(xs, perm[ts[j]]) - xs.begin();
    result[os[j]] = os[k];
  }
  return {shape, result};
}

/// reshape(transpose(x)) that only inserts or removes 1s, as
/// transpose(reshape(x)) for every reader: the transpose then meets them.
void unitsBeforeTranspose(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  TransposeOp t = r ? r.getInput().getDefiningOp<TransposeOp>() : nullptr;
  if (!t || !movesOnlyUnits(r))
    return;
  OpBuilder b(r);
  auto [shape, perm] =
      unitsOutside(shapeOf(t.getInput()), t.getPerm(), shapeOf(r.getResult()));
  auto type = cast<RankedTensorType>(t.getInput().getType());
  Value x = ReshapeOp::create(b, r.getLoc(), type.clone(shape), t.getInput());
  r.getResult().replaceAllUsesWith(
      TransposeOp::create(b, r.getLoc(), r.getType(), x, perm).getResult());
  r.erase();
  if (t.getResult().use_empty())
    t.erase();
}

/// Each reader of `y` that is a reshape only inserting or removing 1s,
/// read by one transpose: that transpose moves before the reshape, onto y
/// itself.
void transposeBeforeUnits(Value y) {
  for (Operation *user : llvm::make_early_inc_range(y.getUsers())) {
    auto r = dyn_cast<ReshapeOp>(user);
    if (!r || !movesOnlyUnits(r) || !r.getResult().hasOneUse())
      continue;
    auto t = dyn_cast<TransposeOp>(*r.getResult().user_begin());
    if (!t)
      continue;
    // transpose(reshape(y), p) as reshape(transpose(y, q)): q keeps y's 1s
    // in place and orders its other dimensions as the result has them.
    ArrayRef<int64_t> yShape = shapeOf(y), rShape = shapeOf(r.getResult());
    SmallVector<int64_t> ys = nonUnitDims(yShape), rs = nonUnitDims(rShape);
    SmallVector<int64_t> outShape(shapeOf(t.getResult()));
    SmallVector<int64_t> os = nonUnitDims(outShape);
    SmallVector<int64_t> perm, shape(yShape);
    for (size_t i = 0; i < yShape.size(); ++i)
      perm.push_back(i);
    for (size_t j = 0; j < os.size(); ++j) {
      size_t k = llvm::find(rs, t.getPerm()[os[j]]) - rs.begin();
      perm[ys[j]] = ys[k];
      shape[ys[j]] = yShape[ys[k]];
    }
    OpBuilder b(t);
    auto type = cast<RankedTensorType>(y.getType());
    Value moved =
        TransposeOp::create(b, t.getLoc(), type.clone(shape), y, perm);
    t.getResult().replaceAllUsesWith(
        ReshapeOp::create(b, t.getLoc(), t.getType(), moved));
    t.erase();
    r.erase();
  }
}

/// Moves the 1s a reshape inserts or removes to the far side of a
/// transpose beside a matmul or an attention (nn.MultiheadAttention's
/// [B*H, T, D] heads, reshaped to rank 4 around the attention as a batch of
/// one), so that the transpose is the op's operand or only reader: a
/// matmul folds it into its layout, and an attention whose heads are
/// stored [T, B*H, D] takes the bthd layout with a batch of one.
void moveUnitReshapes(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<MatmulOp, AttentionOp, AttentionGradOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (auto grad = dyn_cast<AttentionGradOp>(op)) {
      // Its query, key, value and result are the forward's (moved there).
      unitsBeforeTranspose(grad.getResultGrad());
    } else {
      for (Value operand : op->getOperands())
        unitsBeforeTranspose(operand);
    }
    for (Value result : op->getResults())
      if (isa<RankedTensorType>(result.getType()))
        transposeBeforeUnits(result);
  }
}

struct GpucFoldLayouts : gpuc::impl::GpucFoldLayoutsBase<GpucFoldLayouts> {
  void runOnOperation() override {
    moveUnitReshapes(getOperation());
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp op) { attentions.push_back(op); });
    for (AttentionOp op : attentions)
      foldAttentionLayout(op);
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldLayoutsIntoMatmul>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace

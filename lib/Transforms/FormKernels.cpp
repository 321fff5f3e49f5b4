//===- FormKernels.cpp - one gpuc.fusion per remaining computing op -------===//
//
// Codegen emits one kernel per gpuc.fusion. Whatever gpuc-fuse did not group
// gets a fusion of its own here, so after this pass every op of a step is a
// fusion, a library call, a reshape (an alias) or a constant.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFORMKERNELS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct FormKernels : gpuc::impl::GpucFormKernelsBase<FormKernels> {
  void runOnOperation() override {
    // The fused attention kernels first: they read their query, key and
    // value in place where those are row windows of one stored tensor (a
    // fused projection's), so the slices that cut them out, read by
    // nothing else, never run.
    SmallVector<Operation *> attentions;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp>(op))
        attentions.push_back(op);
    });
    for (Operation *op : attentions) {
      // Once each: a window may be the query and the key both.
      llvm::SmallSetVector<Value, 3> windows;
      for (Value operand : op->getOperands())
        if (isAttentionWindow(op, operand))
          windows.insert(operand);
      bool gradient = isa<AttentionGradOp>(op);
      FusionOp fusion = wrapInFusion(op);
      if (gradient)
        storeGradientsInConcat(fusion);
      for (Value window : windows) {
        Operation *reshape = window.getDefiningOp();
        if (!reshape->use_empty())
          continue;
        Operation *slice = reshape->getOperand(0).getDefiningOp();
        reshape->erase();
        if (slice->use_empty())
          slice->erase();
      }
    }
    SmallVector<Operation *> ops, broadcasts, widenings;
    getOperation().walk([&](func::FuncOp func) {
      for (Operation &op : func.getBody().front())
        if (isa<BroadcastOp>(op))
          broadcasts.push_back(&op);
        else if (isWidening(&op))
          widenings.push_back(&op);
        else if (needsKernel(&op))
          ops.push_back(&op);
    });
    for (Operation *op : ops)
      wrapInFusion(op);
    // Likewise a widening cast (mixed precision's f16 -> f32): each kernel
    // that reads it converts the stored 16-bit value itself, so the value
    // kept between kernels (for backward, most of all) is the 16-bit one.
    for (Operation *op : widenings) {
      if (op->use_empty())
        op->erase();
      else
        wrapInFusion(op);
    }
    // A broadcast is an index mapping: the kernels that read it recompute it
    // from its input. Only broadcasts read elsewhere (by a library call or as
    // a result) are materialized.
    for (Operation *op : broadcasts) {
      if (op->use_empty())
        op->erase();
      else
        wrapInFusion(op);
    }
    // Constants that only kernels read now live inside them.
    getOperation().walk([&](ConstantOp constant) {
      if (constant->use_empty() && isa<func::FuncOp>(constant->getParentOp()))
        constant.erase();
    });
  }

  /// A cast that widens a float exactly (f16/bf16 -> f32).
  static bool isWidening(Operation *op) {
    auto cast = dyn_cast<CastOp>(op);
    if (!cast)
      return false;
    auto from = dyn_cast<FloatType>(cast.getInput().getType().getElementType());
    auto to = dyn_cast<FloatType>(cast.getType().getElementType());
    return from && to && from.getWidth() < to.getWidth();
  }

  /// Operands that a kernel computes itself instead of reading: splat
  /// constants and widening casts in any kernel, broadcasts in pointwise
  /// ones.
  static bool isRecomputed(Operation *user, Value operand) {
    if (isInlinableConstant(operand))
      return true;
    if (isAttentionWindow(user, operand))
      return true;
    if (Operation *def = operand.getDefiningOp(); def && isWidening(def))
      return true;
    return isPointwise(user) && operand.getDefiningOp<BroadcastOp>();
  }

  /// A bthd fused attention's query, key or value that is a row window of
  /// a stored tensor: the kernel reads the stored rows at the window's
  /// offset and strides.
  static bool isAttentionWindow(Operation *user, Value operand) {
    auto isQkv = [&](auto op) {
      return op.getBthd() &&
             (operand == op.getQuery() || operand == op.getKey() ||
              operand == op.getValue());
    };
    bool qkv = false;
    if (auto a = dyn_cast<AttentionOp>(user))
      qkv = isQkv(a);
    else if (auto g = dyn_cast<AttentionGradOp>(user))
      qkv = isQkv(g);
    return qkv && attentionRowWindow(operand).has_value();
  }

  /// The three gradients of a fused projection's query, key and value
  /// (`fusion` holds a bthd gpuc.attention_grad) that only a concat along
  /// the last dimension reads, each merged from heads to [B, T, C]: the
  /// kernel stores them as row windows of the concat, which it yields
  /// instead, and no kernel copies them together.
  static void storeGradientsInConcat(FusionOp fusion) {
    // [B, T, H, D] rows merge into [B, T, C] ones in place only under bthd.
    auto grads = fusion.getBodyBlock().getOps<AttentionGradOp>();
    if (grads.empty() || !(*grads.begin()).getBthd())
      return;
    ConcatOp concat = joinedAttentionGradients(fusion.getResults());
    if (!concat)
      return;
    OpBuilder builder(fusion);
    auto stored =
        FusionOp::create(builder, fusion.getLoc(), concat.getResult().getType(),
                         fusion.getInputs());
    Block &body = stored.getBodyBlock();
    IRMapping mapping;
    for (auto [from, to] :
         llvm::zip(fusion.getBodyBlock().getArguments(), body.getArguments()))
      mapping.map(from, to);
    builder.setInsertionPointToStart(&body);
    for (Operation &inner : fusion.getBodyBlock().without_terminator())
      builder.clone(inner, mapping);
    auto yield = cast<YieldOp>(fusion.getBodyBlock().getTerminator());
    for (auto [result, yielded] :
         llvm::zip(fusion.getResults(), yield.getValues()))
      mapping.map(result, mapping.lookup(yielded));
    for (Value input : concat.getInputs())
      builder.clone(*input.getDefiningOp(), mapping);
    Operation *inner = builder.clone(*concat, mapping);
    YieldOp::create(builder, fusion.getLoc(), inner->getResults());
    concat.getResult().replaceAllUsesWith(stored.getResult(0));
    SmallVector<Operation *> merges;
    for (Value input : concat.getInputs())
      merges.push_back(input.getDefiningOp());
    concat.erase();
    for (Operation *merge : merges)
      merge->erase();
    fusion.erase();
  }

  static FusionOp wrapInFusion(Operation *op) {
    // Splat constants and broadcasts are cloned into the kernel; other
    // operands (and the inputs of cloned broadcasts) are read.
    SmallVector<Value> inputs;
    auto addInput = [&](Value v) {
      if (!llvm::is_contained(inputs, v))
        inputs.push_back(v);
    };
    for (Value operand : op->getOperands()) {
      if (!isRecomputed(op, operand))
        addInput(operand);
      else if (isAttentionWindow(op, operand))
        addInput(attentionRowWindow(operand)->stored);
      else if (auto broadcast = operand.getDefiningOp<BroadcastOp>();
               broadcast && !isInlinableConstant(broadcast.getInput()))
        addInput(broadcast.getInput());
      else if (auto widening = operand.getDefiningOp<CastOp>())
        addInput(widening.getInput());
    }
    OpBuilder builder(op);
    auto fusion =
        FusionOp::create(builder, op->getLoc(), op->getResultTypes(), inputs);
    Block &body = fusion.getBodyBlock();
    IRMapping mapping;
    for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
      mapping.map(input, arg);
    builder.setInsertionPointToStart(&body);
    auto cloneInto = [&](Value v) {
      if (!mapping.contains(v))
        mapping.map(v,
                    builder.clone(*v.getDefiningOp(), mapping)->getResult(0));
    };
    for (Value operand : op->getOperands()) {
      if (!isRecomputed(op, operand))
        continue;
      if (isAttentionWindow(op, operand)) {
        // The slice, then the reshape into heads.
        Value slice = operand.getDefiningOp()->getOperand(0);
        cloneInto(slice);
        cloneInto(operand);
        continue;
      }
      if (auto broadcast = operand.getDefiningOp<BroadcastOp>();
          broadcast && isInlinableConstant(broadcast.getInput()))
        cloneInto(broadcast.getInput());
      cloneInto(operand);
    }
    Operation *inner = builder.clone(*op, mapping);
    YieldOp::create(builder, op->getLoc(), inner->getResults());
    op->replaceAllUsesWith(fusion.getResults());
    op->erase();
    return fusion;
  }
};
} // namespace

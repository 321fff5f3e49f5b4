//===- Amp.cpp - mixed precision: f16/bf16 storage, f32 where it matters --===//
//
// The policy, decided per op at compile time (as PyTorch's autocast lists
// are at run time):
// - GEMMs and convolutions (matmul, conv2d) take their operands in the low
//   type and produce it; the libraries accumulate in f32.
// - Data movement (reshape, transpose, broadcast, slice, concat, gather,
//   pad) and max pooling move values without arithmetic: they keep their
//   operand's type (mixed float operands meet in the low type).
// - Every other op computes in f32: its low operands are widened, and each
//   float result of rank >= 1 is rounded to the low type for the ops that
//   read it (ReLU, exact under rounding, is applied to the rounded operand
//   instead), so activations (and, through the casts' gradients, activation
//   gradients) are stored in the low type. Reductions, the losses and
//   scalars keep f32: statistics, softmax and norm internals, the loss.
// - A language model's head (linear_cross_entropy, and linear_token_scores
//   in @eval) computes in f32 from widened operands, or, with low-head,
//   reads them in the low type as its GEMMs do: its logits and their
//   gradient are then stored in 16 bits, as autocast's are, and its loss
//   still sums in f32.
// - Function results keep their declared types; parameters and optimizer
//   state stay f32 (the master weights): a weight is cast to the low type
//   where a GEMM or convolution reads it, and its gradient comes back to f32
//   through that cast.
// - A float input that every function reads only through that cast (the
//   images a first GEMM or convolution takes) is stored in the low type:
//   the trainer rounds the data when it loads a batch, and the step keeps
//   no 16-bit copy of an f32 input for backward.
// A low value inside a fused kernel lives in an f32 register rounded to its
// type after each op, so kernels and the interpreter compute the same.
//
// With loss scaling the pass adds the scale as module state (see
// kLossScaleAttrName); autodiff and the optimizer read it from there.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"

#define DEBUG_TYPE "gpuc-amp"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCAMP
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
enum class Policy { Low, Follow, F32 };

Policy policyOf(Operation *op) {
  if (isa<MatmulOp, Conv2DOp, AttentionOp>(op))
    return Policy::Low;
  if (isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, ConcatOp, GatherOp,
          PadOp, MaxPool2DOp>(op))
    return Policy::Follow;
  return Policy::F32;
}

/// An f32 op that computes element by element: a chain of them is one
/// fused kernel's f32 arithmetic, whose intermediate values are never
/// stored, so they are not rounded between its links.
bool isPointwiseF32(Operation *op) {
  return policyOf(op) == Policy::F32 &&
         (op->hasTrait<OpTrait::Elementwise>() || isa<DropoutOp>(op));
}

/// Results that stay f32 whatever reads them: statistics and losses.
bool keepsF32Results(Operation *op) {
  return isa<ReduceSumOp, ReduceMaxOp, ReduceMeanOp, CrossEntropyOp, NllLossOp,
             MseLossOp, LinearCrossEntropyOp, LinearTokenScoresOp>(op);
}

bool isFloatValue(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

Type withElement(Value v, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(),
                               element);
}

struct Amp : gpuc::impl::GpucAmpBase<Amp> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    if (precision == "fp32")
      return;
    if (precision != "fp16" && precision != "bf16") {
      module.emitError() << "unknown precision '" << precision
                         << "'; the precisions are fp32, fp16 and bf16";
      return signalPassFailure();
    }
    low = precision == "fp16" ? Type(Float16Type::get(context))
                              : Type(BFloat16Type::get(context));
    std::string mode = lossScale;
    if (mode.empty() || mode == "default")
      mode = precision == "fp16" ? "dynamic" : "none";
    if (mode != "dynamic" && mode != "static" && mode != "none") {
      module.emitError() << "unknown loss scaling '" << lossScale
                         << "'; use dynamic, static or none";
      return signalPassFailure();
    }
    if (mode != "none" &&
        !(lossScaleInit > 0 && std::isfinite(lossScaleInit))) {
      module.emitError() << "the initial loss scale must be a positive finite "
                            "number, not "
                         << lossScaleInit;
      return signalPassFailure();
    }
    if (mode == "dynamic" && growthInterval < 1) {
      module.emitError() << "the loss scale's growth interval must be at "
                            "least 1 step, not "
                         << static_cast<int64_t>(growthInterval);
      return signalPassFailure();
    }

    bool any = false;
    for (StringRef name : {"forward", "eval"}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func)
        continue;
      if (func->hasAttr(GpucDialect::kPrecisionAttrName)) {
        func.emitError() << "@" << name
                         << " already has a mixed-precision policy";
        return signalPassFailure();
      }
      if (failed(convert(func)))
        return signalPassFailure();
      func->setAttr(GpucDialect::kPrecisionAttrName,
                    StringAttr::get(context, precision));
      any = true;
    }
    if (!any) {
      module.emitError() << "gpuc-amp: the module has no @forward or @eval";
      return signalPassFailure();
    }
    lowerInputs(module);
    // Loss scaling is for training, which differentiates @forward.
    if (mode != "none" && module.lookupSymbol<func::FuncOp>("forward"))
      addLossScale(module, mode);
  }

  /// Whether `v` is read only as its low-type rounding, through reshapes.
  bool readOnlyLow(Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation *user) {
      if (auto c = dyn_cast<CastOp>(user))
        return getElementTypeOrSelf(c.getType()) == low;
      return isa<ReshapeOp>(user) && readOnlyLow(user->getResult(0));
    });
  }

  /// `v` (and the reshapes of it) retyped to the low type, its casts to the
  /// low type replaced by it.
  void retypeLow(Value v) {
    v.setType(withElement(v, low));
    for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
      if (auto c = dyn_cast<CastOp>(user)) {
        c.getResult().replaceAllUsesWith(v);
        c.erase();
      } else {
        retypeLow(user->getResult(0));
      }
    }
  }

  /// Inputs that every converted function reads only in the low type take
  /// that type (see the file comment).
  void lowerInputs(ModuleOp module) {
    SmallVector<func::FuncOp> funcs;
    for (StringRef name : {"forward", "eval"})
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        funcs.push_back(func);
    llvm::StringMap<bool> lowEverywhere;
    for (func::FuncOp func : funcs)
      for (BlockArgument arg : func.getArguments())
        if (auto name = func.getArgAttrOfType<StringAttr>(
                arg.getArgNumber(), GpucDialect::kInputAttrName)) {
          bool low = getElementTypeOrSelf(arg.getType()).isF32() &&
                     !arg.use_empty() && readOnlyLow(arg);
          auto [it, inserted] = lowEverywhere.try_emplace(name, low);
          if (!inserted)
            it->second &= low;
        }
    for (func::FuncOp func : funcs) {
      for (BlockArgument arg : func.getArguments()) {
        auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), GpucDialect::kInputAttrName);
        if (name && lowEverywhere.lookup(name))
          retypeLow(arg);
      }
      func.setType(FunctionType::get(func.getContext(),
                                     func.getBody().getArgumentTypes(),
                                     func.getResultTypes()));
    }
  }

  /// The loss-scale state: the scale (f32), the clean steps since it last
  /// changed and the steps skipped for a non-finite gradient (both counted
  /// in f32, exact up to 2^24).
  void addLossScale(ModuleOp module, StringRef mode) {
    OpBuilder builder(module.getBodyRegion());
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (forward)
      builder.setInsertionPoint(forward);
    auto scalar = RankedTensorType::get({}, builder.getF32Type());
    Location loc = NameLoc::get(builder.getStringAttr("amp"), module.getLoc());
    auto state = [&](StringRef name, double value) {
      auto param = ParameterOp::create(
          builder, loc, name, scalar,
          DenseElementsAttr::get(scalar, builder.getF32FloatAttr(value)),
          /*trainable=*/false);
      param->setAttr(GpucDialect::kOptimizerStateAttrName,
                     builder.getUnitAttr());
      return param;
    };
    ParameterOp scale = state("amp.loss_scale", lossScaleInit);
    scale->setAttr(
        GpucDialect::kLossScaleAttrName,
        builder.getDictionaryAttr({
            builder.getNamedAttr("mode", builder.getStringAttr(mode)),
            builder.getNamedAttr("growth_interval",
                                 builder.getI64IntegerAttr(growthInterval)),
        }));
    state("amp.good_steps", 0.0);
    state("amp.skipped_steps", 0.0);
  }

  /// `v` converted to `element`, one cast per value and type, placed right
  /// after `v` is defined so that it serves every reader.
  Value castTo(OpBuilder &builder, Location loc, Value v, Type element) {
    if (getElementTypeOrSelf(v.getType()) == element)
      return v;
    Value &cached = casts[{v, element}];
    if (cached)
      return cached;
    OpBuilder::InsertionGuard guard(builder);
    if (Operation *def = v.getDefiningOp())
      builder.setInsertionPointAfter(def);
    else
      builder.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    cached = CastOp::create(builder, loc, withElement(v, element), v);
    return cached;
  }

  LogicalResult convert(func::FuncOp func) {
    casts.clear();
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    OpBuilder builder(func.getContext());
    for (Operation *op : ops) {
      if (isa<ConstantOp>(op) || op->getNumRegions() != 0)
        continue;
      bool floats = llvm::any_of(op->getOperands(), isFloatValue) ||
                    llvm::any_of(op->getResults(), isFloatValue);
      if (!floats)
        continue;
      builder.setInsertionPoint(op);
      Location loc = op->getLoc();
      // A head whose logits are stored in the low type reads its operands
      // as its GEMMs do; its loss stays f32.
      if (lowHead && isa<LinearCrossEntropyOp, LinearTokenScoresOp>(op)) {
        for (OpOperand &operand : op->getOpOperands())
          if (isFloatValue(operand.get()))
            operand.set(castTo(builder, loc, operand.get(), low));
        continue;
      }
      switch (policyOf(op)) {
      case Policy::Low:
        for (OpOperand &operand : op->getOpOperands())
          if (isFloatValue(operand.get()))
            operand.set(castTo(builder, loc, operand.get(), low));
        // An attention's row statistics stay f32: its gradient recomputes
        // the weights from them.
        for (Value r : op->getResults()) {
          auto attention = dyn_cast<AttentionOp>(op);
          if (!attention || r != attention.getLogsumexp())
            r.setType(withElement(r, low));
        }
        break;
      case Policy::Follow: {
        // Float operands and results share one element type.
        bool anyLow = llvm::any_of(op->getOperands(), [&](Value v) {
          return getElementTypeOrSelf(v.getType()) == low;
        });
        if (!anyLow)
          break;
        for (OpOperand &operand : op->getOpOperands())
          if (isFloatValue(operand.get()))
            operand.set(castTo(builder, loc, operand.get(), low));
        for (Value r : op->getResults())
          if (isFloatValue(r))
            r.setType(withElement(r, low));
        break;
      }
      case Policy::F32: {
        Type f32 = builder.getF32Type();
        for (OpOperand &operand : op->getOpOperands())
          if (getElementTypeOrSelf(operand.get().getType()) == low)
            operand.set(castTo(builder, loc, operand.get(), f32));
        if (keepsF32Results(op))
          break;
        builder.setInsertionPointAfter(op);
        for (Value r : op->getResults()) {
          auto type = cast<RankedTensorType>(r.getType());
          if (type.getElementType() != f32 || type.getRank() == 0)
            continue;
          // The readers other than the return read the stored value; the
          // result of a pointwise op that only pointwise f32 ops read is
          // an intermediate of their chain (GELU as ONNX spells it: div,
          // erf, add, mul, mul) and stays f32, as a fused kernel keeps it
          // in a register.
          // The result of a norm or softmax is an activation (what
          // backward keeps), stored whoever reads it.
          bool stored =
              !isPointwiseF32(op) ||
              llvm::any_of(r.getUsers(), [](Operation *user) {
                return !isa<func::ReturnOp>(user) && !isPointwiseF32(user);
              });
          if (!stored)
            continue;
          // ReLU commutes with rounding (max(round(x), 0) is round(max(x,
          // 0))): it runs in the low type on its rounded operand, so that
          // backward, which reads its result, keeps 16 bits, not 32.
          if (isa<ReluOp>(op)) {
            OpOperand &input = op->getOpOperand(0);
            Value x = input.get();
            if (auto widened = x.getDefiningOp<CastOp>();
                widened &&
                getElementTypeOrSelf(widened.getInput().getType()) == low)
              x = widened.getInput();
            builder.setInsertionPoint(op);
            input.set(castTo(builder, loc, x, low));
            r.setType(withElement(r, low));
            continue;
          }
          Value rounded = castTo(builder, loc, r, low);
          r.replaceUsesWithIf(rounded, [&](OpOperand &use) {
            return use.getOwner() != rounded.getDefiningOp() &&
                   !isa<func::ReturnOp>(use.getOwner());
          });
        }
        break;
      }
      }
    }
    // Results keep the types the function declares.
    Operation *ret = body.getTerminator();
    builder.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Type declared = func.getResultTypes()[operand.getOperandNumber()];
      if (operand.get().getType() != declared)
        operand.set(castTo(builder, ret->getLoc(), operand.get(),
                           getElementTypeOrSelf(declared)));
    }
    return success();
  }

  Type low;
  DenseMap<std::pair<Value, Type>, Value> casts;
};
} // namespace

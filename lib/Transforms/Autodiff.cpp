//===- Autodiff.cpp - reverse-mode differentiation into @train_step -------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "gpuc-autodiff"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCAUTODIFF
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct Autodiff : gpuc::impl::GpucAutodiffBase<Autodiff> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError() << "gpuc-autodiff: the module has no @forward";
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError() << "gpuc-autodiff: the module already has a "
                            "@train_step";
      return signalPassFailure();
    }
    if (failed(applyTrainabilityOptions(module)))
      return signalPassFailure();
    auto step = cast<func::FuncOp>(forward->clone());
    step.setSymName("train_step");
    module.getBody()->getOperations().insertAfter(forward->getIterator(), step);
    if (failed(differentiate(step)))
      return signalPassFailure();
  }

  /// --frozen and --trainable: every name must be a parameter of the
  /// module (the error lists them otherwise); --trainable ones must hold
  /// floats.
  LogicalResult applyTrainabilityOptions(ModuleOp module) {
    auto lookup = [&](StringRef name) -> FailureOr<ParameterOp> {
      if (auto param = module.lookupSymbol<ParameterOp>(name))
        return param;
      std::string known;
      for (ParameterOp p : module.getOps<ParameterOp>())
        known += (known.empty() ? "" : ", ") + p.getSymName().str();
      return module.emitError()
             << "gpuc-autodiff: no parameter named '" << name
             << "' to freeze or train; the model's parameters are: " << known;
    };
    for (const std::string &name : trainable) {
      if (llvm::is_contained(frozen, name))
        return module.emitError() << "gpuc-autodiff: parameter '" << name
                                  << "' is named both frozen and trainable";
      FailureOr<ParameterOp> param = lookup(name);
      if (failed(param))
        return failure();
      if (!isa<FloatType>(param->getTensorType().getElementType()))
        return param->emitError()
               << "gpuc-autodiff: parameter @" << name << " holds "
               << param->getTensorType()
               << ", and only floating-point parameters can be trained";
      param->setTrainable(true);
    }
    for (const std::string &name : frozen) {
      FailureOr<ParameterOp> param = lookup(name);
      if (failed(param))
        return failure();
      param->setTrainable(false);
      (*param)->setAttr(GpucDialect::kFrozenAttrName,
                        StringAttr::get(&getContext(), "frozen by request"));
    }
    return success();
  }

  /// Finds the loss result: the output named `loss`, else the only scalar
  /// float output.
  FailureOr<unsigned> findLoss(func::FuncOp func) {
    if (auto i = findResult(func, GpucDialect::kOutputAttrName,
                            StringAttr::get(&getContext(), loss)))
      return *i;
    std::optional<unsigned> only;
    unsigned scalars = 0;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto type = cast<RankedTensorType>(func.getResultTypes()[i]);
      if (type.getRank() == 0 && isa<FloatType>(type.getElementType()) &&
          func.getResultAttr(i, GpucDialect::kOutputAttrName)) {
        only = i;
        ++scalars;
      }
    }
    if (scalars == 1)
      return *only;
    return func.emitError()
           << "no scalar output named '" << loss
           << "' to differentiate; give the model a loss (gpuc import --loss "
              "cross_entropy --target OUTPUT)";
  }

  LogicalResult differentiate(func::FuncOp func) {
    FailureOr<unsigned> lossIndex = findLoss(func);
    if (failed(lossIndex))
      return failure();
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    Value lossValue = ret->getOperand(*lossIndex);
    auto lossType = cast<RankedTensorType>(lossValue.getType());
    if (lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType()))
      return func.emitError()
             << "the loss must be a float scalar, got " << lossType;

    // Activity analysis: differentiate only values that depend on a
    // trainable parameter and that the loss depends on.
    SmallVector<std::pair<BlockArgument, ParameterOp>> params;
    DenseSet<Value> varied, useful;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (ParameterOp p = getArgumentParameter(func, i))
        if (p.getTrainable()) {
          params.push_back({func.getArgument(i), p});
          varied.insert(func.getArgument(i));
        }
    for (Operation &op : body.without_terminator())
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return varied.contains(v); }))
        varied.insert(op.result_begin(), op.result_end());
    useful.insert(lossValue);
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (llvm::any_of(op.getResults(),
                       [&](Value v) { return useful.contains(v); }))
        useful.insert(op.operand_begin(), op.operand_end());
    auto active = [&](Value v) {
      return varied.contains(v) && useful.contains(v);
    };

    OpBuilder builder(ret);
    TensorBuilder tensors(builder);
    DenseMap<Value, Value> grads;
    // The backward seed: 1, or the loss scale under mixed precision (the
    // gradients come out scaled; gpuc-optimizer unscales them).
    grads[lossValue] = tensors.splatLike(func.getLoc(), lossValue, 1.0);
    if (ParameterOp scale =
            findLossScaleParameter(func->getParentOfType<ModuleOp>())) {
      auto ref = FlatSymbolRefAttr::get(scale);
      std::optional<unsigned> arg =
          findArgument(func, GpucDialect::kParamAttrName, ref);
      Value seed =
          arg ? Value(func.getArgument(*arg))
              : Value(appendArgument(
                    func, scale.getType(),
                    builder.getNamedAttr(GpucDialect::kParamAttrName, ref),
                    scale.getLoc()));
      if (seed.getType() != lossValue.getType())
        seed =
            CastOp::create(builder, func.getLoc(), lossValue.getType(), seed);
      grads[lossValue] = seed;
    }
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= (bool)resultGrads.back();
      }
      SmallVector<bool> wanted;
      for (Value v : op->getOperands())
        wanted.push_back(active(v));
      if (!any || llvm::none_of(wanted, [](bool b) { return b; }))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitOpError()
               << "is not differentiable, but the loss depends on a "
                  "trainable parameter through it";
      SmallVector<Value> operandGrads;
      if (failed(
              rule.buildGradients(builder, resultGrads, wanted, operandGrads)))
        return failure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g || !active(operand))
          continue;
        Value &acc = grads[operand];
        acc = acc ? AddOp::create(builder, op->getLoc(), acc.getType(), acc, g)
                        .getResult()
                  : g;
      }
    }

    SmallVector<Value> results;
    SmallVector<NamedAttribute> roles;
    for (auto [arg, param] : params) {
      Value g = grads.lookup(arg);
      if (!g && !llvm::is_contained(trainable, param.getSymName().str())) {
        // No differentiable op carries the loss back to it: a buffer.
        param.setTrainable(false);
        param->setAttr(GpucDialect::kFrozenAttrName,
                       StringAttr::get(&getContext(),
                                       "no gradient reaches it (it reaches "
                                       "the loss through no differentiable "
                                       "op)"));
        continue;
      }
      if (!g)
        g = tensors.splatLike(param.getLoc(), arg, 0.0);
      results.push_back(g);
      roles.push_back(builder.getNamedAttr(GpucDialect::kGradAttrName,
                                           FlatSymbolRefAttr::get(param)));
    }
    appendResults(func, results, roles);
    return success();
  }
};
} // namespace

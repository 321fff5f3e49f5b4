//===- EvalFunction.cpp - the inference-mode forward as @eval -------------===//
//
// Training-mode ops become their inference forms in a clone of @forward:
// dropout is the identity, batch normalization reads the running statistics.
// The state updates that @forward returns (gpuc.update results) are dropped,
// and arguments that nothing reads any more (the RNG key) are removed.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCEVALFUNCTION
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// y = (x - running_mean) * rsqrt(running_var + eps) * scale + bias.
Value batchNormInference(BatchNormTrainOp op) {
  OpBuilder builder(op);
  ExprBuilder B(builder, op.getLoc());
  Value x = op.getInput();
  ArrayRef<int64_t> shape = TensorBuilder::shapeOf(x);
  int64_t rank = shape.size();
  auto perChannel = [&](Value v) {
    return B.expand(B.channelView(v, rank), shape);
  };
  Value var = op.getRunningVar();
  Value invStd =
      B.rsqrt(B.add(var, B.splat(var, op.getEpsilon().convertToDouble())));
  Value y =
      B.mul(B.sub(x, perChannel(op.getRunningMean())), perChannel(invStd));
  return B.add(B.mul(y, perChannel(op.getScale())), perChannel(op.getBias()));
}

struct EvalFunction : gpuc::impl::GpucEvalFunctionBase<EvalFunction> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError() << "gpuc-eval-function: the module has no @forward";
      return signalPassFailure();
    }
    if (module.lookupSymbol("eval")) {
      module.emitError() << "gpuc-eval-function: the module already has @eval";
      return signalPassFailure();
    }
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(forward);
    auto eval = cast<func::FuncOp>(builder.clone(*forward));
    eval.setSymName("eval");

    eval.walk([&](Operation *op) {
      if (auto dropout = dyn_cast<DropoutOp>(op)) {
        dropout.replaceAllUsesWith(dropout.getInput());
        dropout.erase();
      } else if (auto bn = dyn_cast<BatchNormTrainOp>(op)) {
        bn.getResult().replaceAllUsesWith(batchNormInference(bn));
      }
    });

    // No state is written in evaluation.
    SmallVector<unsigned> updates;
    for (unsigned i = 0, e = eval.getNumResults(); i < e; ++i)
      if (eval.getResultAttr(i, GpucDialect::kUpdateAttrName))
        updates.push_back(i);
    eraseResults(eval, updates);

    // What only fed the state updates is dead now.
    eraseDeadOps(eval);
    BitVector unused(eval.getNumArguments());
    for (BlockArgument arg : eval.getArguments())
      if (arg.use_empty() &&
          !eval.getArgAttr(arg.getArgNumber(), GpucDialect::kInputAttrName))
        unused.set(arg.getArgNumber());
    if (failed(eval.eraseArguments(unused)))
      return signalPassFailure();
  }
};
} // namespace

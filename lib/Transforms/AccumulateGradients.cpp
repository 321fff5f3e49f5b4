//===- AccumulateGradients.cpp - one update from several micro-batches ----===//
//
// Gradient accumulation as two functions: @train_step adds its gradients
// into persistent accumulators, and @apply_update, which the trainer runs
// after every K steps, returns their mean as the gradients the optimizer
// (and, with data parallelism, the all-reduce) then reads once per update.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCACCUMULATEGRADIENTS
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// A gradient of @train_step and the accumulator that holds its sum.
struct Accumulated {
  FlatSymbolRefAttr param;
  std::string name;
  RankedTensorType type;
};

struct AccumulateGradients
    : gpuc::impl::GpucAccumulateGradientsBase<AccumulateGradients> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError() << "gpuc-accumulate-gradients: the module has no "
                            "@train_step (run gpuc-autodiff first)";
      return signalPassFailure();
    }
    if (steps < 1) {
      step.emitError() << "steps must be at least 1, not "
                       << static_cast<int64_t>(steps);
      return signalPassFailure();
    }
    if (steps == 1)
      return;
    if (module.lookupSymbol("apply_update")) {
      step.emitError() << "the module already has an @apply_update";
      return signalPassFailure();
    }
    Location loc = NameLoc::get(
        StringAttr::get(&getContext(), "accumulate_gradients"), step.getLoc());
    auto ret = step.getBody().front().getTerminator();
    OpBuilder builder(ret);
    SmallVector<unsigned> gradResults;
    SmallVector<Value> sums;
    SmallVector<NamedAttribute> sumRoles;
    SmallVector<Accumulated> accumulated;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto ref = step.getResultAttrOfType<FlatSymbolRefAttr>(
          i, GpucDialect::kGradAttrName);
      if (!ref)
        continue;
      gradResults.push_back(i);
      Value g = ret->getOperand(i);
      auto type = cast<RankedTensorType>(g.getType());
      std::string name = (ref.getValue() + ".grad_accum").str();
      Value acc = optimizerStateArgument(step, name, type, loc);
      sums.push_back(AddOp::create(builder, loc, type, acc, g));
      sumRoles.push_back(builder.getNamedAttr(
          GpucDialect::kUpdateAttrName,
          FlatSymbolRefAttr::get(builder.getContext(), name)));
      accumulated.push_back({ref, name, type});
    }
    if (accumulated.empty()) {
      step.emitError() << "@train_step has no gradients to accumulate";
      return signalPassFailure();
    }
    appendResults(step, sums, sumRoles);
    eraseResults(step, gradResults);

    // @apply_update: each parameter and its accumulator in, the mean
    // gradient out as that parameter's gpuc.grad (as autodiff left it in
    // @train_step), and the accumulator zeroed.
    OpBuilder moduleBuilder(module.getBodyRegion());
    moduleBuilder.setInsertionPointAfter(step);
    auto apply =
        func::FuncOp::create(moduleBuilder, step.getLoc(), "apply_update",
                             FunctionType::get(module.getContext(), {}, {}));
    Block *entry = apply.addEntryBlock();
    OpBuilder applyBuilder = OpBuilder::atBlockEnd(entry);
    auto applyReturn = func::ReturnOp::create(applyBuilder, step.getLoc());
    applyBuilder.setInsertionPoint(applyReturn);
    TensorBuilder tensors(applyBuilder);
    SmallVector<Value> means, zeroes;
    SmallVector<NamedAttribute> gradRoles, zeroRoles;
    for (const Accumulated &a : accumulated) {
      auto param = module.lookupSymbol<ParameterOp>(a.param.getAttr());
      appendArgument(
          apply, cast<RankedTensorType>(param.getType()),
          applyBuilder.getNamedAttr(GpucDialect::kParamAttrName, a.param), loc);
      Value acc = optimizerStateArgument(apply, a.name, a.type, loc);
      Value scale = tensors.splatLike(loc, acc, 1.0 / steps);
      means.push_back(MulOp::create(applyBuilder, loc, a.type, acc, scale));
      gradRoles.push_back(
          applyBuilder.getNamedAttr(GpucDialect::kGradAttrName, a.param));
      zeroes.push_back(tensors.splatLike(loc, acc, 0.0));
      zeroRoles.push_back(applyBuilder.getNamedAttr(
          GpucDialect::kUpdateAttrName,
          FlatSymbolRefAttr::get(builder.getContext(), a.name)));
    }
    appendResults(apply, means, gradRoles);
    appendResults(apply, zeroes, zeroRoles);
  }
};

} // namespace

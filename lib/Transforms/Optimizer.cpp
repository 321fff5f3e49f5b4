//===- Optimizer.cpp - the optimizer update inside @train_step ------------===//
//
// SGD, Adam and AdamW as PyTorch 1.13 defines them (torch.optim, single-tensor
// path), written as core elementwise ops on each parameter. Hyperparameters
// are scalar step arguments; state lives in module-level parameters.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "gpuc-optimizer"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCOPTIMIZER
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
struct Optimizer : gpuc::impl::GpucOptimizerBase<Optimizer> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The gradients are @train_step's, or those gpuc-accumulate-gradients
    // moved to @apply_update.
    func = module.lookupSymbol<func::FuncOp>("apply_update");
    if (!func)
      func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError() << "gpuc-optimizer: the module has no @train_step "
                            "(run gpuc-autodiff first)";
      return signalPassFailure();
    }
    if (kind != "sgd" && kind != "adam" && kind != "adamw") {
      func.emitError() << "unknown optimizer '" << kind
                       << "'; the optimizers are sgd, adam and adamw";
      return signalPassFailure();
    }
    if (findResult(func, GpucDialect::kUpdateAttrName) &&
        module.lookupSymbol("optimizer.step")) {
      func.emitError() << "@" << func.getSymName()
                       << " already has an optimizer";
      return signalPassFailure();
    }
    shardRanks = shardRanksOf(func);
    OpBuilder stepBuilder(func.getBody().front().getTerminator());
    builder = &stepBuilder;
    loc = NameLoc::get(builder->getStringAttr("optimizer"), func.getLoc());

    // The step counter (PyTorch's per-parameter `step`, shared here).
    Value count =
        stateArgument(module, "optimizer.step",
                      RankedTensorType::get({}, builder->getI64Type()));
    Value one = ConstantOp::create(
        *builder, loc,
        DenseElementsAttr::get(cast<RankedTensorType>(count.getType()),
                               builder->getI64IntegerAttr(1)));
    Value newCount = AddOp::create(*builder, loc, count.getType(), count, one);

    auto ret = func.getBody().front().getTerminator();
    // Mixed precision's loss scale: the gradients are unscaled here, and a
    // non-finite one leaves every parameter and state value as it was.
    Value finite;
    DenseMap<unsigned, Value> unscaled;
    if (ParameterOp scaleParam = findLossScaleParameter(module)) {
      finite = unscaleGradients(module, scaleParam, unscaled);
      if (!finite)
        return signalPassFailure();
    }
    SmallVector<unsigned> gradResults;
    SmallVector<Value> newValues;
    SmallVector<NamedAttribute> roles;
    SmallVector<ShardUpdate> shardUpdates;
    for (auto [i, ref] : gradientResults()) {
      gradResults.push_back(i);
      std::optional<unsigned> argIndex =
          findArgument(func, GpucDialect::kParamAttrName, ref);
      if (!argIndex) {
        func.emitError() << "gradient of " << ref
                         << " has no parameter argument";
        return signalPassFailure();
      }
      auto param = module.lookupSymbol<ParameterOp>(ref.getAttr());
      Value p = func.getArgument(*argIndex), g = ret->getOperand(i);
      // With the optimizer state sharded, the gradient is this rank's
      // shard: the update reads and writes the same shard of the parameter
      // and of its state, and the shards are gathered at the end.
      auto wholeType = cast<RankedTensorType>(p.getType());
      bool sharded = g.getType() != wholeType;
      if (sharded) {
        auto shardType = RankedTensorType::get(
            {shardElements(wholeType.getNumElements(),
                           std::max<int64_t>(shardRanks, 1))},
            wholeType.getElementType());
        if (!shardRanks || g.getType() != shardType) {
          func.emitError() << "the gradient of " << ref << " is " << g.getType()
                           << " but the parameter is " << wholeType
                           << (shardRanks ? ", and not its shard" : "");
          return signalPassFailure();
        }
        p = RankShardOp::create(*builder, loc, shardType, p, shardRanks);
      }
      if (finite)
        g = unscaled.lookup(i);
      SmallVector<std::pair<ParameterOp, Value>> updates;
      Value updated = kind == "sgd"
                          ? sgd(module, param, p, g, count, updates)
                          : adam(module, param, p, g, newCount, updates);
      if (sharded) {
        shardUpdates.push_back({(unsigned)newValues.size(),
                                collectiveOf(ret->getOperand(i)), wholeType});
        for (auto &update : updates)
          markShardOf(update.first, wholeType);
      }
      newValues.push_back(finite ? keepUnlessFinite(finite, updated, p)
                                 : updated);
      roles.push_back(builder->getNamedAttr(GpucDialect::kUpdateAttrName,
                                            FlatSymbolRefAttr::get(param)));
      for (auto [state, value] : updates) {
        if (finite)
          value = keepUnlessFinite(
              finite, value,
              stateArgument(module, state.getSymName(), state.getTensorType()));
        newValues.push_back(value);
        roles.push_back(builder->getNamedAttr(GpucDialect::kUpdateAttrName,
                                              FlatSymbolRefAttr::get(state)));
      }
    }
    if (gradResults.empty()) {
      func.emitError() << "@" << func.getSymName()
                       << " has no gradients to apply";
      return signalPassFailure();
    }
    gatherShards(shardUpdates, newValues);
    newValues.push_back(finite ? keepUnlessFinite(finite, newCount, count)
                               : newCount);
    roles.push_back(builder->getNamedAttr(
        GpucDialect::kUpdateAttrName,
        FlatSymbolRefAttr::get(builder->getContext(), "optimizer.step")));
    if (finite)
      updateLossScale(module, finite, newValues, roles);
    appendResults(func, newValues, roles);
    eraseResults(func, gradResults);
  }

  /// Fills `unscaled` (gradient result index -> gradient / scale) and
  /// returns the scalar i1 "every gradient is finite": the sum over all
  /// gradients of g * 0 is 0 exactly when none holds an infinity or a NaN,
  /// in any summation order.
  Value unscaleGradients(ModuleOp module, ParameterOp scaleParam,
                         DenseMap<unsigned, Value> &unscaled) {
    auto ret = func.getBody().front().getTerminator();
    ExprBuilder B(*builder, loc);
    Value scale = stateArgument(module, scaleParam.getSymName(),
                                scaleParam.getTensorType());
    Value inverse = div(scalarConst(1.0), scale);
    Value poison;
    for (auto [i, ref] : gradientResults()) {
      Value g = ret->getOperand(i);
      auto type = cast<RankedTensorType>(g.getType());
      if (type.getElementType() != builder->getF32Type()) {
        func.emitError() << "the gradient of " << ref << " is " << type
                         << "; loss scaling expects f32 master weights";
        return {};
      }
      SmallVector<int64_t> axes;
      for (int64_t d = 0; d < type.getRank(); ++d)
        axes.push_back(d);
      Value zeroed = mul(g, TensorBuilder(*builder).splatLike(loc, g, 0.0));
      Value part = axes.empty() ? zeroed : B.sum(zeroed, axes, false);
      poison = poison ? add(poison, part) : part;
      unscaled[i] = mul(g, broadcastLike(inverse, g));
    }
    if (!poison)
      return {};
    // A rank sees its shards only: the ranks agree through the sum of
    // their checks (an infinity or NaN anywhere reaches every rank).
    if (shardRanks > 0)
      poison = AllReduceOp::create(*builder, loc, ValueRange{poison},
                                   nextCollectiveNumber(builder->getBlock()))
                   .getResult(0);
    return CompareOp::create(*builder, loc, ComparePredicate::eq, poison,
                             scalarConst(0.0));
  }

  /// `value` where the step's gradients are finite, else `old`.
  Value keepUnlessFinite(Value finite, Value value, Value old) {
    Value cond = TensorBuilder(*builder).broadcastTo(
        loc, finite, cast<RankedTensorType>(value.getType()).getShape());
    return SelectOp::create(*builder, loc, value.getType(), cond, value, old);
  }

  /// The scale's own update (PyTorch GradScaler's rule): on a non-finite
  /// step x0.5 and the clean count restarts; after `growth_interval`
  /// clean steps x2. A static scale stays; both count skipped steps.
  void updateLossScale(ModuleOp module, Value finite,
                       SmallVectorImpl<Value> &newValues,
                       SmallVectorImpl<NamedAttribute> &roles) {
    ParameterOp scaleParam = findLossScaleParameter(module);
    auto config = scaleParam->getAttrOfType<DictionaryAttr>(
        GpucDialect::kLossScaleAttrName);
    auto mode = config ? config.getAs<StringAttr>("mode") : StringAttr();
    auto interval =
        config ? config.getAs<IntegerAttr>("growth_interval") : IntegerAttr();
    auto scalar = RankedTensorType::get({}, builder->getF32Type());
    auto role = [&](StringRef name) {
      return builder->getNamedAttr(
          GpucDialect::kUpdateAttrName,
          FlatSymbolRefAttr::get(builder->getContext(), name));
    };
    auto select = [&](Value c, Value t, Value f) {
      return SelectOp::create(*builder, loc, t.getType(), c, t, f).getResult();
    };
    Value skipped = stateArgument(module, "amp.skipped_steps", scalar);
    newValues.push_back(
        select(finite, skipped, add(skipped, scalarConst(1.0))));
    roles.push_back(role("amp.skipped_steps"));
    if (!mode || mode.getValue() != "dynamic")
      return;
    Value scale = stateArgument(module, scaleParam.getSymName(), scalar);
    Value good = stateArgument(module, "amp.good_steps", scalar);
    Value counted = add(good, scalarConst(1.0));
    Value grow =
        CompareOp::create(*builder, loc, ComparePredicate::ge, counted,
                          scalarConst(interval ? interval.getInt() : 2000));
    Value onFinite = select(grow, mul(scale, scalarConst(2.0)), scale);
    newValues.push_back(select(finite, onFinite, mul(scale, scalarConst(0.5))));
    roles.push_back(role(scaleParam.getSymName()));
    newValues.push_back(select(finite, select(grow, scalarConst(0.0), counted),
                               scalarConst(0.0)));
    roles.push_back(role("amp.good_steps"));
  }

  /// A parameter's new shard: newValues[index], gathered into `whole`
  /// with the others of the collective that summed its gradient.
  struct ShardUpdate {
    unsigned index;
    Operation *group;
    RankedTensorType whole;
  };

  /// The reduce-scatter whose shard `g` is (through the 1/ranks scale),
  /// or null for a gradient whole on every rank.
  static Operation *collectiveOf(Value g) {
    while (Operation *def = g.getDefiningOp()) {
      if (isa<ReduceScatterOp>(def))
        return def;
      if (!isa<MulOp>(def))
        return nullptr;
      g = def->getOperand(0);
    }
    return nullptr;
  }

  /// The number of ranks `func`'s gradients are sharded over (0: none).
  static int64_t shardRanksOf(func::FuncOp func) {
    auto record =
        func->getAttrOfType<DictionaryAttr>(GpucDialect::kDataParallelAttrName);
    auto ranks = record ? record.getAs<IntegerAttr>("shard_ranks") : nullptr;
    return ranks ? ranks.getInt() : 0;
  }

  void markShardOf(ParameterOp state, RankedTensorType whole) {
    state->setAttr(GpucDialect::kShardOfAttrName,
                   builder->getDenseI64ArrayAttr(whole.getShape()));
  }

  /// One gpuc.all_gather per reduce-scatter bucket (one for all in
  /// @apply_update, whose gradients are accumulators): each rank's updated
  /// shards become whole parameters, the same on every rank.
  void gatherShards(ArrayRef<ShardUpdate> shardUpdates,
                    SmallVectorImpl<Value> &newValues) {
    llvm::MapVector<Operation *, SmallVector<ShardUpdate>> groups;
    for (const ShardUpdate &update : shardUpdates)
      groups[update.group].push_back(update);
    for (auto &[group, members] : groups) {
      SmallVector<Value> shards;
      SmallVector<Type> wholes;
      for (const ShardUpdate &update : members) {
        shards.push_back(newValues[update.index]);
        wholes.push_back(update.whole);
      }
      auto gather = AllGatherOp::create(
          *builder, loc, wholes, shards,
          nextCollectiveNumber(builder->getBlock()), shardRanks);
      for (auto [update, whole] : llvm::zip(members, gather.getResults()))
        newValues[update.index] = whole;
    }
  }

  /// The results of `func` that are gradients (gpuc.grad = @p), with @p.
  SmallVector<std::pair<unsigned, FlatSymbolRefAttr>> gradientResults() {
    SmallVector<std::pair<unsigned, FlatSymbolRefAttr>> results;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
              i, GpucDialect::kGradAttrName))
        results.push_back({i, ref});
    return results;
  }

  /// A scalar f32 hyperparameter argument, created once.
  Value hyper(StringRef name, double defaultValue) {
    return hyperArgument(func, name, defaultValue, loc);
  }

  /// The argument holding optimizer state `name` (created once).
  Value stateArgument(ModuleOp, StringRef name, RankedTensorType type) {
    return optimizerStateArgument(func, name, type, loc);
  }

  Value broadcastLike(Value scalar, Value like) {
    Value converted = scalar;
    Type et = getElementTypeOrSelf(like.getType());
    if (getElementTypeOrSelf(scalar.getType()) != et)
      converted =
          CastOp::create(*builder, loc, RankedTensorType::get({}, et), scalar);
    return TensorBuilder(*builder).broadcastTo(
        loc, converted, cast<RankedTensorType>(like.getType()).getShape());
  }
  Value add(Value a, Value b) {
    return AddOp::create(*builder, loc, a.getType(), a, b);
  }
  Value sub(Value a, Value b) {
    return SubOp::create(*builder, loc, a.getType(), a, b);
  }
  Value mul(Value a, Value b) {
    return MulOp::create(*builder, loc, a.getType(), a, b);
  }
  Value div(Value a, Value b) {
    return DivOp::create(*builder, loc, a.getType(), a, b);
  }
  Value scalarConst(double v) {
    return TensorBuilder(*builder).scalar(loc, builder->getF32Type(), v);
  }

  double defaultLr() const {
    return lr >= 0 ? lr : (kind == "sgd" ? 0.01 : 1e-3);
  }
  double defaultWeightDecay() const {
    return weightDecay >= 0 ? weightDecay : (kind == "adamw" ? 0.01 : 0.0);
  }

  /// torch.optim.SGD: d = g + wd p; buf = d on the first step, else
  /// momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
  /// p -= lr d.
  Value sgd(ModuleOp module, ParameterOp param, Value p, Value g, Value count,
            SmallVectorImpl<std::pair<ParameterOp, Value>> &updates) {
    Value lrV = broadcastLike(hyper("lr", defaultLr()), p);
    Value wd = broadcastLike(hyper("weight_decay", defaultWeightDecay()), p);
    Value mom = broadcastLike(hyper("momentum", momentum), p);
    Value damp = broadcastLike(hyper("dampening", dampening), p);
    Value d = add(g, mul(wd, p));
    std::string name = (param.getSymName() + ".momentum_buffer").str();
    Value buf =
        stateArgument(module, name, cast<RankedTensorType>(p.getType()));
    Value oneP = TensorBuilder(*builder).splatLike(loc, p, 1.0);
    Value later = add(mul(mom, buf), mul(sub(oneP, damp), d));
    Value zero = TensorBuilder(*builder).splatLike(loc, count, 0.0);
    Value first = TensorBuilder(*builder).broadcastTo(
        loc,
        CompareOp::create(*builder, loc, ComparePredicate::eq, count, zero),
        cast<RankedTensorType>(p.getType()).getShape());
    Value newBuf =
        SelectOp::create(*builder, loc, p.getType(), first, d, later);
    updates.push_back({module.lookupSymbol<ParameterOp>(name), newBuf});
    Value direction = nesterov ? add(d, mul(mom, newBuf)) : newBuf;
    return sub(p, mul(lrV, direction));
  }

  /// torch.optim.Adam / AdamW with t = step + 1:
  /// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  /// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
  /// with weight decay added to g (Adam) or applied as p *= 1 - lr wd (AdamW).
  Value adam(ModuleOp module, ParameterOp param, Value p, Value g,
             Value newCount,
             SmallVectorImpl<std::pair<ParameterOp, Value>> &updates) {
    Value lrS = hyper("lr", defaultLr());
    Value wdS = hyper("weight_decay", defaultWeightDecay());
    Value b1S = hyper("beta1", beta1), b2S = hyper("beta2", beta2);
    Value epsS = hyper("epsilon", epsilon);
    // Scalar bias corrections, computed once per parameter (CSE merges them).
    Value t = CastOp::create(*builder, loc,
                             RankedTensorType::get({}, builder->getF32Type()),
                             newCount);
    Value oneS = scalarConst(1.0);
    Value bc1 = sub(oneS, PowOp::create(*builder, loc, b1S.getType(), b1S, t));
    Value bc2 = sub(oneS, PowOp::create(*builder, loc, b2S.getType(), b2S, t));
    Value stepSize = div(lrS, bc1);
    Value bc2Sqrt = SqrtOp::create(*builder, loc, bc2.getType(), bc2);

    Value one = TensorBuilder(*builder).splatLike(loc, p, 1.0);
    Value b1 = broadcastLike(b1S, p), b2 = broadcastLike(b2S, p);
    Value wd = broadcastLike(wdS, p);
    Value base = p;
    if (kind == "adamw")
      base = mul(p, sub(one, mul(broadcastLike(lrS, p), wd)));
    else
      g = add(g, mul(wd, p));
    auto type = cast<RankedTensorType>(p.getType());
    std::string mName = (param.getSymName() + ".exp_avg").str();
    std::string vName = (param.getSymName() + ".exp_avg_sq").str();
    Value m = stateArgument(module, mName, type);
    Value v = stateArgument(module, vName, type);
    Value newM = add(mul(b1, m), mul(sub(one, b1), g));
    Value newV = add(mul(b2, v), mul(sub(one, b2), mul(g, g)));
    updates.push_back({module.lookupSymbol<ParameterOp>(mName), newM});
    updates.push_back({module.lookupSymbol<ParameterOp>(vName), newV});
    Value denom = add(div(SqrtOp::create(*builder, loc, type, newV),
                          broadcastLike(bc2Sqrt, p)),
                      broadcastLike(epsS, p));
    return sub(base, mul(broadcastLike(stepSize, p), div(newM, denom)));
  }

  /// The function that updates (@train_step, or @apply_update when
  /// accumulating).
  func::FuncOp func;
  /// The ranks the optimizer state is sharded over (0: not sharded).
  int64_t shardRanks = 0;
  OpBuilder *builder = nullptr;
  LocationAttr loc;
};
} // namespace

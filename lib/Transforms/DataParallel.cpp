//===- DataParallel.cpp - gradients summed over the ranks of a run --------===//
//
// Buckets of gradients in the order backward computes them, one
// gpuc.all_reduce per bucket placed right after its last gradient (or, with
// the optimizer state sharded, one gpuc.reduce_scatter), and the 1/ranks
// scale the optimizer fuses into its update.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/ExprBuilder.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/Signature.h"
#include "gpuc/Dialect/Gpuc/TensorBuilder.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCDATAPARALLEL
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// A gradient result of the step and the op that computes it.
struct Gradient {
  Value value;
  Operation *producer;
  int64_t bytes;
};

struct DataParallel : gpuc::impl::GpucDataParallelBase<DataParallel> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // With gradient accumulation the gradients are summed once per update,
    // in @apply_update.
    auto func = module.lookupSymbol<func::FuncOp>("apply_update");
    if (!func)
      func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError() << "gpuc-data-parallel: the module has no "
                            "@train_step (run gpuc-autodiff first)";
      return signalPassFailure();
    }
    if (func->hasAttr(GpucDialect::kDataParallelAttrName)) {
      func.emitError() << "@" << func.getSymName()
                       << " already sums its gradients over the ranks "
                          "(gpuc-data-parallel ran before)";
      return signalPassFailure();
    }
    if (bucketSize < 1) {
      func.emitError() << "bucket-size must be at least 1 byte, not "
                       << static_cast<int64_t>(bucketSize);
      return signalPassFailure();
    }
    if (shardRanks < 0) {
      func.emitError() << "shard-ranks must be a number of ranks (or 0: no "
                          "sharding), not "
                       << static_cast<int64_t>(shardRanks);
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    DenseMap<Operation *, unsigned> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = i;

    // The gradients computed in the step, in the order they are ready (a
    // value that is the gradient of two parameters is summed once).
    SmallVector<Gradient> gradients;
    DenseMap<Value, SmallVector<unsigned>> resultsOf;
    int64_t gradientBytes = 0;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      if (!func.getResultAttr(i, GpucDialect::kGradAttrName))
        continue;
      Value g = ret.getOperand(i);
      Operation *producer = g.getDefiningOp();
      if (!producer || isa<ConstantOp>(producer))
        continue;
      resultsOf[g].push_back(i);
      if (resultsOf[g].size() > 1)
        continue;
      gradients.push_back({g, producer, tensorBytes(g)});
      gradientBytes += gradients.back().bytes;
    }
    if (gradients.empty()) {
      func.emitError() << "@" << func.getSymName()
                       << " has no computed gradients to sum over the ranks";
      return signalPassFailure();
    }
    llvm::stable_sort(gradients, [&](const Gradient &a, const Gradient &b) {
      return position[a.producer] < position[b.producer];
    });

    Location loc = NameLoc::get(StringAttr::get(&getContext(), "data_parallel"),
                                func.getLoc());
    Value reciprocal = hyperArgument(func, "ranks_reciprocal", 1.0, loc);
    OpBuilder builder(&getContext());
    SmallVector<Value> operands(ret.getOperands());
    // (Numbered after the all-reduces already there: synchronized batch
    // norm's.)
    int64_t buckets = 0, firstNumber = nextCollectiveNumber(&body);
    for (size_t first = 0; first < gradients.size();) {
      size_t end = first;
      int64_t bytes = 0;
      while (end < gradients.size() && bytes < bucketSize)
        bytes += gradients[end++].bytes;
      SmallVector<Value> members;
      for (size_t k = first; k < end; ++k)
        members.push_back(gradients[k].value);
      builder.setInsertionPointAfter(gradients[end - 1].producer);
      int64_t number = firstNumber + buckets++;
      Operation *reduce;
      if (shardRanks > 0) {
        // Each rank updates its shard of the parameters from its shard of
        // the summed gradients (gpuc-optimizer sees the shapes).
        SmallVector<Type> shards;
        for (Value g : members) {
          auto type = cast<RankedTensorType>(g.getType());
          shards.push_back(RankedTensorType::get(
              {shardElements(type.getNumElements(), shardRanks)},
              type.getElementType()));
        }
        reduce = ReduceScatterOp::create(builder, loc, shards, members, number,
                                         shardRanks);
      } else {
        reduce = AllReduceOp::create(builder, loc, members, number);
      }
      // The mean over the ranks, where the optimizer reads the gradient.
      builder.setInsertionPoint(ret);
      for (auto [k, summed] : llvm::enumerate(reduce->getResults())) {
        Value scale = TensorBuilder(builder).broadcastTo(
            loc, reciprocal, TensorBuilder::shapeOf(summed));
        Value mean =
            MulOp::create(builder, loc, summed.getType(), summed, scale);
        for (unsigned i : resultsOf[gradients[first + k].value])
          operands[i] = mean;
      }
      first = end;
    }
    ret->setOperands(operands);
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    SmallVector<NamedAttribute> record = {
        builder.getNamedAttr("buckets", builder.getI64IntegerAttr(buckets)),
        builder.getNamedAttr("bucket_bytes",
                             builder.getI64IntegerAttr(bucketSize)),
        builder.getNamedAttr("gradient_bytes",
                             builder.getI64IntegerAttr(gradientBytes))};
    if (shardRanks > 0)
      record.push_back(builder.getNamedAttr(
          "shard_ranks", builder.getI64IntegerAttr(shardRanks)));
    func->setAttr(GpucDialect::kDataParallelAttrName,
                  builder.getDictionaryAttr(record));
  }
};

} // namespace

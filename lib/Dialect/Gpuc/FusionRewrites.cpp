//===- FusionRewrites.cpp - kernels rebuilt around a result ---------------===//
#include "gpuc/Dialect/Gpuc/FusionRewrites.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::gpuc;

FusionOp mlir::gpuc::cloneFusionResults(OpBuilder &builder, FusionOp fusion,
                                        ArrayRef<unsigned> results) {
  Block &body = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  DenseSet<Operation *> needed;
  llvm::SmallDenseSet<unsigned> args;
  SmallVector<Value> worklist;
  for (unsigned k : results)
    worklist.push_back(yield.getOperand(k));
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      args.insert(arg.getArgNumber());
      continue;
    }
    if (needed.insert(v.getDefiningOp()).second)
      llvm::append_range(worklist, v.getDefiningOp()->getOperands());
  }
  SmallVector<Value> inputs;
  SmallVector<unsigned> kept;
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    if (args.contains(i)) {
      inputs.push_back(fusion.getOperand(i));
      kept.push_back(i);
    }
  SmallVector<Type> types;
  for (unsigned k : results)
    types.push_back(fusion.getResult(k).getType());
  auto clone = FusionOp::create(builder, fusion.getLoc(), types, inputs);
  IRMapping mapping;
  for (auto [k, i] : llvm::enumerate(kept))
    mapping.map(body.getArgument(i), clone.getBodyBlock().getArgument(k));
  OpBuilder inner = OpBuilder::atBlockEnd(&clone.getBodyBlock());
  for (Operation &op : body.without_terminator())
    if (needed.contains(&op))
      inner.clone(op, mapping);
  SmallVector<Value> yielded;
  for (unsigned k : results)
    yielded.push_back(mapping.lookupOrDefault(yield.getOperand(k)));
  YieldOp::create(inner, fusion.getLoc(), yielded);
  return clone;
}

void mlir::gpuc::dropFusionResult(FusionOp fusion, unsigned index) {
  SmallVector<unsigned> others;
  for (unsigned k = 0; k < fusion.getNumResults(); ++k)
    if (k != index)
      others.push_back(k);
  OpBuilder builder(fusion);
  FusionOp slim = cloneFusionResults(builder, fusion, others);
  for (auto [k, original] : llvm::enumerate(others))
    fusion.getResult(original).replaceAllUsesWith(slim.getResult(k));
  fusion.erase();
}

SmallVector<Value> mlir::gpuc::inlineBody(OpBuilder &inner, FusionOp fusion,
                                          IRMapping &mapping) {
  for (Operation &op : fusion.getBodyBlock().without_terminator())
    inner.clone(op, mapping);
  SmallVector<Value> values;
  for (Value v :
       cast<YieldOp>(fusion.getBodyBlock().getTerminator()).getValues())
    values.push_back(mapping.lookup(v));
  return values;
}

FusionOp mlir::gpuc::recomputeInputInFusion(FusionOp reader, Value read,
                                            FusionOp producer,
                                            const SetVector<Operation *> &ops,
                                            ArrayRef<Value> leaves, Value root,
                                            function_ref<Value(Value)> outer) {
  OpBuilder builder(reader);
  SmallVector<Value> inputs;
  for (Value v : reader.getInputs())
    if (v != read && !llvm::is_contained(inputs, v))
      inputs.push_back(v);
  for (Value leaf : leaves)
    if (!llvm::is_contained(inputs, outer(leaf)))
      inputs.push_back(outer(leaf));
  auto copy = FusionOp::create(builder, reader.getLoc(),
                               reader.getResultTypes(), inputs);
  Block &body = copy.getBodyBlock();
  auto argFor = [&](Value outside) {
    return body.getArgument(llvm::find(inputs, outside) - inputs.begin());
  };
  OpBuilder inner = OpBuilder::atBlockBegin(&body);
  IRMapping computed;
  for (Value leaf : leaves)
    computed.map(leaf, argFor(outer(leaf)));
  for (Operation &op : producer.getBodyBlock().without_terminator())
    if (ops.contains(&op))
      inner.clone(op, computed);
  IRMapping mapping;
  for (auto [outside, arg] :
       llvm::zip(reader.getInputs(), reader.getBodyBlock().getArguments()))
    mapping.map(arg, outside == read ? computed.lookup(root) : argFor(outside));
  YieldOp::create(inner, reader.getLoc(), inlineBody(inner, reader, mapping));
  return copy;
}

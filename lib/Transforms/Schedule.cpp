//===- Schedule.cpp - an op order with a lower memory peak ----------------===//
//
// Memory-aware list scheduling of a kernel-formed function: the program
// order autodiff leaves behind is one topological order of the dataflow
// graph; another may keep fewer bytes live at once (finish one branch's
// consumers before starting the next branch's producers). The planner's own
// estimate judges the result, so the pass never makes a plan worse.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Transforms/MemoryPlan.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCSCHEDULE
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {

/// A greedy order of `body`'s ops (the terminator excluded).
SmallVector<Operation *> listSchedule(Block &body) {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> position;
  for (Operation &op : body.without_terminator()) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  // The buffer a value lives in: aliases (reshapes, views) share their
  // source's. Reads of a buffer count its aliases' readers too.
  auto rootOf = [](Value v) { return aliasRoot(v); };
  DenseMap<Value, unsigned> readersLeft;
  DenseSet<Value> returned;
  for (Value v : body.getTerminator()->getOperands())
    returned.insert(rootOf(v));
  DenseMap<Operation *, unsigned> waitingOn;
  DenseMap<Operation *, SmallVector<Operation *>> dependents;
  for (Operation *op : ops) {
    DenseSet<Operation *> producers;
    for (Value operand : op->getOperands()) {
      if (!isAlias(op))
        ++readersLeft[rootOf(operand)];
      if (Operation *def = operand.getDefiningOp();
          def && position.count(def) && producers.insert(def).second)
        dependents[def].push_back(op);
    }
    waitingOn[op] = producers.size();
  }
  auto bytesOf = [](Value v) -> int64_t {
    return isa<BlockArgument>(v) ? 0 : tensorBytes(v);
  };
  // What running `op` now adds to the live bytes.
  auto growth = [&](Operation *op) -> int64_t {
    if (isAlias(op) || isa<ConstantOp>(op))
      return 0;
    int64_t bytes = 0;
    for (Value r : op->getResults())
      bytes += bytesOf(r);
    DenseMap<Value, unsigned> reads;
    for (Value operand : op->getOperands())
      ++reads[rootOf(operand)];
    for (auto [root, n] : reads)
      if (readersLeft.lookup(root) == n && !returned.contains(root) &&
          !isa<BlockArgument>(root) && !isa<ConstantOp>(root.getDefiningOp()))
        bytes -= bytesOf(root);
    return bytes;
  };
  SmallVector<Operation *> ready, order;
  for (Operation *op : ops)
    if (waitingOn[op] == 0)
      ready.push_back(op);
  while (!ready.empty()) {
    auto best = ready.begin();
    int64_t bestGrowth = growth(*best);
    for (auto it = std::next(ready.begin()); it != ready.end(); ++it) {
      int64_t g = growth(*it);
      if (g < bestGrowth ||
          (g == bestGrowth && position[*it] < position[*best])) {
        best = it;
        bestGrowth = g;
      }
    }
    Operation *op = *best;
    ready.erase(best);
    order.push_back(op);
    if (!isAlias(op))
      for (Value operand : op->getOperands())
        --readersLeft[rootOf(operand)];
    for (Operation *user : dependents[op])
      if (--waitingOn[user] == 0)
        ready.push_back(user);
  }
  return order;
}

void applyOrder(Block &body, ArrayRef<Operation *> order) {
  Operation *terminator = body.getTerminator();
  for (Operation *op : order)
    op->moveBefore(terminator);
}

struct Schedule : gpuc::impl::GpucScheduleBase<Schedule> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (isPlannable(func))
        schedule(func);
  }

  void schedule(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);
    PlanEstimate before = estimatePlan(func);
    SmallVector<Operation *> order = listSchedule(body);
    if (order.size() != original.size()) {
      // A cycle cannot happen in SSA form; keep the order if it did.
      func.emitWarning() << "gpuc-schedule: the dataflow graph has no "
                            "complete order; the program order is kept";
      return;
    }
    applyOrder(body, order);
    PlanEstimate after = estimatePlan(func);
    unsigned moved = 0;
    for (auto [a, b] : llvm::zip(original, order))
      moved += a != b;
    bool better =
        after.peak < before.peak ||
        (after.peak == before.peak && after.lowerBound < before.lowerBound);
    if (!better) {
      applyOrder(body, original);
      after = before;
      moved = 0;
    }
    // estimatePlan leaves gpuc.in_place choices behind; the planner makes
    // its own.
    func.walk(
        [](Operation *op) { op->removeAttr(GpucDialect::kInPlaceAttrName); });
    Builder b(func.getContext());
    func->setAttr(
        GpucDialect::kScheduleAttrName,
        b.getDictionaryAttr({
            b.getNamedAttr("peak_before", b.getI64IntegerAttr(before.peak)),
            b.getNamedAttr("peak", b.getI64IntegerAttr(after.peak)),
            b.getNamedAttr("moved", b.getI64IntegerAttr(moved)),
        }));
  }
};
} // namespace

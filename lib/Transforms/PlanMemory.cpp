//===- PlanMemory.cpp - arena offsets and in-place writes for each buffer -===//
//
// The static memory plan: after this pass every kernel and library-call
// result of a step knows where it lives (an arena offset, or the parameter
// it updates in place), and the function knows its arena's peak and the
// liveness lower bound. The step program only serializes it.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Transforms/MemoryPlan.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/EquivalenceClasses.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCPLANMEMORY
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
/// Chooses the in-place writes of `func`, in program order, and records
/// them as `gpuc.in_place` on the fusions that have any.
void chooseInPlace(func::FuncOp func) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Where each buffer-owning value (a result or an argument) is last read.
  DenseMap<Operation *, unsigned> position;
  DenseMap<Value, unsigned> lastUse;
  unsigned pos = 0;
  for (Operation &op : body) {
    position[&op] = pos;
    for (Value operand : op.getOperands())
      lastUse[aliasRoot(operand)] = pos;
    ++pos;
  }
  // The parameter each value is returned as the update of.
  DenseMap<Value, FlatSymbolRefAttr> updateOf;
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
            i, GpucDialect::kUpdateAttrName))
      updateOf[aliasRoot(value)] = ref;

  // Values written over one another share a buffer; it dies when the last
  // of them is read.
  llvm::EquivalenceClasses<Value> sharing;
  DenseMap<Value, unsigned> classEnd; // by leader
  DenseSet<Value> inParameter;        // leaders of buffers that are params
  auto leader = [&](Value v) { return sharing.getOrInsertLeaderValue(v); };

  for (Operation &op : body) {
    unsigned here = position[&op];
    if (isLibraryCall(&op))
      for (Value result : op.getResults())
        classEnd[leader(result)] = std::max(lastUse.lookup(result), here);
    auto fusion = dyn_cast<FusionOp>(op);
    if (!fusion)
      continue;
    SmallVector<int64_t> inPlace(fusion.getNumResults(), -1);
    DenseSet<unsigned> claimed;
    // An operand passed twice is read at two indices; never overwrite it.
    auto passedOnce = [&](unsigned j) {
      Value root = aliasRoot(fusion.getOperand(j));
      return llvm::count_if(fusion.getOperands(), [&](Value other) {
               return aliasRoot(other) == root;
             }) == 1;
    };
    // Whether operand j may hold result k: the old value of the parameter
    // k updates, read for the last time here (first choice: it saves a
    // copy), else a transient dying here that holds no parameter.
    auto legal = [&](unsigned j, unsigned k, bool parameters) {
      if (claimed.contains(j) || !passedOnce(j))
        return false;
      Value root = aliasRoot(fusion.getOperand(j));
      if (auto arg = dyn_cast<BlockArgument>(root)) {
        FlatSymbolRefAttr update = updateOf.lookup(fusion->getResult(k));
        if (!parameters || !update || lastUse.lookup(arg) != here ||
            func.getArgAttrOfType<FlatSymbolRefAttr>(
                arg.getArgNumber(), GpucDialect::kParamAttrName) != update)
          return false;
      } else {
        Operation *def = root.getDefiningOp();
        if (parameters || !def || (!isa<FusionOp>(def) && !isLibraryCall(def)))
          return false;
        Value l = leader(root);
        if (inParameter.contains(l) || classEnd.lookup(l) != here)
          return false;
      }
      return canOverwrite(fusion, j, k);
    };
    for (bool parameters : {true, false})
      for (unsigned k = 0; k < fusion.getNumResults(); ++k)
        for (unsigned j = 0; j < fusion.getNumOperands() && inPlace[k] < 0;
             ++j)
          if (legal(j, k, parameters)) {
            inPlace[k] = j;
            claimed.insert(j);
          }
    for (OpResult result : fusion->getResults()) {
      unsigned k = result.getResultNumber();
      // The result's buffer: its own, or the one it overwrites.
      Value l = leader(result);
      unsigned end = lastUse.lookup(result);
      if (inPlace[k] >= 0) {
        Value root = aliasRoot(fusion.getOperand(inPlace[k]));
        if (isa<BlockArgument>(root)) {
          inParameter.insert(l);
        } else {
          Value previous = leader(root);
          end = std::max(end, classEnd.lookup(previous));
          bool param = inParameter.contains(previous);
          sharing.unionSets(previous, result);
          l = leader(result);
          if (param)
            inParameter.insert(l);
        }
      }
      classEnd[l] = std::max(classEnd.lookup(l), std::max(end, here));
    }
    if (llvm::any_of(inPlace, [](int64_t j) { return j >= 0; }))
      fusion->setAttr(GpucDialect::kInPlaceAttrName,
                      DenseI64ArrayAttr::get(func.getContext(), inPlace));
  }
}

struct PlanMemory : gpuc::impl::GpucPlanMemoryBase<PlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!isPlannable(func))
        continue;
      if (failed(plan(func)))
        return signalPassFailure();
    }
  }

  LogicalResult plan(func::FuncOp func) {
    MLIRContext *context = func.getContext();
    func.walk([](Operation *op) {
      op->removeAttr(GpucDialect::kSlotsAttrName);
      op->removeAttr(GpucDialect::kInPlaceAttrName);
    });
    if (inPlace)
      chooseInPlace(func);

    StepLiveness live = computeLiveness(func);
    SmallVector<int64_t> offsets;
    int64_t peak = packArena(live, offsets);
    for (Operation *op : live.ops) {
      if (!isa<FusionOp>(op) && !isLibraryCall(op))
        continue;
      SmallVector<Attribute> slots;
      for (Value result : op->getResults()) {
        unsigned b = live.bufferOf.lookup(result);
        const LiveBuffer &buffer = live.buffers[b];
        slots.push_back(
            buffer.param
                ? SlotAttr::get(context, -1, tensorBytes(result), buffer.param)
                : SlotAttr::get(context, offsets[b], tensorBytes(result),
                                FlatSymbolRefAttr()));
      }
      op->setAttr(GpucDialect::kSlotsAttrName, ArrayAttr::get(context, slots));
    }
    Builder b(context);
    func->setAttr(
        GpucDialect::kMemoryAttrName,
        b.getDictionaryAttr({
            b.getNamedAttr("arena_peak", b.getI64IntegerAttr(peak)),
            b.getNamedAttr("lower_bound",
                           b.getI64IntegerAttr(live.lowerBound())),
            b.getNamedAttr("kept_for_backward",
                           b.getI64IntegerAttr(live.keptForBackward())),
            b.getNamedAttr("forward_end", b.getI64IntegerAttr(live.forwardEnd)),
        }));
    if (failed(verifyMemoryPlan(func)))
      return func.emitError() << "gpuc-plan-memory made a plan that does not "
                                 "verify (a bug in gpuc; please report it)";
    return success();
  }
};
} // namespace

//===- MemoryPlan.cpp - liveness and packing of a step's buffers ----------===//
#include "gpuc/Transforms/MemoryPlan.h"
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Dialect/Gpuc/GpucAttributes.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace mlir::gpuc;

static int64_t elementsOf(Value v) {
  return getNumElements(cast<RankedTensorType>(v.getType()).getShape());
}

bool mlir::gpuc::isPlannable(func::FuncOp func) {
  if (func.isExternal())
    return false;
  for (Operation &op : func.getBody().front())
    if (!isa<FusionOp, ConstantOp, func::ReturnOp>(op) && !isLibraryCall(&op) &&
        !isAlias(&op))
      return false;
  return true;
}

bool mlir::gpuc::canOverwrite(FusionOp fusion, unsigned input,
                              unsigned result) {
  return OverwriteRule(fusion).allows(input, result);
}

OverwriteRule::OverwriteRule(FusionOp fusion) : fusion(fusion) {
  for (Operation &op : fusion.getBodyBlock().without_terminator())
    if (isReduction(&op))
      reductions.emplace_back(elementsOf(op.getResult(0)),
                              elementsOf(op.getOperand(0)));
}

const OverwriteRule &OverwriteRules::of(FusionOp fusion) {
  std::unique_ptr<OverwriteRule> &rule = rules[fusion];
  if (!rule)
    rule = std::make_unique<OverwriteRule>(fusion);
  return *rule;
}

bool OverwriteRule::allows(unsigned input, unsigned result) const {
  Block &block = fusion.getBodyBlock();
  if (input >= block.getNumArguments() || result >= fusion.getNumResults())
    return false;
  BlockArgument arg = block.getArgument(input);
  Value out = fusion.getResult(result);
  int64_t n = elementsOf(arg);
  if (tensorBytes(arg) != tensorBytes(out) || elementsOf(out) != n)
    return false;
  auto [known, inserted] = readOnlyAtItsIndex.try_emplace(input, false);
  if (inserted)
    known->second = readsOnlyAtItsIndex(arg);
  return known->second;
}

bool OverwriteRule::readsOnlyAtItsIndex(BlockArgument arg) const {
  int64_t n = elementsOf(arg);
  // A row kernel (one block per row of its reductions) writes its per-row
  // values from thread 0 once the row's reductions are done, and its
  // per-element values in a last pass over the row: it may overwrite an
  // operand of one value per row, or one of the reduced shape that it
  // reads only within the row (its reductions read the row before the
  // barrier that precedes the last pass).
  // (A row kernel split across blocks writes its per-row values in a launch
  // of their own, after every block of the row has read its operands.)
  bool perElement = false;
  for (auto [resultElements, operandElements] : reductions) {
    if (resultElements == n)
      continue;
    if (operandElements != n)
      return false;
    perElement = true;
  }
  // Everything computed from the operand is computed at the index it was
  // read at: pointwise ops over n elements, up to the yield (or, per
  // element, up to a reduction of the row).
  SmallVector<Value> worklist{arg};
  DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<YieldOp>(user) || !seen.insert(user).second)
        continue;
      if (perElement && isReduction(user))
        continue;
      if (!isPointwise(user))
        return false;
      for (Value r : user->getResults()) {
        if (elementsOf(r) != n)
          return false;
        worklist.push_back(r);
      }
    }
  }
  return true;
}

Value mlir::gpuc::aliasRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isAlias(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

namespace {
ArrayRef<int64_t> inPlaceOf(Operation *op) {
  if (auto attr =
          op->getAttrOfType<DenseI64ArrayAttr>(GpucDialect::kInPlaceAttrName))
    return attr.asArrayRef();
  return {};
}
} // namespace

/// For each collective (all-reduce, reduce-scatter, all-gather) of `body`:
/// the position of the first op reading one of its results (through
/// views), where the step program waits for it, or the last position when
/// none does. The collective reads its operands and writes its results
/// until then, while the steps between run.
static DenseMap<Operation *, unsigned> collectiveWaits(Block &body) {
  DenseMap<Operation *, unsigned> position, waits;
  if (llvm::none_of(body, [](Operation &op) { return collectiveBucket(&op); }))
    return waits;
  unsigned pos = 0;
  for (Operation &op : body)
    position[&op] = pos++;
  for (Operation &op : body) {
    if (!collectiveBucket(&op))
      continue;
    unsigned first = pos - 1;
    SmallVector<Value> values(op.getResults());
    while (!values.empty())
      for (Operation *user : values.pop_back_val().getUsers()) {
        if (isAlias(user))
          values.push_back(user->getResult(0));
        else
          first = std::min(first, position.lookup(user));
      }
    waits[&op] = first;
  }
  return waits;
}

/// Where `op` at `pos` stops reading its operands.
static unsigned
operandsReadUntil(Operation *op, unsigned pos,
                  const DenseMap<Operation *, unsigned> &waits) {
  auto it = waits.find(op);
  return it == waits.end() ? pos : std::max(pos, it->second);
}

// One walk deciding every in-place write over one table of last readers;
// the cases (updates of state, elementwise and row kernels) share it.
void mlir::gpuc::chooseInPlace(func::FuncOp func, OverwriteRules *rules) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Where each buffer-owning value (a result or an argument) is last read.
  DenseMap<Value, unsigned> lastUse;
  // (About one buffer-owning value per op: remat estimates thousands of
  // plans, and growing the table was a tenth of each.)
  lastUse.reserve(body.getOperations().size());
  DenseMap<Operation *, unsigned> waits = collectiveWaits(body);
  unsigned pos = 0;
  for (Operation &op : body) {
    unsigned readUntil = operandsReadUntil(&op, pos, waits);
    for (Value operand : op.getOperands()) {
      unsigned &last = lastUse[aliasRoot(operand)];
      last = std::max(last, readUntil);
    }
    ++pos;
  }
  // The parameter each value is returned as the update of.
  DenseMap<Value, FlatSymbolRefAttr> updateOf;
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    if (auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
            i, GpucDialect::kUpdateAttrName))
      updateOf[aliasRoot(value)] = ref;

  // The parameter each argument holds, both ways. (Looked up once: a
  // merged optimizer kernel asks about hundreds of arguments.)
  DenseMap<Attribute, BlockArgument> argOfParameter;
  SmallVector<FlatSymbolRefAttr> parameterOf(func.getNumArguments());
  for (BlockArgument arg : func.getArguments())
    if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
            arg.getArgNumber(), GpucDialect::kParamAttrName)) {
      argOfParameter[ref] = arg;
      parameterOf[arg.getArgNumber()] = ref;
    }

  // Values written over one another share a buffer; it dies when the last
  // of them is read.
  llvm::EquivalenceClasses<Value> sharing;
  DenseMap<Value, unsigned> classEnd; // by leader
  classEnd.reserve(body.getOperations().size());
  DenseSet<Value> inParameter; // leaders of buffers that are params
  auto leader = [&](Value v) { return sharing.getOrInsertLeaderValue(v); };

  for (auto [index, op] : llvm::enumerate(body)) {
    unsigned here = index;
    if (isLibraryCall(&op))
      for (Value result : op.getResults())
        classEnd[leader(result)] = std::max(lastUse.lookup(result), here);
    // A product accumulating into a transient read for the last time here
    // accumulates over it (else the step program copies it first).
    if (auto mm = dyn_cast<MatmulOp>(op); mm && mm.getAcc()) {
      Value root = aliasRoot(mm.getAcc());
      Operation *def = root.getDefiningOp();
      Value l = def && (isa<FusionOp>(def) || isLibraryCall(def)) ? leader(root)
                                                                  : Value();
      unsigned accIndex = mm.getAccMutable()[0].getOperandNumber();
      if (l && !inParameter.contains(l) && classEnd.lookup(l) == here &&
          llvm::count(op.getOperands(), mm.getAcc()) == 1 &&
          !llvm::is_contained({aliasRoot(mm.getLhs()), aliasRoot(mm.getRhs())},
                              root)) {
        Value result = mm.getResult();
        unsigned end = std::max(lastUse.lookup(result), here);
        sharing.unionSets(l, result);
        classEnd[leader(result)] = end;
        SmallVector<int64_t> inPlace{(int64_t)accIndex};
        op.setAttr(GpucDialect::kInPlaceAttrName,
                   DenseI64ArrayAttr::get(func.getContext(), inPlace));
      }
    }
    // An all-reduce sums each gradient where it lies when nothing reads
    // the gradient afterwards (else the step program copies it first).
    if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      SmallVector<int64_t> inPlace(reduce.getNumResults(), -1);
      DenseMap<Value, unsigned> timesPassed;
      for (Value input : reduce.getInputs())
        ++timesPassed[aliasRoot(input)];
      for (auto [k, input] : llvm::enumerate(reduce.getInputs())) {
        Value root = aliasRoot(input);
        Operation *def = root.getDefiningOp();
        if (!def || (!isa<FusionOp>(def) && !isLibraryCall(def)) ||
            timesPassed[root] != 1)
          continue;
        // (The all-reduce reads its operands until its wait.)
        Value l = leader(root);
        if (inParameter.contains(l) ||
            classEnd.lookup(l) != operandsReadUntil(&op, here, waits))
          continue;
        Value result = reduce.getResult(k);
        sharing.unionSets(l, result);
        classEnd[leader(result)] = std::max(lastUse.lookup(result), here);
        inPlace[k] = k;
      }
      if (llvm::any_of(inPlace, [](int64_t j) { return j >= 0; }))
        op.setAttr(GpucDialect::kInPlaceAttrName,
                   DenseI64ArrayAttr::get(func.getContext(), inPlace));
      continue;
    }
    auto fusion = dyn_cast<FusionOp>(op);
    if (!fusion)
      continue;
    SmallVector<int64_t> inPlace(fusion.getNumResults(), -1);
    DenseSet<unsigned> claimed;
    // An operand passed twice is read at two indices; never overwrite it.
    // (Counted once per kernel: merged optimizer updates have hundreds of
    // operands.)
    SmallVector<Value, 8> roots;
    llvm::SmallDenseMap<Value, unsigned, 8> timesPassed;
    for (Value operand : fusion.getOperands())
      ++timesPassed[roots.emplace_back(aliasRoot(operand))];
    auto passedOnce = [&](unsigned j) { return timesPassed[roots[j]] == 1; };
    std::optional<OverwriteRule> ownRule;
    const OverwriteRule *rule = nullptr;
    auto overwrites = [&](unsigned j, unsigned k) {
      if (!rule)
        rule = rules ? &rules->of(fusion) : &ownRule.emplace(fusion);
      return rule->allows(j, k);
    };
    // Whether operand j may hold result k: the old value of the parameter
    // k updates, read for the last time here (first choice: it saves a
    // copy).
    auto parameterHolds = [&](unsigned j, unsigned k) {
      auto arg = dyn_cast<BlockArgument>(roots[j]);
      FlatSymbolRefAttr update = updateOf.lookup(fusion->getResult(k));
      return arg && !claimed.contains(j) && passedOnce(j) && update &&
             lastUse.lookup(arg) == here &&
             parameterOf[arg.getArgNumber()] == update && overwrites(j, k);
    };
    // Whether operand j is a transient dying here that holds no parameter
    // (whichever result it may then hold).
    auto dyingTransient = [&](unsigned j) {
      Value root = roots[j];
      // (Read later, it is not dying here whatever its buffer holds: most
      // operands are, and their buffers are not looked up.)
      if (lastUse.lookup(root) != here)
        return false;
      Operation *def = root.getDefiningOp();
      if (!passedOnce(j) || !def ||
          (!isa<FusionOp>(def) && !isLibraryCall(def)))
        return false;
      Value l = leader(root);
      return !inParameter.contains(l) && classEnd.lookup(l) == here;
    };
    // For each result, the first operand that may hold it. (Only the
    // parameters a result is the update of, or the transients dying here,
    // are looked at: a merged optimizer kernel has hundreds of each.)
    auto assign = [&](bool parameters) {
      // (Most kernels update no parameter, and most have no operand dying
      // here: remat estimates thousands of plans, so neither table is
      // made for nothing.)
      if (parameters && llvm::none_of(fusion->getResults(), [&](Value r) {
            return updateOf.count(r);
          }))
        return;
      DenseMap<Attribute, SmallVector<unsigned, 1>> operandsOfParameter;
      // Transients dying here by their bytes and elements, which a result
      // they hold must match.
      DenseMap<std::pair<int64_t, int64_t>, SmallVector<unsigned>> dying;
      // (Parameters appended below are claimed already.)
      for (unsigned j = 0; j < roots.size(); ++j) {
        if (!passedOnce(j))
          continue;
        if (auto arg = dyn_cast<BlockArgument>(roots[j])) {
          if (FlatSymbolRefAttr ref = parameterOf[arg.getArgNumber()];
              ref && parameters)
            operandsOfParameter[ref].push_back(j);
        } else if (!parameters && dyingTransient(j)) {
          dying[{tensorBytes(roots[j]), elementsOf(roots[j])}].push_back(j);
        }
      }
      if (parameters ? operandsOfParameter.empty() : dying.empty())
        return;
      for (unsigned k = 0; k < fusion.getNumResults(); ++k) {
        if (!parameters) {
          Value result = fusion->getResult(k);
          auto it = dying.find({tensorBytes(result), elementsOf(result)});
          if (it == dying.end())
            continue;
          for (unsigned j : it->second)
            if (inPlace[k] < 0 && !claimed.contains(j) && overwrites(j, k)) {
              inPlace[k] = j;
              claimed.insert(j);
            }
          continue;
        }
        FlatSymbolRefAttr update = updateOf.lookup(fusion->getResult(k));
        auto it = update ? operandsOfParameter.find(update)
                         : operandsOfParameter.end();
        if (it == operandsOfParameter.end())
          continue;
        for (unsigned j : it->second)
          if (inPlace[k] < 0 && parameterHolds(j, k)) {
            inPlace[k] = j;
            claimed.insert(j);
          }
      }
    };
    assign(/*parameters=*/true);
    // The new value of a parameter the kernel does not read (a weight's
    // 16-bit copy, computed from the new f32 weight), once nothing reads
    // the old value any more: the kernel takes the parameter as an operand
    // it never reads and writes over it, so no copy ends the step.
    for (unsigned k = 0; k < fusion.getNumResults(); ++k) {
      FlatSymbolRefAttr update = updateOf.lookup(fusion->getResult(k));
      if (inPlace[k] >= 0 || !update)
        continue;
      BlockArgument arg = argOfParameter.lookup(update);
      if (!arg || (lastUse.count(arg) && lastUse.lookup(arg) >= here) ||
          llvm::is_contained(fusion.getOperands(), Value(arg)) ||
          tensorBytes(arg) != tensorBytes(fusion->getResult(k)))
        continue;
      fusion->insertOperands(fusion->getNumOperands(), {arg});
      fusion.getBodyBlock().addArgument(arg.getType(), arg.getLoc());
      lastUse[arg] = here;
      inPlace[k] = fusion.getNumOperands() - 1;
      claimed.insert(inPlace[k]);
    }
    assign(/*parameters=*/false);
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

StepLiveness mlir::gpuc::planLiveness(func::FuncOp func, bool inPlace,
                                      OverwriteRules *rules) {
  // (Only the body's own ops carry the attribute; remat estimates hundreds
  // of plans, so the kernels' bodies are not walked and the name is made
  // once.)
  auto name = StringAttr::get(func.getContext(), GpucDialect::kInPlaceAttrName);
  for (Operation &op : func.getBody().front())
    if (op.getDiscardableAttr(name))
      op.removeDiscardableAttr(name);
  if (inPlace)
    chooseInPlace(func, rules);
  return computeLiveness(func);
}

/// What `live` tells of a plan before it is packed (peak -1).
static PlanEstimate unpackedEstimate(const StepLiveness &live) {
  PlanEstimate estimate;
  estimate.peak = -1;
  estimate.lowerBound = live.lowerBound();
  estimate.keptForBackward = live.keptForBackward();
  return estimate;
}

PlanEstimate mlir::gpuc::estimatePlan(func::FuncOp func, bool inPlace,
                                      OverwriteRules *rules) {
  StepLiveness live = planLiveness(func, inPlace, rules);
  PlanEstimate estimate = unpackedEstimate(live);
  SmallVector<int64_t> offsets;
  estimate.peak = packArena(live, offsets);
  return estimate;
}

PlanEstimate mlir::gpuc::estimateLiveness(func::FuncOp func,
                                          OverwriteRules *rules) {
  return unpackedEstimate(planLiveness(func, /*inPlace=*/true, rules));
}

StepLiveness mlir::gpuc::computeLiveness(func::FuncOp func) {
  StepLiveness live;
  Block &body = func.getBody().front();
  // (Sized once: remat computes thousands of these, and growing the
  // tables was a twentieth of each.)
  size_t ops = body.getOperations().size();
  live.ops.reserve(ops);
  live.buffers.reserve(ops);
  live.bufferOf.reserve(2 * ops);
  DenseMap<Operation *, unsigned> waits = collectiveWaits(body);
  unsigned pos = 0;
  for (Operation &op : body) {
    live.ops.push_back(&op);
    unsigned readUntil = operandsReadUntil(&op, pos, waits);
    for (Value operand : op.getOperands()) {
      Value root = aliasRoot(operand);
      auto it = live.bufferOf.find(root);
      if (it != live.bufferOf.end())
        live.buffers[it->second].end =
            std::max(live.buffers[it->second].end, readUntil);
      else if (isa<BlockArgument>(root))
        live.lastArgUse[root] = std::max(live.lastArgUse[root], readUntil);
    }
    if (isAlias(&op)) {
      auto it = live.bufferOf.find(aliasRoot(op.getOperand(0)));
      if (it != live.bufferOf.end())
        live.bufferOf[op.getResult(0)] = it->second;
    } else if (isa<FusionOp>(op) || isLibraryCall(&op)) {
      ArrayRef<int64_t> inPlace = inPlaceOf(&op);
      for (OpResult result : op.getResults()) {
        int64_t input = result.getResultNumber() < inPlace.size()
                            ? inPlace[result.getResultNumber()]
                            : -1;
        if (input >= 0 && input < op.getNumOperands()) {
          Value root = aliasRoot(op.getOperand(input));
          auto it = live.bufferOf.find(root);
          if (it != live.bufferOf.end()) {
            live.bufferOf[result] = it->second;
            continue;
          }
          if (auto arg = dyn_cast<BlockArgument>(root)) {
            if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
                    arg.getArgNumber(), GpucDialect::kParamAttrName)) {
              live.bufferOf[result] = live.buffers.size();
              live.buffers.push_back(
                  {result, tensorBytes(result), pos, pos, ref});
              continue;
            }
          }
        }
        live.bufferOf[result] = live.buffers.size();
        live.buffers.push_back({result, tensorBytes(result), pos, pos, {}});
      }
    }
    ++pos;
  }

  // The forward pass: everything the loss depends on.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name =
        func.getResultAttrOfType<StringAttr>(i, GpucDialect::kOutputAttrName);
    if (!name || name.getValue() != "loss")
      continue;
    // (An op's operands are all defined before it in the block, so the
    // last op the loss depends on is the one that computes it.)
    if (Operation *def = ret.getOperand(i).getDefiningOp())
      live.forwardEnd = std::max<int>(
          live.forwardEnd, llvm::find(live.ops, def) - live.ops.begin());
  }
  return live;
}

SmallVector<int64_t> StepLiveness::liveBytes() const {
  SmallVector<int64_t> delta(ops.size() + 1, 0);
  for (const LiveBuffer &b : buffers) {
    if (b.param)
      continue;
    delta[b.start] += alignedBytes(b.bytes);
    delta[b.end + 1] -= alignedBytes(b.bytes);
  }
  SmallVector<int64_t> live(ops.size(), 0);
  int64_t bytes = 0;
  for (unsigned pos = 0; pos < ops.size(); ++pos)
    live[pos] = bytes += delta[pos];
  return live;
}

SmallVector<int64_t> StepLiveness::bornBytes() const {
  SmallVector<int64_t> born(ops.size(), 0);
  for (const LiveBuffer &b : buffers)
    if (!b.param)
      born[b.start] += alignedBytes(b.bytes);
  return born;
}

int64_t StepLiveness::lowerBound() const {
  SmallVector<int64_t> live = liveBytes();
  return live.empty() ? 0 : *llvm::max_element(live);
}

int64_t StepLiveness::keptForBackward() const {
  if (forwardEnd < 0)
    return 0;
  Value loss;
  if (auto ret = dyn_cast<func::ReturnOp>(ops.back())) {
    auto func = ret->getParentOfType<func::FuncOp>();
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(
              i, GpucDialect::kOutputAttrName);
          name && name.getValue() == "loss")
        loss = aliasRoot(ret.getOperand(i));
  }
  auto lossBuffer = bufferOf.find(loss);
  int64_t kept = 0;
  for (auto [i, b] : llvm::enumerate(buffers)) {
    if (b.param || b.start > (unsigned)forwardEnd ||
        b.end <= (unsigned)forwardEnd)
      continue;
    if (lossBuffer != bufferOf.end() && lossBuffer->second == i)
      continue;
    kept += alignedBytes(b.bytes);
  }
  return kept;
}

int64_t mlir::gpuc::packArena(const StepLiveness &liveness,
                              SmallVectorImpl<int64_t> &offsets) {
  ArrayRef<LiveBuffer> buffers = liveness.buffers;
  SmallVector<unsigned> arena;
  for (auto [i, b] : llvm::enumerate(buffers))
    if (!b.param)
      arena.push_back(i);
  auto size = [&](unsigned i) { return alignedBytes(buffers[i].bytes); };
  auto length = [&](unsigned i) {
    return (int64_t)(buffers[i].end - buffers[i].start + 1);
  };
  using Order = std::function<bool(unsigned, unsigned)>;
  SmallVector<Order> orders = {
      // The largest first: big blocks placed early leave small holes.
      [&](unsigned a, unsigned b) {
        return std::make_tuple(-size(a), buffers[a].start, a) <
               std::make_tuple(-size(b), buffers[b].start, b);
      },
      // The longest-lived first: they pin the arena's shape.
      [&](unsigned a, unsigned b) {
        return std::make_tuple(-length(a), -size(a), a) <
               std::make_tuple(-length(b), -size(b), b);
      },
      [&](unsigned a, unsigned b) {
        return std::make_tuple(-size(a) * length(a), a) <
               std::make_tuple(-size(b) * length(b), b);
      },
      // Program order: what a runtime allocator would do.
      [&](unsigned a, unsigned b) {
        return std::make_tuple(buffers[a].start, a) <
               std::make_tuple(buffers[b].start, b);
      },
  };
  // Greedy by breadth: the program points with the most bytes live first,
  // and the buffers live there by size.
  SmallVector<int64_t> liveAt = liveness.liveBytes();
  SmallVector<int64_t> breadth(buffers.size(), 0);
  for (unsigned i : arena)
    for (unsigned p = buffers[i].start; p <= buffers[i].end; ++p)
      breadth[i] = std::max(breadth[i], liveAt[p]);
  orders.push_back([&](unsigned a, unsigned b) {
    return std::make_tuple(-breadth[a], -size(a), a) <
           std::make_tuple(-breadth[b], -size(b), b);
  });

  // The placement loop runs for every trial plan gpuc-remat makes, so it
  // works on flat arrays: the buffers placed so far are kept sorted by
  // (offset, top), which is the order the gaps are scanned in, and the scan
  // skips those whose lifetimes do not meet the new buffer's.
  struct Placed {
    int64_t begin, end;
    unsigned start, last;
  };
  int64_t best = -1;
  // No packing goes below the bytes live at once: one that reaches them
  // ends the search, and one that passes the best so far is abandoned
  // (either way the first packing with the lowest peak is the one kept).
  const int64_t lowerBound = liveAt.empty() ? 0 : *llvm::max_element(liveAt);
  SmallVector<int64_t> trial(buffers.size(), -1);
  SmallVector<Placed> placed;
  placed.reserve(arena.size());
  for (const Order &order : orders) {
    if (best >= 0 && best <= lowerBound)
      break;
    SmallVector<unsigned> sequence = arena;
    llvm::sort(sequence, order);
    // First fit (the lowest gap that holds the buffer) and best fit (the
    // tightest gap, else the top).
    for (bool bestFit : {false, true}) {
      if (best >= 0 && best <= lowerBound)
        break;
      placed.clear();
      int64_t peak = 0;
      std::fill(trial.begin(), trial.end(), -1);
      for (unsigned i : sequence) {
        if (best >= 0 && peak >= best)
          break;
        const int64_t bytes = size(i);
        const unsigned start = buffers[i].start, last = buffers[i].end;
        int64_t offset = 0, chosen = -1, tightest = -1;
        for (const Placed &p : placed) {
          if (p.start > last || start > p.last)
            continue;
          int64_t gap = p.begin - offset;
          if (gap >= bytes) {
            if (!bestFit) {
              chosen = offset;
              break;
            }
            if (tightest < 0 || gap < tightest) {
              tightest = gap;
              chosen = offset;
            }
          }
          offset = std::max(offset, p.end);
        }
        trial[i] = chosen >= 0 ? chosen : offset;
        peak = std::max(peak, trial[i] + bytes);
        Placed entry{trial[i], trial[i] + bytes, start, last};
        placed.insert(llvm::upper_bound(placed, entry,
                                        [](const Placed &a, const Placed &b) {
                                          return std::make_pair(a.begin,
                                                                a.end) <
                                                 std::make_pair(b.begin, b.end);
                                        }),
                      entry);
      }
      if (best < 0 || peak < best) {
        best = peak;
        offsets.assign(trial.begin(), trial.end());
      }
    }
  }
  if (best < 0) {
    offsets.assign(buffers.size(), -1);
    best = 0;
  }
  return best;
}

// One pass over the plan checking each of its promises (sizes, in-place
// legality, no two live buffers sharing a byte) against one liveness table.
LogicalResult mlir::gpuc::verifyMemoryPlan(func::FuncOp func) {
  auto memory =
      func->getAttrOfType<DictionaryAttr>(GpucDialect::kMemoryAttrName);
  auto peakAttr =
      memory ? memory.getAs<IntegerAttr>("arena_peak") : IntegerAttr();
  if (!peakAttr)
    return func.emitError()
           << "has no memory plan ('" << GpucDialect::kMemoryAttrName
           << "' with arena_peak; run gpuc-plan-memory)";
  int64_t peak = peakAttr.getInt();
  StepLiveness live = computeLiveness(func);
  DenseMap<Operation *, unsigned> position;
  for (auto [p, op] : llvm::enumerate(live.ops))
    position[op] = p;

  SmallVector<SlotAttr> slotOf(live.buffers.size());
  for (auto [pos, op] : llvm::enumerate(live.ops)) {
    if (!isa<FusionOp>(op) && !isLibraryCall(op))
      continue;
    auto slots = op->getAttrOfType<ArrayAttr>(GpucDialect::kSlotsAttrName);
    if (!slots || slots.size() != op->getNumResults())
      return op->emitOpError()
             << "needs one #gpuc.slot per result in '"
             << GpucDialect::kSlotsAttrName << "' (run gpuc-plan-memory)";
    ArrayRef<int64_t> inPlace = inPlaceOf(op);
    // A product may accumulate over its `plus` operand.
    auto accumulating = dyn_cast<MatmulOp>(op);
    if (accumulating && !accumulating.getAcc())
      accumulating = nullptr;
    bool accumulatesInPlace =
        accumulating && inPlace.size() == 1 &&
        inPlace[0] == accumulating.getAccMutable()[0].getOperandNumber();
    // An all-reduce sums each operand where it lies.
    bool reducesInPlace =
        isa<AllReduceOp>(op) && inPlace.size() == op->getNumResults() &&
        llvm::all_of(llvm::enumerate(inPlace), [](auto entry) {
          return entry.value() < 0 || entry.value() == (int64_t)entry.index();
        });
    if (!inPlace.empty() && !accumulatesInPlace && !reducesInPlace &&
        (!isa<FusionOp>(op) || inPlace.size() != op->getNumResults()))
      return op->emitOpError()
             << "'" << GpucDialect::kInPlaceAttrName
             << "' needs one entry per result, on a fusion (or the operand "
                "a matmul accumulates into, or an all-reduce's own operand)";
    for (OpResult result : op->getResults()) {
      unsigned k = result.getResultNumber();
      auto slot = dyn_cast<SlotAttr>(slots[k]);
      if (!slot)
        return op->emitOpError() << "slot #" << k << " is not a #gpuc.slot";
      if (slot.getBytes() != tensorBytes(result))
        return op->emitOpError()
               << "result #" << k << " holds " << tensorBytes(result)
               << " bytes but its slot " << slot.getBytes();
      if (slot.isArena() && slot.getOffset() + slot.getBytes() > peak)
        return op->emitOpError() << "result #" << k << "'s slot ends at byte "
                                 << slot.getOffset() + slot.getBytes()
                                 << ", past the arena's peak of " << peak;
      int64_t input = inPlace.empty() ? -1 : inPlace[k];
      if (input < 0) {
        if (!slot.isArena())
          return op->emitOpError()
                 << "result #" << k << " is written into " << slot.getParam()
                 << " but overwrites no operand ('"
                 << GpucDialect::kInPlaceAttrName << "')";
        slotOf[live.bufferOf.lookup(result)] = slot;
        continue;
      }
      auto fusion = dyn_cast<FusionOp>(op);
      if (input >= op->getNumOperands() ||
          (fusion && !canOverwrite(fusion, input, k)))
        return op->emitOpError()
               << "result #" << k << " cannot overwrite operand #" << input
               << ": the kernel must be elementwise and read the operand "
                  "only where it writes the result, at the same size";
      Value root = aliasRoot(op->getOperand(input));
      for (auto [j, other] : llvm::enumerate(op->getOperands()))
        if ((int64_t)j != input && aliasRoot(other) == root)
          return op->emitOpError()
                 << "result #" << k << " overwrites operand #" << input
                 << ", which the kernel also reads as operand #" << j;
      for (auto [j, other] : llvm::enumerate(inPlace))
        if (j != k && other == input)
          return op->emitOpError() << "results #" << j << " and #" << k
                                   << " overwrite the same operand #" << input;
      if (auto arg = dyn_cast<BlockArgument>(root)) {
        auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
            arg.getArgNumber(), GpucDialect::kParamAttrName);
        if (!ref || slot.getParam() != ref)
          return op->emitOpError()
                 << "result #" << k << " overwrites an argument, so its slot "
                 << "must name that argument's parameter"
                 << (ref ? " " : " (it has none)") << ref;
        if (live.lastArgUse.lookup(arg) > pos)
          return op->emitOpError() << "result #" << k << " overwrites " << ref
                                   << ", which is read later in the step";
        slotOf[live.bufferOf.lookup(result)] = slot;
        continue;
      }
      // A transient: it must die here, and the result takes its slot.
      unsigned buffer = live.bufferOf.lookup(root);
      for (auto [value, b] : live.bufferOf) {
        if (b != buffer)
          continue;
        Operation *def = value.getDefiningOp();
        if (def && position.lookup(def) >= pos)
          continue;
        for (Operation *user : value.getUsers())
          if (position.lookup(user) > pos)
            return op->emitOpError()
                   << "result #" << k << " overwrites operand #" << input
                   << ", which is read later in the step";
      }
      if (slotOf[buffer] != slot)
        return op->emitOpError() << "result #" << k << " overwrites operand #"
                                 << input << " but its slot " << slot
                                 << " is not the operand's " << slotOf[buffer];
    }
  }

  // No two buffers live at once share a byte.
  SmallVector<unsigned> arena;
  for (auto [i, b] : llvm::enumerate(live.buffers))
    if (!b.param)
      arena.push_back(i);
  llvm::sort(arena, [&](unsigned a, unsigned b) {
    return live.buffers[a].start < live.buffers[b].start;
  });
  for (auto [n, i] : llvm::enumerate(arena)) {
    const LiveBuffer &a = live.buffers[i];
    for (unsigned j : ArrayRef<unsigned>(arena).take_front(n)) {
      const LiveBuffer &b = live.buffers[j];
      if (b.end < a.start)
        continue;
      int64_t lo = std::max(slotOf[i].getOffset(), slotOf[j].getOffset());
      int64_t hi = std::min(slotOf[i].getOffset() + slotOf[i].getBytes(),
                            slotOf[j].getOffset() + slotOf[j].getBytes());
      if (lo < hi) {
        InFlightDiagnostic diag =
            a.root.getDefiningOp()->emitOpError()
            << "result #" << cast<OpResult>(a.root).getResultNumber()
            << " shares bytes [" << lo << ", " << hi
            << ") of the arena with a buffer that is still live";
        diag.attachNote(b.root.getLoc()) << "the other buffer is defined here";
        return diag;
      }
    }
  }
  return success();
}

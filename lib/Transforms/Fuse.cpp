//===- Fuse.cpp - fewer, fatter kernels -----------------------------------===//
//
// Greedy merging of gpuc.fusion regions. A merge is legal when
//  - the merged region has a schedule: the kernel emitter is the judge
//    (elementwise over one space, or rows shared by every reduction), so the
//    pass never forms a kernel codegen cannot emit;
//  - it recomputes nothing expensive: a value computed inside the kernel is
//    never read at many positions (windows, gathers, broadcasts that expand
//    it, except per-row values of a row kernel), and a row kernel, which
//    evaluates its region once per pass, holds no window or gather (but
//    max pooling's gradient, two loads by stored indices);
//  - it keeps every dependency: the producer's other readers all come after
//    the consumer (the producer's results then stay outputs of the merged
//    kernel, which runs where the consumer ran).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Cost.h"
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/FusionRewrites.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Dialect/Gpuc/OpKinds.h"
#include "gpuc/Dialect/Gpuc/ShapeInference.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::gpuc {
#define GEN_PASS_DEF_GPUCFUSE
#include "gpuc/Transforms/Passes.h.inc"
} // namespace mlir::gpuc

using namespace mlir;
using namespace mlir::gpuc;

namespace {
int64_t numElements(Value v) {
  return getNumElements(cast<RankedTensorType>(v.getType()).getShape());
}

/// The number of rows of a row kernel, or 0 for an elementwise one.
int64_t rowsOf(FusionOp fusion) {
  for (Operation &op : fusion.getBodyBlock())
    if (isReduction(&op))
      return numElements(op.getResult(0));
  return 0;
}

/// Whether `v`, inside a kernel, is an input or at most a few cheap
/// pointwise ops of inputs and constants, which computing again wherever it
/// is read costs about what loading it would.
bool cheaplyComputed(Value v) {
  constexpr int kMaxOps = 8;
  return cheapComputationOf(
             v, [](Value) { return false; }, kMaxOps)
      .has_value();
}

/// Whether a value computed inside `fusion` is read at many positions.
bool recomputesWork(FusionOp fusion, bool memoryFirst) {
  int64_t rows = rowsOf(fusion);
  for (Operation &op : fusion.getBodyBlock()) {
    // A conversion of an input costs nothing worth sharing (a 16-bit
    // per-row statistic widened where it is broadcast).
    auto computed = [](Value v) {
      while (auto cast = v.getDefiningOp<CastOp>())
        v = cast.getInput();
      return !isa<BlockArgument>(v);
    };
    if (isa<MaxPool2DOp, MaxPool2DArgmaxOp, AvgPool2DOp>(op)) {
      // A row kernel evaluates its region once per pass over the row: a
      // window there would be redone per reduction. Windows that do not
      // overlap (stride >= kernel) read each input element once, so a
      // computed input costs what storing and loading it would.
      bool overlap =
          llvm::TypeSwitch<Operation *, bool>(&op)
              .Case<MaxPool2DOp, MaxPool2DArgmaxOp, AvgPool2DOp>([](auto p) {
                return p.getStrides()[0] < p.getKernel()[0] ||
                       p.getStrides()[1] < p.getKernel()[1];
              });
      if (rows || ((overlap || !memoryFirst) &&
                   llvm::any_of(op.getOperands(), computed)))
        return true;
    } else if (isa<AvgPool2DBackwardOp>(op)) {
      if (rows || llvm::any_of(op.getOperands(), computed))
        return true;
    } else if (auto backward = dyn_cast<MaxPool2DBackwardOp>(op)) {
      // Routing by stored indices is two loads per window holding the
      // element, cheap enough to redo in each pass of a row kernel (batch
      // norm's backward reads the pooling's gradient without storing it),
      // and so is an output gradient a few cheap ops compute from inputs
      // (a ReLU's mask, applied on the pooled side).
      if ((rows && !memoryFirst) || computed(backward.getIndices()) ||
          !cheaplyComputed(backward.getGradOutput()))
        return true;
    } else if (auto gather = dyn_cast<GatherOp>(op)) {
      if (rows || computed(gather.getData()))
        return true;
    } else if (isa<SegmentSumOp>(op)) {
      // Each update is read once, by the row its position names, so a
      // computed one costs nothing extra; but a row kernel would redo the
      // group's loop in every pass.
      if (rows)
        return true;
    } else if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
      Value in = broadcast.getInput();
      if (computed(in) && !isInlinableConstant(in) &&
          numElements(in) < numElements(broadcast.getResult()) &&
          !(rows && numElements(in) == rows))
        return true;
    }
  }
  return false;
}

/// What the kernel emitter sees of `fusion`: its attributes, operand and
/// result types, and every op of its body with its name, attributes, result
/// types and operands (numbered within the region, which is isolated from
/// above). Attributes and types are uniqued, so their addresses stand for
/// them: equal fingerprints, equal kernels modulo names.
std::string fingerprint(FusionOp fusion) {
  std::string key;
  auto add = [&](const void *p) {
    key.append(reinterpret_cast<const char *>(&p), sizeof(p));
  };
  auto addNumber = [&](uint64_t n) {
    key.append(reinterpret_cast<const char *>(&n), sizeof(n));
  };
  add(fusion->getAttrDictionary().getAsOpaquePointer());
  for (Type type : fusion->getOperandTypes())
    add(type.getAsOpaquePointer());
  DenseMap<Value, uint64_t> number;
  for (BlockArgument arg : fusion.getBodyBlock().getArguments()) {
    number.try_emplace(arg, number.size() + 1);
    add(arg.getType().getAsOpaquePointer());
  }
  fusion.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments()) {
          number.try_emplace(arg, number.size() + 1);
          add(arg.getType().getAsOpaquePointer());
        }
    add(op->getName().getAsOpaquePointer());
    add(op->getAttrDictionary().getAsOpaquePointer());
    addNumber(op->getNumOperands());
    for (Value operand : op->getOperands()) {
      auto it = number.find(operand);
      if (it != number.end())
        addNumber(it->second);
      else
        add(operand.getAsOpaquePointer());
    }
    for (Value result : op->getResults()) {
      number.try_emplace(result, number.size() + 1);
      add(result.getType().getAsOpaquePointer());
    }
  });
  return key;
}

/// The state of one gpuc-fuse run: its policy, and what the kernel emitter
/// said of each candidate kernel it was asked about. The greedy sweeps ask
/// about the same candidates again (a failed merge is retried after others
/// changed the function), and a network's repeated blocks make equal
/// candidates: each is emitted once.
struct Fusing {
  bool memoryFirst;
  llvm::StringMap<bool> scheduled;
  /// Whether the merge of two kernels, described by mergeKey, makes a kernel
  /// that neither recomputes work nor lacks a schedule: a merge refused once
  /// is refused again without building the merged kernel.
  llvm::StringMap<bool> mergeVerdicts;

  /// Whether codegen has a schedule for `fusion` (its diagnostics are
  /// swallowed: a failed check only means "do not merge").
  bool hasSchedule(FusionOp fusion) {
    auto [it, inserted] = scheduled.try_emplace(fingerprint(fusion), false);
    if (inserted) {
      ScopedDiagnosticHandler quiet(fusion.getContext(),
                                    [](Diagnostic &) { return success(); });
      it->second = succeeded(emitKernel(fusion, "check"));
    }
    return it->second;
  }
};

/// Describes the kernel merging `parts` would build: each part's
/// fingerprint, where each part's inputs land among the merged kernel's
/// (`inputs`; -1 - k for a value the first part yields as its result k, which
/// the merged kernel computes instead of reading) and `extra` (what else
/// decides the merged body). Equal keys, equal merged kernels.
std::string mergeKey(StringRef kind, ArrayRef<FusionOp> parts,
                     ArrayRef<int64_t> placement, ArrayRef<int64_t> extra) {
  std::string key = kind.str();
  auto addNumbers = [&](ArrayRef<int64_t> numbers) {
    key.append(std::to_string(numbers.size()) + ":");
    key.append(reinterpret_cast<const char *>(numbers.data()),
               numbers.size() * sizeof(int64_t));
  };
  for (FusionOp part : parts) {
    std::string print = fingerprint(part);
    key += std::to_string(print.size()) + ":" + print;
  }
  addNumbers(placement);
  addNumbers(extra);
  return key;
}

/// Whether `fusion` computes the new value of a parameter or of optimizer or
/// model state (the step returns one of its results as an update).
bool isStateUpdate(FusionOp fusion) {
  for (OpOperand &use : fusion->getUses()) {
    auto ret = dyn_cast<func::ReturnOp>(use.getOwner());
    if (!ret)
      continue;
    auto func = ret->getParentOfType<func::FuncOp>();
    if (func.getResultAttr(use.getOperandNumber(),
                           GpucDialect::kUpdateAttrName))
      return true;
  }
  return false;
}

/// The most results one kernel has (an SGD update with momentum has 2 per
/// parameter, Adam's 3). Like PyTorch's multi_tensor_apply (36 tensors a
/// launch for Adam), a model with hundreds of parameters gets a few update
/// kernels instead of one: the host compiler and NVRTC take superlinear
/// time on one function of hundreds of kilobytes (DenseNet-121's updates
/// of its 120 128-channel batch norms were one loop of 240 results that
/// took GCC 9 s), while a few more launches cost a CUDA Graph next to
/// nothing.
constexpr unsigned kMaxKernelResults = 64;

/// Whether `parts` merged would have at most kMaxKernelResults results
/// (counting those a merge drops, which only a producer-consumer merge
/// does).
bool fitOneKernel(ArrayRef<FusionOp> parts) {
  unsigned results = 0;
  for (FusionOp part : parts)
    results += part.getNumResults();
  return results <= kMaxKernelResults;
}

/// Whether merging `first` into `second` keeps tensors live across a
/// library call that, less what the merge saves, are large beside what the
/// call allocates. The merged kernel runs at `second`, so an input that
/// `first` reads last lives on until then, across every op between the
/// two; a GEMM or convolution there allocates its result beside it (a
/// language model's next chunk of logits), which raises the peak by its
/// bytes less those of `first`'s results that are no longer stored (those
/// not in `kept`). A chunk's row kernel gathered into a kernel after the
/// next chunk's GEMM would keep both chunks' logits live, and so on until
/// every chunk's are. Under an eighth of the largest call's result (a
/// chunk's per-row losses kept for one sum of them all), the growth costs
/// little beside it, and the merge saves a launch. Only a reduction's
/// merges are judged: its results are a sliver of what it reads, where an
/// elementwise kernel's (a weight's gradient cut and cast as its update
/// reads it) are about its inputs' size, and stored, they would cost a
/// pass over memory.
///
/// `memoryFirst` also counts an input that a later op before `second`
/// reads last, from that op on: a layer's bias gradient (a column sum of
/// its output's gradient, which the layer's own GEMMs read after it) merged
/// into the optimizer's pieces at the end of backward keeps every layer's
/// gradient live until then. That costs nothing where the peak is at the
/// end of forward (GPT-2 bf16 at batch 16: the same 5,101 MiB), and its
/// sums are one kernel instead of 168 more launches; under remat, where the
/// peak moves into backward, it is what remat cannot recompute.
bool keepsInputsAcrossLibraryCalls(FusionOp first, FusionOp second,
                                   ArrayRef<Value> kept, bool memoryFirst) {
  if (!rowsOf(first))
    return false;
  int64_t extended = 0;
  // The earliest last reader of an input the merge keeps live.
  Operation *from = nullptr;
  for (Value v : first.getInputs()) {
    // Arguments are persistent: they live through the step anyway.
    if (isa<BlockArgument>(v))
      continue;
    Operation *last = first;
    bool notExtended = false;
    // The readers of its buffer, through every view of it: a reshape placed
    // before `first` may be read after it (Hugging Face's bias gradient is
    // summed after the reshape its layer's GEMMs read).
    Value buffer = v;
    while (Operation *def = buffer.getDefiningOp()) {
      if (!isAlias(def))
        break;
      buffer = def->getOperand(0);
    }
    if (isa<BlockArgument>(buffer))
      continue;
    SmallVector<Operation *> readers;
    SmallVector<Value> views{buffer};
    while (!views.empty())
      for (Operation *user : views.pop_back_val().getUsers()) {
        if (isAlias(user))
          views.push_back(user->getResult(0));
        else
          readers.push_back(user);
      }
    for (Operation *user : readers) {
      if (user == second.getOperation())
        continue;
      if (user->getBlock() != first->getBlock() ||
          second->isBeforeInBlock(user) ||
          (!memoryFirst && first->isBeforeInBlock(user))) {
        notExtended = true;
        break;
      }
      if (last->isBeforeInBlock(user))
        last = user;
    }
    if (notExtended)
      continue;
    extended += tensorBytes(v);
    if (!from || last->isBeforeInBlock(from))
      from = last;
  }
  if (!extended)
    return false;
  int64_t allocated = 0;
  for (Operation *op = from->getNextNode(); op && op != second;
       op = op->getNextNode())
    if (!isa<FusionOp>(op) && !isAlias(op))
      for (Value r : op->getResults())
        allocated = std::max(allocated, tensorBytes(r));
  if (!allocated)
    return false;
  int64_t saved = 0;
  for (Value r : first.getResults())
    if (!llvm::is_contained(kept, r))
      saved += tensorBytes(r);
  return (extended - saved) * 8 >= allocated;
}

/// The merged kernel of `first` and `second` (`second` later in the block),
/// placed at `second`. `second` reads `first`'s results directly or through
/// a reshape; `first`'s results that anything else reads stay results.
/// Returns null (and changes nothing) when the merge is not legal.
// Long: every legality check reads the two bodies' value maps built at the
// top, and the merge reuses them.
FusionOp tryMerge(FusionOp first, FusionOp second, Fusing &fusing) {
  if (!fitOneKernel({first, second}))
    return nullptr;
  // A reduction stays out of parameter and state updates: the optimizer's
  // run at the end of backward, and there a reduction would keep its
  // activation-sized inputs (batch norm's normalized input and output
  // gradient) live until then, where they could have died in the row
  // kernel that reads them. What merging would save is one launch and a
  // vector of per-row values.
  if ((rowsOf(first) || rowsOf(second)) &&
      (isStateUpdate(first) || isStateUpdate(second)))
    return nullptr;
  // Every other reader of `first` must run after `second`. One placed
  // between them whose own results only ops after `second` read (a chunk's
  // loss summed before its logit gradient) moves after the merged kernel.
  SmallVector<Value> keptResults;
  SmallVector<Operation *> reshapesToErase, readersToMove;
  auto readOnlyAfterSecond = [&](Operation *op) {
    return llvm::all_of(op->getUsers(), [&](Operation *u) {
      return u->getBlock() == second->getBlock() && second->isBeforeInBlock(u);
    });
  };
  for (Value result : first.getResults()) {
    bool readElsewhere = false;
    for (Operation *user : result.getUsers()) {
      if (user == second.getOperation())
        continue;
      if (isAlias(user) && llvm::all_of(user->getUsers(), [&](Operation *u) {
            return u == second.getOperation();
          })) {
        reshapesToErase.push_back(user);
        continue;
      }
      if (user->getBlock() != second->getBlock())
        return nullptr;
      if (!second->isBeforeInBlock(user)) {
        // A kernel, or a reshape and the kernels that read it there.
        SmallVector<Operation *> moving{user};
        if (isAlias(user))
          for (Operation *u : user->getUsers())
            if (u->getBlock() != second->getBlock() ||
                !second->isBeforeInBlock(u))
              moving.push_back(u);
        for (Operation *op : moving) {
          bool movable =
              (op == user && isAlias(op)) ||
              (isa<FusionOp>(op) && op != second.getOperation() &&
               op->getBlock() == second->getBlock() && readOnlyAfterSecond(op));
          if (!movable)
            return nullptr;
          if (!llvm::is_contained(readersToMove, op))
            readersToMove.push_back(op);
        }
      }
      readElsewhere = true;
    }
    if (readElsewhere)
      keptResults.push_back(result);
  }
  if (keepsInputsAcrossLibraryCalls(first, second, keptResults,
                                    fusing.memoryFirst))
    return nullptr;

  OpBuilder builder(second);
  SmallVector<Value> inputs;
  auto addInput = [&](Value v) {
    if (!llvm::is_contained(inputs, v))
      inputs.push_back(v);
  };
  auto producedByFirst = [&](Value v) -> std::optional<unsigned> {
    if (v.getDefiningOp() == first.getOperation())
      return cast<OpResult>(v).getResultNumber();
    return std::nullopt;
  };
  auto throughReshape = [&](Value v) -> Operation * {
    Operation *def = v.getDefiningOp();
    if (def && isAlias(def) && producedByFirst(def->getOperand(0)))
      return def;
    return nullptr;
  };
  for (Value v : first.getInputs())
    addInput(v);
  for (Value v : second.getInputs())
    if (!producedByFirst(v) && !throughReshape(v))
      addInput(v);

  // A merge refused before is refused again: the merged kernel is not built.
  SmallVector<int64_t> placement, extra;
  auto position = [&](Value v) -> int64_t {
    return llvm::find(inputs, v) - inputs.begin();
  };
  for (Value v : first.getInputs())
    placement.push_back(position(v));
  for (Value v : second.getInputs()) {
    if (std::optional<unsigned> k = producedByFirst(v)) {
      placement.push_back(-1 - (int64_t)*k);
    } else if (Operation *reshape = throughReshape(v)) {
      placement.push_back(-1 -
                          (int64_t)*producedByFirst(reshape->getOperand(0)));
      extra.push_back(placement.size());
      extra.push_back(
          (int64_t)(intptr_t)reshape->getName().getAsOpaquePointer());
      extra.push_back(
          (int64_t)(intptr_t)reshape->getAttrDictionary().getAsOpaquePointer());
      extra.push_back((int64_t)(intptr_t)v.getType().getAsOpaquePointer());
    } else {
      placement.push_back(position(v));
    }
  }
  extra.push_back(-1);
  for (Value v : keptResults)
    extra.push_back(cast<OpResult>(v).getResultNumber());
  std::string key = mergeKey("producer", {first, second}, placement, extra);
  auto known = fusing.mergeVerdicts.find(key);
  if (known != fusing.mergeVerdicts.end() && !known->second)
    return nullptr;

  SmallVector<Type> resultTypes(second.getResultTypes());
  for (Value v : keptResults)
    resultTypes.push_back(v.getType());
  auto merged = FusionOp::create(builder, second.getLoc(), resultTypes, inputs);
  Block &body = merged.getBodyBlock();
  OpBuilder inner = OpBuilder::atBlockBegin(&body);
  IRMapping mapping;
  auto argFor = [&](Value outer) {
    return body.getArgument(llvm::find(inputs, outer) - inputs.begin());
  };
  for (auto [outer, arg] :
       llvm::zip(first.getInputs(), first.getBodyBlock().getArguments()))
    mapping.map(arg, argFor(outer));
  SmallVector<Value> firstValues = inlineBody(inner, first, mapping);

  IRMapping secondMapping;
  for (auto [outer, arg] :
       llvm::zip(second.getInputs(), second.getBodyBlock().getArguments())) {
    if (std::optional<unsigned> k = producedByFirst(outer)) {
      secondMapping.map(arg, firstValues[*k]);
    } else if (Operation *reshape = throughReshape(outer)) {
      unsigned k = *producedByFirst(reshape->getOperand(0));
      Operation *copy = inner.clone(*reshape);
      copy->setOperand(0, firstValues[k]);
      secondMapping.map(arg, copy->getResult(0));
    } else {
      secondMapping.map(arg, argFor(outer));
    }
  }
  SmallVector<Value> yielded = inlineBody(inner, second, secondMapping);
  for (Value v : keptResults)
    yielded.push_back(firstValues[cast<OpResult>(v).getResultNumber()]);
  YieldOp::create(inner, second.getLoc(), yielded);

  if (known == fusing.mergeVerdicts.end())
    fusing.mergeVerdicts[key] = !recomputesWork(merged, fusing.memoryFirst) &&
                                fusing.hasSchedule(merged);
  if (!fusing.mergeVerdicts[key]) {
    merged.erase();
    return nullptr;
  }
  unsigned n = second.getNumResults();
  second.replaceAllUsesWith(merged.getResults().take_front(n));
  for (auto [k, v] : llvm::enumerate(keptResults))
    v.replaceAllUsesWith(merged.getResult(n + k));
  // In their order, after the kernel whose results they now read.
  llvm::sort(readersToMove,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *reader : llvm::reverse(readersToMove))
    reader->moveAfter(merged);
  second.erase();
  for (Operation *reshape : reshapesToErase)
    if (reshape->use_empty())
      reshape->erase();
  first.erase();
  return merged;
}

/// One kernel computing all of `parts` (none reads another), built at `at`,
/// which the parts' operands must dominate and all their readers follow.
/// Null (and nothing changed) when the merged region has no schedule; with
/// `checkOnly`, the merged kernel is erased again and `parts` returned as
/// they were (the first of them), to say that merging them would succeed.
FusionOp mergeSideBySide(ArrayRef<FusionOp> parts, Operation *at,
                         Fusing &fusing, bool checkOnly = false) {
  OpBuilder builder(at);
  SmallVector<Value> inputs;
  for (FusionOp part : parts)
    for (Value v : part.getInputs())
      if (!llvm::is_contained(inputs, v))
        inputs.push_back(v);
  SmallVector<int64_t> placement;
  for (FusionOp part : parts)
    for (Value v : part.getInputs())
      placement.push_back(llvm::find(inputs, v) - inputs.begin());
  std::string key = mergeKey("siblings", parts, placement, {});
  auto known = fusing.mergeVerdicts.find(key);
  if (known != fusing.mergeVerdicts.end() && (!known->second || checkOnly))
    return known->second ? parts.front() : nullptr;
  SmallVector<Type> types;
  for (FusionOp part : parts)
    llvm::append_range(types, part.getResultTypes());
  Location loc = FusionOp(parts.front()).getLoc();
  auto merged = FusionOp::create(builder, loc, types, inputs);
  Block &body = merged.getBodyBlock();
  OpBuilder inner = OpBuilder::atBlockBegin(&body);
  SmallVector<Value> yielded;
  for (FusionOp part : parts) {
    IRMapping mapping;
    for (auto [outer, arg] :
         llvm::zip(part.getInputs(), part.getBodyBlock().getArguments()))
      mapping.map(arg,
                  body.getArgument(llvm::find(inputs, outer) - inputs.begin()));
    llvm::append_range(yielded, inlineBody(inner, part, mapping));
  }
  YieldOp::create(inner, loc, yielded);
  if (known == fusing.mergeVerdicts.end())
    fusing.mergeVerdicts[key] = !recomputesWork(merged, fusing.memoryFirst) &&
                                fusing.hasSchedule(merged);
  if (!fusing.mergeVerdicts[key] || checkOnly) {
    merged.erase();
    return fusing.mergeVerdicts[key] ? parts.front() : nullptr;
  }
  unsigned n = 0;
  for (FusionOp part : parts) {
    part.replaceAllUsesWith(merged.getResults().slice(n, part.getNumResults()));
    n += part.getNumResults();
    part.erase();
  }
  return merged;
}

/// Whether `fusion` only computes values the step returns (parameter and
/// optimizer-state updates, typically): nothing in the step reads them.
bool onlyReturned(FusionOp fusion) {
  return !rowsOf(fusion) &&
         llvm::all_of(fusion->getUsers(), [](Operation *user) {
           return isa<func::ReturnOp>(user);
         });
}

/// Siblings: two kernels that read a common buffer, both elementwise over
/// the same number of elements or both row kernels over the same rows (batch
/// norm's input gradient and its weight gradients, say), merged where
/// `earlier` runs (so `later`'s operands must all be defined before it).
FusionOp tryMergeSiblings(FusionOp earlier, FusionOp later, Fusing &fusing) {
  int64_t rows = rowsOf(earlier);
  if (rows != rowsOf(later))
    return nullptr;
  if (!rows &&
      numElements(earlier.getResult(0)) != numElements(later.getResult(0)))
    return nullptr;
  if (isStateUpdate(earlier) || isStateUpdate(later))
    return nullptr;
  if (!fitOneKernel({earlier, later}))
    return nullptr;
  for (Value v : later.getInputs()) {
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == earlier->getBlock() &&
        !def->isBeforeInBlock(earlier))
      return nullptr;
  }
  return mergeSideBySide({earlier, later}, earlier, fusing);
}

/// Multi-tensor: the kernels that only produce returned values (the
/// optimizer update of every parameter) become kernels with a segment per
/// tensor size, of up to kMaxKernelResults results each, each run where the
/// last of its updates ran.
///
/// An update that addresses memory by integers it loads (a tied embedding's
/// update summing its rows' positions) stays a kernel of its own: the GPU
/// gives a kernel the registers of its hungriest segment, and such an
/// update cannot be timed against alternatives at load, so beside the
/// others it would run at their occupancy and keep them from being timed.
bool fuseReturnedUpdates(func::FuncOp func, Fusing &fusing) {
  SmallVector<FusionOp> updates;
  for (Operation &op : func.getBody().front())
    if (auto f = dyn_cast<FusionOp>(op);
        f && onlyReturned(f) && !addressesByLoadedIntegers(f))
      updates.push_back(f);
  if (updates.size() < 2)
    return false;
  // Runs of updates whose neighbours merge pairwise are merged at once (a
  // schedule for each neighbouring pair of pointwise segments is one for
  // the run); were a run's kernel refused after all, its updates are merged
  // one at a time, each into the group before it, as long as that works.
  bool changed = false;
  size_t begin = 0;
  while (begin < updates.size()) {
    size_t end = begin + 1;
    while (end < updates.size() &&
           fitOneKernel(ArrayRef(updates).slice(begin, end + 1 - begin)) &&
           mergeSideBySide({updates[end - 1], updates[end]}, updates[end],
                           fusing, /*checkOnly=*/true))
      ++end;
    ArrayRef<FusionOp> run = ArrayRef(updates).slice(begin, end - begin);
    if (run.size() > 1 && mergeSideBySide(run, run.back(), fusing)) {
      changed = true;
    } else {
      // The run fits one kernel, so each group does.
      FusionOp group = run.front();
      for (FusionOp update : run.drop_front()) {
        if (FusionOp merged =
                mergeSideBySide({group, update}, update, fusing)) {
          group = merged;
          changed = true;
        } else {
          group = update;
        }
      }
    }
    begin = end;
  }
  return changed;
}

/// The fusion that produces `v`, directly or through a reshape.
FusionOp producerOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (def && isAlias(def))
    def = def->getOperand(0).getDefiningOp();
  return dyn_cast_or_null<FusionOp>(def);
}

/// Merges producers into consumers, always the first legal merge in block
/// order (of consumers, then of their inputs), until none is left. Merging
/// `first` into `second` moves `first`'s reads to `second`'s place and
/// makes a new kernel there; a pair whose consumer precedes `first` keeps
/// its verdict (a reader that was after the consumer still is; bodies and
/// state updates are unchanged), so the next scan starts where `first` was
/// instead of at the block's start: the same merges as rescanning the
/// block, without its quadratic cost.
bool fuseProducers(func::FuncOp func, Fusing &fusing) {
  bool changed = false;
  Block &block = func.getBody().front();
  for (Operation *from = block.empty() ? nullptr : &block.front(); from;) {
    Operation *restart = nullptr;
    // (A merge erases the consumer: the scan stops there, before stepping
    // past it.)
    for (Operation *op = from; op && !restart;) {
      if (auto consumer = dyn_cast<FusionOp>(op)) {
        for (Value input : consumer.getInputs()) {
          FusionOp producer = producerOf(input);
          if (!producer || producer->getBlock() != consumer->getBlock())
            continue;
          Operation *beforeFirst = producer->getPrevNode();
          if (tryMerge(producer, consumer, fusing)) {
            changed = true;
            restart = beforeFirst ? beforeFirst->getNextNode() : &block.front();
            break;
          }
        }
      }
      if (!restart)
        op = op->getNextNode();
    }
    from = restart;
  }
  return changed;
}

bool fuseSiblings(func::FuncOp func, Fusing &fusing) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    SmallVector<FusionOp> kernels;
    for (Operation &op : func.getBody().front())
      if (auto f = dyn_cast<FusionOp>(op))
        kernels.push_back(f);
    for (size_t i = 0; i < kernels.size() && !again; ++i)
      for (size_t j = i + 1; j < kernels.size() && !again; ++j) {
        bool shareInput = llvm::any_of(kernels[j].getInputs(), [&](Value v) {
          return llvm::is_contained(kernels[i].getInputs(), v);
        });
        if (shareInput && tryMergeSiblings(kernels[i], kernels[j], fusing))
          again = changed = true;
      }
  }
  return changed;
}

/// Recomputes result `index` of `producer` inside each kernel that reads it,
/// instead of storing it, when that is cheap and makes no reader read more
/// bytes than the result holds: it is pointwise (with broadcasts and
/// constants) from the producer's inputs and other results, and the
/// operands as large as it that a reader does not read already are at most
/// as many bytes. Either they are read already (batch norm's scaled output
/// gradient, read beside the unscaled one it is computed from), or they are
/// 16-bit where the result is f32 (under mixed precision, an f32 bias-add
/// and ReLU that backward reads, recomputed from the GEMM's f16 output). The
/// tensor is then neither written nor read, and its bytes are never live.
/// A per-row statistic on the way (a reduction's result, smaller than the
/// result: batch norm's mean under its normalized input) becomes a result
/// of the producer and an operand of the readers.
// Long: the legality checks and the rewrite read the same chain of
// producers, collected once at the top.
bool sinkCheapResult(FusionOp producer, unsigned index, Fusing &fusing) {
  Value result = producer.getResult(index);
  SmallVector<FusionOp> readers;
  for (Operation *user : result.getUsers()) {
    auto reader = dyn_cast<FusionOp>(user);
    if (!reader || reader->getBlock() != producer->getBlock())
      return false;
    if (!llvm::is_contained(readers, reader))
      readers.push_back(reader);
  }
  if (readers.empty())
    return false;
  Block &body = producer.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  Value root = yield.getOperand(index);
  int64_t n = numElements(result);
  // Per-row statistics the producer computes but does not yield (batch
  // norm's mean, under its normalized output), yielded by `grown` if the
  // sinking goes ahead.
  SetVector<Value> exposed;
  FusionOp grown;
  // The value outside the producer that an inner value stands for.
  auto outside = [&](Value inner) -> Value {
    if (auto arg = dyn_cast<BlockArgument>(inner))
      return producer.getOperand(arg.getArgNumber());
    for (auto [k, v] : llvm::enumerate(yield.getValues()))
      if (k != index && v == inner)
        return producer.getResult(k);
    if (grown && exposed.contains(inner))
      return grown.getResult(producer.getNumResults() +
                             (llvm::find(exposed, inner) - exposed.begin()));
    return nullptr;
  };
  if (outside(root))
    return false;
  SetVector<Operation *> slice;
  SetVector<Value> leaves;
  // The slice computing the result from leaves; `exposeRounded`: a value
  // rounded to 16 bits inside the producer is a leaf too (what mixed
  // precision stores: the residual sum a layer norm reads, computed from
  // two 16-bit tensors), tried when the inputs alone are too many bytes.
  auto collect = [&](bool exposeRounded) {
    slice.clear();
    leaves.clear();
    exposed.clear();
    SmallVector<Value> worklist{root};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (v != root && outside(v)) {
        leaves.insert(v);
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (!def)
        return false;
      bool rounded = exposeRounded && isa<CastOp>(def) && v != root &&
                     isa<Float16Type, BFloat16Type>(getElementTypeOrSelf(v));
      if ((isReduction(def) && numElements(v) < n) || rounded) {
        exposed.insert(v);
        leaves.insert(v);
        continue;
      }
      if (!isPointwise(def) && !isa<BroadcastOp, ConstantOp, IotaOp>(def))
        return false;
      if (slice.insert(def))
        llvm::append_range(worklist, def->getOperands());
    }
    // What each reader would read anew, counting only operands as large as
    // the result (smaller ones are broadcast: biases, per-row statistics),
    // and the large leaves that would then live longer than they do.
    SetVector<Value> lengthened;
    for (FusionOp reader : readers) {
      int64_t newBytes = 0;
      bool readerLengthens = false;
      for (Value leaf : leaves) {
        Value outer = outside(leaf);
        if (numElements(leaf) < n ||
            (outer && llvm::is_contained(reader.getInputs(), outer)))
          continue;
        newBytes += tensorBytes(leaf);
        if (!outer || llvm::none_of(outer.getUsers(), [&](Operation *u) {
              return reader->isBeforeInBlock(u);
            })) {
          lengthened.insert(leaf);
          readerLengthens = true;
        }
      }
      // At most as many bytes as the result: the reader reads them instead
      // (batch norm's normalized input, kept for backward, instead of the
      // affine output it is scaled into) and the producer writes less.
      // Memory-first (under a budget), a lengthened leaf of the result's
      // size is refused: a GEMM's output kept in place of the cheap value
      // computed from it is one that remat cannot recompute cheaply.
      if (newBytes > tensorBytes(result) ||
          (fusing.memoryFirst && readerLengthens &&
           newBytes == tensorBytes(result)))
        return false;
    }
    // A leaf that lives on to a reader is live at the producer already, so
    // it takes over the stretch where the result was live: at most the
    // result's bytes lengthened, no point of the schedule holds more
    // (softmax's exp(x - max), recomputed by the loss gradient from the
    // logits instead of stored beside them).
    int64_t lengthenedBytes = 0;
    for (Value leaf : lengthened)
      lengthenedBytes += tensorBytes(leaf);
    return lengthenedBytes <= tensorBytes(result);
  };
  if (!collect(/*exposeRounded=*/false) && !collect(/*exposeRounded=*/true))
    return false;
  if (!exposed.empty()) {
    OpBuilder builder(producer);
    SmallVector<Type> types(producer.getResultTypes());
    for (Value v : exposed)
      types.push_back(v.getType());
    grown = FusionOp::create(builder, producer.getLoc(), types,
                             producer.getInputs());
    IRMapping mapping;
    for (auto [arg, copy] :
         llvm::zip(body.getArguments(), grown.getBodyBlock().getArguments()))
      mapping.map(arg, copy);
    OpBuilder inner = OpBuilder::atBlockBegin(&grown.getBodyBlock());
    SmallVector<Value> yielded = inlineBody(inner, producer, mapping);
    for (Value v : exposed)
      yielded.push_back(mapping.lookup(v));
    YieldOp::create(inner, producer.getLoc(), yielded);
  }

  // Each reader again, computing the result from the leaves.
  SmallVector<std::pair<FusionOp, FusionOp>> rebuilt;
  for (FusionOp reader : readers) {
    FusionOp copy = recomputeInputInFusion(reader, result, producer, slice,
                                           leaves.getArrayRef(), root, outside);
    rebuilt.push_back({reader, copy});
    if (recomputesWork(copy, fusing.memoryFirst) || !fusing.hasSchedule(copy)) {
      for (auto &[original, made] : rebuilt)
        made.erase();
      if (grown)
        grown.erase();
      return false;
    }
  }
  for (auto &[original, made] : rebuilt) {
    original.replaceAllUsesWith(made.getResults());
    original.erase();
  }
  if (grown) {
    producer.replaceAllUsesWith(
        grown.getResults().take_front(producer.getNumResults()));
    producer.erase();
    producer = grown;
  }
  dropFusionResult(producer, index);
  return true;
}

bool sinkCheapResults(func::FuncOp func, Fusing &fusing) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    for (Operation &op : func.getBody().front()) {
      auto fusion = dyn_cast<FusionOp>(op);
      if (!fusion || fusion.getNumResults() < 2)
        continue;
      // A sink replaces `fusion` (erased): `again` is tested before the
      // old op is read.
      for (unsigned k = 0; !again && k < fusion.getNumResults(); ++k)
        again = sinkCheapResult(fusion, k, fusing);
      if (again) {
        changed = true;
        break;
      }
    }
  }
  return changed;
}

struct Fuse : gpuc::impl::GpucFuseBase<Fuse> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      Fusing fusing{memoryFirst};
      while (fuseProducers(func, fusing) | fuseSiblings(func, fusing) |
             sinkCheapResults(func, fusing)) {
      }
      fuseReturnedUpdates(func, fusing);
    });
  }
};
} // namespace

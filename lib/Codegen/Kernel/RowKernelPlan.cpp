//===- RowKernelPlan.cpp - what a row kernel's passes are made of --------===//
//
// The decisions behind a row kernel, taken before any of its text: which
// values are per row and per element, the levels of its reductions and the
// passes they share, which values the first pass keeps for later ones, the
// layout (rows, warp rows, columns), the split of long rows into chunks,
// staging, and the launches. RowKernel.cpp writes the passes from it.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

/// The axes a reduction reduces.
SmallVector<int64_t> reducedAxes(Operation *reduce) {
  if (auto r = dyn_cast<ReduceSumOp>(reduce))
    return SmallVector<int64_t>(r.getAxes());
  if (auto r = dyn_cast<ReduceMaxOp>(reduce))
    return SmallVector<int64_t>(r.getAxes());
  return SmallVector<int64_t>(cast<ReduceMeanOp>(reduce).getAxes());
}

/// Whether `a` and `b`, values of `block`, are one value: the same, or
/// results of the same pure ops on such values (the fuser gives each reader
/// of a producer a copy of its own, so one gradient reaches a kernel's sum
/// and its mean through two casts). `known` keeps the pairs compared.
static bool sameValue(Value a, Value b, Block &block,
                      DenseMap<std::pair<Value, Value>, bool> &known) {
  if (a == b)
    return true;
  auto ra = dyn_cast<OpResult>(a), rb = dyn_cast<OpResult>(b);
  if (!ra || !rb || ra.getResultNumber() != rb.getResultNumber())
    return false;
  Operation *x = ra.getOwner(), *y = rb.getOwner();
  if (x->getBlock() != &block || y->getBlock() != &block || !isPure(x) ||
      !isPure(y))
    return false;
  auto it = known.find({a, b});
  if (it != known.end())
    return it->second;
  bool same = OperationEquivalence::isEquivalentTo(
      x, y,
      [&](Value l, Value r) { return success(sameValue(l, r, block, known)); },
      /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations);
  known[{a, b}] = same;
  return same;
}

/// Whether `reductions[j]` is reduce_sum or reduce_mean of (x - m)^2 (as
/// mul(d, d), d = sub(x, m) with m broadcast or reshaped), m being another
/// of the kernel's reductions, reduce_mean of the same x, where x (f32)
/// reads no reduction and the result is f32.
static std::optional<CenteredSquares>
centeredSquaresOf(ArrayRef<Operation *> reductions, size_t j,
                  const DenseSet<Operation *> &afterReduction, Block &block,
                  DenseMap<std::pair<Value, Value>, bool> &known) {
  Operation *reduce = reductions[j];
  if (!isa<ReduceSumOp, ReduceMeanOp>(reduce) ||
      !elementOf(reduce->getResult(0)).isF32())
    return std::nullopt;
  auto square = reduce->getOperand(0).getDefiningOp<MulOp>();
  if (!square || square.getLhs() != square.getRhs())
    return std::nullopt;
  auto centered = square.getLhs().getDefiningOp<SubOp>();
  if (!centered)
    return std::nullopt;
  Value x = centered.getLhs(), mean = centered.getRhs();
  while (Operation *def = mean.getDefiningOp()) {
    if (!isa<BroadcastOp, ReshapeOp>(def))
      break;
    mean = def->getOperand(0);
  }
  Operation *xDef = x.getDefiningOp();
  if (!elementOf(x).isF32() || (xDef && afterReduction.contains(xDef)))
    return std::nullopt;
  for (auto [m, other] : llvm::enumerate(reductions))
    if (isa<ReduceMeanOp>(other) && other->getResult(0) == mean &&
        sameValue(other->getOperand(0), x, block, known))
      return CenteredSquares{m, x};
  return std::nullopt;
}

/// Whether computing `v` calls a transcendental function (what is worth a
/// store and a load to compute once).
static bool callsTranscendental(Value v, Block &block) {
  SmallVector<Value> worklist{v};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value x = worklist.pop_back_val();
    Operation *def = x.getDefiningOp();
    if (!def || def->getBlock() != &block || !seen.insert(x).second ||
        isReduction(def))
      continue;
    if (isa<ExpOp, LogOp, TanhOp, ErfOp, SigmoidOp, PowOp, GeluOp, CosOp,
            SinOp>(def))
      return true;
    llvm::append_range(worklist, def->getOperands());
  }
  return false;
}

KeptValue Emitter::keptForLastPass(ArrayRef<Operation *> reductions,
                                   ArrayRef<int64_t> levelOf, int64_t levels,
                                   ArrayRef<Value> perElement) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (perElement.size() != 1 || levels == 0)
    return {};
  Value result = perElement[0];
  int64_t output = -1;
  for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
    if (yielded == result)
      output = output < 0 ? (int64_t)k : -2;
  // One output of f32 elements, which hold the kept value exactly.
  if (output < 0 || !elementOf(result).isF32())
    return {};
  for (auto [j, reduce] : llvm::enumerate(reductions)) {
    Value summed = reduce->getOperand(0);
    if (levelOf[j] != levels - 1 || isa<ReduceMaxOp>(reduce) ||
        isa<BlockArgument>(summed) || !elementOf(summed).isF32() ||
        !callsTranscendental(summed, block))
      continue;
    // The result must read `summed`, and (when it is written over an
    // operand, which the store of `summed` then replaces) read that operand
    // only through it.
    int64_t overwritten = inPlace[output];
    bool readsSummed = false, readsOverwritten = false;
    SmallVector<Value> worklist{result};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value x = worklist.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (x == summed) {
        readsSummed = true;
        continue;
      }
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        readsOverwritten |= (int64_t)arg.getArgNumber() == overwritten;
        continue;
      }
      Operation *def = x.getDefiningOp();
      if (def->getBlock() != &block || isReduction(def))
        continue;
      llvm::append_range(worklist, def->getOperands());
    }
    if (readsSummed && !readsOverwritten)
      return {summed, output};
  }
  return {};
}

DenseMap<Value, int64_t> Emitter::storedForLaterPasses(
    ArrayRef<Operation *> reductions, ArrayRef<int64_t> levelOf,
    const KeptValue &reused, function_ref<bool(Value)> beforeReductions,
    SmallVector<Value> &firstPass, SmallVector<Value> &perElement) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  auto outputOf = [&](Value v) {
    for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
      if (yielded == v)
        return (int64_t)k;
    return (int64_t)-1;
  };
  auto bytesOf = [](Value v) {
    return std::max<int64_t>(1, elementOf(v).getIntOrFloatBitWidth() / 8);
  };
  // What the passes after the first compute at each element.
  SmallVector<Value> later(perElement.begin(), perElement.end());
  for (auto [j, reduce] : llvm::enumerate(reductions))
    if (levelOf[j] >= 1)
      later.push_back(reduce->getOperand(0));
  if (reused.value)
    later.push_back(reused.value);
  // The inputs of the block that `roots` read at each element (not through
  // a reduction, whose value is its row's register, nor through `stops`),
  // and the stops they reach.
  auto reads = [&](ArrayRef<Value> roots, const DenseSet<Value> &stops,
                   DenseSet<Value> *reached = nullptr) {
    DenseSet<Value> inputs, seen;
    SmallVector<Value> work(roots.begin(), roots.end());
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (stops.contains(x)) {
        if (reached)
          reached->insert(x);
        continue;
      }
      if (isa<BlockArgument>(x)) {
        inputs.insert(x);
        continue;
      }
      Operation *def = x.getDefiningOp();
      if (def && def->getBlock() == &block && !isReduction(def))
        llvm::append_range(work, def->getOperands());
    }
    return inputs;
  };
  // The bytes of `inputs` loaded at each element (not a per-row operand,
  // which a row loads once).
  int64_t elements = getNumElements(shapeOf(reductions[0]->getOperand(0)));
  auto elementBytes = [&](const DenseSet<Value> &inputs) {
    int64_t bytes = 0;
    for (Value input : inputs)
      if (getNumElements(shapeOf(input)) == elements)
        bytes += bytesOf(input);
    return bytes;
  };
  // Candidates: values of the first pass that a later pass needs too, and
  // values written over an operand, which wait for the last pass only
  // because a later pass might read that operand.
  SmallVector<Value> candidates;
  for (Value v : firstPass)
    candidates.push_back(v);
  for (Value v : perElement) {
    int64_t k = outputOf(v);
    if (k >= 0 && inPlace[k] >= 0 && beforeReductions(v) &&
        !(reused.value && reused.output == k))
      candidates.push_back(v);
  }
  DenseMap<Value, int64_t> chosen;
  DenseSet<Value> stops;
  for (Value v : candidates) {
    int64_t k = outputOf(v);
    if (k < 0 || isa<BlockArgument>(v))
      continue;
    bool inPlaceValue = inPlace[k] >= 0;
    DenseSet<Value> with = stops;
    with.insert(v);
    DenseSet<Value> reached;
    DenseSet<Value> laterInputs = reads(later, with, &reached);
    if (inPlaceValue) {
      // Stored by the first pass, over an operand that no later pass may
      // read again.
      if (laterInputs.contains(block.getArgument(inPlace[k])))
        continue;
    } else {
      // Read back when a later pass needs it and that reads fewer bytes
      // than computing it again.
      if (!reached.contains(v))
        continue;
      DenseSet<Value> own = reads({v}, {});
      DenseSet<Value> saved;
      for (Value input : own)
        if (!laterInputs.contains(input))
          saved.insert(input);
      if (elementBytes(saved) <= bytesOf(v))
        continue;
    }
    stops.insert(v);
    chosen[v] = k;
  }
  // The values written over an operand move to the first pass, in the
  // kernel's order (a map's order would change the text from run to run).
  for (Value v : candidates)
    if (auto it = chosen.find(v); it != chosen.end() &&
                                  inPlace[it->second] >= 0 &&
                                  llvm::is_contained(perElement, v)) {
      llvm::erase(perElement, v);
      firstPass.push_back(v);
    }
  return chosen;
}

DenseMap<Value, int64_t>
Emitter::stagedRowInputs(ArrayRef<Value> firstPass, ArrayRef<Value> later,
                         const DenseMap<Value, int64_t> &readBack,
                         int64_t rowLength, bool inRegisters, int64_t &bytes) {
  DenseMap<Value, int64_t> staged;
  bytes = 0;
  ArrayRef<int64_t> full = shapeOf(firstPass.front());
  // What the later passes read: a value the first pass stored they load
  // from its output, not from its inputs.
  storedOutputs = readBack;
  SmallVector<Value> readLater = inputsReadAtStoredIndex(later);
  storedOutputs.clear();
  for (Value input : inputsReadAtStoredIndex(firstPass)) {
    Type element = elementOf(input);
    if (!isa<BlockArgument>(input) || shapeOf(input) != full ||
        !llvm::is_contained(readLater, input) || loadGuards.count(input) ||
        !isa<FloatType>(element) || element.getIntOrFloatBitWidth() > 32)
      continue;
    // Each row 16-byte aligned in shared memory; a register (4 bytes) an
    // element in registers.
    int64_t rowBytes =
        inRegisters
            ? rowLength * 4
            : llvm::alignTo(rowLength * (element.getIntOrFloatBitWidth() / 8),
                            16);
    if (bytes + rowBytes >
        (inRegisters ? warpRowRegisters * 4 * 32 : rowStageBytes))
      continue;
    staged[input] = bytes;
    bytes += rowBytes;
  }
  return staged;
}

FailureOr<RowKernelPlan>
Emitter::planRowKernel(ArrayRef<Operation *> reductions, EmittedKernel &kernel,
                       int64_t &cpuGrid) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A row kernel: one block per element of the kept axes ("row"); every
  // reduction reduces the same axes of the same shape. Each reduction is a
  // pass over the row (threads stride, then a block reduction), after
  // which its value is a register of the block; values written per row
  // are stored by thread 0, values of the full shape in a last pass.
  RowKernelPlan p;
  p.full.assign(shapeOf(reductions[0]->getOperand(0)));
  ArrayRef<int64_t> full = p.full;
  SmallVector<int64_t> axes = reducedAxes(reductions[0]);
  for (Operation *reduce : reductions)
    if (shapeOf(reduce->getOperand(0)) != full || reducedAxes(reduce) != axes)
      return reduce->emitOpError()
             << "reduces other axes or another shape than the kernel's "
                "first reduction; a kernel's reductions share their rows";
  SmallVector<int64_t> keptShape;
  for (size_t d = 0; d < full.size(); ++d)
    (llvm::is_contained(axes, (int64_t)d) ? p.rowShape : keptShape)
        .push_back(full[d]);
  p.rows = getNumElements(keptShape);
  p.rowLength = getNumElements(p.rowShape);
  for (Value value : yield.getValues()) {
    int64_t n = getNumElements(shapeOf(value));
    if (n == p.rows)
      p.perRow.push_back(value);
    else if (shapeOf(value) == full)
      p.perElement.push_back(value);
    else
      return fusion.emitOpError()
             << "writes " << value.getType()
             << ", neither one value per row nor the reduced shape";
  }
  // A reduction's result lives in a register of its row, read whatever
  // index asks for it: every op between it and a store must read it at
  // its own row, so only pointwise ops, reshapes (the linear index stays)
  // and broadcasts back to the reduced shape may follow. A permutation
  // (a transpose of the per-row values, as a gather's gradient has) would
  // store row o's value where another row's belongs.
  DenseSet<Value> fromRows;
  for (Operation &op : block.without_terminator()) {
    bool readsRows = llvm::any_of(
        op.getOperands(), [&](Value v) { return fromRows.contains(v); });
    if (!readsRows) {
      if (isReduction(&op))
        fromRows.insert(op.getResult(0));
      continue;
    }
    auto broadcast = dyn_cast<BroadcastOp>(op);
    if (!isPointwise(&op) && !isReduction(&op) && !isa<ReshapeOp>(op) &&
        !(broadcast && shapeOf(broadcast.getResult()) == full))
      return op.emitOpError()
             << "reads a row kernel's per-row value at other positions than "
                "its row; it needs a kernel of its own";
    for (Value result : op.getResults())
      fromRows.insert(result);
  }
  // Per-element values that depend on no reduction (and overwrite no
  // operand) are stored in the first pass over the row, which visits
  // every element once (split rows: the first launch, each block its
  // chunk), so only values computed from a reduction need the last pass.
  // A dropout gradient summed over the batch then draws its mask once,
  // not once per pass.
  DenseSet<Operation *> afterReduction;
  for (Operation &op : block.without_terminator())
    if (isReduction(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && afterReduction.contains(def);
        }))
      afterReduction.insert(&op);
  // A value written over an operand stays in the last pass: the row's
  // reductions read that operand until then (canOverwrite's contract).
  auto writtenInPlace = [&](Value v) {
    for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
      if (yielded == v && inPlace[k] >= 0)
        return true;
    return false;
  };
  // Adjacent axes that are both kept or both reduced are one axis of the
  // iteration (batch norm's [N, C, H, W] over {0, 2, 3} is [N, C, H*W]
  // over {0, 2}), so an element's index costs one division less per
  // merged axis; the original coordinates are derived from the merged
  // ones (the host compiler drops those nobody reads).
  for (size_t d = 0; d < full.size(); ++d) {
    bool reduced = llvm::is_contained(axes, (int64_t)d);
    if (p.runs.empty() || p.runs.back().reduced != reduced)
      p.runs.push_back({reduced, 1, {}});
    p.runs.back().size *= full[d];
    p.runs.back().dims.push_back(full[d]);
  }
  for (const RowKernelPlan::Run &run : p.runs) {
    p.mergedFull.push_back(run.size);
    (run.reduced ? p.mergedRow : p.mergedKept).push_back(run.size);
  }
  // A row kernel whose rows are adjacent elements (its innermost axis is
  // kept: a bias gradient's sum over the batch, a layer norm's weight
  // gradient) runs in columns: each block takes a group of adjacent rows,
  // whose elements it walks together, so that loads of neighbouring
  // threads (GPU) or lanes (CPU) are neighbouring addresses. One block per
  // row gathered elements a row's length apart: the GPU's warps loaded 32
  // rows' elements per load, a sector each, and such sums ran at a tenth
  // of the memory's speed.
  p.columns = !p.runs.back().reduced &&
              p.runs.back().dims.back() % kCpuLanes == 0 &&
              p.runs.back().dims.back() % kGpuColumnLanes == 0;
  // A sum of squares about the mean of the same rows (batch norm's
  // variance, reduce_mean((x - mean(x))^2)) reads its mean, so it would
  // take a pass of its own after the mean's. In columns, whose sums are
  // double on both targets, it is summed in the mean's pass instead: the
  // squares of x less a shift (shiftedSquare, in float), then less the
  // square of the shifted mean (centeredSquares, in double). The shift is the
  // row's first element, so the sums cancel as little as the row's values lie
  // from it: a row of values far from 0 (a mean 10^6 times its spread) keeps
  // its variance, which unshifted sums would lose. Batch norm's forward
  // then reads its input twice, not three times, in two launches less.
  // Values compared for sameValue, here and for the shared accumulators.
  DenseMap<std::pair<Value, Value>, bool> known;
  if (p.columns)
    for (auto [j, reduce] : llvm::enumerate(reductions))
      if (std::optional<CenteredSquares> c =
              centeredSquaresOf(reductions, j, afterReduction, block, known))
        p.centered[reduce] = *c;
  // A reduction's level: 0 when it reads no reduction's result, else one
  // more than the highest level it reads (a centered square: its mean's).
  DenseMap<Operation *, int64_t> levelAfter; // of ops after a reduction
  for (Operation &op : block.without_terminator()) {
    int64_t reads = -1;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (levelAfter.count(def))
          reads = std::max(reads, levelAfter[def]);
    if (isReduction(&op)) {
      if (auto c = p.centered.find(&op); c != p.centered.end())
        reads = levelAfter[reductions[c->second.mean]] - 1;
      p.levelOf.push_back(reads + 1);
      p.levels = std::max(p.levels, reads + 2);
      levelAfter[&op] = reads + 1;
    } else if (reads >= 0) {
      levelAfter[&op] = reads;
    }
  }
  // A sum and a mean of one value (batch norm's gradient: the bias
  // gradient and the mean its input gradient subtracts) share one
  // accumulator: the value is computed and added once an element, and both
  // results are what two accumulators adding the same elements in the same
  // order hold. (Not a centered square or its mean, whose accumulators
  // combine.)
  p.sharedWith.assign(reductions.size(), -1);
  DenseSet<Operation *> combining;
  for (auto &[reduce, c] : p.centered) {
    combining.insert(reduce);
    combining.insert(reductions[c.mean]);
  }
  auto shareable = [&](size_t j) {
    return isa<ReduceSumOp, ReduceMeanOp>(reductions[j]) &&
           !combining.contains(reductions[j]);
  };
  for (size_t j = 0; j < reductions.size(); ++j)
    for (size_t i = 0; i < j && shareable(j); ++i)
      if (p.sharedWith[i] < 0 && shareable(i) && p.levelOf[i] == p.levelOf[j] &&
          sameValue(reductions[i]->getOperand(0), reductions[j]->getOperand(0),
                    block, known)) {
        p.sharedWith[j] = i;
        break;
      }
  // Each accumulator's slot among a split kernel's partials and totals.
  p.slotOf.assign(reductions.size(), -1);
  for (size_t j = 0; j < reductions.size(); ++j)
    p.slotOf[j] =
        p.sharedWith[j] < 0 ? p.accumulators++ : p.slotOf[p.sharedWith[j]];
  auto beforeReductions = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !def || !afterReduction.contains(def);
  };
  // When the first pass is the only one over the row (one level of
  // reductions, every per-element value computed before them), it may
  // store over an operand too: canOverwrite lets an element be computed
  // only from the operand's same element, which the pass reads just before
  // it stores there, and no later pass reads the row. A bias gradient
  // fused with the activation gradient it sums then computes each
  // element once, not once for the sum and again for the store.
  bool onePass = p.levels <= 1 && p.rowLength > 1 &&
                 llvm::all_of(p.perElement, beforeReductions);
  llvm::erase_if(p.perElement, [&](Value v) {
    if (!beforeReductions(v) || (writtenInPlace(v) && !onePass))
      return false;
    p.firstPass.push_back(v);
    return true;
  });
  // A value the last level of reductions sums and the last pass needs
  // again (a softmax's or a cross-entropy's exponentials: summed for the
  // normalizer, then each one divided by it) is stored by that level's
  // pass in the buffer of the per-element result, and the last pass reads
  // it back instead of computing it again: the same f32 value, so the
  // same results, with one exp per element where there were two.
  p.reused = keptForLastPass(reductions, p.levelOf, p.levels, p.perElement);
  p.readBack =
      storedForLaterPasses(reductions, p.levelOf, p.reused, beforeReductions,
                           p.firstPass, p.perElement);
  p.gpuLanes = gpuColumnLanes(
      p.runs.back().dims.back(),
      llvm::any_of(block.getArguments(),
                   [&](Value input) {
                     auto type = dyn_cast<RankedTensorType>(input.getType());
                     return type && type.getShape() == full &&
                            type.getElementType().getIntOrFloatBitWidth() == 16;
                   }),
      mostColumnLanes);
  // Few long rows (batch norm's per-channel statistics) would leave most
  // of a GPU idle with one block per row: such a row is split into
  // `splits` chunks, one block each, and the kernel runs as one launch
  // per reduction (each block reduces its chunk into `partials`) plus a
  // last launch that writes the results. Every launch combines the
  // partials of the reductions before its own in the same order, so all
  // blocks of a row agree and replays are bit-identical. Columns split by
  // their groups of rows, in shorter chunks (columnChunkMin): GPT-2's 768
  // bf16 features summed over 16k tokens are 3 groups, 342 blocks each.
  splits = p.columns ? rowKernelSplits(p.rows / p.gpuLanes, p.rowLength,
                                       columnChunkMin(p.gpuLanes))
                     : rowKernelSplits(p.rows, p.rowLength);
  p.chunk = (p.rowLength + splits - 1) / splits;
  // A chunk is whole batches of its GPU block's threads (each thread takes
  // its elements kMaxElementsInFlight at a time), so that no thread takes
  // its last few one at a time, each waiting on its loads (GPT-2's GELU
  // gradient with its bias's sums had chunks of 191 rows, 7 of a thread's
  // taken one at a time).
  if (splits > 1) {
    p.chunk = llvm::alignTo(
        p.chunk, kMaxElementsInFlight *
                     (p.columns ? kBlockThreads / p.gpuLanes : kBlockThreads));
    splits = (p.rowLength + p.chunk - 1) / p.chunk;
  }
  // The CPU's lanes (adjacent rows a column block walks together): as many
  // as make the block's loads of each row a run of whole cache lines (8
  // lanes loaded 32 bytes of a row 12 KB long, then the next row's, and
  // GPT-2's GELU gradient with its bias's column sums ran at a fifth of the
  // memory's speed, waiting on each row), but no more than leave
  // kCpuMinColumnBlocks blocks (groups times splits) for the threads, nor
  // than fit the block's accumulators in kCpuColumnAccumulatorBytes.
  p.cpuLanes = kCpuLanes;
  if (p.columns) {
    int64_t width = p.runs.back().dims.back();
    auto fits = [&](int64_t lanes) {
      return width % lanes == 0 &&
             p.rows / lanes * splits >= kCpuMinColumnBlocks &&
             p.accumulators * lanes * 8 <= kCpuColumnAccumulatorBytes;
    };
    while (p.cpuLanes * 2 <= kCpuMaxColumnLanes && fits(p.cpuLanes * 2))
      p.cpuLanes *= 2;
  }
  kernel.grid = std::max<int64_t>(1, p.rows) * splits;
  // Short rows (attention's softmax over 1024 keys, a layer norm over 768
  // features) run a warp per row on the GPU: a block of 256 threads per
  // such row gave each thread a few elements between barriers. The lanes
  // stride over the row and shuffles reduce it; on the CPU (one thread per
  // block) warpRow() is the block and a lane is the whole row.
  p.warpRows = !p.columns && splits == 1 && p.rowLength <= kWarpRowMax;
  if (p.warpRows) {
    cpuGrid = std::max<int64_t>(1, p.rows);
    kernel.grid = (cpuGrid + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
  }
  // A block per long row (one launch: a block owns its row) whose passes
  // read the row's inputs more than once copies them into shared memory
  // before its first pass, on the GPU (where each pass read them from
  // memory again, and a thousand rows in flight evicted each other from
  // L2 in between), and every pass reads them from there. The copy is of
  // a row in one stretch of memory (the row's axes innermost), all of it
  // in flight at once (gpuc::stageRow). The CPU's lines take the row from
  // its caches as they are, so staging needs them (cpuLines).
  //
  // A warp's row (a layer norm's 768 features) is short enough for its
  // lanes' registers: each lane loads its elements of the staged inputs
  // (every 32nd) into an array before the first pass, all in flight at
  // once, and the passes, unrolled, read them there. Each pass read them
  // from memory again, a batch at a time: a layer norm's forward waited
  // on memory six times a row (three passes of three batches), now once.
  bool rowInOneStretch = p.runs.back().reduced && p.runs.size() <= 2;
  stagedInRegisters = p.warpRows && rowInOneStretch && p.rowLength % 32 == 0 &&
                      p.rowLength / 32 <= warpRowRegisters;
  if (!p.columns && splits == 1 && (!p.warpRows || stagedInRegisters) &&
      (stagedInRegisters || rowStageBytes > 0) && rowInOneStretch &&
      getNumElements(p.mergedRow) >= kCpuMinLine) {
    SmallVector<Value> first, later(p.perElement.begin(), p.perElement.end());
    for (auto [j, reduce] : llvm::enumerate(reductions))
      (p.levelOf[j] == 0 ? first : later).push_back(reduce->getOperand(0));
    llvm::append_range(first, p.firstPass);
    if (p.reused.value)
      (p.levels == 1 ? first : later).push_back(p.reused.value);
    int64_t bytes = 0;
    stagedInputs = stagedRowInputs(first, later, p.readBack, p.rowLength,
                                   stagedInRegisters, bytes);
    if (!stagedInRegisters)
      kernel.sharedBytes = bytes;
  }
  // And the values the first pass stores that later passes read back (a
  // residual add's sum before its layer norm): each lane keeps its elements
  // in registers too, where the later passes loaded them from the output.
  if (stagedInRegisters) {
    int64_t used = 0;
    for (Value input : block.getArguments())
      used += stagedInputs.count(input) ? p.rowLength / 32 : 0;
    for (Value v : p.firstPass)
      if (auto stored = p.readBack.find(v);
          stored != p.readBack.end() && isa<FloatType>(elementOf(v)) &&
          used + p.rowLength / 32 <= warpRowRegisters) {
        keptInRegisters[v] = stored->second;
        used += p.rowLength / 32;
      }
  }
  if (stagedInputs.empty() && keptInRegisters.empty())
    stagedInRegisters = false;
  // Unrolled over registers, a warp row kernel would take all it may (up to
  // 140 for a layer norm's gradient), one block of 8 rows an SM: two blocks
  // keep a block's loads in flight while the other computes. Where 128
  // registers make ptxas spill, one block an SM may still be faster: the
  // GPU times both.
  if (stagedInRegisters) {
    kernel.minBlocksPerSm = 2;
    kernel.alternatives = {KernelAlternative::bounded(1)};
  }
  // Launches of a split kernel: one per level of reductions, then one
  // writing the per-element values, whose blocks of each row's first chunk
  // write the per-row values too. Where a per-row result overwrites an
  // operand (which the per-element launch may still read in every block
  // of the row), the per-row values take a launch of their own after it,
  // in which each row's first chunk writes them. A split column kernel
  // follows each level's launch with one that combines its partials into
  // `totals` (combineColumnPartials): its blocks hold up to 256 rows of up
  // to 1,024 chunks.
  // A kernel of one level whose per-element results are all stored by the
  // first pass (a bias's or a norm's weight gradient, alone or beside the
  // per-element gradient it sums) has nothing left for a launch after the
  // combining one, which then writes the per-row results itself: a launch
  // a kernel less (SmolLM-135M's 61 RMSNorm gain sums, GPT-2's layer
  // norms' and biases' sums).
  p.combined = p.columns && splits > 1;
  p.finishInCombine = p.combined && p.levels == 1 && p.centered.empty() &&
                      !p.reused.value && !p.perRow.empty() &&
                      p.perElement.empty();
  p.elementPhase = p.finishInCombine ? 1 : p.combined ? 2 * p.levels : p.levels;
  bool rowsOverwrite = llvm::any_of(p.perRow, writtenInPlace);
  p.rowPhase = !p.finishInCombine && !p.perRow.empty() &&
                       !p.perElement.empty() && rowsOverwrite
                   ? p.elementPhase + 1
                   : p.elementPhase;
  kernel.launches = splits > 1 ? p.rowPhase + 1 : 1;
  if (splits > 1)
    kernel.workspaceBytes =
        p.accumulators * p.rows *
        (splits + (p.combined && !p.finishInCombine ? 1 : 0)) * 8;
  // A split kernel's chunks make about kRowKernelBlocks blocks, a wave of
  // 8 blocks an SM on an H100's 132 SMs; past 32 registers a thread an SM
  // holds fewer, and a second wave runs mostly empty (GPT-2's GELU
  // gradient with its bias sums: 39 registers, 6 blocks an SM, 1,032
  // blocks in 1.3 waves). The GPU times each launch bounded to 8 blocks an
  // SM against its own.
  if (splits > 1)
    kernel.alternatives.push_back(
        KernelAlternative::bounded(kGpuThreadsPerSm / kBlockThreads));
  return p;
}

} // namespace mlir::gpuc::kernel_emitter

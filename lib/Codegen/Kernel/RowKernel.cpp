//===- RowKernel.cpp - kernels of one block per row of their reductions
//-----===//
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

namespace {
/// A reduction that sums the squares of a value less its mean over the
/// same rows: `reductions[mean]` is that mean, of `value`.
struct CenteredSquares {
  size_t mean;
  Value value;
};
} // namespace

/// Whether `reductions[j]` is reduce_sum or reduce_mean of (x - m)^2 (as
/// mul(d, d), d = sub(x, m) with m broadcast or reshaped), m being another
/// of the kernel's reductions, reduce_mean of the same x, where x (f32)
/// reads no reduction and the result is f32.
static std::optional<CenteredSquares>
centeredSquaresOf(ArrayRef<Operation *> reductions, size_t j,
                  const DenseSet<Operation *> &afterReduction) {
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
  // The same x, or the same op on the same operands (the fuser gives each
  // use of a producer its own copy: each reads the input through a cast of
  // its own).
  auto sameX = [&](Value other) {
    Operation *otherDef = other.getDefiningOp();
    return other == x ||
           (xDef && otherDef && isPure(xDef) &&
            OperationEquivalence::isEquivalentTo(
                xDef, otherDef, OperationEquivalence::IgnoreLocations));
  };
  for (auto [m, other] : llvm::enumerate(reductions))
    if (isa<ReduceMeanOp>(other) && other->getResult(0) == mean &&
        sameX(other->getOperand(0)))
      return CenteredSquares{m, x};
  return std::nullopt;
}

/// `terms` added pairwise, as one C expression: ((a + b) + (c + d)) ...
static std::string pairwiseSum(ArrayRef<std::string> terms) {
  if (terms.size() == 1)
    return terms.front();
  size_t half = (terms.size() + 1) / 2;
  return "(" + pairwiseSum(terms.take_front(half)) + " + " +
         pairwiseSum(terms.drop_front(half)) + ")";
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
    if (isa<ExpOp, LogOp, TanhOp, ErfOp, SigmoidOp, PowOp, GeluOp>(def))
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

// One function for the row kernel's plan and its passes: the passes
// (emitRows) read two dozen facts the plan computes (kept and reduced
// shapes, the per-row and per-element values, reduction levels, launch
// phases, merged axes), and they are emitted twice on the CPU (row by row,
// and in columns of rows); splitting it would pass all of them around.
LogicalResult Emitter::emitRowKernel(ArrayRef<Operation *> reductions,
                                     EmittedKernel &kernel, int64_t &cpuGrid) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A row kernel: one block per element of the kept axes ("row"); every
  // reduction reduces the same axes of the same shape. Each reduction is a
  // pass over the row (threads stride, then a block reduction), after
  // which its value is a register of the block; values written per row
  // are stored by thread 0, values of the full shape in a last pass.
  ArrayRef<int64_t> full = shapeOf(reductions[0]->getOperand(0));
  SmallVector<int64_t> axes = reducedAxes(reductions[0]);
  for (Operation *reduce : reductions)
    if (shapeOf(reduce->getOperand(0)) != full || reducedAxes(reduce) != axes)
      return reduce->emitOpError()
             << "reduces other axes or another shape than the kernel's "
                "first reduction; a kernel's reductions share their rows";
  SmallVector<int64_t> keptShape, rowShape;
  for (size_t d = 0; d < full.size(); ++d)
    (llvm::is_contained(axes, (int64_t)d) ? rowShape : keptShape)
        .push_back(full[d]);
  int64_t rows = getNumElements(keptShape);
  int64_t rowLength = getNumElements(rowShape);
  SmallVector<Value> perRow, perElement;
  for (Value value : yield.getValues()) {
    int64_t n = getNumElements(shapeOf(value));
    if (n == rows)
      perRow.push_back(value);
    else if (shapeOf(value) == full)
      perElement.push_back(value);
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
  struct Run {
    bool reduced;
    int64_t size;
    SmallVector<int64_t> dims;
  };
  SmallVector<Run> runs;
  for (size_t d = 0; d < full.size(); ++d) {
    bool reduced = llvm::is_contained(axes, (int64_t)d);
    if (runs.empty() || runs.back().reduced != reduced)
      runs.push_back({reduced, 1, {}});
    runs.back().size *= full[d];
    runs.back().dims.push_back(full[d]);
  }
  SmallVector<int64_t> mergedFull, mergedKept, mergedRow;
  for (const Run &run : runs) {
    mergedFull.push_back(run.size);
    (run.reduced ? mergedRow : mergedKept).push_back(run.size);
  }
  // A row kernel whose rows are adjacent elements (its innermost axis is
  // kept: a bias gradient's sum over the batch, a layer norm's weight
  // gradient) runs in columns: each block takes a group of adjacent rows,
  // whose elements it walks together, so that loads of neighbouring
  // threads (GPU) or lanes (CPU) are neighbouring addresses. One block per
  // row gathered elements a row's length apart: the GPU's warps loaded 32
  // rows' elements per load, a sector each, and such sums ran at a tenth
  // of the memory's speed.
  bool columns = !runs.back().reduced &&
                 runs.back().dims.back() % kCpuLanes == 0 &&
                 runs.back().dims.back() % kGpuColumnLanes == 0;
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
  DenseMap<Operation *, CenteredSquares> centered;
  if (columns)
    for (auto [j, reduce] : llvm::enumerate(reductions))
      if (std::optional<CenteredSquares> c =
              centeredSquaresOf(reductions, j, afterReduction))
        centered[reduce] = *c;
  // A reduction's level: 0 when it reads no reduction's result, else one
  // more than the highest level it reads (a centered square: its mean's).
  DenseMap<Operation *, int64_t> levelAfter; // of ops after a reduction
  SmallVector<int64_t> levelOf;
  int64_t levels = 0;
  for (Operation &op : block.without_terminator()) {
    int64_t reads = -1;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (levelAfter.count(def))
          reads = std::max(reads, levelAfter[def]);
    if (isReduction(&op)) {
      if (auto c = centered.find(&op); c != centered.end())
        reads = levelAfter[reductions[c->second.mean]] - 1;
      levelOf.push_back(reads + 1);
      levels = std::max(levels, reads + 2);
      levelAfter[&op] = reads + 1;
    } else if (reads >= 0) {
      levelAfter[&op] = reads;
    }
  }
  // What a reduction's pass computes at each element: its operand, or a
  // centered square's value before it is centered.
  auto summedValue = [&](size_t j) {
    auto c = centered.find(reductions[j]);
    return c != centered.end() ? c->second.value : reductions[j]->getOperand(0);
  };
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
  bool onePass = levels <= 1 && rowLength > 1 &&
                 llvm::all_of(perElement, beforeReductions);
  SmallVector<Value> firstPass;
  llvm::erase_if(perElement, [&](Value v) {
    if (!beforeReductions(v) || (writtenInPlace(v) && !onePass))
      return false;
    firstPass.push_back(v);
    return true;
  });
  // A value the last level of reductions sums and the last pass needs
  // again (a softmax's or a cross-entropy's exponentials: summed for the
  // normalizer, then each one divided by it) is stored by that level's
  // pass in the buffer of the per-element result, and the last pass reads
  // it back instead of computing it again: the same f32 value, so the
  // same results, with one exp per element where there were two.
  KeptValue reused = keptForLastPass(reductions, levelOf, levels, perElement);
  DenseMap<Value, int64_t> readBack = storedForLaterPasses(
      reductions, levelOf, reused, beforeReductions, firstPass, perElement);
  int64_t gpuLanes = gpuColumnLanes(
      runs.back().dims.back(),
      llvm::any_of(block.getArguments(),
                   [&](Value input) {
                     auto type = dyn_cast<RankedTensorType>(input.getType());
                     return type && type.getShape() == full &&
                            type.getElementType().getIntOrFloatBitWidth() == 16;
                   }),
      mostColumnLanes);
  // The GPU's column helpers (Kernel.h), for this kernel's lanes.
  auto columnCall = [&](StringRef helper) {
    return llvm::formatv("gpuc::{0}<{1}>", helper, gpuLanes).str();
  };
  // Few long rows (batch norm's per-channel statistics) would leave most
  // of a GPU idle with one block per row: such a row is split into
  // `splits` chunks, one block each, and the kernel runs as one launch
  // per reduction (each block reduces its chunk into `partials`) plus a
  // last launch that writes the results. Every launch combines the
  // partials of the reductions before its own in the same order, so all
  // blocks of a row agree and replays are bit-identical. Columns split by
  // their groups of rows, in shorter chunks (columnChunkMin): GPT-2's 768
  // bf16 features summed over 16k tokens are 3 groups, 342 blocks each.
  splits = columns ? rowKernelSplits(rows / gpuLanes, rowLength,
                                     columnChunkMin(gpuLanes))
                   : rowKernelSplits(rows, rowLength);
  int64_t chunk = (rowLength + splits - 1) / splits;
  // A chunk is whole batches of its GPU block's threads (each thread takes
  // its elements kMaxElementsInFlight at a time), so that no thread takes
  // its last few one at a time, each waiting on its loads (GPT-2's GELU
  // gradient with its bias's sums had chunks of 191 rows, 7 of a thread's
  // taken one at a time).
  if (splits > 1) {
    chunk = llvm::alignTo(
        chunk, kMaxElementsInFlight *
                   (columns ? kBlockThreads / gpuLanes : kBlockThreads));
    splits = (rowLength + chunk - 1) / chunk;
  }
  // The CPU's lanes (adjacent rows a column block walks together): as many
  // as make the block's loads of each row a run of whole cache lines (8
  // lanes loaded 32 bytes of a row 12 KB long, then the next row's, and
  // GPT-2's GELU gradient with its bias's column sums ran at a fifth of the
  // memory's speed, waiting on each row), but no more than leave
  // kCpuMinColumnBlocks blocks (groups times splits) for the threads, nor
  // than fit the block's accumulators in kCpuColumnAccumulatorBytes.
  int64_t cpuLanes = kCpuLanes;
  if (columns) {
    int64_t width = runs.back().dims.back();
    auto fits = [&](int64_t lanes) {
      return width % lanes == 0 &&
             rows / lanes * splits >= kCpuMinColumnBlocks &&
             (int64_t)reductions.size() * lanes * 8 <=
                 kCpuColumnAccumulatorBytes;
    };
    while (cpuLanes * 2 <= kCpuMaxColumnLanes && fits(cpuLanes * 2))
      cpuLanes *= 2;
  }
  kernel.grid = std::max<int64_t>(1, rows) * splits;
  // Short rows (attention's softmax over 1024 keys, a layer norm over 768
  // features) run a warp per row on the GPU: a block of 256 threads per
  // such row gave each thread a few elements between barriers. The lanes
  // stride over the row and shuffles reduce it; on the CPU (one thread per
  // block) warpRow() is the block and a lane is the whole row.
  bool warpRows = !columns && splits == 1 && rowLength <= kWarpRowMax;
  if (warpRows) {
    cpuGrid = std::max<int64_t>(1, rows);
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
  bool rowInOneStretch = runs.back().reduced && runs.size() <= 2;
  stagedInRegisters = warpRows && rowInOneStretch && rowLength % 32 == 0 &&
                      rowLength / 32 <= warpRowRegisters;
  if (!columns && splits == 1 && (!warpRows || stagedInRegisters) &&
      (stagedInRegisters || rowStageBytes > 0) && rowInOneStretch &&
      getNumElements(mergedRow) >= kCpuMinLine) {
    SmallVector<Value> first, later(perElement.begin(), perElement.end());
    for (auto [j, reduce] : llvm::enumerate(reductions))
      (levelOf[j] == 0 ? first : later).push_back(reduce->getOperand(0));
    llvm::append_range(first, firstPass);
    if (reused.value)
      (levels == 1 ? first : later).push_back(reused.value);
    int64_t bytes = 0;
    stagedInputs = stagedRowInputs(first, later, readBack, rowLength,
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
      used += stagedInputs.count(input) ? rowLength / 32 : 0;
    for (Value v : firstPass)
      if (auto stored = readBack.find(v);
          stored != readBack.end() && isa<FloatType>(elementOf(v)) &&
          used + rowLength / 32 <= warpRowRegisters) {
        keptInRegisters[v] = stored->second;
        used += rowLength / 32;
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
  bool combined = columns && splits > 1;
  auto reducePhase = [&](int64_t level) {
    return combined ? 2 * level : level;
  };
  int64_t elementPhase = combined ? 2 * levels : levels;
  bool rowsOverwrite = llvm::any_of(perRow, writtenInPlace);
  int64_t rowPhase = !perRow.empty() && !perElement.empty() && rowsOverwrite
                         ? elementPhase + 1
                         : elementPhase;
  kernel.launches = splits > 1 ? rowPhase + 1 : 1;
  if (splits > 1)
    kernel.workspaceBytes =
        (int64_t)reductions.size() * rows * (splits + (combined ? 1 : 0)) * 8;
  // A split kernel's chunks make about kRowKernelBlocks blocks, a wave of
  // 8 blocks an SM on an H100's 132 SMs; past 32 registers a thread an SM
  // holds fewer, and a second wave runs mostly empty (GPT-2's GELU
  // gradient with its bias sums: 39 registers, 6 blocks an SM, 1,032
  // blocks in 1.3 waves). The GPU times each launch bounded to 8 blocks an
  // SM against its own.
  if (splits > 1)
    kernel.alternatives.push_back(
        KernelAlternative::bounded(kGpuThreadsPerSm / kBlockThreads));
  // Columns on the CPU: cpuLanes rows per block, the row's loop outside
  // and the rows' lanes inside, so the lanes load adjacent elements and
  // vectorize; each row still adds its elements in order. On the GPU:
  // gpuLanes rows per block, each thread a row (its column lane) and a
  // slice of the row's elements (every gpuc::columnSlices()-th), the
  // slices' partial results combined in a fixed order (Kernel.h's
  // columnReduceSum).
  SmallVector<std::string> kept;
  // `column`: the CPU's columns; `gpuColumn`: the GPU's.
  auto emitRows = [&](bool column, bool gpuColumn) -> LogicalResult {
    // The part of the row this block covers: all of it, or its chunk.
    std::string rowBegin = "0", rowEnd = llvm::formatv("{0}", rowLength);
    // Divides both ends of the block's part of the row.
    int64_t rowBoundsDivisor =
        splits > 1 ? std::gcd(chunk, rowLength) : rowLength;
    // The block's row or group of rows.
    std::string blockRows =
        splits > 1 ? llvm::formatv("(blockIdx.x / {0})", splits).str()
                   : std::string("blockIdx.x");
    if (column) {
      line(llvm::formatv("const gidx oGroup = (gidx){0} * {1};", blockRows,
                         cpuLanes));
    } else if (gpuColumn) {
      line(llvm::formatv("const gidx o = (gidx){0} * {1} + {2}();", blockRows,
                         gpuLanes, columnCall("columnLane")));
    } else if (warpRows) {
      // The last block's warps past the last row have nothing to do; each
      // warp is in or out as a whole, so its shuffles see all its lanes.
      line("const gidx o = (gidx)gpuc::warpRow();");
      open(llvm::formatv("if (o < {0})", std::max<int64_t>(1, rows)));
    } else {
      line(llvm::formatv("const gidx o = {0};", blockRows));
    }
    // The GPU's block copies its row of each staged input into shared
    // memory, all in flight at once, before its first pass reads it.
    if (!column && !gpuColumn && stagedInRegisters) {
      line("#ifndef GPUC_CPU");
      for (BlockArgument input : block.getArguments())
        if (stagedInputs.count(input)) {
          line(llvm::formatv("float rowIn{0}[{1}];", input.getArgNumber(),
                             rowLength / 32));
          line("GPUC_UNROLL");
          line(llvm::formatv("for (int k = 0; k < {1}; ++k) rowIn{0}[k] = "
                             "in{0}[(int64_t)o * {2} + gpuc::warpLane() + 32 "
                             "* k];",
                             input.getArgNumber(), rowLength / 32, rowLength));
        }
      for (Value v : firstPass)
        if (auto kept = keptInRegisters.find(v); kept != keptInRegisters.end())
          line(llvm::formatv("float rowOut{0}[{1}];", kept->second,
                             rowLength / 32));
      line("#endif");
    } else if (!column && !gpuColumn && !stagedInputs.empty()) {
      line("#ifndef GPUC_CPU");
      for (BlockArgument input : block.getArguments())
        if (auto staged = stagedInputs.find(input);
            staged != stagedInputs.end())
          line(
              llvm::formatv("gpuc::stageRow(gpuc::stagedRow<{0}>({1}), in{2} + "
                            "(int64_t)o * {3}, {3});",
                            storageCType(elementOf(input)), staged->second,
                            input.getArgNumber(), rowLength));
      line("gpuc::awaitStagedRows();");
      line("#endif");
    }
    if (splits > 1) {
      line(llvm::formatv("const gidx part = blockIdx.x % {0};", splits));
      line(llvm::formatv("const gidx rowBegin = part * {0};", chunk));
      line(llvm::formatv("const gidx rowEnd = rowBegin + {0} < {1} ? "
                         "rowBegin + {0} : {1};",
                         chunk, rowLength));
      // (The GPU's columns sum in double: see accType.)
      line(gpuColumn ? "double *partials = (double *)workspace;"
                     : "gpuc::Accumulator *partials = (gpuc::Accumulator "
                       "*)workspace;");
      if (combined)
        line(llvm::formatv("{0} *totals = partials + {1};",
                           gpuColumn ? "double" : "gpuc::Accumulator",
                           (int64_t)reductions.size() * rows * splits));
      rowBegin = "rowBegin";
      rowEnd = "rowEnd";
      // The launch that writes per-row results writes them from each
      // row's first chunk; the other chunks' blocks would only combine the
      // partials again, every thread all of them (ResNet-50's batch norms
      // on an H200: 4 ms of a 76 ms step in such launches).
      if (!perRow.empty() && rowPhase != elementPhase)
        line(llvm::formatv("if (phase == {0} && part != 0) return;", rowPhase));
    }
    // A column block's rows share every kept coordinate but the
    // innermost, which is the group's plus the lane (the group starts at
    // a multiple of cpuLanes, which divides the innermost kept axis).
    SmallVector<std::string> keptGroup;
    if (column)
      keptGroup = unravel("oGroup", mergedKept);
    else
      kept = unravel("o", mergedKept);
    // A concatenation of inputs along the lanes' axis whose inputs all
    // start and end at multiples of cpuLanes holds a column group's rows
    // in one input: picked once per block, here, so each lane loads from
    // one pointer (a vector load) instead of choosing its own (a gather).
    SmallVector<std::pair<ConcatOp, std::string>> groupConcats;
    if (column && runs.back().dims.size() == 1) {
      int64_t lastAxis = full.size() - 1;
      fusion.getBody().walk([&](ConcatOp c) {
        if (c.getAxis() != lastAxis || shapeOf(c.getResult()) != full ||
            !concatenatesKernelInputs(c) ||
            llvm::any_of(c.getInputs(), [&](Value input) {
              return shapeOf(input)[lastAxis] % cpuLanes != 0;
            }))
          return;
        groupConcats.push_back({c, selectConcatInput(c, keptGroup.back())});
      });
    }
    // A concatenation of inputs along a kept axis (DenseNet's batch norms
    // over the concatenated features) picks its input once per row, here,
    // rather than at each element of every pass over the row.
    if (!column) {
      std::map<int64_t, std::string> keptAxes;
      size_t d = 0, nk = 0;
      for (const Run &run : runs) {
        if (!run.reduced && run.dims.size() == 1)
          keptAxes[d] = kept[nk];
        nk += !run.reduced;
        d += run.dims.size();
      }
      fusion.getBody().walk([&](ConcatOp c) {
        auto axis = keptAxes.find(c.getAxis());
        if (axis != keptAxes.end() && shapeOf(c.getResult()) == full &&
            concatenatesKernelInputs(c))
          selectConcatInput(c, axis->second);
      });
    }
    // A column block's loop over its rows, innermost; `o` is the row.
    auto openRowLanes = [&] {
      line("GPUC_INDEPENDENT_ITERATIONS");
      open(llvm::formatv("for (gidx lane = 0; lane < {0}; ++lane)", cpuLanes));
      line("const gidx o = oGroup + lane;");
      kept = keptGroup;
      kept.back() = index(keptGroup.back() + " + lane");
      for (auto &[c, from] : groupConcats)
        remember(c.getResult(), concatInputKey(kept.back()), from);
      ArrayRef<int64_t> dims = runs.back().dims;
      if (dims.size() > 1) {
        SmallVector<std::string> coords = unravel(keptGroup.back(), dims);
        coords.back() = index(coords.back() + " + lane");
        rememberCoords(
            {kept.back(), std::vector<int64_t>(dims.begin(), dims.end())},
            coords);
      }
    };
    auto fullIndex = [&](StringRef r) {
      SmallVector<std::string> rcoords = unravel(r.str(), mergedRow);
      SmallVector<std::string> merged, coords;
      size_t nk = 0, nr = 0;
      for (const Run &run : runs) {
        merged.push_back(run.reduced ? rcoords[nr++] : kept[nk++]);
        if (run.dims.size() == 1)
          coords.push_back(merged.back());
        else
          llvm::append_range(coords, unravel(merged.back(), run.dims));
      }
      std::string idx = raveled(merged, mergedFull);
      rememberCoords({idx, std::vector<int64_t>(full.begin(), full.end())},
                     coords);
      return idx;
    };
    // The CPU walks a row by lines of its innermost merged axis
    // (cpuLoopNest) when those are long enough.
    bool cpuLines = !columns && getNumElements(mergedRow) >= kCpuMinLine;
    // The CPU's walk over a row: by lines of the merged axes, or of the
    // row's own axes when the body needs coordinates inside a merged axis
    // (a pooling gradient's row and column), which the lines of the row's
    // axes give without division.
    auto cpuRowNest = [&](CpuLine mode,
                          function_ref<LogicalResult(StringRef)> pass,
                          const LaneHooks *hooks = nullptr) {
      size_t mark = body.size();
      unsigned divided = divisions;
      if (failed(cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor, mergedRow,
                             mode, pass, hooks)))
        return failure();
      if (divisions == divided || rowShape == mergedRow)
        return success();
      body.resize(mark);
      return cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor, rowShape,
                         mode, pass, hooks);
    };
    // A pass's body at the row coordinates `rs` (a GPU thread's batch of
    // elements, all in the row, or the one "r").
    using BatchPass =
        function_ref<LogicalResult(StringRef lane, ArrayRef<std::string> rs)>;
    // How many elements a GPU thread takes at once in a pass computing
    // `values` at each, and the threads that stride over a row (or chunk).
    int64_t threadStride = gpuColumn  ? kBlockThreads / gpuLanes
                           : warpRows ? kBlockThreads / kWarpRowsPerBlock
                                      : kBlockThreads;
    // The GPU's loop over the row's elements. With `batch` > 1 a thread
    // runs `pass` at `batch` of its elements at once (a stride apart: the
    // warp's loads stay coalesced), which loads them all before its
    // arithmetic, as an elementwise kernel does (elementsInFlight), while
    // all `batch` are in the row; then at its last few elements one at a
    // time, unless every thread's elements come in whole batches. (Guards
    // on the elements past the end, in one loop, cost the GPU's head
    // cross-entropy a dozen instructions an element: the clamped index,
    // the guarded sums and stores.) Sums still add the elements in the
    // same order.
    auto portableRowLoop = [&](BatchPass pass, int64_t batch) -> LogicalResult {
      std::string first = gpuColumn  ? columnCall("columnSlice") + "()"
                          : warpRows ? "gpuc::warpLane()"
                                     : "threadIdx.x";
      std::string stride = gpuColumn  ? columnCall("columnSlices") + "()"
                           : warpRows ? "gpuc::kWarpStride"
                                      : "blockDim.x";
      if (stagingText && stagedInRegisters) {
        // Every lane has rowLength / 32 elements, `batch` at a time: an
        // unrolled loop, whose elements' places in the lanes' arrays are
        // constants.
        line("GPUC_UNROLL");
        open(llvm::formatv("for (int step = 0; step < {0}; ++step)",
                           rowLength / 32 / batch));
        line(llvm::formatv("const gidx r = {0} + {1} + step * {2};", rowBegin,
                           first, batch * 32));
        SmallVector<std::string> names{"r"};
        registerPositions["r"] = llvm::formatv("step * {0}", batch).str();
        for (int64_t k = 1; k < batch; ++k) {
          names.push_back("rPlus" + std::to_string(k));
          line(llvm::formatv("const gidx {0} = r + {1} * (gidx){2};",
                             names.back(), k, stride));
          registerPositions[names.back()] =
              llvm::formatv("step * {0} + {1}", batch, k).str();
        }
        LogicalResult emitted = pass("", names);
        registerPositions.clear();
        close();
        return emitted;
      }
      if (batch == 1) {
        open(llvm::formatv("for (gidx r = {0} + {1}; r < {2}; r += {3})",
                           rowBegin, first, rowEnd, stride));
        if (failed(pass("", {"r"})))
          return failure();
        close();
        return success();
      }
      open("");
      line(llvm::formatv("gidx r = {0} + {1};", rowBegin, first));
      open(llvm::formatv("for (; r + {0} * (gidx){1} < {2}; r += {3} * "
                         "(gidx){1})",
                         batch - 1, stride, rowEnd, batch));
      SmallVector<std::string> names{"r"};
      for (int64_t k = 1; k < batch; ++k) {
        names.push_back("rPlus" + std::to_string(k));
        line(llvm::formatv("const gidx {0} = r + {1} * (gidx){2};",
                           names.back(), k, stride));
      }
      if (failed(pass("", names)))
        return failure();
      close();
      // Both ends of the row (or of every chunk) are multiples of a whole
      // batch of the block's threads: no thread has elements left.
      if (rowBoundsDivisor % (batch * threadStride) != 0) {
        open(llvm::formatv("for (; r < {0}; r += {1})", rowEnd, stride));
        if (failed(pass("", {"r"})))
          return failure();
        close();
      }
      close();
      return success();
    };
    auto rowBatch = [&](ValueRange values) {
      if (column)
        return (int64_t)1;
      int64_t batch =
          elementsInFlight(values, (chunk + threadStride - 1) / threadStride);
      // (Register-staged rows: a batch that divides a lane's elements.)
      while (stagedInRegisters && (rowLength / 32) % batch != 0)
        batch /= 2;
      return batch;
    };
    // A pass over the row: the CPU's `cpu` (when given: its lines) and the
    // GPU's portable loop, split by target where they differ (the CPU
    // takes one element at a time).
    auto rowLoops = [&](BatchPass pass, ValueRange values,
                        function_ref<LogicalResult()> cpu) -> LogicalResult {
      int64_t batch = rowBatch(values);
      auto gpu = [&] {
        GpuText text(*this);
        stagingText =
            (!stagedInputs.empty() || stagedInRegisters) && !gpuColumn;
        LogicalResult emitted = portableRowLoop(pass, batch);
        stagingText = false;
        stagedPositions.clear();
        return emitted;
      };
      if (cpu)
        return splitByTarget(gpu, cpu, /*onlyIfDivides=*/false);
      // (Rows in registers: every pass's GPU text reads them there.)
      if (gpuColumn || (batch == 1 && !stagedInRegisters))
        return portableRowLoop(pass, batch);
      return splitByTarget(
          gpu, [&] { return portableRowLoop(pass, 1); },
          /*onlyIfDivides=*/false);
    };
    // The inputs a column block reads a run of at each row: it fetches
    // their runs some rows ahead while it computes this row's. Its loads
    // jump a row's length from one row to the next, which the CPU's
    // prefetchers do not follow, and without this each row waited on the
    // memory (GPT-2's GELU gradient with its bias's column sums, from
    // memory: 1.8x faster with it at 64 or 256 lanes).
    SmallVector<BlockArgument> streamed;
    for (BlockArgument input : block.getArguments())
      if (auto type = dyn_cast<RankedTensorType>(input.getType());
          type && type.getShape() == full)
        streamed.push_back(input);
    auto prefetchRowsAhead = [&] {
      int64_t ahead =
          std::clamp<int64_t>(kCpuColumnPrefetchBytes / (cpuLanes * 4), 2, 16);
      if (streamed.empty() || ahead >= rowLength)
        return;
      open(llvm::formatv("if (r + {0} < {1})", ahead, rowEnd));
      kept = keptGroup;
      std::string idx = fullIndex(llvm::formatv("(r + {0})", ahead).str());
      for (BlockArgument input : streamed) {
        int64_t bytes =
            (getElementTypeOrSelf(input.getType()).getIntOrFloatBitWidth() +
             7) /
            8;
        line(llvm::formatv("for (int at = 0; at < {0}; at += {1}) "
                           "__builtin_prefetch(&in{2}[{3} + at]);",
                           cpuLanes, std::max<int64_t>(1, 64 / bytes),
                           input.getArgNumber(), idx));
      }
      close();
    };
    // A column block's walk: each element of the row, the rows' lanes
    // inside (lane k of a reduction adds row k's elements in order).
    auto cpuColumnNest = [&](function_ref<LogicalResult(StringRef)> pass,
                             StringRef lane) {
      return cpuRowNest(CpuLine::Plain, [&](StringRef) -> LogicalResult {
        prefetchRowsAhead();
        openRowLanes();
        if (failed(pass(lane)))
          return failure();
        close();
        return success();
      });
    };
    // Each centered square's shift: its row's first element, in every
    // launch, so that the chunks of a row agree on it.
    DenseMap<size_t, std::string> shifts;
    for (auto [j, reduce] : llvm::enumerate(reductions)) {
      auto c = centered.find(reduce);
      if (c == centered.end())
        continue;
      std::string name = fresh("shift");
      if (column) {
        line(llvm::formatv("float {0}[{1}];", name, cpuLanes));
        openRowLanes();
      }
      FailureOr<std::string> first = at(c->second.value, fullIndex("0"));
      if (failed(first))
        return failure();
      if (column) {
        line(llvm::formatv("{0}[lane] = (float){1};", name, *first));
        close();
        shifts[j] = name + "[lane]";
      } else {
        line(llvm::formatv("const float {0} = (float){1};", name, *first));
        shifts[j] = name;
      }
    }
    // Reductions that read no other reduction's result share one pass over
    // the row, and so on by level: batch norm's gradient takes two passes
    // (the sums of dy, dy*x, ... then the one that needs them), not one per
    // sum. Each accumulator still adds the same elements in the same order.
    for (int64_t level = 0; level < levels; ++level) {
      // The first pass computes what later ones read back.
      storedOutputs = level == 0 ? DenseMap<Value, int64_t>() : readBack;
      SmallVector<size_t> members;
      for (size_t j = 0; j < reductions.size(); ++j)
        if (levelOf[j] == level)
          members.push_back(j);
      SmallVector<std::string> accs;
      // A maximum is exact in float: only sums accumulate in
      // gpuc::Accumulator (double on the CPU, where float lanes are twice
      // as many per vector).
      // The GPU's columns sum in double too: a thread adds a long slice of
      // a column (16k tokens' bias gradients are 128 a thread in 4
      // chunks) where a row's 256 threads each add a few, and float lost
      // 5e-4 of a layer norm's gain gradient, a sum that cancels; it
      // costs nothing in a kernel bound by memory.
      auto accType = [&](size_t m) -> StringRef {
        return isa<ReduceMaxOp>(reductions[members[m]]) ? "float"
               : gpuColumn                              ? "double"
                                                        : "gpuc::Accumulator";
      };
      for (auto [m, j] : llvm::enumerate(members)) {
        accs.push_back(fresh("acc"));
        StringRef init = isa<ReduceMaxOp>(reductions[j]) ? "-INFINITY" : "0";
        if (column)
          line(llvm::formatv("{3} {0}Lanes[{1}]; for (int lane "
                             "= 0; lane < {1}; ++lane) {0}Lanes[lane] = {2};",
                             accs.back(), cpuLanes, init, accType(m)));
        else
          line(llvm::formatv("{2} {0} = {1};", accs.back(), init, accType(m)));
      }
      // A float sum (a centered square's shifted squares are float too):
      // the CPU's rows add it in float lane blocks (kCpuLaneBlock), the
      // GPU's columns in float batches.
      auto blockedSum = [&](size_t m) {
        Operation *reduction = reductions[members[m]];
        return !isa<ReduceMaxOp>(reduction) &&
               getElementTypeOrSelf(reduction->getOperand(0).getType()).isF32();
      };
      auto accumulate = [&](size_t m, const std::string &x,
                            StringRef lane = "") {
        bool isMax = isa<ReduceMaxOp>(reductions[members[m]]);
        if (!lane.empty() && inLaneGroup) {
          // The group's value; endGroup folds it into the accumulators.
          line(llvm::formatv(isMax ? "{0}Group[{1}] = (float){2};"
                                   : "{0}Group[{1}] = {2};",
                             accs[m], lane, x));
          return;
        }
        std::string acc =
            lane.empty() ? accs[m] : (accs[m] + "Lanes[" + lane + "]").str();
        if (isMax)
          line(llvm::formatv("{0} = gpuc::maxOrNan({0}, (float){1});", acc, x));
        else
          line(llvm::formatv("{0} += {1};", acc, x));
      };
      auto slot = [&](size_t m) {
        return llvm::formatv("({0} + o) * {1}", (int64_t)members[m] * rows,
                             splits)
            .str();
      };
      // The CPU's column lanes, each with its row `o`.
      auto openLanes = [&] {
        open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)", cpuLanes));
        line("const gidx o = oGroup + lane;");
      };
      if (combined) {
        // An earlier launch combined this row's chunks: one load.
        open(llvm::formatv("if (phase > {0})", reducePhase(level) + 1));
        if (column)
          openLanes();
        for (size_t m = 0; m < members.size(); ++m)
          line(llvm::formatv("{0} = ({1})totals[{2} + o];",
                             column ? accs[m] + "Lanes[lane]" : accs[m],
                             accType(m), (int64_t)members[m] * rows));
        if (column)
          close();
        close();
        open(llvm::formatv("else if (phase == {0})", reducePhase(level) + 1));
        // Reductions of one kind with adjacent indices (their partials and
        // totals adjacent too) are one call: its warps share all their
        // columns.
        for (size_t m = 0; m < members.size();) {
          size_t end = m + 1;
          bool isMax = isa<ReduceMaxOp>(reductions[members[m]]);
          while (end < members.size() && members[end] == members[end - 1] + 1 &&
                 isa<ReduceMaxOp>(reductions[members[end]]) == isMax)
            ++end;
          line(llvm::formatv(
              "gpuc::combineColumnPartials<{0}>(partials + {1}, totals + {2}, "
              "{3}, {4});",
              isMax ? "true" : "false", (int64_t)members[m] * rows * splits,
              (int64_t)members[m] * rows, (int64_t)(end - m) * rows, splits));
          m = end;
        }
        line("return;");
        close();
        open("else");
      } else if (splits > 1) {
        // An earlier launch reduced this row's chunks: combine them.
        open(llvm::formatv("if (phase > {0})", level));
        std::string s = fresh("s");
        open(llvm::formatv("for (gidx {0} = 0; {0} < {1}; ++{0})", s, splits));
        for (size_t m = 0; m < members.size(); ++m)
          accumulate(m, llvm::formatv("partials[{0} + {1}]", slot(m), s).str());
        close();
        close();
        open("else");
      }
      // What the pass computes at each element.
      SmallVector<Value> computed;
      for (size_t j : members)
        computed.push_back(summedValue(j));
      if (level == 0)
        llvm::append_range(computed, firstPass);
      if (reused.value && level == levels - 1)
        computed.push_back(reused.value);
      auto batchPass = [&](StringRef lane,
                           ArrayRef<std::string> rs) -> LogicalResult {
        SmallVector<std::string> elements;
        for (const std::string &r : rs) {
          elements.push_back(fullIndex(r));
          if (stagingText)
            stagedPositions[elements.back()] = stagedPosition(r);
        }
        if (failed(loadAhead(computed, elements)))
          return failure();
        // A GPU column's thread adds its batch of a float sum's elements
        // in float, pairwise, and that into its double once: each element
        // converted to double took an F2F.F64.F32, 16 a cycle on an SM
        // where a batch norm's gradient (4 sums) converted 4 an element,
        // near the cycles its memory traffic takes. The double still
        // carries the long slice, whose sum is where float lost accuracy.
        SmallVector<SmallVector<std::string>> batchTerms(members.size());
        auto inFloatBatch = [&](size_t m) {
          return gpuColumn && elements.size() > 1 && blockedSum(m);
        };
        for (const std::string &element : elements)
          for (size_t m = 0; m < members.size(); ++m) {
            FailureOr<std::string> x = at(summedValue(members[m]), element);
            if (failed(x))
              return failure();
            if (auto shift = shifts.find(members[m]); shift != shifts.end())
              *x = llvm::formatv("gpuc::shiftedSquare({0}, {1})", *x,
                                 shift->second);
            if (inFloatBatch(m))
              batchTerms[m].push_back(*x);
            else
              accumulate(m, *x, lane);
          }
        for (size_t m = 0; m < members.size(); ++m)
          if (inFloatBatch(m))
            accumulate(m, "(double)" + pairwiseSum(batchTerms[m]), lane);
        if (level == 0 &&
            failed(storeResults(firstPass, elements,
                                SmallVector<std::string>(elements.size()))))
          return failure();
        // The values later passes read back, kept in the lanes' registers.
        if (level == 0 && stagingText && stagedInRegisters)
          for (const std::string &element : elements)
            for (Value v : firstPass)
              if (auto kept = keptInRegisters.find(v);
                  kept != keptInRegisters.end()) {
                FailureOr<std::string> reg = at(v, element);
                if (failed(reg))
                  return failure();
                line(llvm::formatv("rowOut{0}[{1}] = {2};", kept->second,
                                   stagedPositions[element], *reg));
              }
        if (reused.value && level == levels - 1) {
          SmallVector<std::string> regs;
          for (const std::string &element : elements) {
            FailureOr<std::string> reg = at(reused.value, element);
            if (failed(reg))
              return failure();
            regs.push_back(*reg);
          }
          for (auto [element, reg] : llvm::zip(elements, regs))
            line(llvm::formatv("out{0}[{1}] = {2};", reused.output, element,
                               reg));
        }
        return success();
      };
      auto pass = [&](StringRef lane) { return batchPass(lane, {"r"}); };
      // The CPU adds a row's elements in lanes (one accumulator per lane,
      // combined in lane order), so the adds vectorize and no longer wait
      // on each other.
      auto cpu = [&]() -> LogicalResult {
        // Each accumulator's lanes as one vector value (CpuShim.h's
        // CpuLanes), which the host compiler keeps in registers: an array
        // of lanes stayed in memory, and a pass whose elements cost little
        // (a maximum, a labelled logit's pick) waited on a store and a load
        // per group.
        for (size_t m = 0; m < members.size(); ++m)
          line(llvm::formatv(
              "gpuc::CpuLanes<{3}> {0}Lanes; for (int lane = 0; lane < "
              "{1}; ++lane) {0}Lanes[lane] = {2};",
              accs[m], kCpuReductionLanes,
              isa<ReduceMaxOp>(reductions[members[m]]) ? "-INFINITY" : "0",
              accType(m)));
        bool anyBlocked = false;
        for (size_t m = 0; m < members.size(); ++m)
          anyBlocked |= blockedSum(m);
        auto beginGroup = [&] {
          for (size_t m = 0; m < members.size(); ++m)
            line(llvm::formatv("{0} {1}Group[{2}];",
                               blockedSum(m) ? StringRef("float") : accType(m),
                               accs[m], kCpuReductionLanes));
        };
        auto endGroup = [&] {
          for (size_t m = 0; m < members.size(); ++m) {
            StringRef type = blockedSum(m) ? StringRef("float") : accType(m);
            std::string group = llvm::formatv(
                "gpuc::cpuLoadLanes<{0}>({1}Group)", type, accs[m]);
            if (isa<ReduceMaxOp>(reductions[members[m]]))
              line(llvm::formatv("{0}Lanes = gpuc::cpuLanesMax({0}Lanes, {1});",
                                 accs[m], group));
            else if (blockedSum(m) && inLaneBlock)
              line(llvm::formatv("{0}Block += {1};", accs[m], group));
            else if (blockedSum(m))
              line(llvm::formatv("{0}Lanes += gpuc::cpuWidenLanes({1});",
                                 accs[m], group));
            else
              line(llvm::formatv("{0}Lanes += {1};", accs[m], group));
          }
        };
        auto beginBlock = [&] {
          for (size_t m = 0; m < members.size(); ++m)
            if (blockedSum(m))
              line(llvm::formatv("gpuc::CpuLanes<float> {0}Block = {{};",
                                 accs[m]));
        };
        auto endBlock = [&] {
          for (size_t m = 0; m < members.size(); ++m)
            if (blockedSum(m))
              line(llvm::formatv("{0}Lanes += gpuc::cpuWidenLanes({0}Block);",
                                 accs[m]));
        };
        LaneHooks hooks{beginGroup, endGroup};
        if (anyBlocked) {
          hooks.beginBlock = beginBlock;
          hooks.endBlock = endBlock;
        }
        if (failed(cpuRowNest(CpuLine::Lanes, pass, &hooks)))
          return failure();
        for (size_t m = 0; m < members.size(); ++m) {
          open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                             kCpuReductionLanes));
          accumulate(m, accs[m] + "Lanes[lane]");
          close();
        }
        return success();
      };
      if (column) {
        if (failed(cpuColumnNest(pass, "lane")))
          return failure();
      } else if (failed(rowLoops(batchPass, computed,
                                 cpuLines ? function_ref<LogicalResult()>(cpu)
                                          : nullptr))) {
        return failure();
      }
      for (size_t m = 0; m < members.size() && !column; ++m)
        line(llvm::formatv(
            "{0} = {1}({0});", accs[m],
            gpuColumn ? columnCall(isa<ReduceMaxOp>(reductions[members[m]])
                                       ? "columnReduceMax"
                                       : "columnReduceSum")
                      : std::string(warpRows ? "gpuc::warp" : "gpuc::block") +
                            (isa<ReduceMaxOp>(reductions[members[m]])
                                 ? "ReduceMax"
                                 : "ReduceSum")));
      if (splits > 1) {
        // This launch's reductions: store the chunk's partials and stop.
        open(llvm::formatv("if (phase == {0})", reducePhase(level)));
        if (column)
          openLanes();
        for (size_t m = 0; m < members.size(); ++m)
          line(llvm::formatv(
              "{0}partials[{1} + part] = {2};",
              column      ? ""
              : gpuColumn ? "if (" + columnCall("columnSlice") + "() == 0) "
                          : "if (threadIdx.x == 0) ",
              slot(m), column ? accs[m] + "Lanes[lane]" : accs[m]));
        if (column)
          close();
        line("return;");
        close();
        close();
      }
      for (size_t m = 0; m < members.size(); ++m) {
        Operation *reduce = reductions[members[m]];
        Value result = reduce->getResult(0);
        std::string type = registerCType(elementOf(result)).str();
        auto accOf = [&](size_t member) {
          return column ? accs[member] + "Lanes[lane]" : accs[member];
        };
        std::string acc = accOf(m);
        // A centered square's sum from the shifted squares and its mean's
        // sum, both of this pass.
        if (auto c = centered.find(reduce); c != centered.end())
          acc = llvm::formatv(
              "gpuc::centeredSquares({0}, {1}, {2}, {3}.0)", acc,
              accOf(llvm::find(members, c->second.mean) - members.begin()),
              shifts[members[m]], rowLength);
        std::string value = rounded(
            elementOf(result),
            isa<ReduceMeanOp>(reduce)
                ? llvm::formatv("({0})({1} / {2}.0)", type, acc, rowLength)
                      .str()
                : llvm::formatv("({0}){1}", type, acc).str());
        std::string reg = fresh("red");
        if (column) {
          // One per row of the block, read in the rows' later lane loops.
          line(llvm::formatv("{0} {1}[{2}];", type, reg, cpuLanes));
          open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                             cpuLanes));
          line(llvm::formatv("{0}[lane] = {1};", reg, value));
          close();
          reg += "[lane]";
        } else {
          line(llvm::formatv("const {0} {1} = {2};", type, reg, value));
        }
        rowValues[result.getAsOpaquePointer()] = reg;
      }
    }
    if (!perRow.empty() && column) {
      if (splits > 1)
        open(llvm::formatv("if (phase == {0} && part == 0)", rowPhase));
      openRowLanes();
      if (failed(storeResults(perRow, "o")))
        return failure();
      close();
      if (splits > 1)
        close();
    } else if (!perRow.empty()) {
      open(splits > 1 ? llvm::formatv(
                            "if (phase == {0} && part == 0 && {1})", rowPhase,
                            gpuColumn ? columnCall("columnSlice") + "() == 0"
                                      : "threadIdx.x == 0")
                            .str()
           : warpRows  ? std::string("if (gpuc::warpLane() == 0)")
           : gpuColumn ? "if (" + columnCall("columnSlice") + "() == 0)"
                       : std::string("if (threadIdx.x == 0)"));
      if (failed(storeResults(perRow, "o")))
        return failure();
      close();
    }
    storedOutputs = readBack;
    if (!perElement.empty()) {
      if (splits > 1)
        open(llvm::formatv("if (phase == {0})", elementPhase));
      auto batchPass = [&](StringRef, ArrayRef<std::string> rs) {
        SmallVector<std::string> elements;
        for (const std::string &r : rs) {
          elements.push_back(fullIndex(r));
          if (stagingText)
            stagedPositions[elements.back()] = stagedPosition(r);
          if (reused.value)
            remember(reused.value, elements.back(),
                     load(reused.value, "out" + std::to_string(reused.output),
                          elements.back()));
        }
        if (reused.value && elements.size() > 1)
          pinLoads({reused.value}, elements);
        return storeResults(perElement, elements,
                            SmallVector<std::string>(elements.size()));
      };
      auto pass = [&](StringRef lane) { return batchPass(lane, {"r"}); };
      auto cpuLinesLoop = [&] { return cpuRowNest(CpuLine::Simd, pass); };
      if (column) {
        if (failed(cpuColumnNest(pass, "")))
          return failure();
      } else if (failed(rowLoops(
                     batchPass, perElement,
                     cpuLines ? function_ref<LogicalResult()>(cpuLinesLoop)
                              : nullptr))) {
        return failure();
      }
      if (splits > 1)
        close();
    }
    if (warpRows && !column)
      close(); // if (o < rows)
    return success();
  };
  auto emitScoped = [&](bool column, bool gpuColumn) {
    pushScope();
    LogicalResult emitted = emitRows(column, gpuColumn);
    popScope();
    storedOutputs.clear();
    return emitted;
  };
  if (!columns)
    return emitScoped(/*column=*/false, /*gpuColumn=*/false);
  line("#ifdef GPUC_CPU");
  if (failed(emitScoped(/*column=*/true, /*gpuColumn=*/false)))
    return failure();
  line("#else");
  if (failed(emitScoped(/*column=*/false, /*gpuColumn=*/true)))
    return failure();
  line("#endif");
  cpuGrid = rows / cpuLanes * splits;
  kernel.grid = rows / gpuLanes * splits;
  return success();
}

} // namespace mlir::gpuc::kernel_emitter

//===- RowKernel.cpp - kernels of one block per row of their reductions --===//
//
// The passes of a row kernel, from its plan (RowKernelPlan.cpp): on the
// GPU a block, a warp or a column lane per row; on the CPU row by row or
// in columns of rows.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

/// `terms` added pairwise, as one C expression: ((a + b) + (c + d)) ...
static std::string pairwiseSum(ArrayRef<std::string> terms) {
  if (terms.size() == 1)
    return terms.front();
  size_t half = (terms.size() + 1) / 2;
  return "(" + pairwiseSum(terms.take_front(half)) + " + " +
         pairwiseSum(terms.drop_front(half)) + ")";
}

LogicalResult Emitter::emitRowKernel(ArrayRef<Operation *> reductions,
                                     EmittedKernel &kernel, int64_t &cpuGrid) {
  FailureOr<RowKernelPlan> planned = planRowKernel(reductions, kernel, cpuGrid);
  if (failed(planned))
    return failure();
  const RowKernelPlan &p = *planned;
  ArrayRef<int64_t> full = p.full;
  Block &block = fusion.getBodyBlock();
  // What a reduction's pass computes at each element: its operand, or a
  // centered square's value before it is centered.
  auto summedValue = [&](size_t j) {
    auto c = p.centered.find(reductions[j]);
    return c != p.centered.end() ? c->second.value
                                 : reductions[j]->getOperand(0);
  };
  // The GPU's column helpers (Kernel.h), for this kernel's lanes.
  auto columnCall = [&](StringRef helper) {
    return llvm::formatv("gpuc::{0}<{1}>", helper, p.gpuLanes).str();
  };
  // The launch that reduces level `level` (in a split column kernel, a
  // launch combining its partials follows each).
  auto reducePhase = [&](int64_t level) {
    return p.combined ? 2 * level : level;
  };
  // Columns on the CPU: cpuLanes rows per block, the row's loop outside
  // and the rows' lanes inside, so the lanes load adjacent elements and
  // vectorize; each row still adds its elements in order. On the GPU:
  // gpuLanes rows per block, each thread a row (its column lane) and a
  // slice of the row's elements (every gpuc::columnSlices()-th), the
  // slices' partial results combined in a fixed order (Kernel.h's
  // columnReduceSum).
  // A reduction's result from its accumulator `acc`: a mean divided by
  // the row's length, rounded to the result's type.
  auto reducedValue = [&](Operation *reduce, const std::string &acc) {
    Value result = reduce->getResult(0);
    std::string type = registerCType(elementOf(result)).str();
    return rounded(
        elementOf(result),
        isa<ReduceMeanOp>(reduce)
            ? llvm::formatv("({0})({1} / {2}.0)", type, acc, p.rowLength).str()
            : llvm::formatv("({0}){1}", type, acc).str());
  };
  // The launch combining a split column kernel's partials, where it
  // finishes the kernel (finishInCombine): each column's partials of each
  // accumulator combined (a warp's on the GPU, a block's on the CPU), its
  // per-row values computed from them and written by one thread.
  auto finishColumns = [&](ArrayRef<size_t> members,
                           ArrayRef<size_t> levelReductions) -> LogicalResult {
    std::string column = fresh("column");
    open(llvm::formatv("for (gidx {0} = (gidx)gpuc::firstCombinedColumn(); "
                       "{0} < {1}; {0} += (gidx)gpuc::combinedColumnStep())",
                       column, p.rows));
    SmallVector<std::string> totals;
    for (size_t j : members) {
      totals.push_back(fresh("total"));
      line(llvm::formatv(
          "const double {0} = gpuc::combineColumn<{1}>(partials + {2}, {3}, "
          "{4});",
          totals.back(), isa<ReduceMaxOp>(reductions[j]) ? "true" : "false",
          p.slotOf[j] * p.rows * splits, column, splits));
    }
    for (size_t j : levelReductions) {
      size_t m = llvm::find(members,
                            p.sharedWith[j] < 0 ? j : (size_t)p.sharedWith[j]) -
                 members.begin();
      Value result = reductions[j]->getResult(0);
      std::string reg = fresh("red");
      line(llvm::formatv("const {0} {1} = {2};",
                         registerCType(elementOf(result)), reg,
                         reducedValue(reductions[j], totals[m])));
      rowValues[result.getAsOpaquePointer()] = reg;
    }
    open("if (gpuc::writesCombinedColumn())");
    if (failed(storeResults(p.perRow, column)))
      return failure();
    close();
    close();
    return success();
  };
  SmallVector<std::string> kept;
  // `column`: the CPU's columns; `gpuColumn`: the GPU's.
  auto emitRows = [&](bool column, bool gpuColumn) -> LogicalResult {
    // The part of the row this block covers: all of it, or its chunk.
    std::string rowBegin = "0", rowEnd = llvm::formatv("{0}", p.rowLength);
    // Divides both ends of the block's part of the row.
    int64_t rowBoundsDivisor =
        splits > 1 ? std::gcd(p.chunk, p.rowLength) : p.rowLength;
    // The block's row or group of rows.
    std::string blockRows =
        splits > 1 ? llvm::formatv("(blockIdx.x / {0})", splits).str()
                   : std::string("blockIdx.x");
    if (column) {
      line(llvm::formatv("const gidx oGroup = (gidx){0} * {1};", blockRows,
                         p.cpuLanes));
    } else if (gpuColumn) {
      line(llvm::formatv("const gidx o = (gidx){0} * {1} + {2}();", blockRows,
                         p.gpuLanes, columnCall("columnLane")));
    } else if (p.warpRows) {
      // The last block's warps past the last row have nothing to do; each
      // warp is in or out as a whole, so its shuffles see all its lanes.
      line("const gidx o = (gidx)gpuc::warpRow();");
      open(llvm::formatv("if (o < {0})", std::max<int64_t>(1, p.rows)));
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
                             p.rowLength / 32));
          line("GPUC_UNROLL");
          line(llvm::formatv("for (int k = 0; k < {1}; ++k) rowIn{0}[k] = "
                             "in{0}[(int64_t)o * {2} + gpuc::warpLane() + 32 "
                             "* k];",
                             input.getArgNumber(), p.rowLength / 32,
                             p.rowLength));
        }
      for (Value v : p.firstPass)
        if (auto kept = keptInRegisters.find(v); kept != keptInRegisters.end())
          line(llvm::formatv("float rowOut{0}[{1}];", kept->second,
                             p.rowLength / 32));
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
                            input.getArgNumber(), p.rowLength));
      line("gpuc::awaitStagedRows();");
      line("#endif");
    }
    if (splits > 1) {
      line(llvm::formatv("const gidx part = blockIdx.x % {0};", splits));
      line(llvm::formatv("const gidx rowBegin = part * {0};", p.chunk));
      line(llvm::formatv("const gidx rowEnd = rowBegin + {0} < {1} ? "
                         "rowBegin + {0} : {1};",
                         p.chunk, p.rowLength));
      // (The GPU's columns sum in double: see accType.)
      line(gpuColumn ? "double *partials = (double *)workspace;"
                     : "gpuc::Accumulator *partials = (gpuc::Accumulator "
                       "*)workspace;");
      if (p.combined)
        line(llvm::formatv("{0} *totals = partials + {1};",
                           gpuColumn ? "double" : "gpuc::Accumulator",
                           p.accumulators * p.rows * splits));
      rowBegin = "rowBegin";
      rowEnd = "rowEnd";
      // The launch that writes per-row results writes them from each
      // row's first chunk; the other chunks' blocks would only combine the
      // partials again, every thread all of them (ResNet-50's batch norms
      // on an H200: 4 ms of a 76 ms step in such launches).
      if (!p.perRow.empty() && p.rowPhase != p.elementPhase)
        line(llvm::formatv("if (phase == {0} && part != 0) return;",
                           p.rowPhase));
    }
    // A column block's rows share every kept coordinate but the
    // innermost, which is the group's plus the lane (the group starts at
    // a multiple of cpuLanes, which divides the innermost kept axis).
    SmallVector<std::string> keptGroup;
    if (column)
      keptGroup = unravel("oGroup", p.mergedKept);
    else
      kept = unravel("o", p.mergedKept);
    // A concatenation of inputs along the lanes' axis whose inputs all
    // start and end at multiples of cpuLanes holds a column group's rows
    // in one input: picked once per block, here, so each lane loads from
    // one pointer (a vector load) instead of choosing its own (a gather).
    SmallVector<std::pair<ConcatOp, std::string>> groupConcats;
    if (column && p.runs.back().dims.size() == 1) {
      int64_t lastAxis = full.size() - 1;
      fusion.getBody().walk([&](ConcatOp c) {
        if (c.getAxis() != lastAxis || shapeOf(c.getResult()) != full ||
            !concatenatesKernelInputs(c) ||
            llvm::any_of(c.getInputs(), [&](Value input) {
              return shapeOf(input)[lastAxis] % p.cpuLanes != 0;
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
      for (const RowKernelPlan::Run &run : p.runs) {
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
      open(
          llvm::formatv("for (gidx lane = 0; lane < {0}; ++lane)", p.cpuLanes));
      line("const gidx o = oGroup + lane;");
      kept = keptGroup;
      kept.back() = index(keptGroup.back() + " + lane");
      for (auto &[c, from] : groupConcats)
        remember(c.getResult(), concatInputKey(kept.back()), from);
      ArrayRef<int64_t> dims = p.runs.back().dims;
      if (dims.size() > 1) {
        SmallVector<std::string> coords = unravel(keptGroup.back(), dims);
        coords.back() = index(coords.back() + " + lane");
        rememberCoords(
            {kept.back(), std::vector<int64_t>(dims.begin(), dims.end())},
            coords);
      }
    };
    auto fullIndex = [&](StringRef r) {
      SmallVector<std::string> rcoords = unravel(r.str(), p.mergedRow);
      SmallVector<std::string> merged, coords;
      size_t nk = 0, nr = 0;
      for (const RowKernelPlan::Run &run : p.runs) {
        merged.push_back(run.reduced ? rcoords[nr++] : kept[nk++]);
        if (run.dims.size() == 1)
          coords.push_back(merged.back());
        else
          llvm::append_range(coords, unravel(merged.back(), run.dims));
      }
      std::string idx = raveled(merged, p.mergedFull);
      rememberCoords({idx, std::vector<int64_t>(full.begin(), full.end())},
                     coords);
      return idx;
    };
    // The CPU walks a row by lines of its innermost merged axis
    // (cpuLoopNest) when those are long enough.
    bool cpuLines = !p.columns && getNumElements(p.mergedRow) >= kCpuMinLine;
    // The CPU's walk over a row: by lines of the merged axes, or of the
    // row's own axes when the body needs coordinates inside a merged axis
    // (a pooling gradient's row and column), which the lines of the row's
    // axes give without division.
    auto cpuRowNest = [&](CpuLine mode,
                          function_ref<LogicalResult(StringRef)> pass,
                          const LaneHooks *hooks = nullptr) {
      size_t mark = body.size();
      unsigned divided = divisions;
      if (failed(cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor,
                             p.mergedRow, mode, pass, hooks)))
        return failure();
      if (divisions == divided || p.rowShape == p.mergedRow)
        return success();
      body.resize(mark);
      return cpuLoopNest("r", rowBegin, rowEnd, rowBoundsDivisor, p.rowShape,
                         mode, pass, hooks);
    };
    // A pass's body at the row coordinates `rs` (a GPU thread's batch of
    // elements, all in the row, or the one "r").
    using BatchPass =
        function_ref<LogicalResult(StringRef lane, ArrayRef<std::string> rs)>;
    // How many elements a GPU thread takes at once in a pass computing
    // `values` at each, and the threads that stride over a row (or chunk).
    int64_t threadStride = gpuColumn    ? kBlockThreads / p.gpuLanes
                           : p.warpRows ? kBlockThreads / kWarpRowsPerBlock
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
      std::string first = gpuColumn    ? columnCall("columnSlice") + "()"
                          : p.warpRows ? "gpuc::warpLane()"
                                       : "threadIdx.x";
      std::string stride = gpuColumn    ? columnCall("columnSlices") + "()"
                           : p.warpRows ? "gpuc::kWarpStride"
                                        : "blockDim.x";
      if (stagingText && stagedInRegisters) {
        // Every lane has rowLength / 32 elements, `batch` at a time: an
        // unrolled loop, whose elements' places in the lanes' arrays are
        // constants.
        line("GPUC_UNROLL");
        open(llvm::formatv("for (int step = 0; step < {0}; ++step)",
                           p.rowLength / 32 / batch));
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
          elementsInFlight(values, (p.chunk + threadStride - 1) / threadStride);
      // (Register-staged rows: a batch that divides a lane's elements.)
      while (stagedInRegisters && (p.rowLength / 32) % batch != 0)
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
      int64_t ahead = std::clamp<int64_t>(
          kCpuColumnPrefetchBytes / (p.cpuLanes * 4), 2, 16);
      if (streamed.empty() || ahead >= p.rowLength)
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
                           p.cpuLanes, std::max<int64_t>(1, 64 / bytes),
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
      auto c = p.centered.find(reduce);
      if (c == p.centered.end())
        continue;
      std::string name = fresh("shift");
      if (column) {
        line(llvm::formatv("float {0}[{1}];", name, p.cpuLanes));
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
    for (int64_t level = 0; level < p.levels; ++level) {
      // The first pass computes what later ones read back.
      storedOutputs = level == 0 ? DenseMap<Value, int64_t>() : p.readBack;
      // The level's reductions with an accumulator of their own (`members`)
      // and all of them.
      SmallVector<size_t> members, levelReductions;
      for (size_t j = 0; j < reductions.size(); ++j)
        if (p.levelOf[j] == level) {
          levelReductions.push_back(j);
          if (p.sharedWith[j] < 0)
            members.push_back(j);
        }
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
                             accs.back(), p.cpuLanes, init, accType(m)));
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
        return llvm::formatv("({0} + o) * {1}", p.slotOf[members[m]] * p.rows,
                             splits)
            .str();
      };
      // The CPU's column lanes, each with its row `o`.
      auto openLanes = [&] {
        open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                           p.cpuLanes));
        line("const gidx o = oGroup + lane;");
      };
      if (p.finishInCombine) {
        open(llvm::formatv("if (phase == {0})", reducePhase(level) + 1));
        if (failed(finishColumns(members, levelReductions)))
          return failure();
        line("return;");
        close();
        open("else");
      } else if (p.combined) {
        // An earlier launch combined this row's chunks: one load.
        open(llvm::formatv("if (phase > {0})", reducePhase(level) + 1));
        if (column)
          openLanes();
        for (size_t m = 0; m < members.size(); ++m)
          line(llvm::formatv("{0} = ({1})totals[{2} + o];",
                             column ? accs[m] + "Lanes[lane]" : accs[m],
                             accType(m), p.slotOf[members[m]] * p.rows));
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
          while (end < members.size() &&
                 p.slotOf[members[end]] == p.slotOf[members[end - 1]] + 1 &&
                 isa<ReduceMaxOp>(reductions[members[end]]) == isMax)
            ++end;
          line(llvm::formatv(
              "gpuc::combineColumnPartials<{0}>(partials + {1}, totals + {2}, "
              "{3}, {4});",
              isMax ? "true" : "false", p.slotOf[members[m]] * p.rows * splits,
              p.slotOf[members[m]] * p.rows, (int64_t)(end - m) * p.rows,
              splits));
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
        llvm::append_range(computed, p.firstPass);
      if (p.reused.value && level == p.levels - 1)
        computed.push_back(p.reused.value);
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
            failed(storeResults(p.firstPass, elements,
                                SmallVector<std::string>(elements.size()))))
          return failure();
        // The values later passes read back, kept in the lanes' registers.
        if (level == 0 && stagingText && stagedInRegisters)
          for (const std::string &element : elements)
            for (Value v : p.firstPass)
              if (auto kept = keptInRegisters.find(v);
                  kept != keptInRegisters.end()) {
                FailureOr<std::string> reg = at(v, element);
                if (failed(reg))
                  return failure();
                line(llvm::formatv("rowOut{0}[{1}] = {2};", kept->second,
                                   stagedPositions[element], *reg));
              }
        if (p.reused.value && level == p.levels - 1) {
          SmallVector<std::string> regs;
          for (const std::string &element : elements) {
            FailureOr<std::string> reg = at(p.reused.value, element);
            if (failed(reg))
              return failure();
            regs.push_back(*reg);
          }
          for (auto [element, reg] : llvm::zip(elements, regs))
            line(llvm::formatv("out{0}[{1}] = {2};", p.reused.output, element,
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
                      : std::string(p.warpRows ? "gpuc::warp" : "gpuc::block") +
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
      for (size_t j : levelReductions) {
        size_t m =
            llvm::find(members,
                       p.sharedWith[j] < 0 ? j : (size_t)p.sharedWith[j]) -
            members.begin();
        Operation *reduce = reductions[j];
        Value result = reduce->getResult(0);
        std::string type = registerCType(elementOf(result)).str();
        auto accOf = [&](size_t member) {
          return column ? accs[member] + "Lanes[lane]" : accs[member];
        };
        std::string acc = accOf(m);
        // A centered square's sum from the shifted squares and its mean's
        // sum, both of this pass.
        if (auto c = p.centered.find(reduce); c != p.centered.end())
          acc = llvm::formatv(
              "gpuc::centeredSquares({0}, {1}, {2}, {3}.0)", acc,
              accOf(llvm::find(members, c->second.mean) - members.begin()),
              shifts[j], p.rowLength);
        std::string value = reducedValue(reduce, acc);
        std::string reg = fresh("red");
        if (column) {
          // One per row of the block, read in the rows' later lane loops.
          line(llvm::formatv("{0} {1}[{2}];", type, reg, p.cpuLanes));
          open(llvm::formatv("for (int lane = 0; lane < {0}; ++lane)",
                             p.cpuLanes));
          line(llvm::formatv("{0}[lane] = {1};", reg, value));
          close();
          reg += "[lane]";
        } else {
          line(llvm::formatv("const {0} {1} = {2};", type, reg, value));
        }
        rowValues[result.getAsOpaquePointer()] = reg;
      }
    }
    if (p.finishInCombine) {
      // The combining launch wrote the per-row results, and the first
      // pass the per-element ones.
    } else if (!p.perRow.empty() && column) {
      if (splits > 1)
        open(llvm::formatv("if (phase == {0} && part == 0)", p.rowPhase));
      openRowLanes();
      if (failed(storeResults(p.perRow, "o")))
        return failure();
      close();
      if (splits > 1)
        close();
    } else if (!p.perRow.empty()) {
      open(splits > 1 ? llvm::formatv(
                            "if (phase == {0} && part == 0 && {1})", p.rowPhase,
                            gpuColumn ? columnCall("columnSlice") + "() == 0"
                                      : "threadIdx.x == 0")
                            .str()
           : p.warpRows ? std::string("if (gpuc::warpLane() == 0)")
           : gpuColumn  ? "if (" + columnCall("columnSlice") + "() == 0)"
                        : std::string("if (threadIdx.x == 0)"));
      if (failed(storeResults(p.perRow, "o")))
        return failure();
      close();
    }
    storedOutputs = p.readBack;
    if (!p.perElement.empty()) {
      if (splits > 1)
        open(llvm::formatv("if (phase == {0})", p.elementPhase));
      auto batchPass = [&](StringRef, ArrayRef<std::string> rs) {
        SmallVector<std::string> elements;
        for (const std::string &r : rs) {
          elements.push_back(fullIndex(r));
          if (stagingText)
            stagedPositions[elements.back()] = stagedPosition(r);
          if (p.reused.value)
            remember(p.reused.value, elements.back(),
                     load(p.reused.value,
                          "out" + std::to_string(p.reused.output),
                          elements.back()));
        }
        if (p.reused.value && elements.size() > 1)
          pinLoads({p.reused.value}, elements);
        return storeResults(p.perElement, elements,
                            SmallVector<std::string>(elements.size()));
      };
      auto pass = [&](StringRef lane) { return batchPass(lane, {"r"}); };
      auto cpuLinesLoop = [&] { return cpuRowNest(CpuLine::Simd, pass); };
      if (column) {
        if (failed(cpuColumnNest(pass, "")))
          return failure();
      } else if (failed(rowLoops(
                     batchPass, p.perElement,
                     cpuLines ? function_ref<LogicalResult()>(cpuLinesLoop)
                              : nullptr))) {
        return failure();
      }
      if (splits > 1)
        close();
    }
    if (p.warpRows && !column)
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
  if (!p.columns)
    return emitScoped(/*column=*/false, /*gpuColumn=*/false);
  line("#ifdef GPUC_CPU");
  if (failed(emitScoped(/*column=*/true, /*gpuColumn=*/false)))
    return failure();
  line("#else");
  if (failed(emitScoped(/*column=*/false, /*gpuColumn=*/true)))
    return failure();
  line("#endif");
  cpuGrid = p.rows / p.cpuLanes * splits;
  kernel.grid = p.rows / p.gpuLanes * splits;
  return success();
}

} // namespace mlir::gpuc::kernel_emitter

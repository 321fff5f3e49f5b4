//===- ElementwiseKernel.cpp - kernels without reductions ----------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

SmallVector<Value> Emitter::inputsReadAtStoredIndex(ValueRange values) {
  SmallVector<Value> inputs;
  llvm::SmallPtrSet<Operation *, 32> visited;
  // `elements`: how many v has where it is read at the stored index (more
  // than the value's, past a slice at the start of its input).
  std::function<void(Value, int64_t)> walk = [&](Value v, int64_t elements) {
    // (A value loaded from an output stands for the inputs it was computed
    // from.)
    if (isa<BlockArgument>(v) || storedOutputs.count(v)) {
      if (getNumElements(shapeOf(v)) == elements &&
          !llvm::is_contained(inputs, v))
        inputs.push_back(v);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (!def || !visited.insert(def).second)
      return;
    if (auto slice = dyn_cast<SliceOp>(def)) {
      if (contiguousSliceOffset(slice) == 0)
        walk(slice.getInput(), getNumElements(shapeOf(slice.getInput())));
      return;
    }
    if (isPointwise(def) || isAlias(def))
      for (Value operand : def->getOperands())
        walk(operand, elements);
  };
  for (Value value : values)
    walk(value, getNumElements(shapeOf(value)));
  return inputs;
}

LogicalResult Emitter::loadAhead(ValueRange values,
                                 ArrayRef<std::string> indices) {
  SmallVector<Value> inputs = inputsReadAtStoredIndex(values);
  for (const std::string &idx : indices)
    for (Value input : inputs)
      if (failed(at(input, idx)))
        return failure();
  if (indices.size() > 1)
    pinLoads(inputs, indices);
  return success();
}

void Emitter::pinLoads(ArrayRef<Value> values, ArrayRef<std::string> indices) {
  SmallVector<std::string> pinned;
  for (const std::string &idx : indices)
    for (Value v : values) {
      auto it = memo.find({v.getAsOpaquePointer(), idx});
      // (A register pinned already, by an earlier part of the same pass,
      // stays as it is.)
      if (it == memo.end() || registerCType(elementOf(v)) != "float" ||
          StringRef(it->second).ends_with(kPinnedSuffix))
        continue;
      std::string copy = it->second + kPinnedSuffix.str();
      pinned.push_back(copy);
      line(llvm::formatv("float {0} = {1};", copy, it->second));
      remember(v, idx, copy);
    }
  if (pinned.empty())
    return;
  // An asm statement takes at most 30 operands.
  line("#ifdef GPUC_NVRTC");
  for (size_t begin = 0; begin < pinned.size(); begin += 30) {
    std::string operands;
    for (size_t k = begin; k < std::min(pinned.size(), begin + 30); ++k)
      operands += (k == begin ? "\"+f\"(" : ", \"+f\"(") + pinned[k] + ")";
    line("asm volatile(\"\" : " + operands + ");");
  }
  line("#endif");
}

LogicalResult Emitter::storeResults(ValueRange values, const std::string &idx) {
  return storeResults(values, ArrayRef<std::string>{idx},
                      ArrayRef<std::string>{""});
}

LogicalResult Emitter::storeResults(ValueRange values,
                                    ArrayRef<std::string> indices,
                                    ArrayRef<std::string> guards) {
  auto yield = cast<YieldOp>(fusion.getBodyBlock().getTerminator());
  // The inputs read at the stored indices are loaded first, then every value
  // is computed, then stored. The GPU issues a warp's instructions in order,
  // and its compiler keeps a load after a store written before it: a kernel
  // computing many results one after the other (the optimizer update of
  // twelve parameters) would otherwise wait for each result's loads in
  // turn, stalled at its first arithmetic, instead of having them all in
  // flight. Computing before storing also makes in-place results safe: an
  // operand a result overwrites (gpuc.in_place; gpuc-plan-memory only picks
  // operands read at the stored index) is read before anything is stored.
  if (!loadsFirst) {
    // One value at a time (see loadsFirst), the operands results overwrite
    // loaded first.
    assert(indices.size() == 1 && "a batch of elements loads first");
    const std::string &idx = indices.front();
    for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
      if (inPlace[k] >= 0 && llvm::is_contained(values, yielded) &&
          failed(at(fusion.getBodyBlock().getArgument(inPlace[k]), idx)))
        return failure();
    for (Value value : values) {
      FailureOr<std::string> reg = at(value, idx);
      if (failed(reg))
        return failure();
      for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
        if (yielded == value)
          line(llvm::formatv("out{0}[{1}] = {2};", k, idx, *reg));
    }
    return success();
  }
  if (failed(loadAhead(values, indices)))
    return failure();
  SmallVector<SmallVector<std::string>> registers;
  for (const std::string &idx : indices) {
    registers.emplace_back();
    for (Value value : values) {
      FailureOr<std::string> reg = at(value, idx);
      if (failed(reg))
        return failure();
      registers.back().push_back(*reg);
    }
  }
  for (auto [idx, guard, regs] : llvm::zip(indices, guards, registers)) {
    if (!guard.empty())
      open("if (" + guard + ")");
    for (auto [value, reg] : llvm::zip(values, regs))
      // A value yielded twice is written to each of its outputs.
      for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
        if (yielded == value)
          line(llvm::formatv("out{0}[{1}] = {2};", k, idx, reg));
    if (!guard.empty())
      close();
  }
  return success();
}

int64_t Emitter::elementsInFlight(ValueRange values, int64_t perThread) {
  // The bytes one element loads: each read of a kernel input (through a
  // slice or a gather too: the 16 slices of a head's chunks are 16 loads),
  // but not a broadcast one (a bias, a scalar: cached, and the same for all
  // of a thread's elements).
  // An input read at the element's own index is one load however many ops
  // read it (the emitter's memo); one read at another index, one per op
  // that moves the index on its way (the 16 slices of one cast tensor are
  // 16 loads). A segment sum's loads do not count: its loop's follow the
  // offsets it loads, so they cannot be in flight beside the others, and
  // its offsets are its row's, the same for all of the row's elements.
  int64_t bytes = 0;
  llvm::DenseSet<std::pair<Operation *, Operation *>> visited;
  llvm::DenseSet<std::pair<Value, Operation *>> loads;
  std::function<void(Value, Operation *)> walk = [&](Value v,
                                                     Operation *mover) {
    Operation *def = v.getDefiningOp();
    if (!def || isa<BroadcastOp, SegmentSumOp>(def) ||
        !visited.insert({def, mover}).second)
      return;
    if (!isPointwise(def) && !isAlias(def))
      mover = def;
    for (Value operand : def->getOperands()) {
      // (A value loaded from an output is a load of its own.)
      if (!isa<BlockArgument>(operand) && !storedOutputs.count(operand))
        walk(operand, mover);
      else if (loads.insert({operand, mover}).second)
        bytes += std::max<int64_t>(
            1, getElementTypeOrSelf(operand.getType()).getIntOrFloatBitWidth() /
                   8);
    }
  };
  for (Value value : values) {
    if (isa<BlockArgument>(value) || storedOutputs.count(value))
      bytes +=
          getElementTypeOrSelf(value.getType()).getIntOrFloatBitWidth() / 8;
    if (!storedOutputs.count(value))
      walk(value, nullptr);
  }
  if (bytesInFlight == 0)
    return 1;
  int64_t elements = bytesInFlight / std::max<int64_t>(bytes, 1);
  int64_t batch = 1;
  while (batch * 2 <= std::min({elements, perThread, kMaxElementsInFlight}))
    batch *= 2;
  return batch;
}

LogicalResult Emitter::emitElementwise(EmittedKernel &kernel) {
  auto yield = cast<YieldOp>(fusion.getBodyBlock().getTerminator());
  // Elementwise. Values written with the same number of elements share an
  // iteration space; several spaces (the updates of many parameters, a
  // multi-tensor kernel) are segments of the grid, each block owning a
  // tile of one segment.
  SmallVector<std::pair<int64_t, SmallVector<Value>>> segments;
  for (Value value : yield.getValues()) {
    int64_t n = getNumElements(shapeOf(value));
    auto it = llvm::find_if(segments, [&](auto &s) { return s.first == n; });
    if (it == segments.end())
      segments.push_back({n, {value}});
    else
      it->second.push_back(value);
  }
  auto tilesOf = [](int64_t elements) {
    return std::max<int64_t>(1,
                             (elements + kPointwiseTile - 1) / kPointwiseTile);
  };
  int64_t grid = 0;
  for (auto &segment : segments)
    grid += tilesOf(segment.first);
  int64_t base = 0;
  for (auto &[elements, values] : segments) {
    int64_t tile = kPointwiseTile;
    int64_t tiles = tilesOf(elements);
    // The GPU allocates registers for a kernel's hungriest segment: a small
    // segment beside a large one (a dozen biases updated beside a 38M
    // element embedding) computes one result at a time, as loading all its
    // inputs first would cost the large segment occupancy.
    loadsFirst = bytesInFlight > 0 && tiles * kSmallSegmentShare >= grid;
    bool only = segments.size() == 1;
    if (!only)
      open(llvm::formatv("if (blockIdx.x >= {0} && blockIdx.x < {1})", base,
                         base + tiles));
    line(llvm::formatv("const gidx begin = ((gidx)blockIdx.x - {0}) * {1};",
                       base, tile));
    line(llvm::formatv("const gidx end = begin + {0} < {1} ? begin + "
                       "{0} : {1};",
                       tile, elements));
    auto portable = [&]() -> LogicalResult {
      line("GPUC_INDEPENDENT_ITERATIONS");
      open("for (gidx i = begin + threadIdx.x; i < end; i += blockDim.x)");
      if (failed(storeResults(values, "i")))
        return failure();
      close();
      return success();
    };
    // The CPU walks the lines of the first result of more than one
    // dimension, when the flat loop would divide to find coordinates.
    auto lined =
        llvm::find_if(values, [](Value v) { return shapeOf(v).size() > 1; });
    auto cpuNest = [&] {
      return cpuLoopNest("i", "begin", "end", /*boundsDivisor=*/1,
                         shapeOf(*lined), CpuLine::Simd,
                         [&](StringRef) { return storeResults(values, "i"); });
    };
    // A GPU thread loads `batch` of its elements (a block's stride apart,
    // so a warp's loads stay coalesced) before computing and storing any:
    // with one element's loads in flight at a time, a thread of a kernel
    // that reads one 16-bit tensor has 2 bytes in flight, and a full SM
    // 4 KiB, a fifth of what keeps an H100's memory busy. Batches run
    // while the whole batch is in the tile, then the thread's last few
    // elements one at a time (only a segment's last tile has any, and none
    // when the segment is whole batches), so no element is clamped or
    // guarded.
    int64_t batch =
        loadsFirst ? elementsInFlight(values, kPointwiseTile / kBlockThreads)
                   : 1;
    auto batched = [&]() -> LogicalResult {
      GpuText text(*this);
      open("");
      line("gidx i = begin + threadIdx.x;");
      open(llvm::formatv("for (; i + {0} * (gidx)blockDim.x < end; i += {1} * "
                         "(gidx)blockDim.x)",
                         batch - 1, batch));
      SmallVector<std::string> indices{"i"};
      for (int64_t k = 1; k < batch; ++k) {
        indices.push_back("iPlus" + std::to_string(k));
        line(llvm::formatv("const gidx {0} = i + {1} * (gidx)blockDim.x;",
                           indices.back(), k));
      }
      if (failed(
              storeResults(values, indices, SmallVector<std::string>(batch))))
        return failure();
      close();
      if (elements % (batch * kBlockThreads) != 0) {
        open("for (; i < end; i += blockDim.x)");
        if (failed(storeResults(values, "i")))
          return failure();
        close();
      }
      close();
      return success();
    };
    auto cpu = [&]() -> LogicalResult {
      size_t mark = body.size();
      unsigned divided = divisions;
      if (failed(portable()))
        return failure();
      if (lined == values.end() || divisions == divided)
        return success();
      body.resize(mark);
      return cpuNest();
    };
    if (batch > 1 ? failed(splitByTarget(batched, cpu, /*onlyIfDivides=*/false))
        : lined == values.end()
            ? failed(portable())
            : failed(splitByTarget(portable, cpuNest, /*onlyIfDivides=*/true)))
      return failure();
    if (!only)
      close();
    base += tiles;
  }
  loadsFirst = bytesInFlight > 0;
  kernel.grid = base;
  return success();
}

} // namespace mlir::gpuc::kernel_emitter

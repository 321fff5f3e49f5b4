//===- ElementwiseKernel.cpp - kernels without reductions
//-------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

LogicalResult Emitter::storeResults(ValueRange values, const std::string &idx) {
  auto yield = cast<YieldOp>(fusion.getBodyBlock().getTerminator());
  // An operand that a result stored here overwrites in place is loaded
  // before anything is stored (gpuc-plan-memory only picks operands read at
  // the stored index, so these loads are all its reads at this index).
  for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
    if (inPlace[k] >= 0 && llvm::is_contained(values, yielded) &&
        failed(at(fusion.getBodyBlock().getArgument(inPlace[k]), idx)))
      return failure();
  for (Value value : values) {
    FailureOr<std::string> reg = at(value, idx);
    if (failed(reg))
      return failure();
    // A value yielded twice is written to each of its outputs.
    for (auto [k, yielded] : llvm::enumerate(yield.getValues()))
      if (yielded == value)
        line(llvm::formatv("out{0}[{1}] = {2};", k, idx, *reg));
  }
  return success();
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
  int64_t base = 0;
  for (auto &[elements, values] : segments) {
    int64_t tile = kPointwiseTile;
    int64_t tiles = std::max<int64_t>(1, (elements + tile - 1) / tile);
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
    if (lined == values.end()
            ? failed(portable())
            : failed(splitByTarget(
                  portable,
                  [&] {
                    return cpuLoopNest(
                        "i", "begin", "end", /*boundsDivisor=*/1,
                        shapeOf(*lined), CpuLine::Simd,
                        [&](StringRef) { return storeResults(values, "i"); });
                  },
                  /*onlyIfDivides=*/true)))
      return failure();
    if (!only)
      close();
    base += tiles;
  }
  kernel.grid = base;
  return success();
}

} // namespace mlir::gpuc::kernel_emitter

//===- CpuLoops.cpp - the CPU's forms of a kernel's loops -----------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

LogicalResult Emitter::splitByTarget(function_ref<LogicalResult()> portable,
                                     function_ref<LogicalResult()> cpu,
                                     bool onlyIfDivides) {
  size_t mark = body.size();
  unsigned divided = divisions;
  if (failed(portable()))
    return failure();
  if (onlyIfDivides && divisions == divided)
    return success();
  std::string portableText = body.substr(mark);
  body.resize(mark);
  line("#ifdef GPUC_CPU");
  if (failed(cpu()))
    return failure();
  line("#else");
  body += portableText;
  line("#endif");
  return success();
}

LogicalResult Emitter::cpuLoopNest(
    const std::string &flat, const std::string &begin, const std::string &end,
    int64_t boundsDivisor, ArrayRef<int64_t> shape, CpuLine mode,
    function_ref<LogicalResult(StringRef)> emitBody, const LaneHooks *hooks) {
  // A line is the innermost dimension, or as many trailing ones as make it
  // kCpuMinLine long (coordinates inside it are then unravelled).
  size_t lineRank = 1;
  int64_t inner = shape.back();
  while (inner < kCpuMinLine && lineRank < shape.size())
    inner *= shape[shape.size() - ++lineRank];
  std::string lineIdx = flat + "Line", pos = flat + "At";
  open(llvm::formatv("for (gidx {0} = {1} / {2}; {0} * {2} < {3}; ++{0})",
                     lineIdx, begin, inner, end));
  line(llvm::formatv("const gidx {0}Begin = {1} * {2} < {3} ? {3} - {1} * "
                     "{2} : 0;",
                     pos, lineIdx, inner, begin));
  line(llvm::formatv("const gidx {0}End = {1} - {2} * {3} < {3} ? {1} - {2} "
                     "* {3} : {3};",
                     pos, end, lineIdx, inner));
  SmallVector<std::string> outer = unravel(lineIdx, shape.drop_back(lineRank));
  auto inside = [&](StringRef lane) {
    line(llvm::formatv("const gidx {0} = {1} * {2} + {3};", flat, lineIdx,
                       inner, pos));
    SmallVector<std::string> coords(outer);
    llvm::append_range(coords, unravel(pos, shape.take_back(lineRank)));
    rememberCoords({flat, std::vector<int64_t>(shape.begin(), shape.end())},
                   coords);
    return emitBody(lane);
  };
  if (mode != CpuLine::Lanes) {
    if (mode == CpuLine::Simd)
      line("GPUC_INDEPENDENT_ITERATIONS");
    open(llvm::formatv("for (gidx {0} = {0}Begin; {0} < {0}End; ++{0})", pos));
    if (failed(inside("")))
      return failure();
    close();
  } else {
    line(llvm::formatv("gidx {0}Group = {0}Begin;", pos));
    // Blocks only where a line is longer than one.
    bool blocked = hooks && hooks->beginBlock && inner > kCpuLaneBlock;
    std::string groupsEnd = pos + "End";
    if (blocked) {
      open(llvm::formatv("while ({0}Group + {1} <= {0}End)", pos,
                         kCpuReductionLanes));
      groupsEnd = pos + "BlockEnd";
      line(llvm::formatv("const gidx {0} = {1}End - {1}Group > {2} ? "
                         "{1}Group + {2} : {1}End;",
                         groupsEnd, pos, kCpuLaneBlock));
      hooks->beginBlock();
    }
    open(llvm::formatv("for (; {0}Group + {1} <= {2}; {0}Group += {1})", pos,
                       kCpuReductionLanes, groupsEnd));
    inLaneGroup = hooks != nullptr;
    inLaneBlock = blocked;
    if (hooks)
      hooks->beginGroup();
    line("GPUC_INDEPENDENT_ITERATIONS");
    open(llvm::formatv("for (gidx lane = 0; lane < {0}; ++lane)",
                       kCpuReductionLanes));
    line(llvm::formatv("const gidx {0} = {0}Group + lane;", pos));
    LogicalResult emitted = inside("lane");
    close();
    if (hooks)
      hooks->endGroup();
    inLaneGroup = inLaneBlock = false;
    if (failed(emitted))
      return failure();
    close();
    if (blocked) {
      hooks->endBlock();
      close();
    }
    // The line's last elements, fewer than a group, go to the first lanes
    // (unless every line is whole and its groups are all full).
    if (boundsDivisor % inner != 0 || inner % kCpuReductionLanes != 0) {
      open(llvm::formatv(
          "for (gidx lane = 0; {0}Group + lane < {0}End; ++lane)", pos));
      line(llvm::formatv("const gidx {0} = {0}Group + lane;", pos));
      if (failed(inside("lane")))
        return failure();
      close();
    }
  }
  close();
  return success();
}

} // namespace mlir::gpuc::kernel_emitter

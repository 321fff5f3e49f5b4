//===- KernelEmitter.cpp - a gpuc.fusion as one CUDA C++ kernel -----------===//
//
// The entry point, and the kernel's function around its body: the
// signature, the index type, and the launchers for both targets. The body
// comes from the emitter's parts (Kernel/Emitter.h).
//
//===----------------------------------------------------------------------===//
#include "Kernel/Emitter.h"

using namespace mlir;
using namespace mlir::gpuc;

StringRef mlir::gpuc::storageCType(Type elementType) {
  if (elementType.isF32())
    return "float";
  if (elementType.isInteger(64))
    return "int64_t";
  if (elementType.isInteger(32))
    return "int32_t";
  if (elementType.isInteger(8))
    return "signed char";
  if (elementType.isInteger(1))
    return "bool";
  if (elementType.isF16())
    return "gpuc::f16";
  if (elementType.isBF16())
    return "gpuc::bf16";
  return "";
}

StringRef mlir::gpuc::registerCType(Type elementType) {
  if (isa<FloatType>(elementType))
    return "float";
  return storageCType(elementType);
}

namespace mlir::gpuc::kernel_emitter {

LogicalResult Emitter::configure() {
  inPlace.assign(fusion.getNumResults(), -1);
  if (auto module = fusion->getParentOfType<ModuleOp>())
    if (auto bytes = module->getAttrOfType<IntegerAttr>(
            GpucDialect::kGpuBytesInFlightAttrName))
      bytesInFlight = bytes.getInt();
  if (auto module = fusion->getParentOfType<ModuleOp>())
    if (auto lanes = module->getAttrOfType<IntegerAttr>(
            GpucDialect::kGpuColumnLanesAttrName))
      mostColumnLanes = lanes.getInt();
  if (auto module = fusion->getParentOfType<ModuleOp>())
    if (auto bytes = module->getAttrOfType<IntegerAttr>(
            GpucDialect::kGpuRowStageBytesAttrName))
      rowStageBytes = bytes.getInt();
  if (auto module = fusion->getParentOfType<ModuleOp>())
    if (auto registers = module->getAttrOfType<IntegerAttr>(
            GpucDialect::kGpuWarpRowRegistersAttrName))
      warpRowRegisters = registers.getInt();
  loadsFirst = bytesInFlight > 0;
  if (auto attr = fusion->getAttrOfType<DenseI64ArrayAttr>(
          GpucDialect::kInPlaceAttrName)) {
    if (attr.size() != fusion.getNumResults())
      return fusion.emitOpError() << "'" << GpucDialect::kInPlaceAttrName
                                  << "' needs one entry per result";
    inPlace.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  }
  findLoadGuards();
  return success();
}

FailureOr<EmittedKernel> Emitter::run(StringRef name) {
  Block &block = fusion.getBodyBlock();
  SmallVector<Operation *> reductions;
  for (Operation &op : block.without_terminator())
    if (isReduction(&op))
      reductions.push_back(&op);

  EmittedKernel kernel;
  kernel.name = name.str();
  // Blocks of the CPU's launch, when not the GPU's grid.
  int64_t cpuGrid = 0;
  if (failed(configure()))
    return failure();
  for (Operation &op : block.without_terminator())
    if (auto groups = dyn_cast<RowGroupsOp>(op))
      return emitRowGroups(groups, name);
    else if (isa<AttentionOp, AttentionGradOp>(op))
      return emitAttention(&op, name);
  if (failed(reductions.empty() ? emitElementwise(kernel)
                                : emitRowKernel(reductions, kernel, cpuGrid)))
    return failure();
  // How many bytes a GPU thread of an elementwise kernel keeps in flight
  // is a guess (kGpuBytesInFlight): AdamW's f32 weights, gradients and
  // moments fit two elements in 32 bytes. The GPU times the kernel with
  // 2 and 4 times as many against its own (the same bits: no element's
  // arithmetic depends on which others a thread loads with it), where the
  // batch grows at all and the kernel has a block an SM or more (a smaller
  // one is its launch's latency).
  if (reductions.empty() && bytesInFlight > 0 &&
      kernel.grid >= kRowKernelBlocks / (kGpuThreadsPerSm / kBlockThreads))
    for (int64_t more : {2 * bytesInFlight, 4 * bytesInFlight}) {
      Emitter wider(fusion);
      EmittedKernel scratch;
      if (failed(wider.configure()))
        return failure();
      wider.bytesInFlight = more;
      wider.loadsFirst = true;
      if (failed(wider.emitElementwise(scratch)))
        return failure();
      if (wider.body == body ||
          llvm::any_of(kernel.alternatives, [&](const KernelAlternative &a) {
            return a.body == wider.body;
          }))
        continue;
      KernelAlternative alternative;
      alternative.suffix = "_f" + std::to_string(more);
      alternative.body = std::move(wider.body);
      kernel.alternatives.push_back(std::move(alternative));
    }
  if (!reductions.empty() && failed(addUnstagedAlternative(reductions, kernel)))
    return failure();
  return assemble(name, std::move(kernel), cpuGrid, reductions);
}

LogicalResult Emitter::addUnstagedAlternative(ArrayRef<Operation *> reductions,
                                              EmittedKernel &kernel) {
  // Whether staging a row pays (in shared memory, so that its later passes
  // do not go back to memory; in a warp's registers, all its loads in
  // flight at once) depends on the GPU: the staged row takes shared memory
  // or registers that would hold more blocks an SM. The GPU times the
  // kernel reading its row from memory in every pass (`_s0`) against its
  // own. The same bits: each pass computes the same elements in the same
  // order, only their loads differ.
  if (kernel.launches != 1 || (kernel.sharedBytes == 0 && !stagedInRegisters))
    return success();
  Emitter plain(fusion);
  if (failed(plain.configure()))
    return failure();
  plain.rowStageBytes = 0;
  plain.warpRowRegisters = 0;
  EmittedKernel scratch;
  int64_t cpuGrid = 0;
  if (failed(plain.emitRowKernel(reductions, scratch, cpuGrid)))
    return failure();
  if (scratch.grid != kernel.grid || scratch.launches != 1 ||
      plain.body == body)
    return success();
  KernelAlternative alternative;
  alternative.suffix = "_s0";
  alternative.body = std::move(plain.body);
  alternative.minBlocksPerSm = scratch.minBlocksPerSm;
  alternative.sharedBytes = scratch.sharedBytes;
  kernel.alternatives.push_back(std::move(alternative));
  return success();
}

FailureOr<EmittedKernel> Emitter::emitRowGroups(RowGroupsOp groups,
                                                StringRef name) {
  // The counting sort is one block's work, in the device header: it is the
  // kernel's only op, reading its indices and writing both results.
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (block.getOperations().size() != 2 || block.getNumArguments() != 1 ||
      groups.getIndices() != block.getArgument(0) ||
      !llvm::equal(yield.getValues(), groups.getResults()))
    return fusion.emitOpError()
           << "holds a row_groups with other work; it must be a kernel of "
              "its own";
  if (llvm::any_of(inPlace, [](int64_t k) { return k >= 0; }))
    return fusion.emitOpError() << "row_groups cannot write over its indices";
  EmittedKernel kernel;
  kernel.name = name.str();
  kernel.grid = 1;
  line(llvm::formatv("gpuc::groupRows(in0, {0}, {1}, out0, out1);",
                     getNumElements(shapeOf(groups.getIndices())),
                     groups.getRows()));
  return assemble(name, std::move(kernel), /*cpuGrid=*/0, {});
}

FailureOr<EmittedKernel> Emitter::assemble(StringRef name, EmittedKernel kernel,
                                           int64_t cpuGrid,
                                           ArrayRef<Operation *> reductions) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  // The signature: inputs, then outputs (then a split row kernel's
  // workspace).
  std::string params, names, casts;
  unsigned arg = 0;
  for (auto [k, input] : llvm::enumerate(block.getArguments())) {
    StringRef type = storageCType(elementOf(input));
    if (type.empty())
      return fusion.emitOpError()
             << "reads " << input.getType()
             << ", which code generation cannot store (it stores f32, f16, "
                "bf16, i64, i32 and i1)";
    // Pointers that alias (an output written over this input) drop
    // __restrict__; every other pointer keeps it.
    bool aliased = llvm::is_contained(inPlace, (int64_t)k);
    params +=
        llvm::formatv("{0}const {1} *{2}in{3}", params.empty() ? "" : ", ",
                      type, aliased ? "" : "__restrict__ ", k);
    names += llvm::formatv("{0}in{1}", names.empty() ? "" : ", ", k);
    casts +=
        llvm::formatv("{0}(const {1} *)args[{2}]", arg ? ", " : "", type, arg);
    ++arg;
  }
  for (auto [k, output] : llvm::enumerate(yield.getValues())) {
    StringRef type = storageCType(elementOf(output));
    if (type.empty())
      return fusion.emitOpError()
             << "writes " << output.getType()
             << ", which code generation cannot store (it stores f32, "
                "f16, bf16, i64, i32 and i1)";
    params += llvm::formatv("{0}{1} *{2}out{3}", params.empty() ? "" : ", ",
                            type, inPlace[k] >= 0 ? "" : "__restrict__ ", k);
    names += llvm::formatv("{0}out{1}", names.empty() ? "" : ", ", k);
    casts += llvm::formatv("{0}({1} *)args[{2}]", arg ? ", " : "", type, arg);
    ++arg;
  }
  // Index arithmetic is 32-bit when every index the kernel forms fits: the
  // host compiler vectorizes 32-bit division by a constant (AVX2 has no
  // 64-bit multiply-high) and a GPU emulates 64-bit division in software.
  // An elementwise block starts at blockIdx.x * tile; a row kernel's
  // partials are indexed by (reduction, row, chunk).
  int64_t largest =
      std::max(reductions.empty() ? kernel.grid * kPointwiseTile : kernel.grid,
               kernel.workspaceBytes / (int64_t)sizeof(double));
  fusion.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (isa<RankedTensorType>(v.getType()))
        largest = std::max(largest, getNumElements(shapeOf(v)));
  });
  for (Value v : block.getArguments())
    largest = std::max(largest, getNumElements(shapeOf(v)));
  std::string indexType =
      llvm::formatv("  typedef {0} gidx;\n",
                    largest + kPointwiseTile < (int64_t(1) << 31) ? "int32_t"
                                                                  : "int64_t")
          .str();
  body = indexType + body;
  for (KernelAlternative &alternative : kernel.alternatives)
    if (!alternative.body.empty())
      alternative.body = indexType + alternative.body;
  auto boundsOf = [](int64_t threads, int64_t blocksPerSm) {
    return blocksPerSm > 0
               ? llvm::formatv("{0}, {1}", threads, blocksPerSm).str()
               : std::to_string(threads);
  };
  std::string bounds = boundsOf(kBlockThreads, kernel.minBlocksPerSm);
  // The GPU times alternatives on operands no step has written yet: a
  // kernel that addresses memory by integers it loads could go out of
  // bounds there.
  if (addressesByLoadedIntegers(fusion))
    kernel.alternatives.clear();
  kernel.key = params + "\n" + body + "\n" + std::to_string(kernel.grid) +
               "\n" + bounds + "\n" + std::to_string(kernel.sharedBytes);
  for (const KernelAlternative &alternative : kernel.alternatives)
    kernel.key +=
        "\nor " + alternative.suffix + " " +
        boundsOf(alternative.blockThreads, alternative.minBlocksPerSm) + " " +
        std::to_string(alternative.sharedBytes) + "\n" + alternative.body;
  bool split = kernel.launches > 1;
  if (split) {
    params += ", void *workspace";
    names += ", workspace";
    casts += llvm::formatv(", args[{0}]", arg);
    ++arg;
  }
  kernel.arguments = arg;
  // The alternatives' entry points exist in the GPU's text, and in a
  // trainer built for the CUDA device on a host CUDA (on the emulated GPU,
  // so that the device's choice among them runs where there is no GPU);
  // the CPU has nothing to choose from. With a body of its own, a split
  // kernel's alternative instantiates it per launch, as the kernel does
  // its own.
  auto guarded = [](const KernelAlternative &alternative, StringRef text) {
    return llvm::formatv(
               "#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA)){0}\n"
               "{1}#endif\n",
               alternative.requires.empty()
                   ? ""
                   : " && defined(" + alternative.requires + ")",
               text)
        .str();
  };
  // An alternative's launcher on the host CUDA's emulated GPU, with its
  // block size.
  auto hostCudaLaunchers = [&](int64_t launch) {
    std::string text;
    for (const KernelAlternative &alternative : kernel.alternatives) {
      std::string entry = kernel.launchName(launch) + alternative.suffix;
      text += hostCudaOnly(
          alternative.requires,
          llvm::formatv("extern \"C\" void gpuc_cpu_{0}(void *const *args) {{\n"
                        "  gpuc::emulatedLaunch({1}LL, {2}, \"{0}\", [&] {{ "
                        "{0}({3}); });\n}\n",
                        entry, kernel.grid, alternative.blockThreads, casts)
              .str());
    }
    return text;
  };
  std::string alternativeBodies;
  for (const KernelAlternative &alternative : kernel.alternatives)
    if (split && !alternative.body.empty())
      alternativeBodies += guarded(
          alternative,
          llvm::formatv("template <int phase>\n__device__ "
                        "__forceinline__ void {0}{1}_body({2}) "
                        "{{\n{3}}\n",
                        name, alternative.suffix, params, alternative.body)
              .str());
  auto alternatives = [&](int64_t launch, StringRef entryBody) {
    std::string text;
    for (const KernelAlternative &alternative : kernel.alternatives) {
      std::string own =
          alternative.body.empty() ? entryBody.str()
          : split ? llvm::formatv("{{ {0}{1}_body<{2}>({3}); }\n", name,
                                  alternative.suffix, launch, names)
                        .str()
                  : "{\n" + alternative.body + "}\n";
      text += guarded(
          alternative,
          llvm::formatv(
              "extern \"C\" __global__ void __launch_bounds__({0}) "
              "{1}{2}({3}) {4}",
              boundsOf(alternative.blockThreads, alternative.minBlocksPerSm),
              kernel.launchName(launch), alternative.suffix, params, own)
              .str());
    }
    return text;
  };
  if (!split) {
    std::string entryBody = "{\n" + body + "}\n";
    kernel.source = llvm::formatv("extern \"C\" __global__ void "
                                  "__launch_bounds__({2}) {0}({1}) {3}",
                                  name, params, bounds, entryBody)
                        .str() +
                    alternatives(0, entryBody);
    kernel.cpuLauncher =
        llvm::formatv("extern \"C\" void gpuc_cpu_{0}(void *const *args) {{\n"
                      "  gpuc::cpuLaunch({1}LL, {3}LL, \"{0}\", [&] {{ "
                      "{0}({2}); });\n}\n",
                      name, cpuGrid ? cpuGrid : kernel.grid, casts, kernel.grid)
            .str() +
        hostCudaLaunchers(0);
    return kernel;
  }
  // One body, instantiated per launch.
  kernel.source = llvm::formatv("template <int phase>\n__device__ "
                                "__forceinline__ void {0}_body({1}) {{\n{2}}\n",
                                name, params, body)
                      .str() +
                  alternativeBodies;
  for (int64_t phase = 0; phase < kernel.launches; ++phase) {
    std::string launch = kernel.launchName(phase);
    std::string entryBody =
        llvm::formatv("{{ {0}_body<{1}>({2}); }\n", name, phase, names).str();
    kernel.source += llvm::formatv("extern \"C\" __global__ void "
                                   "__launch_bounds__({2}) {0}({1}) {3}",
                                   launch, params, bounds, entryBody)
                         .str() +
                     alternatives(phase, entryBody);
    kernel.cpuLauncher +=
        llvm::formatv("extern \"C\" void gpuc_cpu_{0}(void *const *args) {{\n"
                      "  gpuc::cpuLaunch({1}LL, {3}LL, \"{0}\", [&] {{ "
                      "{0}({2}); });\n}\n",
                      launch, cpuGrid ? cpuGrid : kernel.grid, casts,
                      kernel.grid)
            .str() +
        hostCudaLaunchers(phase);
  }
  return kernel;
}

} // namespace mlir::gpuc::kernel_emitter

std::string mlir::gpuc::hostCudaOnly(StringRef macro, StringRef text) {
  return ("#if defined(GPUC_HOST_CUDA)" +
          (macro.empty() ? "" : " && defined(" + macro + ")") + "\n" + text +
          "#endif\n")
      .str();
}

using mlir::gpuc::kernel_emitter::Emitter;

FailureOr<EmittedKernel> mlir::gpuc::emitKernel(FusionOp fusion,
                                                StringRef name) {
  return Emitter(fusion).run(name);
}

int64_t mlir::gpuc::rowKernelSplits(int64_t rows, int64_t rowLength,
                                    int64_t minChunk) {
  rows = std::max<int64_t>(rows, 1);
  if (rows >= kRowKernelBlocks)
    return 1;
  int64_t wanted = (kRowKernelBlocks + rows - 1) / rows;
  return std::max<int64_t>(1, std::min(wanted, rowLength / minChunk));
}

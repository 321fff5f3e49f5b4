//===- AttentionKernel.cpp - the fused attention kernels ------------------===//
//
// A gpuc.attention (or gpuc.attention_grad) left by the flash lowering is a
// kernel of its own: its body fills a gpuc::AttentionGeometry with the
// op's shapes, layout and score rules and calls the device header's
// functions (runtime/include/gpuc/runtime/device/Attention.h), which hold
// the algorithm for both targets.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

namespace mlir::gpuc::kernel_emitter {

namespace {
/// The widest row the fused kernels keep in registers: a thread holds a
/// query row, its gradient or a key row, and the value width's sums.
constexpr int64_t kMaxAttentionWidth = 256;

/// The strides of an operand as stored ([B, H, T, D], or [B, T, H, D]
/// under bthd, or such a tensor read as a row window of a wider one) as
/// the geometry names them (batch, head, row).
std::string rowStrides(StringRef field, Value v, bool bthd) {
  std::optional<AttentionRowWindow> window = attentionRowWindow(v);
  std::array<int64_t, 3> s =
      window ? window->strides() : attentionStrides(v, bthd);
  return llvm::formatv("g.{0}[0] = {1}LL; g.{0}[1] = {2}LL; g.{0}[2] = {3}LL;",
                       field, s[0], s[1], s[2])
      .str();
}
/// The concat a bthd attention gradient's kernel yields, holding its three
/// gradients as row windows (none: it yields the three).
ConcatOp gradientConcat(Operation *op, YieldOp yield) {
  auto grad = dyn_cast<AttentionGradOp>(op);
  if (!grad || !grad.getBthd() || yield.getValues().size() != 1)
    return {};
  ConcatOp joined = joinedAttentionGradients(grad->getResults());
  return joined && joined.getResult() == yield.getValues()[0] ? joined
                                                              : ConcatOp();
}

/// Whether the device header runs attention over `operand` with query/key
/// width `d` and value width `dv` on tensor cores
/// (attentionOnTensorCores: 16-bit operands, widths multiples of 16 up to
/// 128), on a GPU that has them.
bool onTensorCores(Type operand, int64_t d, int64_t dv) {
  return (operand.isF16() || operand.isBF16()) && d % 16 == 0 && dv % 16 == 0 &&
         d <= 128 && dv <= 128;
}

/// Whether cuDNN's fused attention may stand in for the module's fused
/// attention kernels (gpuc compile --attention-library): never, wherever
/// it agrees with them at load, or where it also is the faster.
enum class CudnnAttentionChoice { None, Agrees, Faster };

CudnnAttentionChoice cudnnAttentionChoice(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  IntegerAttr attr = module ? module->getAttrOfType<IntegerAttr>(
                                  GpucDialect::kAttentionCudnnAttrName)
                            : IntegerAttr();
  if (!attr)
    return CudnnAttentionChoice::None;
  return attr.getInt() == 2 ? CudnnAttentionChoice::Faster
                            : CudnnAttentionChoice::Agrees;
}

/// Where `v`, read by a fused attention kernel, lies among its arguments:
/// a block argument, or a row window of one; none otherwise.
std::optional<CudnnAttentionCall::Operand> cudnnOperandOf(StringRef name,
                                                          Value v, bool bthd) {
  CudnnAttentionCall::Operand operand;
  operand.name = name.str();
  if (std::optional<AttentionRowWindow> window = attentionRowWindow(v)) {
    auto arg = dyn_cast<BlockArgument>(window->stored);
    if (!arg)
      return std::nullopt;
    operand.arg = arg.getArgNumber();
    operand.offset = window->offset;
    operand.strides = window->strides();
    return operand;
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return std::nullopt;
  operand.arg = arg.getArgNumber();
  operand.strides = attentionStrides(v, bthd);
  return operand;
}

/// What cuDNN's fused attention needs to stand in for `o` (an
/// attention or its gradient, alone in its kernel): 16-bit operands, no
/// dropout, no mask or a causal one (a query sees the keys up to its own,
/// the others weigh nothing), rows of whole 16-byte pieces. None where it
/// cannot; cuDNN itself may still refuse the shapes at load.
template <typename Op>
std::optional<CudnnAttentionCall>
cudnnAttentionOf(Op o, bool bthd, int64_t inputs, ConcatOp joined,
                 CudnnAttentionChoice choice) {
  Type element = elementOf(o.getQuery());
  if (!(element.isBF16() || element.isF16()) ||
      elementOf(o.getKey()) != element || elementOf(o.getValue()) != element)
    return std::nullopt;
  if (o.getRngKey() || o.getDropout().convertToDouble() != 0.0)
    return std::nullopt;
  CudnnAttentionCall call;
  call.timed = choice == CudnnAttentionChoice::Faster;
  call.backward = isa<AttentionGradOp>(o.getOperation());
  call.dtype = element.isBF16() ? "BF16" : "F16";
  SmallVector<int64_t, 4> q = attentionShape(o.getQuery(), bthd),
                          k = attentionShape(o.getKey(), bthd),
                          v = attentionShape(o.getValue(), bthd);
  call.batch = q[0];
  call.heads = q[1];
  call.keyHeads = k[1];
  call.queries = q[2];
  call.keys = k[2];
  call.width = q[3];
  call.valueWidth = v[3];
  call.scale = o.getScale().convertToDouble();
  // A mask that is read (a padding mask, beside a triangle or not) is not
  // the causal rule cuDNN is given.
  if (o.getMask())
    return std::nullopt;
  if (o.getMaskTriangle()) {
    // The mask's bits are a comparison of key with query: causal where it
    // excludes key > query (or keeps key <= query), and the fill weighs
    // an excluded score nothing: -inf, or a fill of -1e4 or less, whose
    // weight beside a row's kept scores (the query's own key among them)
    // is exp(-1e4 - max), a float's 0 unless every kept score is below
    // -9,900.
    std::optional<ComparePredicate> triangle = o.getMaskTriangle();
    bool keeps = o.getMaskKeeps();
    call.causal = triangle && ((!keeps && *triangle == ComparePredicate::gt) ||
                               (keeps && *triangle == ComparePredicate::le));
    if (!call.causal || o.getFill().convertToDouble() > -1e4)
      return std::nullopt;
  }
  auto add = [&](StringRef name, Value value) {
    std::optional<CudnnAttentionCall::Operand> operand =
        cudnnOperandOf(name, value, bthd);
    if (operand)
      call.operands.push_back(*operand);
    return operand.has_value();
  };
  auto output = [&](StringRef name, int64_t index,
                    std::array<int64_t, 3> strides, int64_t offset = 0) {
    call.operands.push_back({name.str(), inputs + index, offset, strides});
  };
  std::array<int64_t, 3> lseStrides = {q[1] * q[2], q[2], 1};
  if (!add("q", o.getQuery()) || !add("k", o.getKey()) ||
      !add("v", o.getValue()))
    return std::nullopt;
  if (auto grad = dyn_cast<AttentionGradOp>(o.getOperation())) {
    if (!add("out", grad.getResult()) || !add("lse", grad.getLogsumexp()) ||
        !add("d_out", grad.getResultGrad()))
      return std::nullopt;
    // The kernels read the output's gradient in the output's layout (as
    // stored, it may be typed by its rows), and the logsumexps a row each
    // from the first.
    call.operands[5].strides = call.operands[3].strides;
    call.operands[4].strides = lseStrides;
    if (call.operands[4].offset)
      return std::nullopt;
    for (auto [i, name, result] : llvm::enumerate(
             std::array<StringRef, 3>{"dq", "dk", "dv"}, grad->getResults())) {
      if (!joined) {
        output(name, i, attentionStrides(result, bthd));
        continue;
      }
      AttentionRowWindow window = *attentionGradientWindow(result);
      output(name, 0, window.strides(), window.offset);
    }
  } else {
    auto attention = cast<AttentionOp>(o.getOperation());
    output("out", 0, attentionStrides(attention.getResult(), bthd));
    output("lse", 1, lseStrides);
  }
  // cuDNN reads and writes 16-byte pieces of a row.
  for (const CudnnAttentionCall::Operand &operand : call.operands)
    if (operand.name != "lse" &&
        (operand.offset % 8 ||
         llvm::any_of(operand.strides, [](int64_t s) { return s % 8 != 0; })))
      return std::nullopt;
  if (call.width % 8 || call.valueWidth % 8)
    return std::nullopt;
  return call;
}

/// The attention's kernel in blocks of 4 warps (128 threads) on tensor
/// cores, with `body`: the same rows in twice the passes.
KernelAlternative quarterBlocks(std::string body) {
  KernelAlternative quarter;
  quarter.suffix = "_w4";
  quarter.blockThreads = 128;
  quarter.body = std::move(body);
  quarter.requires = "GPUC_HAVE_MMA";
  return quarter;
}
} // namespace

FailureOr<EmittedKernel> Emitter::emitAttention(Operation *op, StringRef name) {
  Block &block = fusion.getBodyBlock();
  auto yield = cast<YieldOp>(block.getTerminator());
  // Besides the op, only the views that cut its [B, T, H, D] operands out
  // of stored tensors (row windows, read in place).
  bool bthd = isa<AttentionOp>(op) ? cast<AttentionOp>(op).getBthd()
                                   : cast<AttentionGradOp>(op).getBthd();
  // Or, for a gradient, the concat it stores its three results in as row
  // windows (gpuc-form-kernels: a fused projection's gradient).
  ConcatOp joined = gradientConcat(op, yield);
  bool alone = (joined || llvm::equal(yield.getValues(), op->getResults())) &&
               llvm::all_of(block.without_terminator(), [&](Operation &other) {
                 return &other == op ||
                        (bthd && isa<SliceOp, ReshapeOp>(other)) ||
                        (joined && &other == joined.getOperation());
               });
  if (!alone)
    return fusion.emitOpError()
           << "holds " << op->getName()
           << " with other work; it must be a kernel of its own";
  if (llvm::any_of(inPlace, [](int64_t k) { return k >= 0; }))
    return fusion.emitOpError()
           << op->getName() << " cannot write over its operands";
  // Every operand is read from the kernel's inputs: a row window at its
  // offset into the stored rows.
  auto input = [&](Value v) -> FailureOr<std::string> {
    if (std::optional<AttentionRowWindow> window = attentionRowWindow(v))
      if (auto arg = dyn_cast<BlockArgument>(window->stored))
        return llvm::formatv("in{0} + {1}", arg.getArgNumber(), window->offset)
            .str();
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return fusion.emitOpError()
             << "computes an operand of " << op->getName()
             << " inside its kernel; the fused kernel reads stored operands";
    return "in" + std::to_string(arg.getArgNumber());
  };
  auto attention = dyn_cast<AttentionOp>(op);
  auto grad = dyn_cast<AttentionGradOp>(op);
  auto common = [&](auto o) -> LogicalResult {
    bool bthd = o.getBthd();
    SmallVector<int64_t, 4> q = attentionShape(o.getQuery(), bthd),
                            k = attentionShape(o.getKey(), bthd),
                            v = attentionShape(o.getValue(), bthd);
    if (q[3] > kMaxAttentionWidth || v[3] > kMaxAttentionWidth)
      return fusion.emitOpError()
             << "the fused attention kernel keeps rows of at most "
             << kMaxAttentionWidth << " elements in registers; this one has "
             << q[3] << " and " << v[3] << " (compile with --attention gemm)";
    int64_t weightCount = q[0] * q[1] * q[2] * k[2];
    line("gpuc::AttentionGeometry g;");
    line(llvm::formatv(
        "g.heads = {0}; g.queries = {1}; g.keys = {2}; g.groups = {3};", q[1],
        q[2], k[2], q[1] / k[1]));
    line(rowStrides("q", o.getQuery(), bthd));
    line(rowStrides("k", o.getKey(), bthd));
    line(rowStrides("v", o.getValue(), bthd));
    line(rowStrides("out", o.getResult(), bthd));
    Type f32 = Float32Type::get(op->getContext());
    line(llvm::formatv("g.scale = {0}; g.fill = {1};",
                       literal(o.getScale().convertToDouble(), f32),
                       literal(o.getFill().convertToDouble(), f32)));
    if (Value mask = o.getMask()) {
      FailureOr<std::string> in = input(mask);
      if (failed(in))
        return failure();
      ArrayRef<int64_t> m = shapeOf(mask);
      SmallVector<int64_t> strides = stridesOf(m);
      for (int d = 0; d < 4; ++d)
        if (m[d] == 1)
          strides[d] = 0;
      line(llvm::formatv("g.mask = {0}; g.maskKeeps = {1}; g.triangle = {2};",
                         *in, o.getMaskKeeps() ? "true" : "false",
                         o.getMaskTriangle() ? 1 + (int)*o.getMaskTriangle()
                                             : 0));
      line(llvm::formatv("g.maskStrides[0] = {0}LL; g.maskStrides[1] = {1}LL; "
                         "g.maskStrides[2] = {2}LL; g.maskStrides[3] = {3}LL;",
                         strides[0], strides[1], strides[2], strides[3]));
    } else if (std::optional<ComparePredicate> triangle = o.getMaskTriangle()) {
      // A mask the flash lowering knew for a comparison of indices.
      line(llvm::formatv("g.mask = nullptr; g.maskKeeps = {0}; g.triangle = "
                         "{1};",
                         o.getMaskKeeps() ? "true" : "false",
                         1 + (int)*triangle));
      line("g.maskStrides[0] = g.maskStrides[1] = g.maskStrides[2] = "
           "g.maskStrides[3] = 0;");
    } else {
      line("g.mask = nullptr; g.maskKeeps = false; g.triangle = 0;");
    }
    double ratio = o.getDropout().convertToDouble();
    if (Value key = o.getRngKey()) {
      FailureOr<std::string> in = input(key);
      if (failed(in))
        return failure();
      line(llvm::formatv("g.dropout = {0}; g.keepScale = {1};",
                         literal(ratio, f32),
                         literal(1.0 / (1.0 - ratio), f32)));
      line(llvm::formatv("g.seed = (unsigned long long){0}[0]; g.step = "
                         "(unsigned long long){0}[1]; g.stream = {1}ULL; "
                         "g.weights = {2}ULL;",
                         *in, o.getStream(), weightCount));
    } else {
      line("g.dropout = 0.0f; g.keepScale = 1.0f; g.seed = 0; g.step = 0; "
           "g.stream = 0; g.weights = 0;");
    }
    return success();
  };
  auto inputs = [&](ArrayRef<Value> values) -> FailureOr<std::string> {
    std::string list;
    for (Value v : values) {
      FailureOr<std::string> in = input(v);
      if (failed(in))
        return failure();
      list += *in + ", ";
    }
    return list;
  };

  EmittedKernel kernel;
  kernel.name = name.str();
  CudnnAttentionChoice cudnn = cudnnAttentionChoice(fusion);
  if (attention) {
    if (failed(common(attention)))
      return failure();
    FailureOr<std::string> ins = inputs(
        {attention.getQuery(), attention.getKey(), attention.getValue()});
    if (failed(ins))
      return failure();
    SmallVector<int64_t, 4> q = attentionShape(attention.getQuery(), bthd),
                            v = attentionShape(attention.getValue(), bthd);
    kernel.grid =
        q[0] * q[1] *
        ((std::max(q[2], attentionShape(attention.getKey(), bthd)[2]) +
          kBlockThreads - 1) /
         kBlockThreads);
    // A warp's rows on tensor cores: 16, or 32 (two m-tiles) when the
    // module asks.
    IntegerAttr rowsPerWarp;
    if (auto module = fusion->getParentOfType<ModuleOp>())
      rowsPerWarp = module->getAttrOfType<IntegerAttr>(
          GpucDialect::kAttentionRowsPerWarpAttrName);
    int64_t tiles = rowsPerWarp ? rowsPerWarp.getInt() / 16 : 1;
    if (cudnn != CudnnAttentionChoice::None)
      kernel.cudnnAttention = cudnnAttentionOf(
          attention, bthd, fusion.getInputs().size(), {}, cudnn);
    // (Template arguments past the last that differs from its default
    // are left out.)
    auto call = [&](int64_t warps, int64_t tiles) {
      std::string templateArgs =
          std::to_string(q[3]) + ", " + std::to_string(v[3]);
      if (tiles > 1 || warps != kBlockThreads / 32)
        templateArgs += ", " + std::to_string(tiles);
      if (warps != kBlockThreads / 32)
        templateArgs += ", " + std::to_string(warps);
      return llvm::formatv("  gpuc::attentionForward<{0}>({1}g, out0, out1);\n",
                           templateArgs, *ins)
          .str();
    };
    std::string prologue = body;
    body += call(kBlockThreads / 32, tiles);
    // Only the forward may ask for more than one block an SM: the
    // backward's launches hold 190 to 250 registers a thread, and capped
    // at 128 they would spill much of their state. Unless the module says
    // how many, the forward comes both ways (one block an SM and up to
    // 255 registers a thread, or two and 128) and the GPU times both: a
    // warp's 32 rows need more than 128.
    IntegerAttr blocks;
    if (auto module = fusion->getParentOfType<ModuleOp>())
      blocks = module->getAttrOfType<IntegerAttr>(
          GpucDialect::kAttentionBlocksPerSmAttrName);
    if (blocks && blocks.getInt() > 1)
      kernel.minBlocksPerSm = blocks.getInt();
    else if (!blocks && tiles == 1)
      kernel.alternatives.push_back(KernelAlternative::bounded(2));
    // On tensor cores the forward also comes in blocks of 4 warps, which
    // take the same rows in twice the passes (the same bits): an SM holds
    // two or three, each waiting at its own barriers where one block of 8
    // waits for all 8 (attentionForwardMma).
    bool mma = onTensorCores(elementOf(attention.getQuery()), q[3], v[3]);
    if (!blocks && mma)
      kernel.alternatives.push_back(quarterBlocks(prologue + call(4, tiles)));
    // And, unless the module says how many rows a warp owns, with 32 (two
    // m-tiles sharing each fragment of keys they load: fewer loads and
    // barriers a product, more registers a thread, so fewer warps to hide
    // the products' latency): which is faster depends on the GPU and the
    // shapes, so the GPU times both, in both block sizes, at one block an
    // SM (32 rows take more than the 128 registers of two). The same bits:
    // each row's sums run in the same order either way.
    if (!rowsPerWarp && !blocks && mma) {
      KernelAlternative wide;
      wide.suffix = "_r32";
      wide.body = prologue + call(kBlockThreads / 32, 2);
      wide.requires = "GPUC_HAVE_MMA";
      kernel.alternatives.push_back(std::move(wide));
      KernelAlternative wideQuarter = quarterBlocks(prologue + call(4, 2));
      wideQuarter.suffix = "_w4r32";
      kernel.alternatives.push_back(std::move(wideQuarter));
    }
    return assemble(name, std::move(kernel), /*cpuGrid=*/0, {});
  }
  if (failed(common(grad)))
    return failure();
  // Where each gradient is stored: its own output, or its row window of
  // the concat the kernel yields.
  std::string gradOut[3];
  for (auto [i, field, result] : llvm::enumerate(
           std::array<StringRef, 3>{"dq", "dk", "dv"}, grad->getResults())) {
    if (!joined) {
      line(rowStrides(field, result, bthd));
      gradOut[i] = "out" + std::to_string(i);
      continue;
    }
    AttentionRowWindow window = *attentionGradientWindow(result);
    std::array<int64_t, 3> s = window.strides();
    line(llvm::formatv("g.{0}[0] = {1}LL; g.{0}[1] = {2}LL; g.{0}[2] = {3}LL;",
                       field, s[0], s[1], s[2]));
    gradOut[i] = llvm::formatv("out0 + {0}", window.offset).str();
  }
  FailureOr<std::string> ins =
      inputs({grad.getQuery(), grad.getKey(), grad.getValue()});
  FailureOr<std::string> out = input(grad.getResult());
  FailureOr<std::string> lse = input(grad.getLogsumexp());
  FailureOr<std::string> dOut = input(grad.getResultGrad());
  if (failed(ins) || failed(out) || failed(lse) || failed(dOut))
    return failure();
  SmallVector<int64_t, 4> q = attentionShape(grad.getQuery(), bthd),
                          v = attentionShape(grad.getValue(), bthd);
  kernel.grid = q[0] * q[1] *
                ((std::max(q[2], attentionShape(grad.getKey(), bthd)[2]) +
                  kBlockThreads - 1) /
                 kBlockThreads);
  if (cudnn != CudnnAttentionChoice::None)
    kernel.cudnnAttention =
        cudnnAttentionOf(grad, bthd, fusion.getInputs().size(), joined, cudnn);
  // Phase 0 leaves each query row's dot(dO, O) in the workspace for
  // phase 1.
  kernel.launches = 2;
  kernel.workspaceBytes = q[0] * q[1] * q[2] * (int64_t)sizeof(float);
  line("float *rowDots = (float *)workspace;");
  bool storedScores = false;
  if (auto module = fusion->getParentOfType<ModuleOp>())
    storedScores =
        module->hasAttr(GpucDialect::kAttentionStoredScoreGradientsAttrName);
  // Where the backward runs on tensor cores (elsewhere it has nothing to
  // store), over an even number of queries (a lane stores its two adjacent
  // queries' in one word).
  if (storedScores && onTensorCores(elementOf(grad.getQuery()), q[3], v[3]) &&
      q[2] % 2 == 0) {
    // A third launch: the keys' launch stores every score gradient (16
    // bits, [B, H, keys, queries] after the row dots, and a pass's rows
    // more, which the last tile of queries stages past the end), and the
    // last launch multiplies them by the keys (Attention.h's
    // attentionBackwardStored). That launch stages its tiles of them in
    // dynamic shared memory: 2 buffers of a tile of keys (64, or 32 past
    // 64 wide) by a pass's 128 queries, rows 8 apart.
    int64_t keys = attentionShape(grad.getKey(), bthd)[2];
    int64_t keyTile = q[3] <= 64 && v[3] <= 64 ? 64 : 32;
    constexpr int64_t kPassRows = 128;
    int64_t dotsBytes = llvm::alignTo(kernel.workspaceBytes, 16);
    kernel.launches = 3;
    kernel.workspaceBytes =
        dotsBytes + (q[0] * q[1] * keys * q[2] + kPassRows) * 2;
    kernel.sharedBytes = 2 * keyTile * (kPassRows + 8) * 2;
    line("#ifdef GPUC_HAVE_MMA");
    line(llvm::formatv("static_assert(gpuc::attentionStoredScoreSharedBytes<"
                       "{0}, {1}>() == {2}, \"the launch's shared memory\");",
                       q[3], v[3], kernel.sharedBytes));
    line("#endif");
    line(llvm::formatv("gpuc::attentionBackwardStored<{0}, {1}>(phase, "
                       "{2}{3}, {4}, {5}, g, {6}, {7}, {8}, rowDots, "
                       "(unsigned short *)((char *)workspace + {9}));",
                       q[3], v[3], *ins, *out, *lse, *dOut, gradOut[0],
                       gradOut[1], gradOut[2], dotsBytes));
    return assemble(name, std::move(kernel), /*cpuGrid=*/0, {});
  }
  auto launches = [&](int64_t warps) {
    std::string templateArgs =
        std::to_string(q[3]) + ", " + std::to_string(v[3]) +
        (warps != kBlockThreads / 32 ? ", " + std::to_string(warps) : "");
    return llvm::formatv(
               "  if (phase == 0)\n"
               "    gpuc::attentionBackwardQueries<{0}>({1}{2}, {3}, {4}, g, "
               "{5}, rowDots);\n"
               "  else\n"
               "    gpuc::attentionBackwardKeys<{0}>({1}{3}, {4}, g, rowDots, "
               "{6}, {7});\n",
               templateArgs, *ins, *out, *lse, *dOut, gradOut[0], gradOut[1],
               gradOut[2])
        .str();
  };
  std::string prologue = body;
  body += launches(kBlockThreads / 32);
  // Blocks of 4 warps, as the forward's (the same bits): two an SM, at the
  // launches' 190 and 250 registers a thread.
  if (onTensorCores(elementOf(grad.getQuery()), q[3], v[3]))
    kernel.alternatives.push_back(quarterBlocks(prologue + launches(4)));
  return assemble(name, std::move(kernel), /*cpuGrid=*/0, {});
}

} // namespace mlir::gpuc::kernel_emitter

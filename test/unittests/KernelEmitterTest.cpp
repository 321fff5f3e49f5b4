//===- KernelEmitterTest.cpp - kernels that write over their inputs -------===//
//
// A kernel whose result overwrites an operand (gpuc.in_place) must read that
// operand at an index before storing anything there, and only the aliasing
// pointers lose __restrict__.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/InitAll.h"
#include "gpuc/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <tuple>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

// Result #0 (a + b) overwrites operand #1 (%b), which result #1 (b * 2)
// still reads: unless %b is loaded before out0 is stored, result #1 would
// read the new value.
constexpr const char *kKernel = R"mlir(
func.func @f(%a: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %r:2 = gpuc.fusion(%a, %b) {gpuc.in_place = array<i64: 1, -1>} : (tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  ^bb0(%x: tensor<16xf32>, %y: tensor<16xf32>):
    %s = gpuc.add %x, %x : tensor<16xf32>
    %t = gpuc.mul %y, %y : tensor<16xf32>
    gpuc.yield %s, %t : tensor<16xf32>, tensor<16xf32>
  }
  return %r#0, %r#1 : tensor<16xf32>, tensor<16xf32>
}
)mlir";

TEST(KernelEmitterTest, InPlaceOperandIsLoadedBeforeTheFirstStore) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kKernel, &context);
  ASSERT_TRUE(module);
  FusionOp fusion;
  module->walk([&](FusionOp op) { fusion = op; });
  FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t load = src.find("in1[i]"), store = src.find("out0[i] =");
  ASSERT_NE(load, std::string::npos) << src;
  ASSERT_NE(store, std::string::npos) << src;
  EXPECT_LT(load, store) << src;
  // Exactly the aliasing pair drops __restrict__.
  EXPECT_NE(src.find("const float *__restrict__ in0"), std::string::npos)
      << src;
  EXPECT_NE(src.find("const float *in1"), std::string::npos) << src;
  EXPECT_NE(src.find("float *out0"), std::string::npos) << src;
  EXPECT_EQ(src.find("float *__restrict__ out0"), std::string::npos) << src;
  EXPECT_NE(src.find("float *__restrict__ out1"), std::string::npos) << src;
}

// The kernel of the first fusion in `source`.
FailureOr<EmittedKernel> emitFirstFusion(const std::string &source) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  FusionOp fusion;
  if (module)
    module->walk([&](FusionOp op) { fusion = op; });
  if (!fusion)
    return failure();
  return emitKernel(fusion, "k");
}

// A kernel's text up to its entry points under other bounds (the GPU's
// alternatives, which repeat its body).
std::string withoutAlternatives(const std::string &source) {
  return source.substr(
      0, source.find("#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA))"));
}

// An elementwise kernel over `n` elements (a type only: nothing is
// allocated).
std::string elementwise(int64_t n) {
  std::string t = "tensor<" + std::to_string(n) + "xf32>";
  return "func.func @f(%a: " + t + ") -> " + t +
         " {\n  %r = gpuc.fusion(%a) : (" + t + ") -> " + t +
         " {\n  ^bb0(%x: " + t + "):\n    %s = gpuc.add %x, %x : " + t +
         "\n    gpuc.yield %s : " + t + "\n  }\n  return %r : " + t + "\n}\n";
}

// Index arithmetic is 32-bit while every index fits, 64-bit beyond; the
// elementwise loop is marked independent for the host compiler either way.
TEST(KernelEmitterTest, IndexWidthFollowsTheLargestIndex) {
  int64_t limit = (int64_t(1) << 31) - kPointwiseTile;
  for (int64_t n : {int64_t(4096), limit - 1, limit, int64_t(3) << 31}) {
    FailureOr<EmittedKernel> kernel = emitFirstFusion(elementwise(n));
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    // The grid's last tile may reach past n by up to one tile.
    bool narrow = (kernel->grid + 1) * kPointwiseTile < (int64_t(1) << 31);
    EXPECT_NE(
        src.find(narrow ? "typedef int32_t gidx;" : "typedef int64_t gidx;"),
        std::string::npos)
        << n << "\n"
        << src;
    EXPECT_NE(src.find("GPUC_INDEPENDENT_ITERATIONS\n"), std::string::npos)
        << src;
    EXPECT_NE(src.find("for (gidx i = begin"), std::string::npos) << src;
  }
}

} // namespace

// A row kernel over `rows` rows (columns of a [65536, rows] tensor) of
// 65,536: the per-row sum plus an operand of one value per row (%b), and the
// centred row.
static std::string rowKernel(int rows, const std::string &element = "f32",
                             int64_t length = 65536) {
  std::string r = std::to_string(rows),
              t = "tensor<" + std::to_string(length) + "x" + r + "x" + element +
                  ">",
              v = "tensor<" + r + "x" + element + ">";
  return "func.func @f(%a: " + t + ", %b: " + v + ") -> (" + v + ", " + t +
         ") {\n  %r:2 = gpuc.fusion(%a, %b) : (" + t + ", " + v + ") -> (" + v +
         ", " + t + ") {\n  ^bb0(%x: " + t + ", %y: " + v +
         "):\n    %s = gpuc.reduce_sum %x axes = [0] : " + t + " -> " + v +
         "\n    %p = gpuc.add %s, %y : " + v +
         "\n    %m = gpuc.broadcast %s : " + v + " -> " + t +
         "\n    %c = gpuc.sub %x, %m : " + t +
         "\n    gpuc.yield %p, %c : " + v + ", " + t +
         "\n  }\n  return %r#0, %r#1 : " + v + ", " + t + "\n}\n";
}

// A CPU column block's lanes keep their accumulators (a double per lane and
// sum) in 12 KiB: six column sums over 2,048 columns take 256 lanes, seven
// take 128.
TEST(KernelEmitterTest, ManyColumnSumsTakeFewerLanes) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  for (auto [sums, lanes] : {std::pair{6, 256}, std::pair{7, 128}}) {
    std::string t = "tensor<65536x2048xf32>", v = "tensor<2048xf32>";
    std::string body, yields, types;
    std::string power = "%x";
    for (int i = 0; i < sums; ++i) {
      if (i > 0) {
        body += "    %p" + std::to_string(i) + " = gpuc.mul " + power +
                ", %x : " + t + "\n";
        power = "%p" + std::to_string(i);
      }
      body += "    %s" + std::to_string(i) + " = gpuc.reduce_sum " + power +
              " axes = [0] : " + t + " -> " + v + "\n";
      yields += (i ? ", %s" : "%s") + std::to_string(i);
      types += (i ? ", " : "") + v;
    }
    // The function returns the first sum; the others are the fusion's
    // results all the same.
    std::string text = "func.func @f(%a: " + t + ") -> " + v +
                       " {\n  %r:" + std::to_string(sums) +
                       " = gpuc.fusion(%a) : (" + t + ") -> (" + types +
                       ") {\n  ^bb0(%x: " + t + "):\n" + body +
                       "    gpuc.yield " + yields + " : " + types +
                       "\n  }\n  return %r#0 : " + v + "\n}\n";
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    ASSERT_TRUE(module) << text;
    FusionOp fusion;
    module->walk([&](FusionOp op) { fusion = op; });
    FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
    ASSERT_TRUE(succeeded(kernel));
    int64_t splits = rowKernelSplits(2048 / 256, 65536, columnChunkMin(256));
    EXPECT_NE(kernel->source.find(llvm::formatv("const gidx oGroup = "
                                                "(gidx)(blockIdx.x / {0}) "
                                                "* {1};",
                                                splits, lanes)
                                      .str()),
              std::string::npos)
        << sums << " sums\n"
        << kernel->source;
  }
}

TEST(KernelEmitterTest, FewLongRowsAreSplitAcrossBlocks) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  for (int rows : {4, 2048}) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(rowKernel(rows), &context);
    ASSERT_TRUE(module);
    FusionOp fusion;
    module->walk([&](FusionOp op) { fusion = op; });
    FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    // Where the per-row result overwrites its operand (%b, which the
    // centred rows' launch reads in every chunk), it is written in a
    // launch of its own after that one.
    fusion->setAttr("gpuc.in_place", DenseI64ArrayAttr::get(&context, {1, -1}));
    FailureOr<EmittedKernel> overwriting = emitKernel(fusion, "k");
    ASSERT_TRUE(succeeded(overwriting));
    EXPECT_EQ(overwriting->launches, kernel->launches + 1);
    if (rows == 2048) {
      // Rows that are adjacent elements run in columns, 256 rows a GPU
      // block (a block's loads at an element are a kilobyte of one row),
      // and their 8 groups split into 128 chunks of 512 to give a GPU
      // 1,024 blocks: one launch reduces, one combines each row's chunks,
      // one writes the centred rows and (from each row's first chunk) the
      // per-row values. The per-row operand may still be overwritten by
      // the per-row result.
      EXPECT_EQ(gpuColumnLanes(2048, /*sixteenBitRows=*/false), 256);
      EXPECT_EQ(rowKernelSplits(rows / 256, 65536, columnChunkMin(256)), 128);
      EXPECT_EQ(kernel->grid, 2048 / 256 * 128);
      EXPECT_EQ(kernel->launches, 3);
      EXPECT_EQ(kernel->workspaceBytes, 2048 * (128 + 1) * 8);
      EXPECT_TRUE(canOverwrite(fusion, 1, 0));
      // The GPU's column: one slice, one partial per chunk, combined once
      // (by a warp a row) into the totals the later launches read; the
      // per-row value from the first chunk.
      EXPECT_NE(src.find("const gidx o = (gidx)(blockIdx.x / 128) * 256 + "
                         "gpuc::columnLane<256>();"),
                std::string::npos)
          << src;
      // A thread's elements: a batch of them, a slice's stride apart.
      EXPECT_NE(src.find(" * (gidx)gpuc::columnSlices<256>())"),
                std::string::npos)
          << src;
      EXPECT_NE(src.find("gpuc::columnReduceSum<256>("), std::string::npos)
          << src;
      EXPECT_NE(src.find("if (gpuc::columnSlice<256>() == 0) partials[(0 + "
                         "o) * 128 + part] = acc"),
                std::string::npos)
          << src;
      EXPECT_NE(src.find("else if (phase == 1) {\n    "
                         "gpuc::combineColumnPartials<false>(partials + 0, "
                         "totals + 0, 2048, 128);\n    return;"),
                std::string::npos)
          << src;
      EXPECT_TRUE(std::regex_search(
          src, std::regex(R"(if \(phase > 1\) \{\n *acc[0-9]+ = )"
                          R"(\(double\)totals\[0 \+ o\];)")))
          << src;
      EXPECT_NE(src.find("if (phase == 2 && part == 0 && "
                         "gpuc::columnSlice<256>() == 0)"),
                std::string::npos)
          << src;
      EXPECT_EQ(src.find("part != 0) return;"), std::string::npos) << src;
      EXPECT_NE(overwriting->source.find("if (phase == 3 && part != 0) "
                                         "return;"),
                std::string::npos)
          << overwriting->source;
      // The CPU's: each lane's row has its own partial, and the CPU's
      // totals are the same launch's. A block takes 256 rows (a kilobyte
      // of each row it reads, 1,024 blocks), and fetches the next rows'
      // runs 4 rows ahead.
      EXPECT_NE(src.find("const gidx oGroup = (gidx)(blockIdx.x / 128) * 256;"),
                std::string::npos)
          << src;
      EXPECT_NE(src.find("acc0Lanes[lane] = (gpuc::Accumulator)totals[0 + "
                         "o];"),
                std::string::npos)
          << src;
      EXPECT_NE(src.find("Lanes[lane];"), std::string::npos) << src;
      EXPECT_NE(src.find("if (r + 4 < rowEnd) {"), std::string::npos) << src;
      EXPECT_NE(src.find("for (int at = 0; at < 256; at += 16) "
                         "__builtin_prefetch(&in0["),
                std::string::npos)
          << src;
      EXPECT_NE(kernel->cpuLauncher.find("cpuLaunch(1024LL, 1024LL"),
                std::string::npos)
          << kernel->cpuLauncher;
      continue;
    }
    int64_t splits = rowKernelSplits(rows, 65536);
    // 4 rows: 16 chunks of 4,096 per row (kRowChunkMin bounds the split).
    EXPECT_EQ(splits, 16);
    EXPECT_EQ(kernel->grid, 4 * 16);
    // One launch reduces, the next writes the centred row and the per-row
    // value; one partial per block.
    EXPECT_EQ(kernel->launches, 2);
    EXPECT_EQ(kernel->workspaceBytes, 4 * 16 * 8);
    EXPECT_EQ(kernel->launchName(1), "k_p1");
    EXPECT_NE(src.find("k_p0("), std::string::npos) << src;
    EXPECT_NE(src.find("k_body<1>("), std::string::npos) << src;
    // The reducing launch stores its chunk's partial and stops; the writing
    // one combines the row's 16 partials in order.
    EXPECT_NE(src.find("partials[(0 + o) * 16 + part] = acc"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("< 16; ++s"), std::string::npos) << src;
    // Block 0 of a row writes the per-row value; in a launch of its own,
    // after every block of the row has read %b, where it overwrites %b:
    // in place stays legal.
    EXPECT_NE(src.find("if (phase == 1 && part == 0 && threadIdx.x == 0)"),
              std::string::npos)
        << src;
    EXPECT_NE(overwriting->source.find(
                  "if (phase == 2 && part == 0 && threadIdx.x == 0)"),
              std::string::npos)
        << overwriting->source;
    EXPECT_NE(src.find("if (phase == 1)"), std::string::npos) << src;
    EXPECT_TRUE(canOverwrite(fusion, 1, 0));
    // The centred row is written at the index it was read: still legal.
    EXPECT_TRUE(canOverwrite(fusion, 0, 1));
  }
}

// A per-element result that depends on no reduction (%d) is stored in the
// reducing pass, which visits every element once; no pass of its own, so a
// split row kernel launches once per reduction plus once for the per-row
// result. The centred row of rowKernel() depends on the sum and keeps its
// pass (FewLongRowsAreSplitAcrossBlocks).
TEST(KernelEmitterTest, ResultsIndependentOfReductionsAreStoredInTheFirstPass) {
  std::string t = "tensor<65536x4xf32>", v = "tensor<4xf32>";
  std::string source =
      "func.func @f(%a: " + t + ") -> (" + v + ", " + t +
      ") {\n  %r:2 = gpuc.fusion(%a) : (" + t + ") -> (" + v + ", " + t +
      ") {\n  ^bb0(%x: " + t + "):\n    %d = gpuc.mul %x, %x : " + t +
      "\n    %s = gpuc.reduce_sum %d axes = [0] : " + t + " -> " + v +
      "\n    gpuc.yield %s, %d : " + v + ", " + t +
      "\n  }\n  return %r#0, %r#1 : " + v + ", " + t + "\n}\n";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  EXPECT_EQ(kernel->launches, 2) << src;
  // Stored in the first pass's loops only (the CPU's lane groups and the
  // line's remainder, the GPU's strided loop at each of a thread's batch of
  // 8 elements: 4 bytes of f32 input each), all before the reduction.
  size_t reduced = src.find("blockReduceSum");
  ASSERT_NE(reduced, std::string::npos) << src;
  int stores = 0;
  for (size_t at = src.find("out1["); at != std::string::npos;
       at = src.find("out1[", at + 1), ++stores)
    EXPECT_LT(at, reduced) << src;
  EXPECT_EQ(stores, 2 + 8) << src;
  // The GPU's batch of loads is pinned ahead of the arithmetic once, by the
  // pass, not again where the stored values are computed.
  EXPECT_NE(src.find("#ifdef GPUC_NVRTC\n"), std::string::npos) << src;
  EXPECT_NE(src.find("asm volatile(\"\" : \"+f\"("), std::string::npos) << src;
  EXPECT_EQ(src.find("IssuedIssued"), std::string::npos) << src;
}

// A bias gradient fused with the gradient it sums, written over its operand:
// the only pass over the row stores it (each element is computed once), the
// operand's element read just before the store. With a per-element value
// that needs the sum, a later pass reads the row, and the in-place store
// waits for that pass.
TEST(KernelEmitterTest, InPlaceResultIsStoredInTheOnlyPass) {
  std::string t = "tensor<65536x4xf32>", v = "tensor<4xf32>";
  auto source = [&](bool centred) {
    std::string results = v + ", " + t + (centred ? ", " + t : "");
    return "func.func @f(%a: " + t + ") -> (" + results +
           ") {\n  %r:" + (centred ? "3" : "2") + " = gpuc.fusion(%a) " +
           "{gpuc.in_place = array<i64: -1, 0" + (centred ? ", -1" : "") +
           ">} : (" + t + ") -> (" + results + ") {\n  ^bb0(%x: " + t +
           "):\n    %d = gpuc.mul %x, %x : " + t +
           "\n    %s = gpuc.reduce_sum %d axes = [0] : " + t + " -> " + v +
           "\n    %m = gpuc.broadcast %s : " + v + " -> " + t +
           "\n    %c = gpuc.sub %x, %m : " + t + "\n    gpuc.yield %s, %d" +
           (centred ? ", %c" : "") + " : " + results + "\n  }\n  return " +
           (centred ? "%r#0, %r#1, %r#2" : "%r#0, %r#1") + " : " + results +
           "\n}\n";
  };
  for (bool centred : {false, true}) {
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source(centred));
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    size_t reduced = src.find("blockReduceSum");
    ASSERT_NE(reduced, std::string::npos) << src;
    size_t store = src.find("out1[");
    ASSERT_NE(store, std::string::npos) << src;
    EXPECT_EQ(store < reduced, !centred) << src;
  }
}

// A softmax written over its input: the exponentials are summed in one pass
// and needed again, divided by the sum, in the last. The summing pass
// stores each one in the result's buffer (holding the input, which the
// result reads only through them) and the last pass reads it back: no exp
// after the sum. When the result also reads the input itself, the
// exponentials cannot take its place, and the last pass computes them.
TEST(KernelEmitterTest, ExponentialsAreKeptForTheLastPass) {
  std::string t = "tensor<64x1000xf32>", v = "tensor<64xf32>",
              c = "tensor<64x1xf32>";
  auto source = [&](bool readsInput) {
    return "func.func @f(%a: " + t + ") -> " + t +
           " {\n  %r = gpuc.fusion(%a) " +
           "{gpuc.in_place = array<i64: 0>} : (" + t + ") -> " + t +
           " {\n  ^bb0(%x: " + t +
           "):\n    %m = gpuc.reduce_max %x axes = [1] : " + t + " -> " + v +
           "\n    %m1 = gpuc.reshape %m : " + v + " -> " + c +
           "\n    %mb = gpuc.broadcast %m1 : " + c + " -> " + t +
           "\n    %d = gpuc.sub %x, %mb : " + t +
           "\n    %e = gpuc.exp %d : " + t +
           "\n    %s = gpuc.reduce_sum %e axes = [1] : " + t + " -> " + v +
           "\n    %s1 = gpuc.reshape %s : " + v + " -> " + c +
           "\n    %sb = gpuc.broadcast %s1 : " + c + " -> " + t +
           "\n    %p = gpuc.div %e, %sb : " + t +
           (readsInput ? "\n    %q = gpuc.add %p, %x : " + t : "") +
           "\n    gpuc.yield " + (readsInput ? "%q" : "%p") + " : " + t +
           "\n  }\n  return %r : " + t + "\n}\n";
  };
  for (bool readsInput : {false, true}) {
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source(readsInput));
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    size_t lastSum = src.rfind("warpReduceSum");
    size_t lastExp = src.rfind("gpuc::exponential(");
    ASSERT_NE(lastSum, std::string::npos) << src;
    ASSERT_NE(lastExp, std::string::npos) << src;
    EXPECT_EQ(lastExp > lastSum, readsInput) << src;
    EXPECT_EQ(src.find("= out0[") != std::string::npos, !readsInput) << src;
  }
}

// A bias gradient of a concatenation (a fused QKV projection's): the CPU's
// column blocks pick the input once per block (each block's rows lie in one
// input), so the lanes load from one pointer, as the GPU's row blocks do.
TEST(KernelEmitterTest, ColumnBlocksPickAConcatInputOncePerBlock) {
  std::string a = "tensor<256x16xf32>", t = "tensor<256x32xf32>",
              v = "tensor<32xf32>";
  std::string source =
      "func.func @f(%a: " + a + ", %b: " + a + ") -> (" + v + ", " + t +
      ") {\n  %r:2 = gpuc.fusion(%a, %b) : (" + a + ", " + a + ") -> (" + v +
      ", " + t + ") {\n  ^bb0(%x: " + a + ", %y: " + a +
      "):\n    %c = gpuc.concat %x, %y axis = 1 : (" + a + ", " + a + ") -> " +
      t + "\n    %s = gpuc.reduce_sum %c axes = [0] : " + t + " -> " + v +
      "\n    gpuc.yield %s, %c : " + v + ", " + t +
      "\n  }\n  return %r#0, %r#1 : " + v + ", " + t + "\n}\n";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t cpu = src.find("#ifdef GPUC_CPU"), gpu = src.find("#else");
  ASSERT_NE(cpu, std::string::npos) << src;
  ASSERT_NE(gpu, std::string::npos) << src;
  size_t picked = src.find("if (oGroup < 16)");
  EXPECT_GT(picked, cpu) << src;
  EXPECT_LT(picked, src.find("for (gidx lane")) << src;
  // Only the one choice on the CPU.
  int choices = 0;
  for (size_t at = src.find("< 16) {", cpu); at < gpu;
       at = src.find("< 16) {", at + 1))
    ++choices;
  EXPECT_EQ(choices, 1) << src;
}

// Reductions that read no other reduction share a pass: the sums of x and
// x*x (level 0) are reduced in the first launch of a split row kernel, the
// sum of squared deviations (level 1, it reads the mean) in the second; then
// the per-element and per-row launches: 4 launches, not 5.
TEST(KernelEmitterTest, IndependentReductionsShareAPass) {
  std::string t = "tensor<65536x4xf32>", v = "tensor<4xf32>";
  std::string source =
      "func.func @f(%a: " + t + ") -> (" + v + ", " + v + ", " + t +
      ") {\n  %r:3 = gpuc.fusion(%a) : (" + t + ") -> (" + v + ", " + v + ", " +
      t + ") {\n  ^bb0(%x: " + t +
      "):\n    %s = gpuc.reduce_sum %x axes = [0] : " + t + " -> " + v +
      "\n    %q = gpuc.mul %x, %x : " + t +
      "\n    %s2 = gpuc.reduce_sum %q axes = [0] : " + t + " -> " + v +
      "\n    %m = gpuc.broadcast %s : " + v + " -> " + t +
      "\n    %c = gpuc.sub %x, %m : " + t +
      "\n    %c2 = gpuc.mul %c, %c : " + t +
      "\n    %s3 = gpuc.reduce_sum %c2 axes = [0] : " + t + " -> " + v +
      "\n    gpuc.yield %s2, %s3, %c : " + v + ", " + v + ", " + t +
      "\n  }\n  return %r#0, %r#1, %r#2 : " + v + ", " + v + ", " + t + "\n}\n";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  EXPECT_EQ(kernel->launches, 3) << src;
  // Launch 0 stores the partials of reductions 0 and 1 (slots 0 and 4 rows
  // on), launch 1 those of reduction 2; launch 2 writes the rest.
  size_t first = src.find("if (phase == 0)");
  ASSERT_NE(first, std::string::npos) << src;
  std::string launch0 = src.substr(first, src.find("return;", first) - first);
  EXPECT_NE(launch0.find("partials[(0 + o) * 16 + part] = acc"),
            std::string::npos)
      << src;
  EXPECT_NE(launch0.find("partials[(4 + o) * 16 + part] = acc"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("partials[(8 + o) * 16 + part] = acc"), std::string::npos)
      << src;
  EXPECT_EQ(launch0.find("partials[(8 + o)"), std::string::npos) << src;
}

// A row kernel keeps each row's sum in a register of that row: a transpose
// of the per-row sums would read other rows' values, so codegen refuses the
// kernel (and gpuc-fuse, which asks it, leaves the transpose outside).
TEST(KernelEmitterTest, PerRowValuesAreNotPermuted) {
  std::string source = R"mlir(
func.func @f(%a: tensor<4x2x3xf32>) -> tensor<2x4xf32> {
  %r = gpuc.fusion(%a) : (tensor<4x2x3xf32>) -> tensor<2x4xf32> {
  ^bb0(%x: tensor<4x2x3xf32>):
    %s = gpuc.reduce_sum %x axes = [2] : tensor<4x2x3xf32> -> tensor<4x2xf32>
    %t = gpuc.transpose %s perm = [1, 0] : tensor<4x2xf32> -> tensor<2x4xf32>
    gpuc.yield %t : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}
)mlir";
  EXPECT_TRUE(failed(emitFirstFusion(source)));
  // Pointwise ops and a reshape keep the row's own index.
  std::string kept = R"mlir(
func.func @f(%a: tensor<4x2x3xf32>) -> tensor<8xf32> {
  %r = gpuc.fusion(%a) : (tensor<4x2x3xf32>) -> tensor<8xf32> {
  ^bb0(%x: tensor<4x2x3xf32>):
    %s = gpuc.reduce_sum %x axes = [2] : tensor<4x2x3xf32> -> tensor<4x2xf32>
    %n = gpuc.neg %s : tensor<4x2xf32>
    %f = gpuc.reshape %n : tensor<4x2xf32> -> tensor<8xf32>
    gpuc.yield %f : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
)mlir";
  EXPECT_TRUE(succeeded(emitFirstFusion(kept)));
}

// Batch norm's statistics over a concatenation of kernel inputs along the
// channel axis (DenseNet): `spatial` elements per channel and image.
std::string statisticsOfConcat(int64_t spatial) {
  auto t = [&](int64_t c) {
    return "tensor<4x" + std::to_string(c) + "x" + std::to_string(spatial) +
           "xf32>";
  };
  std::string v = "tensor<8xf32>";
  return "func.func @f(%a: " + t(3) + ", %b: " + t(5) + ") -> " + v +
         " {\n  %r = gpuc.fusion(%a, %b) : (" + t(3) + ", " + t(5) + ") -> " +
         v + " {\n  ^bb0(%x: " + t(3) + ", %y: " + t(5) +
         "):\n    %c = gpuc.concat %x, %y axis = 1 : (" + t(3) + ", " + t(5) +
         ") -> " + t(8) + "\n    %q = gpuc.mul %c, %c : " + t(8) +
         "\n    %s = gpuc.reduce_sum %c axes = [0, 2] : " + t(8) + " -> " + v +
         "\n    %s2 = gpuc.reduce_sum %q axes = [0, 2] : " + t(8) + " -> " + v +
         "\n    gpuc.yield %s2 : " + v + "\n  }\n  return %r : " + v + "\n}\n";
}

size_t occurrences(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1))
    ++n;
  return n;
}

// The row's channel picks the concatenation's input once per row, before any
// loop, however many passes and targets read it; each read is one load from
// the picked input.
TEST(KernelEmitterTest, ConcatAlongAKeptAxisSelectsItsInputOncePerRow) {
  FailureOr<EmittedKernel> kernel = emitFirstFusion(statisticsOfConcat(64));
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t select = src.find("if (o < 3) { p");
  ASSERT_NE(select, std::string::npos) << src;
  EXPECT_EQ(occurrences(src, "if (o < 3)"), 1u) << src;
  EXPECT_LT(select, src.find("for (")) << src;
  EXPECT_NE(src.find("else { p0 = in1; p0Extent = 5; p0Start = 3; }"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("in0["), std::string::npos) << src;
  EXPECT_NE(src.find("p0Extent + o - p0Start) * 64"), std::string::npos) << src;
}

// The CPU adds a row in groups of 8 lanes; a last, partial group needs a loop
// of its own only when the row's lines are not a multiple of 8 long.
TEST(KernelEmitterTest, RowsOfWholeLaneGroupsHaveNoRemainderLoop) {
  const std::string remainder = "rAtGroup + lane < rAtEnd";
  FailureOr<EmittedKernel> whole = emitFirstFusion(statisticsOfConcat(64));
  ASSERT_TRUE(succeeded(whole));
  EXPECT_EQ(whole->source.find(remainder), std::string::npos) << whole->source;
  FailureOr<EmittedKernel> partial = emitFirstFusion(statisticsOfConcat(25));
  ASSERT_TRUE(succeeded(partial));
  EXPECT_NE(partial->source.find(remainder), std::string::npos)
      << partial->source;
}

// A single element broadcast over a tensor (an optimizer's learning rate) is
// read at index 0 without unravelling the tensor's coordinates, so the
// kernel has no division and the CPU runs the flat loop, not one of lines.
TEST(KernelEmitterTest, BroadcastScalarNeedsNoCoordinates) {
  std::string source = R"mlir(
func.func @f(%w: tensor<64x3x3xf32>, %g: tensor<64x3x3xf32>, %lr: tensor<f32>) -> tensor<64x3x3xf32> {
  %r = gpuc.fusion(%w, %g, %lr) : (tensor<64x3x3xf32>, tensor<64x3x3xf32>, tensor<f32>) -> tensor<64x3x3xf32> {
  ^bb0(%x: tensor<64x3x3xf32>, %y: tensor<64x3x3xf32>, %s: tensor<f32>):
    %b = gpuc.broadcast %s : tensor<f32> -> tensor<64x3x3xf32>
    %m = gpuc.mul %b, %y : tensor<64x3x3xf32>
    %u = gpuc.sub %x, %m : tensor<64x3x3xf32>
    gpuc.yield %u : tensor<64x3x3xf32>
  }
  return %r : tensor<64x3x3xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  EXPECT_NE(src.find("in2[0]"), std::string::npos) << src;
  EXPECT_EQ(src.find(" / "), std::string::npos) << src;
  // The CPU's loop is the flat one, not a walk over lines.
  EXPECT_EQ(src.find("iLine"), std::string::npos) << src;
}

// Three parameters' updates in one kernel (a multi-tensor optimizer step):
// every input read at the stored index is loaded before anything is
// computed, and everything is computed before the first store, so a GPU
// thread has all its loads in flight at once instead of one result's at a
// time (its warp would stall at the first result's arithmetic).
TEST(KernelEmitterTest, EveryLoadPrecedesTheArithmeticAndTheStores) {
  std::string source = R"mlir(
func.func @f(%w0: tensor<256xf32>, %g0: tensor<256xf32>, %w1: tensor<256xf32>, %g1: tensor<256xf32>, %w2: tensor<256xf32>, %g2: tensor<256xf32>, %lr: tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  %r:3 = gpuc.fusion(%w0, %g0, %w1, %g1, %w2, %g2, %lr) : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  ^bb0(%x0: tensor<256xf32>, %y0: tensor<256xf32>, %x1: tensor<256xf32>, %y1: tensor<256xf32>, %x2: tensor<256xf32>, %y2: tensor<256xf32>, %s: tensor<f32>):
    %b = gpuc.broadcast %s : tensor<f32> -> tensor<256xf32>
    %m0 = gpuc.mul %b, %y0 : tensor<256xf32>
    %u0 = gpuc.sub %x0, %m0 : tensor<256xf32>
    %e1 = gpuc.exp %y1 : tensor<256xf32>
    %m1 = gpuc.mul %b, %e1 : tensor<256xf32>
    %u1 = gpuc.sub %x1, %m1 : tensor<256xf32>
    %m2 = gpuc.mul %b, %y2 : tensor<256xf32>
    %u2 = gpuc.sub %x2, %m2 : tensor<256xf32>
    gpuc.yield %u0, %u1, %u2 : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string src = withoutAlternatives(kernel->source);
  size_t lastLoad = 0;
  for (int k = 0; k < 6; ++k) {
    size_t load = src.find("in" + std::to_string(k) + "[i]");
    ASSERT_NE(load, std::string::npos) << src;
    lastLoad = std::max(lastLoad, load);
  }
  // In the loop, arithmetic assigns a parenthesized expression or a call.
  size_t loop = src.find("for (gidx i");
  ASSERT_NE(loop, std::string::npos) << src;
  size_t firstArithmetic =
      std::min(src.find(" = (", loop), src.find("gpuc::exponential(", loop));
  size_t firstStore = src.find("out0[i] =");
  ASSERT_NE(firstArithmetic, std::string::npos) << src;
  ASSERT_NE(firstStore, std::string::npos) << src;
  EXPECT_LT(lastLoad, firstArithmetic) << src;
  // The last result's subtraction is computed before the first store.
  EXPECT_LT(src.rfind(" - "), firstStore) << src;
  EXPECT_NE(src.find("out2[i] ="), std::string::npos) << src;
}

// Slices that are one stretch of their input (a padded head's gradient cut
// to the embedding's rows, at offset 0 and past two rows) read it at the
// element's index plus the offset, with no coordinates; the one at offset 0
// loads ahead with the other inputs. A slice of the rows' trailing columns
// is not one stretch and unravels its index.
TEST(KernelEmitterTest, SlicesInOneStretchMoveTheIndexByAConstant) {
  std::string source = R"mlir(
func.func @f(%g: tensor<66x32xf32>, %w: tensor<64x32xf32>, %h: tensor<64x40xf32>) -> tensor<64x32xf32> {
  %r = gpuc.fusion(%g, %w, %h) : (tensor<66x32xf32>, tensor<64x32xf32>, tensor<64x40xf32>) -> tensor<64x32xf32> {
  ^bb0(%x: tensor<66x32xf32>, %y: tensor<64x32xf32>, %z: tensor<64x40xf32>):
    %a = gpuc.slice %x starts = [0, 0] limits = [64, 32] strides = [1, 1] : tensor<66x32xf32> -> tensor<64x32xf32>
    %b = gpuc.slice %x starts = [2, 0] limits = [66, 32] strides = [1, 1] : tensor<66x32xf32> -> tensor<64x32xf32>
    %c = gpuc.slice %z starts = [0, 8] limits = [64, 40] strides = [1, 1] : tensor<64x40xf32> -> tensor<64x32xf32>
    %s = gpuc.add %a, %b : tensor<64x32xf32>
    %t = gpuc.mul %s, %y : tensor<64x32xf32>
    %u = gpuc.sub %t, %c : tensor<64x32xf32>
    gpuc.yield %u : tensor<64x32xf32>
  }
  return %r : tensor<64x32xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  // The GPU's batched loop: its first element is `i`.
  size_t loop = src.find("for (; i + ");
  ASSERT_NE(loop, std::string::npos) << src;
  size_t sliceLoad = src.find("in0[i]", loop);
  size_t ownLoad = src.find("in1[i]", loop);
  size_t firstArithmetic = src.find(" = (", loop);
  ASSERT_NE(sliceLoad, std::string::npos) << src;
  ASSERT_NE(ownLoad, std::string::npos) << src;
  EXPECT_LT(sliceLoad, firstArithmetic) << src;
  EXPECT_NE(src.find("= i + 64;", loop), std::string::npos) << src;
  // The columns' slice divides its index into a row and a column.
  EXPECT_NE(src.find("(i / 32)", loop), std::string::npos) << src;
  EXPECT_NE(src.find("8 + ", loop), std::string::npos) << src;
}

// The fused attention's backward in three launches when the module asks
// for stored score gradients: the workspace holds the row dots (16-byte
// aligned) and then every score gradient (batch x heads x keys x queries,
// 16 bits each, and a pass's 128 queries more), and the last launch asks
// for two tiles of 64 keys by 136 bf16 in dynamic shared memory. Two
// launches without the attribute, for an odd number of queries (a lane
// stores two adjacent queries' in one word), and for f32 operands (no
// tensor cores).
TEST(KernelEmitterTest, StoredScoreGradientsTakeAThirdLaunch) {
  auto source = [](bool stored, int queries, const char *type) {
    std::string q = llvm::formatv("tensor<2x3x{0}x16x{1}>", queries, type);
    std::string kv = llvm::formatv("tensor<2x3x48x16x{0}>", type);
    std::string lse = llvm::formatv("tensor<2x3x{0}xf32>", queries);
    return llvm::formatv(
               R"mlir(
module attributes {{{0}} {{
func.func @f(%q: {1}, %k: {2}, %v: {2}, %o: {1}, %l: {3}, %d: {1}) -> ({1}, {2}, {2}) {{
  %r:3 = gpuc.fusion(%q, %k, %v, %o, %l, %d) : ({1}, {2}, {2}, {1}, {3}, {1}) -> ({1}, {2}, {2}) {{
  ^bb0(%a: {1}, %b: {2}, %c: {2}, %e: {1}, %f: {3}, %g: {1}):
    %dq, %dk, %dv = gpuc.attention_grad %a, %b, %c, %e, %f, %g scale = 0.25 fill = 0xFFF0000000000000 : {1}, {2}, {2}, {1}, {3}
    gpuc.yield %dq, %dk, %dv : {1}, {2}, {2}
  }
  return %r#0, %r#1, %r#2 : {1}, {2}, {2}
}
}
)mlir",
               stored ? "gpuc.attention_stored_score_gradients = 1 : i64" : "",
               q, kv, lse)
        .str();
  };
  FailureOr<EmittedKernel> stored = emitFirstFusion(source(true, 64, "bf16"));
  ASSERT_TRUE(succeeded(stored));
  EXPECT_EQ(stored->launches, 3);
  EXPECT_EQ(stored->sharedBytes, 2 * 64 * 136 * 2);
  EXPECT_EQ(stored->workspaceBytes,
            llvm::alignTo(2 * 3 * 64 * 4, 16) + (2 * 3 * 48 * 64 + 128) * 2);
  EXPECT_NE(stored->source.find("gpuc::attentionBackwardStored<16, 16>(phase"),
            std::string::npos)
      << stored->source;
  EXPECT_TRUE(stored->alternatives.empty());
  for (auto [attr, queries, type] :
       {std::tuple{false, 64, "bf16"}, std::tuple{true, 63, "bf16"},
        std::tuple{true, 64, "f32"}}) {
    FailureOr<EmittedKernel> two = emitFirstFusion(source(attr, queries, type));
    ASSERT_TRUE(succeeded(two)) << attr << " " << queries << " " << type;
    EXPECT_EQ(two->launches, 2) << attr << " " << queries << " " << type;
    EXPECT_EQ(two->sharedBytes, 0);
    EXPECT_EQ(two->source.find("attentionBackwardStored"), std::string::npos);
    // On tensor cores the two launches also come in blocks of 4 warps:
    // a body of their own, instantiated per launch, where the GPU has
    // tensor cores.
    bool quarter = StringRef(type) == "bf16";
    EXPECT_EQ(two->alternatives.size(), quarter ? 1u : 0u) << type;
    if (!quarter)
      continue;
    EXPECT_EQ(two->alternatives[0].blockThreads, 128);
    const std::string &text = two->source;
    size_t body =
        text.find("#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA)) && "
                  "defined(GPUC_HAVE_MMA)\ntemplate <int "
                  "phase>\n__device__ __forceinline__ void k_w4_body(");
    ASSERT_NE(body, std::string::npos) << text;
    EXPECT_NE(text.find("gpuc::attentionBackwardQueries<16, 16, 4>(", body),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("gpuc::attentionBackwardKeys<16, 16, 4>(", body),
              std::string::npos)
        << text;
    for (int phase = 0; phase < 2; ++phase) {
      std::string p = std::to_string(phase);
      size_t entry = text.find("__launch_bounds__(128) k_p" + p + "_w4(");
      ASSERT_NE(entry, std::string::npos) << text;
      EXPECT_EQ(text.find("{ k_w4_body<" + p + ">(", entry),
                text.find('{', entry))
          << text;
    }
  }
}

// A kernel reading one bf16 tensor (2 bytes an element): a GPU thread
// loads 8 of its elements, a block's width apart, before storing any, while
// all 8 are in its tile, with no clamp and no guard; its last few (the
// last tile's: 3000 is not a whole number of batches) one at a time. The
// CPU keeps its loop, one element after the other.
TEST(KernelEmitterTest, GpuThreadsLoadSeveralElementsBeforeStoring) {
  std::string source = R"mlir(
func.func @f(%a: tensor<3000xbf16>) -> tensor<3000xf32> {
  %r = gpuc.fusion(%a) : (tensor<3000xbf16>) -> tensor<3000xf32> {
  ^bb0(%x: tensor<3000xbf16>):
    %c = gpuc.cast %x : tensor<3000xbf16> to tensor<3000xf32>
    %e = gpuc.exp %c : tensor<3000xf32>
    gpuc.yield %e : tensor<3000xf32>
  }
  return %r : tensor<3000xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t gpu = src.find("#else");
  ASSERT_NE(gpu, std::string::npos) << src;
  size_t batches = src.find("for (; i + 7 * (gidx)blockDim.x < end; i += 8 "
                            "* (gidx)blockDim.x)",
                            gpu);
  ASSERT_NE(batches, std::string::npos) << src;
  EXPECT_NE(src.find("const gidx iPlus7 = i + 7 * (gidx)blockDim.x;", gpu),
            std::string::npos)
      << src;
  size_t lastLoad = src.find("in0[iPlus7]", gpu);
  size_t firstStore = src.find("out0[", gpu);
  ASSERT_NE(lastLoad, std::string::npos) << src;
  EXPECT_LT(lastLoad, firstStore) << src;
  EXPECT_NE(src.find("\n      out0[iPlus7] =", gpu), std::string::npos) << src;
  EXPECT_EQ(src.find("end - 1", gpu), std::string::npos) << src;
  EXPECT_EQ(src.find("if (end - i", gpu), std::string::npos) << src;
  size_t tail = src.find("for (; i < end; i += blockDim.x)", gpu);
  EXPECT_NE(tail, std::string::npos) << src;
  EXPECT_LT(batches, tail) << src;
  // 4096 elements are whole batches of the block's threads: no tail.
  std::string whole = source;
  for (size_t at = whole.find("3000"); at != std::string::npos;
       at = whole.find("3000"))
    whole.replace(at, 4, "4096");
  kernel = emitFirstFusion(whole);
  ASSERT_TRUE(succeeded(kernel));
  EXPECT_EQ(kernel->source.find("for (; i < end;"), std::string::npos)
      << kernel->source;
  // The CPU's text: the flat loop, one element an iteration.
  EXPECT_NE(src.find("i += blockDim.x"), std::string::npos) << src;
  EXPECT_LT(src.find("i += blockDim.x"), gpu) << src;
}

/// A softmax over the rows of a 64 x `length` tensor of `element` (cast to
/// f32 first unless it is f32), in a module with `attributes` (MLIR text
/// such as "attributes {...}"; empty: none).
std::string softmaxModule(int64_t length, StringRef element = "f32",
                          StringRef attributes = "") {
  std::string in = llvm::formatv("tensor<64x{0}x{1}>", length, element);
  std::string row = llvm::formatv("tensor<64x{0}xf32>", length);
  std::string cast =
      element == "f32"
          ? std::string("")
          : llvm::formatv("    %x = gpuc.cast %a0 : {0} to {1}\n", in, row)
                .str();
  std::string x = element == "f32" ? "%a0" : "%x";
  return llvm::formatv(R"mlir(module {0} {{
func.func @f(%a: {1}) -> {2} {{
  %r = gpuc.fusion(%a) : ({1}) -> {2} {{
  ^bb0(%a0: {1}):
{3}    %m = gpuc.reduce_max {4} axes = [1] : {2} -> tensor<64xf32>
    %m1 = gpuc.reshape %m : tensor<64xf32> -> tensor<64x1xf32>
    %mb = gpuc.broadcast %m1 : tensor<64x1xf32> -> {2}
    %d = gpuc.sub {4}, %mb : {2}
    %e = gpuc.exp %d : {2}
    %s = gpuc.reduce_sum %e axes = [1] : {2} -> tensor<64xf32>
    %s1 = gpuc.reshape %s : tensor<64xf32> -> tensor<64x1xf32>
    %sb = gpuc.broadcast %s1 : tensor<64x1xf32> -> {2}
    %p = gpuc.div %e, %sb : {2}
    gpuc.yield %p : {2}
  }
  return %r : {2}
}
}
)mlir",
                       attributes, in, row, cast, x)
      .str();
}

// A softmax over rows of 1000 (a warp's each): every pass takes 8 of a
// lane's elements, a warp's stride apart, while all 8 are in the row, with
// no guard on any of them; then the lane's last elements one at a time.
// Rows of 512 (whole batches of the warp's lanes) need no such loop: their
// passes are unrolled over the lanes' registers
// (WarpRowsAreStagedInRegisters).
TEST(KernelEmitterTest, RowPassesTakeABatchOfALanesElements) {
  FailureOr<EmittedKernel> kernel = emitFirstFusion(softmaxModule(1000));
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t gpu = src.find("#else");
  ASSERT_NE(gpu, std::string::npos) << src;
  std::string loop = "for (; r + 7 * (gidx)gpuc::kWarpStride < 1000; r += 8 "
                     "* (gidx)gpuc::kWarpStride)";
  std::string tail = "for (; r < 1000; r += gpuc::kWarpStride)";
  // Three passes: the maximum, the sum, the stores.
  size_t at = gpu;
  for (int pass = 0; pass < 3; ++pass) {
    at = src.find(loop, at + 1);
    ASSERT_NE(at, std::string::npos) << pass << "\n" << src;
    EXPECT_NE(
        src.find("const gidx rPlus7 = r + 7 * (gidx)gpuc::kWarpStride;", at),
        std::string::npos)
        << pass << "\n"
        << src;
    // Each batch loop has its own loop for the lane's last elements.
    EXPECT_LT(src.find(tail, at), src.find(loop, at + 1)) << pass << "\n"
                                                          << src;
  }
  // No element of a batch is past the row's end: nothing clamps or guards.
  EXPECT_EQ(src.find(": 1000 - 1", gpu), std::string::npos) << src;
  EXPECT_EQ(src.find(" : 0.0f)", gpu), std::string::npos) << src;
  EXPECT_EQ(src.find("if (1000 - r", gpu), std::string::npos) << src;

  kernel = emitFirstFusion(softmaxModule(512));
  ASSERT_TRUE(succeeded(kernel));
  EXPECT_EQ(occurrences(withoutAlternatives(kernel->source),
                        "for (int step = 0; step < 2; ++step)"),
            3u)
      << kernel->source;
  EXPECT_EQ(kernel->source.find("for (; r < 512;"), std::string::npos)
      << kernel->source;
}

// The lines of a kernel's text that one target compiles: those outside
// every GPUC_CPU conditional, and those of its own branches (up to the
// entry points under other bounds, which repeat the kernel's body).
std::string targetText(const std::string &source, bool cpu) {
  std::string src = withoutAlternatives(source);
  std::string text, lineText;
  // Per open conditional: whether it tests GPUC_CPU, and whether the
  // lines in its current branch are the other target's.
  std::vector<std::pair<bool, bool>> open;
  std::istringstream lines(src);
  while (std::getline(lines, lineText)) {
    std::string t =
        lineText.substr(lineText.find_first_not_of(' ') == std::string::npos
                            ? 0
                            : lineText.find_first_not_of(' '));
    if (t.rfind("#if", 0) == 0) {
      bool tests = t.find("GPUC_CPU") != std::string::npos;
      bool gpuBranch = t.rfind("#ifndef", 0) == 0;
      open.push_back({tests, tests && (gpuBranch == cpu)});
      continue;
    }
    if (t.rfind("#else", 0) == 0 && !open.empty()) {
      if (open.back().first)
        open.back().second = !open.back().second;
      continue;
    }
    if (t.rfind("#endif", 0) == 0 && !open.empty()) {
      open.pop_back();
      continue;
    }
    if (llvm::none_of(open, [](auto &o) { return o.second; }))
      text += lineText + "\n";
  }
  return text;
}

// A warp's row whose lanes' elements fit their registers (a softmax over
// 512, 16 a lane; a bf16 one too) is loaded into them before its first
// pass, every element in flight at once; each pass, unrolled (a batch of 8
// a step), reads them there and loads nothing from the input. The CPU's
// text reads the input as it did. Rows of 1000 (not a lane's whole
// elements) and 1024 in f32 with three inputs past 64 registers a lane
// stage nothing.
TEST(KernelEmitterTest, WarpRowsAreStagedInRegisters) {
  for (StringRef element : {"f32", "bf16"}) {
    FailureOr<EmittedKernel> kernel =
        emitFirstFusion(softmaxModule(512, element));
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    size_t gpu = src.find("#else");
    ASSERT_NE(gpu, std::string::npos) << src;
    size_t stage = src.find("float rowIn0[16];");
    ASSERT_NE(stage, std::string::npos) << src;
    EXPECT_NE(src.find("rowIn0[k] = in0[(int64_t)o * 512 + gpuc::warpLane() "
                       "+ 32 * k];",
                       stage),
              std::string::npos)
        << src;
    // Every pass reads the lane's registers, a batch's 8 at once.
    size_t at = stage;
    for (int pass = 0; pass < 3; ++pass) {
      at = src.find("for (int step = 0; step < 2; ++step)", at + 1);
      ASSERT_NE(at, std::string::npos) << pass << "\n" << src;
      EXPECT_NE(src.find("= rowIn0[step * 8 + 7];", at), std::string::npos)
          << pass << "\n"
          << src;
    }
    // The GPU's text loads the input once, into the registers; the CPU's
    // loads it in its passes.
    EXPECT_EQ(occurrences(targetText(src, /*cpu=*/false), "in0["), 1u) << src;
    EXPECT_NE(targetText(src, /*cpu=*/true).find("in0["), std::string::npos)
        << src;
  }
  FailureOr<EmittedKernel> kernel = emitFirstFusion(softmaxModule(1000));
  ASSERT_TRUE(succeeded(kernel));
  EXPECT_EQ(kernel->source.find("float rowIn"), std::string::npos)
      << kernel->source;
}

// The suffixes of a kernel's alternatives, with their threads and bounds.
std::vector<std::string> alternativesOf(const EmittedKernel &kernel) {
  std::vector<std::string> names;
  for (const KernelAlternative &alternative : kernel.alternatives)
    names.push_back(llvm::formatv("{0} {1} {2}", alternative.suffix,
                                  alternative.blockThreads,
                                  alternative.minBlocksPerSm)
                        .str());
  return names;
}

// Entry points the GPU chooses between: a warp row kernel over registers
// is bounded to two blocks an SM, with an entry point bounded to one
// beside it and one reading its row from memory in every pass (`_s0`), in
// the GPU's text only (NVRTC's); the attention's forward is
// one block of 8 warps an SM, with entry points at two blocks an SM and
// in blocks of 4 warps (only on tensor cores), unless the module names
// the blocks an SM. A kernel that writes over an input has them too (the
// GPU times it where what it writes is transient).
TEST(KernelEmitterTest, KernelsComeWithAlternativesTheGpuTimes) {
  FailureOr<EmittedKernel> rows = emitFirstFusion(softmaxModule(512));
  ASSERT_TRUE(succeeded(rows));
  EXPECT_EQ(rows->minBlocksPerSm, 2);
  EXPECT_EQ(alternativesOf(*rows),
            (std::vector<std::string>{"_b1 256 1", "_s0 256 0"}));
  const std::string &src = rows->source;
  // The unstaged entry point keeps no registers of the row.
  ASSERT_EQ(rows->alternatives.size(), 2u);
  EXPECT_EQ(rows->alternatives[1].body.find("rowIn"), std::string::npos)
      << rows->alternatives[1].body;
  EXPECT_NE(rows->alternatives[1].body.find("= in0["), std::string::npos)
      << rows->alternatives[1].body;
  size_t main = src.find("__launch_bounds__(256, 2) k(");
  size_t guard = src.find("#if (defined(GPUC_NVRTC) || "
                          "defined(GPUC_HOST_CUDA))\nextern \"C\" __global__ "
                          "void __launch_bounds__(256, 1) k_b1(");
  ASSERT_NE(main, std::string::npos) << src;
  ASSERT_NE(guard, std::string::npos) << src;
  // The alternative's body is the kernel's.
  size_t open = src.find('{', main);
  EXPECT_NE(src.find(src.substr(open, guard - open), guard), std::string::npos)
      << src;
  std::string inPlace = softmaxModule(512);
  inPlace.replace(inPlace.find("gpuc.fusion(%a)"), 15,
                  "gpuc.fusion(%a) {gpuc.in_place = array<i64: 0>}");
  FailureOr<EmittedKernel> overwriting = emitFirstFusion(inPlace);
  ASSERT_TRUE(succeeded(overwriting));
  EXPECT_EQ(overwriting->minBlocksPerSm, 2);
  EXPECT_EQ(alternativesOf(*overwriting), alternativesOf(*rows));
  EXPECT_NE(overwriting->source.find("k_b1("), std::string::npos);
  EXPECT_NE(overwriting->key, rows->key);

  auto attention = [](const char *attributes, const char *type) {
    std::string q = llvm::formatv("tensor<2x3x64x16x{0}>", type),
                l = "tensor<2x3x64xf32>";
    return llvm::formatv(R"mlir(
module attributes {{{0}} {{
func.func @f(%q: {1}, %k: {1}, %v: {1}) -> ({1}, {2}) {{
  %r:2 = gpuc.fusion(%q, %k, %v) : ({1}, {1}, {1}) -> ({1}, {2}) {{
  ^bb0(%a: {1}, %b: {1}, %c: {1}):
    %o, %lse = gpuc.attention %a, %b, %c scale = 2.500000e-01 fill = 0xFFF0000000000000 : {1}, {1}, {1} -> {1}, {2}
    gpuc.yield %o, %lse : {1}, {2}
  }
  return %r#0, %r#1 : {1}, {2}
}
}
)mlir",
                         attributes, q, l)
        .str();
  };
  using Names = std::vector<std::string>;
  for (auto [attributes, type, bound, alternatives] : {
           std::tuple{
               "", "bf16", int64_t(0),
               Names{"_b2 256 2", "_w4 128 0", "_r32 256 0", "_w4r32 128 0"}},
           std::tuple{"", "f32", int64_t(0), Names{"_b2 256 2"}},
           std::tuple{"gpuc.attention_blocks_per_sm = 1 : i64", "bf16",
                      int64_t(0), Names{}},
           std::tuple{"gpuc.attention_blocks_per_sm = 2 : i64", "bf16",
                      int64_t(2), Names{}},
           std::tuple{"gpuc.attention_rows_per_warp = 32 : i64", "bf16",
                      int64_t(0), Names{"_w4 128 0"}},
       }) {
    FailureOr<EmittedKernel> forward =
        emitFirstFusion(attention(attributes, type));
    ASSERT_TRUE(succeeded(forward)) << attributes;
    EXPECT_EQ(forward->minBlocksPerSm, bound) << attributes;
    EXPECT_EQ(alternativesOf(*forward), alternatives) << attributes << type;
    const std::string &text = forward->source;
    // Blocks of 4 warps take the forward's template argument, and exist
    // only where the GPU has tensor cores.
    size_t quarter =
        text.find("#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA)) && "
                  "defined(GPUC_HAVE_MMA)\nextern \"C\" "
                  "__global__ void __launch_bounds__(128) k_w4(");
    bool rows32 = StringRef(attributes).contains("rows_per_warp");
    EXPECT_EQ(quarter != std::string::npos,
              llvm::is_contained(alternatives, "_w4 128 0"))
        << text;
    if (quarter != std::string::npos) {
      EXPECT_NE(text.find(rows32 ? "gpuc::attentionForward<16, 16, 2, 4>("
                                 : "gpuc::attentionForward<16, 16, 1, 4>(",
                          quarter),
                std::string::npos)
          << text;
    }
    EXPECT_NE(text.find(rows32 ? "gpuc::attentionForward<16, 16, 2>("
                               : "gpuc::attentionForward<16, 16>("),
              std::string::npos)
        << text;
    // Unless the module names the rows, 32 rows a warp in blocks of 8 and
    // of 4 warps, on tensor cores only.
    size_t wide = text.find("defined(GPUC_HAVE_MMA)\nextern \"C\" __global__ "
                            "void __launch_bounds__(256) k_r32(");
    size_t wideQuarter =
        text.find("defined(GPUC_HAVE_MMA)\nextern \"C\" __global__ void "
                  "__launch_bounds__(128) k_w4r32(");
    EXPECT_EQ(wide != std::string::npos,
              llvm::is_contained(alternatives, "_r32 256 0"))
        << text;
    EXPECT_EQ(wideQuarter != std::string::npos,
              llvm::is_contained(alternatives, "_w4r32 128 0"))
        << text;
    if (wide != std::string::npos) {
      EXPECT_NE(text.find("gpuc::attentionForward<16, 16, 2>(", wide),
                std::string::npos);
    }
    if (wideQuarter != std::string::npos) {
      EXPECT_NE(text.find("gpuc::attentionForward<16, 16, 2, 4>(", wideQuarter),
                std::string::npos);
    }
  }
}

// A split column kernel's launches (4 columns of 65,536 rows, chunks of
// rows in about 1,024 blocks) come bounded to 8 blocks an SM as well, where
// a row kernel of one launch has no alternative (a softmax over rows of
// 1,000); the same sums over rows gathered by loaded indices have none
// (the GPU times alternatives on operands not yet written).
TEST(KernelEmitterTest, SplitKernelsComeBoundedToEightBlocksAnSm) {
  FailureOr<EmittedKernel> split = emitFirstFusion(rowKernel(4));
  ASSERT_TRUE(succeeded(split));
  ASSERT_GT(split->launches, 1);
  EXPECT_EQ(alternativesOf(*split), std::vector<std::string>{"_b8 256 8"});
  for (int64_t launch = 0; launch < split->launches; ++launch)
    EXPECT_NE(split->source.find("__launch_bounds__(256, 8) k_p" +
                                 std::to_string(launch) + "_b8("),
              std::string::npos)
        << split->source;
  FailureOr<EmittedKernel> rows = emitFirstFusion(softmaxModule(1000));
  ASSERT_TRUE(succeeded(rows));
  EXPECT_EQ(rows->launches, 1);
  EXPECT_TRUE(rows->alternatives.empty());

  std::string gathered = R"mlir(
func.func @f(%a: tensor<65536x4xf32>, %i: tensor<65536xi64>) -> tensor<4xf32> {
  %r = gpuc.fusion(%a, %i) : (tensor<65536x4xf32>, tensor<65536xi64>) -> tensor<4xf32> {
  ^bb0(%x: tensor<65536x4xf32>, %j: tensor<65536xi64>):
    %g = gpuc.gather %x[%j] axis = 0 : (tensor<65536x4xf32>, tensor<65536xi64>) -> tensor<65536x4xf32>
    %s = gpuc.reduce_sum %g axes = [0] : tensor<65536x4xf32> -> tensor<4xf32>
    gpuc.yield %s : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
)mlir";
  FailureOr<EmittedKernel> indexed = emitFirstFusion(gathered);
  ASSERT_TRUE(succeeded(indexed));
  EXPECT_GT(indexed->launches, 1);
  EXPECT_TRUE(indexed->alternatives.empty());
  EXPECT_EQ(indexed->source.find("_b8("), std::string::npos);
}

// An elementwise kernel's bytes in flight a thread are a guess: a sum of
// four f32 tensors of 2^20 elements (16 bytes loaded an element) batches
// 2 elements in its 32 bytes, and comes with the batches of 64 and 128
// bytes as alternatives (4 and 8 elements a thread). A kernel of a few
// blocks has none.
TEST(KernelEmitterTest, ElementwiseKernelsComeWithWiderBatches) {
  auto sum = [](int64_t n) {
    std::string t = llvm::formatv("tensor<{0}xf32>", n).str();
    return llvm::formatv(R"mlir(
func.func @f(%a: {0}, %b: {0}, %c: {0}, %d: {0}) -> {0} {{
  %r = gpuc.fusion(%a, %b, %c, %d) : ({0}, {0}, {0}, {0}) -> {0} {{
  ^bb0(%w: {0}, %x: {0}, %y: {0}, %z: {0}):
    %s = gpuc.add %w, %x : {0}
    %t = gpuc.add %y, %z : {0}
    %u = gpuc.add %s, %t : {0}
    gpuc.yield %u : {0}
  }
  return %r : {0}
}
)mlir",
                         t)
        .str();
  };
  FailureOr<EmittedKernel> wide = emitFirstFusion(sum(1 << 20));
  ASSERT_TRUE(succeeded(wide));
  EXPECT_EQ(alternativesOf(*wide),
            (std::vector<std::string>{"_f64 256 0", "_f128 256 0"}));
  std::string own = withoutAlternatives(wide->source);
  EXPECT_NE(own.find("iPlus1"), std::string::npos) << own;
  EXPECT_EQ(own.find("iPlus2"), std::string::npos) << own;
  ASSERT_EQ(wide->alternatives.size(), 2u);
  EXPECT_NE(wide->alternatives[0].body.find("iPlus3"), std::string::npos);
  EXPECT_EQ(wide->alternatives[0].body.find("iPlus4"), std::string::npos);
  EXPECT_NE(wide->alternatives[1].body.find("iPlus7"), std::string::npos);
  EXPECT_NE(
      wide->source.find(
          "#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA))\nextern \"C\" "
          "__global__ void __launch_bounds__(256) k_f128("),
      std::string::npos)
      << wide->source;
  FailureOr<EmittedKernel> small = emitFirstFusion(sum(4096));
  ASSERT_TRUE(succeeded(small));
  EXPECT_TRUE(small->alternatives.empty());
}

// A residual add before its normalization (rows of 512, a warp's each):
// the first pass stores the sum, which the later passes read back; each
// lane keeps its elements of it in registers as it stores them, and the
// later passes read them there, not from the output.
TEST(KernelEmitterTest, WarpRowsKeepWhatTheyReadBackInRegisters) {
  std::string source = R"mlir(
func.func @f(%a: tensor<64x512xf32>, %b: tensor<64x512xf32>) -> (tensor<64x512xf32>, tensor<64x512xf32>) {
  %r:2 = gpuc.fusion(%a, %b) : (tensor<64x512xf32>, tensor<64x512xf32>) -> (tensor<64x512xf32>, tensor<64x512xf32>) {
  ^bb0(%x: tensor<64x512xf32>, %y: tensor<64x512xf32>):
    %s = gpuc.add %x, %y : tensor<64x512xf32>
    %m = gpuc.reduce_mean %s axes = [1] : tensor<64x512xf32> -> tensor<64xf32>
    %m1 = gpuc.reshape %m : tensor<64xf32> -> tensor<64x1xf32>
    %mb = gpuc.broadcast %m1 : tensor<64x1xf32> -> tensor<64x512xf32>
    %d = gpuc.sub %s, %mb : tensor<64x512xf32>
    gpuc.yield %s, %d : tensor<64x512xf32>, tensor<64x512xf32>
  }
  return %r#0, %r#1 : tensor<64x512xf32>, tensor<64x512xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  std::string gpu = targetText(src, /*cpu=*/false);
  EXPECT_NE(gpu.find("float rowOut0[16];"), std::string::npos) << src;
  // (The first pass loads two inputs an element: 4 elements a step.)
  EXPECT_NE(gpu.find("rowOut0[step * 4 + 3] = "), std::string::npos) << src;
  EXPECT_NE(gpu.find("= rowOut0[step * 8 + 7];"), std::string::npos) << src;
  // The GPU's passes load no element of the sum back; the CPU's do.
  EXPECT_EQ(gpu.find("= out0["), std::string::npos) << src;
  EXPECT_NE(targetText(src, /*cpu=*/true).find("= out0["), std::string::npos)
      << src;
}

// A block per long row (a softmax over 3,000 classes) stages the row in
// shared memory on the GPU: it copies the row there before its first pass
// (gpuc::stageRow, all in flight at once), and all three passes (the
// maximum, the sum, the stores) read it from there; the CPU's lines read
// the row from memory in every pass. The launch asks for the row's bytes;
// a row past gpuc.gpu_row_stage_bytes (or 0) is not staged, nor one whose
// elements are not one stretch of memory.
TEST(KernelEmitterTest, LongRowsAreStagedForTheirPasses) {
  auto softmax = [](StringRef element, std::optional<int64_t> stageBytes) {
    return softmaxModule(
        3000, element,
        stageBytes ? llvm::formatv("attributes {{gpuc.gpu_row_stage_bytes = "
                                   "{0} : i64}",
                                   *stageBytes)
                         .str()
                   : "");
  };
  for (auto [element, type, bytes] :
       {std::tuple<StringRef, StringRef, int64_t>{"f32", "float", 12000},
        {"bf16", "gpuc::bf16", 6000}}) {
    FailureOr<EmittedKernel> kernel =
        emitFirstFusion(softmax(element, std::nullopt));
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    EXPECT_EQ(kernel->sharedBytes, bytes) << src;
    // The copy, in the GPU's text, before the first pass.
    std::string copy =
        llvm::formatv("#ifndef GPUC_CPU\n  gpuc::stageRow(gpuc::stagedRow<{0}>"
                      "(0), in0 + (int64_t)o * 3000, 3000);\n  "
                      "gpuc::awaitStagedRows();\n  #endif",
                      type)
            .str();
    EXPECT_EQ(occurrences(src, copy), 1u) << src;
    EXPECT_LT(src.find(copy), src.find("#ifdef GPUC_CPU")) << src;
    // The three passes read it (a batch of 8 and its tail each), none from
    // memory.
    std::string staged = llvm::formatv("gpuc::stagedRow<{0}>(0)[", type).str();
    EXPECT_EQ(occurrences(src, "= " + staged), 3u * 9u) << src;
    // The kernel's own entry point, before its alternative's.
    std::string own = src.substr(0, src.find(" k_s0("));
    std::string cpu;
    for (size_t at = own.find("#ifdef GPUC_CPU"); at != std::string::npos;
         at = own.find("#ifdef GPUC_CPU", at + 1))
      cpu += own.substr(at, own.find("#else", at) - at);
    EXPECT_EQ(cpu.find("stagedRow"), std::string::npos) << src;
    EXPECT_EQ(occurrences(own, "= in0["), occurrences(cpu, "= in0[")) << src;
    // Beside it, an entry point that reads the row from memory in every
    // pass, without the shared memory.
    ASSERT_EQ(kernel->alternatives.size(), 1u);
    const KernelAlternative &unstaged = kernel->alternatives.front();
    EXPECT_EQ(unstaged.suffix, "_s0");
    EXPECT_EQ(unstaged.sharedBytes, 0);
    EXPECT_EQ(unstaged.body.find("stagedRow"), std::string::npos)
        << unstaged.body;
    EXPECT_GT(occurrences(unstaged.body, "= in0["),
              occurrences(cpu, "= in0[") + 3)
        << unstaged.body;
    // Not staged: past the bytes allowed, or none allowed.
    for (int64_t allowed : {bytes - 16, (int64_t)0}) {
      kernel = emitFirstFusion(softmax(element, allowed));
      ASSERT_TRUE(succeeded(kernel));
      EXPECT_EQ(kernel->sharedBytes, 0) << allowed;
      EXPECT_EQ(kernel->source.find("stagedRow"), std::string::npos)
          << kernel->source;
      EXPECT_TRUE(kernel->alternatives.empty()) << kernel->source;
    }
  }
  // Rows whose elements are 4 apart (a softmax over the middle axis).
  FailureOr<EmittedKernel> strided = emitFirstFusion(R"mlir(
func.func @f(%a: tensor<8x3000x4xf32>) -> tensor<8x3000x4xf32> {
  %r = gpuc.fusion(%a) : (tensor<8x3000x4xf32>) -> tensor<8x3000x4xf32> {
  ^bb0(%x: tensor<8x3000x4xf32>):
    %m = gpuc.reduce_max %x axes = [1] : tensor<8x3000x4xf32> -> tensor<8x4xf32>
    %m1 = gpuc.reshape %m : tensor<8x4xf32> -> tensor<8x1x4xf32>
    %mb = gpuc.broadcast %m1 : tensor<8x1x4xf32> -> tensor<8x3000x4xf32>
    %d = gpuc.sub %x, %mb : tensor<8x3000x4xf32>
    %e = gpuc.exp %d : tensor<8x3000x4xf32>
    %s = gpuc.reduce_sum %e axes = [1] : tensor<8x3000x4xf32> -> tensor<8x4xf32>
    %s1 = gpuc.reshape %s : tensor<8x4xf32> -> tensor<8x1x4xf32>
    %sb = gpuc.broadcast %s1 : tensor<8x1x4xf32> -> tensor<8x3000x4xf32>
    %p = gpuc.div %e, %sb : tensor<8x3000x4xf32>
    gpuc.yield %p : tensor<8x3000x4xf32>
  }
  return %r : tensor<8x3000x4xf32>
}
)mlir");
  ASSERT_TRUE(succeeded(strided));
  EXPECT_EQ(strided->sharedBytes, 0) << strided->source;
  EXPECT_EQ(strided->source.find("stagedRow"), std::string::npos)
      << strided->source;
}

// A causal softmax's scores: the GPU reads a score only where the mask
// keeps it (a warp whose keys are all past its query issues no load); the
// CPU's loop reads every one (a conditional load would keep it scalar). A
// score also read past the select is read everywhere.
TEST(KernelEmitterTest, MaskedScoresAreReadOnlyWhereKept) {
  auto causalSoftmax = [](bool alsoStored) {
    std::string results = alsoStored ? "(tensor<64x1000xf32>, "
                                       "tensor<64x1000xf32>)"
                                     : "tensor<64x1000xf32>";
    return R"mlir(
func.func @f(%a: tensor<64x1000xbf16>) -> )mlir" +
           results + R"mlir( {
  %r)mlir" +
           std::string(alsoStored ? ":2" : "") +
           R"mlir( = gpuc.fusion(%a) : (tensor<64x1000xbf16>) -> )mlir" +
           results + R"mlir( {
  ^bb0(%x: tensor<64x1000xbf16>):
    %q = gpuc.iota dim = 0 : tensor<64x1000xi64>
    %k = gpuc.iota dim = 1 : tensor<64x1000xi64>
    %masked = gpuc.compare gt, %k, %q : tensor<64x1000xi64>
    %xf = gpuc.cast %x : tensor<64x1000xbf16> to tensor<64x1000xf32>
    %fill = gpuc.constant dense<-1.0e+04> : tensor<64x1000xf32>
    %z = gpuc.select %masked, %fill, %xf : tensor<64x1000xi1>, tensor<64x1000xf32>
    %m = gpuc.reduce_max %z axes = [1] : tensor<64x1000xf32> -> tensor<64xf32>
    %m1 = gpuc.reshape %m : tensor<64xf32> -> tensor<64x1xf32>
    %mb = gpuc.broadcast %m1 : tensor<64x1xf32> -> tensor<64x1000xf32>
    %d = gpuc.sub %z, %mb : tensor<64x1000xf32>
    %e = gpuc.exp %d : tensor<64x1000xf32>
    %s = gpuc.reduce_sum %e axes = [1] : tensor<64x1000xf32> -> tensor<64xf32>
    %s1 = gpuc.reshape %s : tensor<64xf32> -> tensor<64x1xf32>
    %sb = gpuc.broadcast %s1 : tensor<64x1xf32> -> tensor<64x1000xf32>
    %p = gpuc.div %e, %sb : tensor<64x1000xf32>
    gpuc.yield %p)mlir" +
           std::string(alsoStored ? ", %xf : tensor<64x1000xf32>, "
                                    "tensor<64x1000xf32>"
                                  : " : tensor<64x1000xf32>") +
           R"mlir(
  }
  return %r)mlir" +
           std::string(alsoStored ? "#0, %r#1 : tensor<64x1000xf32>, "
                                    "tensor<64x1000xf32>"
                                  : " : tensor<64x1000xf32>") +
           "\n}\n";
  };
  FailureOr<EmittedKernel> kernel = emitFirstFusion(causalSoftmax(false));
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  // Each pass is split by target: `#ifdef GPUC_CPU` (the CPU's lines),
  // `#else` (the GPU's loop).
  std::string cpu;
  for (size_t at = src.find("#ifdef GPUC_CPU"); at != std::string::npos;
       at = src.find("#ifdef GPUC_CPU", at + 1))
    cpu += src.substr(at, src.find("#else", at) - at);
  // Every pass of the GPU's loop reads its batch of 8 under the mask (and
  // its last elements, one at a time), and only the CPU's lines read the
  // scores unguarded.
  EXPECT_EQ(occurrences(src, "? (float)in0["), 3u * (8u + 1u)) << src;
  EXPECT_EQ(occurrences(src, "= in0["), occurrences(cpu, "= in0[")) << src;
  EXPECT_EQ(occurrences(cpu, "? (float)in0["), 0u) << src;
  EXPECT_NE(cpu.find("= in0["), std::string::npos) << src;

  kernel = emitFirstFusion(causalSoftmax(true));
  ASSERT_TRUE(succeeded(kernel)) << causalSoftmax(true);
  EXPECT_EQ(occurrences(kernel->source, "? (float)in0["), 0u) << kernel->source;
}

// The same in an elementwise kernel (no reduction): the GPU's batch of
// elements reads each score under the mask, the CPU's loop every score.
TEST(KernelEmitterTest, MaskedElementsAreReadOnlyWhereKept) {
  std::string source = R"mlir(
func.func @f(%a: tensor<64x1000xbf16>) -> tensor<64x1000xf32> {
  %r = gpuc.fusion(%a) : (tensor<64x1000xbf16>) -> tensor<64x1000xf32> {
  ^bb0(%x: tensor<64x1000xbf16>):
    %q = gpuc.iota dim = 0 : tensor<64x1000xi64>
    %k = gpuc.iota dim = 1 : tensor<64x1000xi64>
    %kept = gpuc.compare le, %k, %q : tensor<64x1000xi64>
    %xf = gpuc.cast %x : tensor<64x1000xbf16> to tensor<64x1000xf32>
    %e = gpuc.exp %xf : tensor<64x1000xf32>
    %zero = gpuc.constant dense<0.0> : tensor<64x1000xf32>
    %z = gpuc.select %kept, %e, %zero : tensor<64x1000xi1>, tensor<64x1000xf32>
    gpuc.yield %z : tensor<64x1000xf32>
  }
  return %r : tensor<64x1000xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  size_t gpu = src.find("#else"), end = src.find("#endif", gpu);
  ASSERT_NE(gpu, std::string::npos) << src;
  std::string cpu = src.substr(0, gpu), gpuText = src.substr(gpu, end - gpu);
  // The true operand: read where the condition holds.
  EXPECT_EQ(occurrences(gpuText, " ? (float)in0["), 8u) << src;
  EXPECT_EQ(occurrences(gpuText, "= !"), 0u) << src;
  EXPECT_EQ(occurrences(cpu, "? (float)in0["), 0u) << src;
}

// A one-hot mask beside float math: the bool is converted through int,
// which GCC vectorizes ((float)b alone kept the whole loop scalar), and the
// row's maximum is kept in float (exact) while its sum accumulates in
// gpuc::Accumulator.
TEST(KernelEmitterTest, OneHotSoftmaxRowVectorizes) {
  std::string source = R"mlir(
func.func @f(%x: tensor<4x64xf32>, %l: tensor<4x64xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = gpuc.fusion(%x, %l) : (tensor<4x64xf32>, tensor<4x64xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x64xf32>, %b: tensor<4x64xi64>):
    %i = gpuc.iota dim = 1 : tensor<4x64xi64>
    %h = gpuc.compare eq, %i, %b : tensor<4x64xi64>
    %f = gpuc.cast %h : tensor<4x64xi1> to tensor<4x64xf32>
    %p = gpuc.mul %a, %f : tensor<4x64xf32>
    %s = gpuc.reduce_sum %p axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
    %m = gpuc.reduce_max %a axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
    gpuc.yield %s, %m : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  EXPECT_NE(src.find("(float)((int)"), std::string::npos) << src;
  EXPECT_EQ(src.find("(float)(v"), std::string::npos) << src;
  EXPECT_NE(src.find("float acc1 = -INFINITY;"), std::string::npos) << src;
  EXPECT_NE(src.find("gpuc::Accumulator acc0 = 0;"), std::string::npos) << src;
}

// A row_groups is a kernel of its own: the one-block sort cannot share a
// kernel with other work (gpuc-fuse merges only what the emitter accepts).
TEST(KernelEmitterTest, RowGroupsIsAKernelOfItsOwn) {
  std::string alone = R"mlir(
func.func @f(%ids: tensor<8xi64>) -> (tensor<6xi32>, tensor<8xi32>) {
  %r:2 = gpuc.fusion(%ids) : (tensor<8xi64>) -> (tensor<6xi32>, tensor<8xi32>) {
  ^bb0(%a: tensor<8xi64>):
    %o, %p = gpuc.row_groups %a rows = 5 : tensor<8xi64> -> tensor<6xi32>, tensor<8xi32>
    gpuc.yield %o, %p : tensor<6xi32>, tensor<8xi32>
  }
  return %r#0, %r#1 : tensor<6xi32>, tensor<8xi32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(alone);
  ASSERT_TRUE(succeeded(kernel));
  EXPECT_EQ(kernel->grid, 1);
  EXPECT_NE(kernel->source.find("gpuc::groupRows(in0, 8, 5, out0, out1);"),
            std::string::npos)
      << kernel->source;
  std::string withOther = R"mlir(
func.func @f(%ids: tensor<8xi64>) -> (tensor<6xi32>, tensor<8xi32>) {
  %r:2 = gpuc.fusion(%ids) : (tensor<8xi64>) -> (tensor<6xi32>, tensor<8xi32>) {
  ^bb0(%a: tensor<8xi64>):
    %n = gpuc.neg %a : tensor<8xi64>
    %o, %p = gpuc.row_groups %n rows = 5 : tensor<8xi64> -> tensor<6xi32>, tensor<8xi32>
    gpuc.yield %o, %p : tensor<6xi32>, tensor<8xi32>
  }
  return %r#0, %r#1 : tensor<6xi32>, tensor<8xi32>
}
)mlir";
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.getDiagEngine().registerHandler([](Diagnostic &) {});
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(withOther, &context);
  ASSERT_TRUE(module);
  FusionOp fusion;
  module->walk([&](FusionOp op) { fusion = op; });
  EXPECT_TRUE(failed(emitKernel(fusion, "k")));
}

// Rows of at most kWarpRowMax elements are a warp's on the GPU: 8 rows per
// block (the grid is a row count over 8, rounded up; the CPU still runs a
// block per row), the last block's spare warps guarded out, the row reduced
// by shuffles and its value stored by lane 0. Longer rows keep a block each.
TEST(KernelEmitterTest, ShortRowsAreAWarpEach) {
  auto source = [](int64_t rows, int64_t length) {
    std::string t = "tensor<" + std::to_string(rows) + "x" +
                    std::to_string(length) + "xf32>",
                v = "tensor<" + std::to_string(rows) + "xf32>";
    return "func.func @f(%a: " + t + ") -> " + v +
           " {\n  %r = gpuc.fusion(%a) : (" + t + ") -> " + v +
           " {\n  ^bb0(%x: " + t +
           "):\n    %s = gpuc.reduce_sum %x axes = "
           "[1] : " +
           t + " -> " + v + "\n    gpuc.yield %s : " + v +
           "\n  }\n  return %r : " + v + "\n}\n";
  };
  FailureOr<EmittedKernel> shortRows = emitFirstFusion(source(100, 1024));
  ASSERT_TRUE(succeeded(shortRows));
  const std::string &src = shortRows->source;
  EXPECT_EQ(shortRows->grid, 13) << src;
  EXPECT_NE(shortRows->cpuLauncher.find("cpuLaunch(100LL, 13LL, "),
            std::string::npos)
      << shortRows->cpuLauncher;
  EXPECT_NE(src.find("const gidx o = (gidx)gpuc::warpRow();\n  if (o < 100) {"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find(" * (gidx)gpuc::kWarpStride)"), std::string::npos) << src;
  EXPECT_NE(src.find("gpuc::warpReduceSum("), std::string::npos) << src;
  EXPECT_NE(src.find("if (gpuc::warpLane() == 0)"), std::string::npos) << src;
  EXPECT_EQ(src.find("blockReduce"), std::string::npos) << src;

  FailureOr<EmittedKernel> longRows = emitFirstFusion(source(2048, 1025));
  ASSERT_TRUE(succeeded(longRows));
  EXPECT_EQ(longRows->grid, 2048) << longRows->source;
  EXPECT_NE(longRows->source.find("gpuc::blockReduceSum("), std::string::npos)
      << longRows->source;
  EXPECT_EQ(longRows->source.find("warpRow"), std::string::npos)
      << longRows->source;
}

// Columns take as many lanes as divide their axis, up to a block (or
// --gpu-column-lanes): 2,048 take 256, 96 take 32. An axis of no multiple of 32
// takes 16 lanes of 16-bit elements (a warp's loads are two runs of 32 bytes,
// whole sectors, where 8 lanes read half of each), 8 of wider ones.
TEST(KernelEmitterTest, ColumnsTakeTheWidestLanesTheirAxisAllows) {
  EXPECT_EQ(gpuColumnLanes(2048, false), 256);
  EXPECT_EQ(gpuColumnLanes(768, true), 256);
  EXPECT_EQ(gpuColumnLanes(64, false), 64);
  EXPECT_EQ(gpuColumnLanes(96, true), 32);
  EXPECT_EQ(gpuColumnLanes(2000, true), kGpuNarrowColumnLanes);
  EXPECT_EQ(gpuColumnLanes(2000, false), kGpuColumnLanes);
  EXPECT_EQ(gpuColumnLanes(24, true), kGpuColumnLanes);
  // gpuc compile --gpu-column-lanes caps them.
  EXPECT_EQ(gpuColumnLanes(2048, true, 64), 64);
  EXPECT_EQ(gpuColumnLanes(2048, true, 16), kGpuNarrowColumnLanes);
  EXPECT_EQ(gpuColumnLanes(2048, false, 16), kGpuColumnLanes);
  EXPECT_EQ(gpuColumnLanes(2048, true, 8), kGpuColumnLanes);
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  for (auto [element, width, lanes] :
       {std::tuple<const char *, int, int64_t>{"bf16", 2000, 16},
        {"f16", 2000, 16},
        {"f32", 2000, 8},
        {"bf16", 96, 32}}) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(rowKernel(width, element), &context);
    ASSERT_TRUE(module);
    FusionOp fusion;
    module->walk([&](FusionOp op) { fusion = op; });
    FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
    ASSERT_TRUE(succeeded(kernel));
    const std::string &src = kernel->source;
    int64_t splits =
        rowKernelSplits(width / lanes, 65536, columnChunkMin(lanes));
    EXPECT_EQ(kernel->grid, width / lanes * splits);
    EXPECT_NE(
        src.find(
            llvm::formatv(" * {0} + gpuc::columnLane<{0}>();", lanes).str()),
        std::string::npos)
        << src;
    EXPECT_NE(
        src.find(
            llvm::formatv(" * (gidx)gpuc::columnSlices<{0}>())", lanes).str()),
        std::string::npos)
        << src;
    EXPECT_NE(
        src.find(llvm::formatv("gpuc::columnReduceSum<{0}>(", lanes).str()),
        std::string::npos)
        << src;
  }
}

// A chunk of a split kernel is whole batches of its block's threads (8
// elements a thread): GPT-2's GELU gradient with its bias's sums, 3,072
// bf16 columns over 16,384 tokens, split 86 ways, has chunks of 192 rows
// (not 191), and no thread takes its last few one at a time.
TEST(KernelEmitterTest, ChunksAreWholeBatches) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(rowKernel(3072, "bf16", 16384), &context);
  ASSERT_TRUE(module);
  FusionOp fusion;
  module->walk([&](FusionOp op) { fusion = op; });
  FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  int64_t splits = rowKernelSplits(3072 / 256, 16384, columnChunkMin(256));
  ASSERT_EQ(splits, 86);
  ASSERT_NE((16384 + splits - 1) / splits % 8, 0) << "not a case to test";
  EXPECT_EQ(kernel->grid, 12 * 86) << src;
  size_t gpu = src.find("#else");
  ASSERT_NE(gpu, std::string::npos) << src;
  EXPECT_NE(src.find("const gidx rowBegin = part * 192;", gpu),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("for (; r < rowEnd;", gpu), std::string::npos) << src;
}

// Few groups of columns (a layer norm's weight gradient: 768 features
// summed over 16,384 tokens) split into chunks short enough to give a GPU
// about kRowKernelBlocks blocks: a chunk needs only columnChunkMin rows,
// its threads sharing them, where kRowChunkMin rows left such a kernel 192
// blocks (48 bf16 groups, 4 chunks each).
TEST(KernelEmitterTest, FewColumnGroupsSplitIntoShortChunks) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  for (const char *element : {"bf16", "f32"}) {
    // 3 groups of 256 columns, 342 chunks of 48 rows each.
    int64_t lanes = 256, splits = 342;
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(rowKernel(768, element, 16384), &context);
    ASSERT_TRUE(module);
    FusionOp fusion;
    module->walk([&](FusionOp op) { fusion = op; });
    FailureOr<EmittedKernel> kernel = emitKernel(fusion, "k");
    ASSERT_TRUE(succeeded(kernel));
    EXPECT_EQ(columnChunkMin(lanes), 16);
    EXPECT_EQ(kernel->grid, 768 / lanes * splits) << element;
    EXPECT_EQ(kernel->launches, 3) << element;
    const std::string &src = kernel->source;
    EXPECT_NE(
        src.find(
            llvm::formatv("const gidx part = blockIdx.x % {0};", splits).str()),
        std::string::npos)
        << src;
    // The last launch writes the per-row values from each row's first
    // chunk alone (both texts), and the centred rows from every chunk.
    EXPECT_NE(src.find("if (phase == 2 && part == 0"), std::string::npos)
        << src;
    EXPECT_EQ(src.find("part != 0) return;"), std::string::npos) << src;
    // One launch combines the chunks' partials of all 768 columns, on both
    // targets (the GPU a warp a column, the CPU a block a column, each in
    // a fixed order); no block of a later launch adds them again.
    std::string combine =
        llvm::formatv("gpuc::combineColumnPartials<false>(partials + 0, "
                      "totals + 0, 768, {0});",
                      splits)
            .str();
    size_t first = src.find(combine);
    EXPECT_NE(first, std::string::npos) << src;
    EXPECT_NE(src.find(combine, first + 1), std::string::npos) << src;
    EXPECT_EQ(src.find("partials[(0 + o) * 342 + s"), std::string::npos) << src;
  }
}

// A per-element result of a row kernel's first pass that its last pass
// needs again is read back from its output when computing it reads more
// bytes (a residual sum of two inputs, stored and then normalized: one
// load where there were two); one computed from a single input of its own
// size is computed again. Either way the first pass stores it.
TEST(KernelEmitterTest, LaterPassesReadBackWhatTheFirstStored) {
  for (bool twoInputs : {true, false}) {
    std::string t = "tensor<64x1024xf32>", v = "tensor<64x1xf32>";
    std::string sum =
        twoInputs ? "gpuc.add %x, %y : " + t : "gpuc.mul %x, %x : " + t;
    std::string source =
        "func.func @f(%a: " + t + ", %b: " + t + ") -> (" + t + ", " + t +
        ") {\n  %r:2 = gpuc.fusion(%a, %b) : (" + t + ", " + t + ") -> (" + t +
        ", " + t + ") {\n  ^bb0(%x: " + t + ", %y: " + t +
        "):\n    %s = " + sum +
        "\n    %m = gpuc.reduce_mean %s axes = [1] keep_dims : " + t + " -> " +
        v + "\n    %mb = gpuc.broadcast %m : " + v + " -> " + t +
        "\n    %c = gpuc.sub %s, %mb : " + t +
        "\n    gpuc.yield %s, %c : " + t + ", " + t +
        "\n  }\n  return %r#0, %r#1 : " + t + ", " + t + "\n}\n";
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
    ASSERT_TRUE(succeeded(kernel)) << source;
    const std::string src = withoutAlternatives(kernel->source);
    // Both texts (CPU, GPU): the first pass stores the sum...
    size_t reduced = src.find("ReduceSum(");
    ASSERT_NE(reduced, std::string::npos) << src;
    EXPECT_NE(src.rfind("out0[", reduced), std::string::npos) << src;
    // ...and the passes after the reduction (the GPU's, then the CPU's and
    // the GPU's) load it, or its input.
    std::string after = src.substr(reduced);
    if (twoInputs) {
      EXPECT_NE(after.find("= out0["), std::string::npos) << src;
      EXPECT_EQ(after.find("= in0["), std::string::npos) << src;
      EXPECT_EQ(after.find("= in1["), std::string::npos) << src;
    } else {
      EXPECT_NE(after.find("= in0["), std::string::npos) << src;
      EXPECT_EQ(after.find("= out0["), std::string::npos) << src;
    }
  }
}

// A GPU column's thread adds each batch of a float sum's elements in
// float, pairwise, and converts that to double once; a maximum stays a
// float an element, and the CPU's double lanes take each element.
TEST(KernelEmitterTest, GpuColumnBatchesSumInFloat) {
  std::string t = "tensor<65536x64xf32>", v = "tensor<1x64xf32>";
  std::string source =
      "func.func @f(%a: " + t + ", %b: " + t + ") -> (" + v + ", " + v + ", " +
      v + ") {\n  %r:3 = gpuc.fusion(%a, %b) : (" + t + ", " + t + ") -> (" +
      v + ", " + v + ", " + v + ") {\n  ^bb0(%x: " + t + ", %y: " + t +
      "):\n    %p = gpuc.mul %x, %y : " + t +
      "\n    %s = gpuc.reduce_sum %p axes = [0] keep_dims : " + t + " -> " + v +
      "\n    %m = gpuc.reduce_mean %x axes = [0] keep_dims : " + t + " -> " +
      v + "\n    %x2 = gpuc.reduce_max %y axes = [0] keep_dims : " + t +
      " -> " + v + "\n    gpuc.yield %s, %m, %x2 : " + v + ", " + v + ", " + v +
      "\n  }\n  return %r#0, %r#1, %r#2 : " + v + ", " + v + ", " + v + "\n}\n";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel)) << source;
  const std::string &src = kernel->source;
  size_t gpu = src.find("#else"), end = src.rfind("#endif");
  ASSERT_NE(gpu, std::string::npos) << src;
  std::string cpuText = src.substr(0, gpu),
              gpuText = src.substr(gpu, end - gpu);
  // The GPU's batch loop adds each sum's batch pairwise in float, then
  // converts once; its tail loop adds one element at a time; the maximum
  // stays a float per element.
  std::regex batchSum(R"(\+= \(double\)\([^;]* \+ [^;]*\);)");
  auto batched = std::distance(
      std::sregex_iterator(gpuText.begin(), gpuText.end(), batchSum),
      std::sregex_iterator());
  EXPECT_EQ(batched, 2) << gpuText;
  EXPECT_NE(gpuText.find("double acc"), std::string::npos) << gpuText;
  EXPECT_NE(gpuText.find("gpuc::maxOrNan("), std::string::npos) << gpuText;
  // The CPU's columns keep their double lanes, element by element.
  EXPECT_EQ(cpuText.find("+= (double)("), std::string::npos) << cpuText;
}

// A variance about the mean of the same rows (batch norm's over the 65,536
// positions of 64 channels, in columns split into chunks) is summed in the
// mean's pass, about each column's first element: one level of
// reductions, so 3 launches (the sums, their combining, the normalized
// elements with the per-channel values) where two levels took 5. In rows
// (the same over the channels of each position: a float sum on the GPU)
// it keeps its own pass after the mean's.
TEST(KernelEmitterTest, ColumnVarianceSharesItsMeansPass) {
  for (bool columns : {true, false}) {
    std::string t = "tensor<65536x64xf32>",
                v = columns ? "tensor<1x64xf32>" : "tensor<65536x1xf32>",
                axis = columns ? "0" : "1";
    std::string source =
        "func.func @f(%a: " + t + ") -> (" + t + ", " + v +
        ") {\n  %r:2 = gpuc.fusion(%a) : (" + t + ") -> (" + t + ", " + v +
        ") {\n  ^bb0(%x: " + t + "):\n    %m = gpuc.reduce_mean %x axes = [" +
        axis + "] keep_dims : " + t + " -> " + v +
        "\n    %mb = gpuc.broadcast %m : " + v + " -> " + t +
        "\n    %c = gpuc.sub %x, %mb : " + t +
        "\n    %s = gpuc.mul %c, %c : " + t +
        "\n    %var = gpuc.reduce_mean %s axes = [" + axis +
        "] keep_dims : " + t + " -> " + v +
        "\n    %r = gpuc.rsqrt %var : " + v +
        "\n    %rb = gpuc.broadcast %r : " + v + " -> " + t +
        "\n    %n = gpuc.mul %c, %rb : " + t +
        "\n    gpuc.yield %n, %var : " + t + ", " + v +
        "\n  }\n  return %r#0, %r#1 : " + t + ", " + v + "\n}\n";
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
    ASSERT_TRUE(succeeded(kernel)) << source;
    const std::string &src = kernel->source;
    if (!columns) {
      EXPECT_EQ(src.find("shiftedSquare"), std::string::npos) << src;
      continue;
    }
    EXPECT_EQ(kernel->launches, 3) << src;
    // Both targets: the shift is the column's first element (row 0), the
    // squares are about it, and the variance comes from both sums.
    for (const char *text : {"shift0[lane] = (float)", "gpuc::shiftedSquare(",
                             "gpuc::centeredSquares(acc", "const float shift"})
      EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;
    // On the GPU the shifted squares are summed a batch at a time in float.
    EXPECT_NE(src.find("+= (double)((gpuc::shiftedSquare("), std::string::npos)
        << src;
    EXPECT_NE(src.find("gpuc::combineColumnPartials<false>(partials + 0, "
                       "totals + 0, 128,"),
              std::string::npos)
        << src;
  }
}

// A sum and a mean of one value (batch norm's gradient: a bias gradient and
// the mean its input gradient subtracts), here one product computed twice
// as the fuser's copies are, take one accumulator: added once an element,
// the sum its value and the mean its value over the count. A sum of
// another value keeps its own.
TEST(KernelEmitterTest, SumAndMeanOfOneValueShareAnAccumulator) {
  for (bool columns : {true, false}) {
    std::string t = "tensor<65536x64xf32>",
                v = columns ? "tensor<1x64xf32>" : "tensor<65536x1xf32>",
                s = columns ? "tensor<64xf32>" : "tensor<65536xf32>",
                axis = columns ? "0" : "1";
    std::string source =
        "func.func @f(%a: " + t + ", %b: " + t + ") -> (" + t + ", " + s +
        ", " + s + ") {\n  %r:3 = gpuc.fusion(%a, %b) : (" + t + ", " + t +
        ") -> (" + t + ", " + s + ", " + s + ") {\n  ^bb0(%x: " + t +
        ", %y: " + t + "):\n    %p1 = gpuc.mul %x, %y : " + t +
        "\n    %p2 = gpuc.mul %x, %y : " + t +
        "\n    %m = gpuc.reduce_mean %p1 axes = [" + axis +
        "] keep_dims : " + t + " -> " + v +
        "\n    %sum = gpuc.reduce_sum %p2 axes = [" + axis + "] : " + t +
        " -> " + s + "\n    %other = gpuc.reduce_sum %x axes = [" + axis +
        "] : " + t + " -> " + s + "\n    %mb = gpuc.broadcast %m : " + v +
        " -> " + t + "\n    %d = gpuc.sub %y, %mb : " + t +
        "\n    gpuc.yield %d, %sum, %other : " + t + ", " + s + ", " + s +
        "\n  }\n  return %r#0, %r#1, %r#2 : " + t + ", " + s + ", " + s +
        "\n}\n";
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
    ASSERT_TRUE(succeeded(kernel)) << source;
    const std::string &src = kernel->source;
    // Each text (CPU and GPU) has two accumulators for the three
    // reductions, and reads the shared one for both of its results.
    EXPECT_NE(src.find("acc1"), std::string::npos) << src;
    EXPECT_EQ(src.find("acc2"), std::string::npos) << src;
    std::smatch mean;
    ASSERT_TRUE(std::regex_search(
        src, mean,
        std::regex(R"(\(float\)\((acc\d+(Lanes\[lane\])?) / )" +
                   std::string(columns ? "65536" : "64") + R"(\.0\))")))
        << src;
    EXPECT_NE(src.find("(float)" + mean[1].str() + ";"), std::string::npos)
        << mean[1] << "\n"
        << src;
    if (!columns)
      continue;
    // The split kernel's partials and totals: two columns of slots a row
    // (128 = 2 x 64 combined at once), where three reductions took three.
    std::smatch combine;
    ASSERT_TRUE(std::regex_search(
        src, combine,
        std::regex(R"(combineColumnPartials<false>\(partials \+ 0, totals )"
                   R"(\+ 0, 128, (\d+)\))")))
        << src;
    int64_t splits = std::stoll(combine[1].str());
    EXPECT_EQ(kernel->workspaceBytes, 2 * 64 * (splits + 1) * 8) << src;
  }
}

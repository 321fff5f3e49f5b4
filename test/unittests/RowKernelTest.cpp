//===- RowKernelTest.cpp - row kernels' passes and staging ----------------===//
//
// Row kernels, read as text: how a row's reductions share passes, which
// values a later pass reads back or computes again, rows split across
// blocks or a warp each, and rows staged in registers or shared memory.
//
//===----------------------------------------------------------------------===//
#include "KernelEmitterTestSupport.h"

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
using namespace gpuc_test;

TEST(RowKernelTest, FewLongRowsAreSplitAcrossBlocks) {
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
      // totals are the same launch's. A block takes 1,024 rows (4 KiB of
      // each row it reads, 256 blocks), and fetches the next rows' runs 2
      // rows ahead.
      EXPECT_NE(
          src.find("const gidx oGroup = (gidx)(blockIdx.x / 128) * 1024;"),
          std::string::npos)
          << src;
      EXPECT_NE(src.find("acc0Lanes[lane] = (gpuc::Accumulator)totals[0 + "
                         "o];"),
                std::string::npos)
          << src;
      EXPECT_NE(src.find("Lanes[lane];"), std::string::npos) << src;
      EXPECT_NE(src.find("if (r + 2 < rowEnd) {"), std::string::npos) << src;
      EXPECT_NE(src.find("for (int at = 0; at < 1024; at += 16) "
                         "__builtin_prefetch(&in0["),
                std::string::npos)
          << src;
      EXPECT_NE(kernel->cpuLauncher.find("cpuLaunch(256LL, 1024LL"),
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
TEST(RowKernelTest, ResultsIndependentOfReductionsAreStoredInTheFirstPass) {
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
TEST(RowKernelTest, InPlaceResultIsStoredInTheOnlyPass) {
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
TEST(RowKernelTest, ExponentialsAreKeptForTheLastPass) {
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

// Reductions that read no other reduction share a pass: the sums of x and
// x*x (level 0) are reduced in the first launch of a split row kernel, the
// sum of squared deviations (level 1, it reads the mean) in the second; then
// the per-element and per-row launches: 4 launches, not 5.
TEST(RowKernelTest, IndependentReductionsShareAPass) {
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
TEST(RowKernelTest, PerRowValuesAreNotPermuted) {
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

// The row's channel picks the concatenation's input once per row, before any
// loop, however many passes and targets read it; each read is one load from
// the picked input.
TEST(RowKernelTest, ConcatAlongAKeptAxisSelectsItsInputOncePerRow) {
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
TEST(RowKernelTest, RowsOfWholeLaneGroupsHaveNoRemainderLoop) {
  const std::string remainder = "rAtGroup + lane < rAtEnd";
  FailureOr<EmittedKernel> whole = emitFirstFusion(statisticsOfConcat(64));
  ASSERT_TRUE(succeeded(whole));
  EXPECT_EQ(whole->source.find(remainder), std::string::npos) << whole->source;
  FailureOr<EmittedKernel> partial = emitFirstFusion(statisticsOfConcat(25));
  ASSERT_TRUE(succeeded(partial));
  EXPECT_NE(partial->source.find(remainder), std::string::npos)
      << partial->source;
}

// A softmax over rows of 1000 (a warp's each): every pass takes 8 of a
// lane's elements, a warp's stride apart, while all 8 are in the row, with
// no guard on any of them; then the lane's last elements one at a time.
// Rows of 512 (whole batches of the warp's lanes) need no such loop: their
// passes are unrolled over the lanes' registers
// (WarpRowsAreStagedInRegisters).
TEST(RowKernelTest, RowPassesTakeABatchOfALanesElements) {
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

// A warp's row whose lanes' elements fit their registers (a softmax over
// 512, 16 a lane; a bf16 one too) is loaded into them before its first
// pass, every element in flight at once; each pass, unrolled (a batch of 8
// a step), reads them there and loads nothing from the input. The CPU's
// text reads the input as it did. Rows of 1000 (not a lane's whole
// elements) and 1024 in f32 with three inputs past 64 registers a lane
// stage nothing.
TEST(RowKernelTest, WarpRowsAreStagedInRegisters) {
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

// A residual add before its normalization (rows of 512, a warp's each):
// the first pass stores the sum, which the later passes read back; each
// lane keeps its elements of it in registers as it stores them, and the
// later passes read them there, not from the output.
TEST(RowKernelTest, WarpRowsKeepWhatTheyReadBackInRegisters) {
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
TEST(RowKernelTest, LongRowsAreStagedForTheirPasses) {
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

// The same in an elementwise kernel (no reduction): the GPU's batch of
// elements reads each score under the mask, the CPU's loop every score.
TEST(RowKernelTest, MaskedElementsAreReadOnlyWhereKept) {
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
TEST(RowKernelTest, OneHotSoftmaxRowVectorizes) {
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
TEST(RowKernelTest, RowGroupsIsAKernelOfItsOwn) {
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
TEST(RowKernelTest, ShortRowsAreAWarpEach) {
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

// A per-element result of a row kernel's first pass that its last pass
// needs again is read back from its output when computing it reads more
// bytes (a residual sum of two inputs, stored and then normalized: one
// load where there were two); one computed from a single input of its own
// size is computed again. Either way the first pass stores it.
TEST(RowKernelTest, LaterPassesReadBackWhatTheFirstStored) {
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

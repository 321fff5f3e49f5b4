//===- KernelEmitterTest.cpp - the kernels emitKernel writes --------------===//
//
// What emitKernel writes for a fusion, read as text: operands it writes
// over, index widths, the order of loads and stores, elementwise batches,
// the attention kernels, and the alternative entry points the GPU times.
// Row kernels (RowKernelTest.cpp) and column kernels (ColumnKernelTest.cpp)
// have files of their own.
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

// An embedding's update (its rows' position sums, a segment sum, read by
// an update written in place): the segment sum's loads do not count
// towards a thread's 32 bytes in flight (its loop's wait for the offsets it
// loads, and the offsets are a row's), so the two 4-byte inputs read at
// the stored index make batches of 4 elements. Such a kernel has no
// alternatives: timed on unwritten offsets, they could read out of bounds.
TEST(KernelEmitterTest, SegmentSumLoadsAreNotCountedInFlight) {
  std::string source = R"mlir(
func.func @f(%w: tensor<1000x64xf32>, %m: tensor<1000x64xf32>, %u: tensor<300x64xf32>, %o: tensor<1001xi32>, %p: tensor<300xi32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>) {
  %r:2 = gpuc.fusion(%w, %m, %u, %o, %p) {gpuc.in_place = array<i64: 0, 1>} : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<300x64xf32>, tensor<1001xi32>, tensor<300xi32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>) {
  ^bb0(%x: tensor<1000x64xf32>, %y: tensor<1000x64xf32>, %v: tensor<300x64xf32>, %off: tensor<1001xi32>, %ord: tensor<300xi32>):
    %g = gpuc.segment_sum %v, %off, %ord axis = 0 : (tensor<300x64xf32>, tensor<1001xi32>, tensor<300xi32>) -> tensor<1000x64xf32>
    %y2 = gpuc.add %y, %g : tensor<1000x64xf32>
    %x2 = gpuc.sub %x, %y2 : tensor<1000x64xf32>
    gpuc.yield %x2, %y2 : tensor<1000x64xf32>, tensor<1000x64xf32>
  }
  return %r#0, %r#1 : tensor<1000x64xf32>, tensor<1000x64xf32>
}
)mlir";
  FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
  ASSERT_TRUE(succeeded(kernel));
  const std::string &src = kernel->source;
  std::string gpu = targetText(src, /*cpu=*/false);
  EXPECT_NE(gpu.find("const gidx iPlus3 ="), std::string::npos) << src;
  EXPECT_EQ(gpu.find("iPlus4"), std::string::npos) << src;
  // Every element's operands are loaded before the first store.
  size_t lastLoad = gpu.find("in1[iPlus3]");
  ASSERT_NE(lastLoad, std::string::npos) << src;
  EXPECT_LT(lastLoad, gpu.find("out0[")) << src;
  EXPECT_TRUE(kernel->alternatives.empty());
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

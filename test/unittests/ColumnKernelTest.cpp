//===- ColumnKernelTest.cpp - column kernels' lanes and chunks ------------===//
//
// Column kernels (sums over the rows of adjacent elements: a bias
// gradient, a channels-last batch norm's statistics), read as text: their
// lanes, their chunks of rows, and how their sums accumulate.
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

// A CPU column block's lanes keep their accumulators (a double per lane and
// sum) in 12 KiB: six column sums over 2,048 columns take 256 lanes, seven
// take 128.
TEST(ColumnKernelTest, ManyColumnSumsTakeFewerLanes) {
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

// A bias gradient of a concatenation (a fused QKV projection's): the CPU's
// column blocks pick the input once per block (each block's rows lie in one
// input), so the lanes load from one pointer, as the GPU's row blocks do.
TEST(ColumnKernelTest, ColumnBlocksPickAConcatInputOncePerBlock) {
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

// Columns take as many lanes as divide their axis, up to a block (or
// --gpu-column-lanes): 2,048 take 256, 96 take 32. An axis of no multiple of 32
// takes 16 lanes of 16-bit elements (a warp's loads are two runs of 32 bytes,
// whole sectors, where 8 lanes read half of each), 8 of wider ones.
TEST(ColumnKernelTest, ColumnsTakeTheWidestLanesTheirAxisAllows) {
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
TEST(ColumnKernelTest, ChunksAreWholeBatches) {
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
TEST(ColumnKernelTest, FewColumnGroupsSplitIntoShortChunks) {
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

// A GPU column's thread adds each batch of a float sum's elements in
// float, pairwise, and converts that to double once; a maximum stays a
// float an element, and the CPU's double lanes take each element.
TEST(ColumnKernelTest, GpuColumnBatchesSumInFloat) {
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
TEST(ColumnKernelTest, ColumnVarianceSharesItsMeansPass) {
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
TEST(ColumnKernelTest, SumAndMeanOfOneValueShareAnAccumulator) {
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

// A split column kernel with nothing left for a launch after its partials
// are combined (a bias's gradient summed beside the per-element gradient it
// sums, which the first pass stores) takes two launches: the combining
// one writes each column's result, from the combined partials, where a
// third launch did. It needs no totals for later launches. A kernel whose
// per-element result reads its sums (a mean subtracted) keeps three.
TEST(ColumnKernelTest, CombiningLaunchWritesAKernelsLastResults) {
  for (bool perElementReadsSum : {false, true}) {
    std::string t = "tensor<16384x768xf32>", v = "tensor<768xf32>",
                k = "tensor<1x768xf32>";
    std::string element =
        perElementReadsSum
            ? "    %sk = gpuc.reshape %s : " + v + " -> " + k +
                  "\n    %sb = gpuc.broadcast %sk : " + k + " -> " + t +
                  "\n    %g = gpuc.sub %p, %sb : " + t + "\n"
            : "    %g = gpuc.mul %p, %x : " + t + "\n";
    std::string source =
        "func.func @f(%a: " + t + ", %b: " + t + ") -> (" + t + ", " + v +
        ") {\n  %r:2 = gpuc.fusion(%a, %b) : (" + t + ", " + t + ") -> (" + t +
        ", " + v + ") {\n  ^bb0(%x: " + t + ", %y: " + t +
        "):\n    %p = gpuc.mul %x, %y : " + t +
        "\n    %s = gpuc.reduce_sum %p axes = [0] : " + t + " -> " + v +
        "\n    %h = gpuc.mul %s, %s : " + v + "\n" + element +
        "    gpuc.yield %g, %h : " + t + ", " + v +
        "\n  }\n  return %r#0, %r#1 : " + t + ", " + v + "\n}\n";
    FailureOr<EmittedKernel> kernel = emitFirstFusion(source);
    ASSERT_TRUE(succeeded(kernel)) << source;
    const std::string &src = kernel->source;
    std::smatch part;
    ASSERT_TRUE(std::regex_search(
        src, part, std::regex(R"(const gidx part = blockIdx.x % (\d+);)")))
        << src;
    int64_t splits = std::stoll(part[1].str());
    ASSERT_GT(splits, 1) << src;
    if (perElementReadsSum) {
      EXPECT_EQ(kernel->launches, 3) << src;
      EXPECT_EQ(src.find("gpuc::firstCombinedColumn()"), std::string::npos)
          << src;
      continue;
    }
    EXPECT_EQ(kernel->launches, 2) << src;
    EXPECT_EQ(kernel->workspaceBytes, 768 * splits * 8) << src;
    // Both texts: the combining launch computes the per-row value (the
    // square of the sum) from the combined partials and one thread a
    // column stores it; no launch reads totals.
    std::regex finish(
        R"(if \(phase == 1\) \{\s*for \(gidx (column\d+) = \(gidx\)gpuc::firstCombinedColumn\(\); \1 < 768; \1 \+= \(gidx\)gpuc::combinedColumnStep\(\)\) \{\s*const double (total\d+) = gpuc::combineColumn<false>\(partials \+ 0, \1, )" +
        std::to_string(splits) +
        R"(\);\s*const float (red\d+) = \(float\)\2;\s*if \(gpuc::writesCombinedColumn\(\)\) \{\s*const float (v\d+) = \(\3 \* \3\);\s*out1\[\1\] = \4;)");
    auto finishes =
        std::distance(std::sregex_iterator(src.begin(), src.end(), finish),
                      std::sregex_iterator());
    EXPECT_EQ(finishes, 2) << src;
    EXPECT_EQ(src.find("= totals["), std::string::npos) << src;
    EXPECT_EQ(src.find("phase == 2"), std::string::npos) << src;
  }
}

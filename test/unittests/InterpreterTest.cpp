//===- InterpreterTest.cpp - hand-computed results and the Philox KAT -----===//
#include "gpuc/Interpreter/Interpreter.h"
#include "gpuc/InitAll.h"
#include "gpuc/runtime/Philox.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

TEST(Philox, KnownAnswers) {
  // Random123's known-answer vectors for philox4x32_10.
  const ::gpuc::philox_u32 zeroCtr[4] = {0, 0, 0, 0}, zeroKey[2] = {0, 0};
  ::gpuc::philox_u32 out[4];
  ::gpuc::philox4x32_10(zeroCtr, zeroKey, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  const ::gpuc::philox_u32 onesCtr[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu,
                                         0xffffffffu},
                           onesKey[2] = {0xffffffffu, 0xffffffffu};
  ::gpuc::philox4x32_10(onesCtr, onesKey, out);
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

TEST(Philox, DropoutRateAndDeterminism) {
  int kept = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i)
    kept += ::gpuc::dropoutKeeps(1234, 7, 3, i, n, 0.25f);
  EXPECT_NEAR(kept / (double)n, 0.75, 0.01);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(::gpuc::philoxUniform(1, 2, 3, i),
              ::gpuc::philoxUniform(1, 2, 3, i));
  int differs = 0;
  for (int i = 0; i < 100; ++i)
    differs +=
        ::gpuc::philoxUniform(1, 2, 3, i) != ::gpuc::philoxUniform(1, 3, 3, i);
  EXPECT_GT(differs, 90) << "another step must give another mask";
}

// Rank r of a data-parallel step draws element i of its N elements as one
// process draws element i + r * N of the global batch's 2N.
TEST(Philox, RanksDrawTheirSliceOfTheGlobalBatch) {
  const uint64_t n = 1000, step = 7, rank1 = step | 1ull << 48;
  for (uint64_t i = 0; i < n; ++i) {
    EXPECT_EQ(::gpuc::dropoutKeeps(5, step, 2, i, n, 0.5f),
              ::gpuc::dropoutKeeps(5, step, 2, i, 2 * n, 0.5f));
    EXPECT_EQ(::gpuc::dropoutKeeps(5, rank1, 2, i, n, 0.5f),
              ::gpuc::dropoutKeeps(5, step, 2, n + i, 2 * n, 0.5f));
  }
}

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  std::vector<HostTensor> run(StringRef source, std::vector<HostTensor> args) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    auto func = module->lookupSymbol<func::FuncOp>("f");
    FailureOr<std::vector<HostTensor>> r = interpret(func, args);
    EXPECT_TRUE(succeeded(r));
    return succeeded(r) ? *r : std::vector<HostTensor>();
  }
  HostTensor f32(ArrayRef<int64_t> shape, std::vector<double> values) {
    HostTensor t(shape, Float32Type::get(&context));
    t.data = std::move(values);
    return t;
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(InterpreterTest, MatmulTransposed) {
  auto r =
      run(R"mlir(
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %0 = gpuc.matmul %a, %b transpose_rhs : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
})mlir",
          {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {1, 0, 1, 0, 1, 0})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data, (std::vector<double>{4, 2, 10, 5}));
}

TEST_F(InterpreterTest, CrossEntropyIgnoresLabels) {
  auto r = run(R"mlir(
func.func @f(%x: tensor<2x2xf32>) -> tensor<f32> {
  %l = gpuc.constant dense<[1, -100]> : tensor<2xi64>
  %0 = gpuc.cross_entropy %x, %l reduction = mean ignore_index = -100 : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
  return %0 : tensor<f32>
})mlir",
               {f32({2, 2}, {0, 0, 5, 5})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NEAR(r[0].data[0], std::log(2.0), 1e-6);
}

TEST_F(InterpreterTest, ResultsAreRoundedToF32) {
  auto r = run(R"mlir(
func.func @f(%x: tensor<1xf32>) -> tensor<1xf32> {
  %0 = gpuc.div %x, %x : tensor<1xf32>
  %c = gpuc.constant dense<3.0> : tensor<1xf32>
  %1 = gpuc.div %0, %c : tensor<1xf32>
  return %1 : tensor<1xf32>
})mlir",
               {f32({1}, {1.0})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data[0], (double)(1.0f / 3.0f));
}

// Over one rank a shard is the whole tensor, flattened; the interpreter is
// one rank and refuses shards over more, naming them.
TEST_F(InterpreterTest, ShardsOverOneRankAreTheWholeTensor) {
  auto r =
      run(R"mlir(
func.func @f(%g: tensor<2x3xf32>, %w: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<6xf32>) {
  %s = gpuc.reduce_scatter %g bucket = 0 ranks = 1 : (tensor<2x3xf32>) -> (tensor<6xf32>)
  %p = gpuc.rank_shard %w ranks = 1 : tensor<2x3xf32> -> tensor<6xf32>
  %n = gpuc.add %s, %p : tensor<6xf32>
  %a = gpuc.all_gather %n bucket = 1 ranks = 1 : (tensor<6xf32>) -> (tensor<2x3xf32>)
  return %a, %s : tensor<2x3xf32>, tensor<6xf32>
})mlir",
          {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {6, 5, 4, 3, 2, 1})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].shape, (SmallVector<int64_t>{2, 3}));
  EXPECT_EQ(r[0].data, (std::vector<double>(6, 7.0)));
  EXPECT_EQ(r[1].data, (std::vector<double>{1, 2, 3, 4, 5, 6}));

  module = parseSourceString<ModuleOp>(R"mlir(
func.func @f(%w: tensor<2x3xf32>) -> tensor<3xf32> {
  %p = gpuc.rank_shard %w ranks = 2 : tensor<2x3xf32> -> tensor<3xf32>
  return %p : tensor<3xf32>
})mlir",
                                       &context);
  ASSERT_TRUE(module);
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostic = d.str();
    return success();
  });
  auto func = module->lookupSymbol<func::FuncOp>("f");
  EXPECT_TRUE(failed(interpret(func, {f32({2, 3}, {1, 2, 3, 4, 5, 6})})));
  EXPECT_NE(diagnostic.find("the interpreter evaluates one rank"),
            std::string::npos)
      << diagnostic;
}

// The decomposition of scatter_add, by hand: ids [3, -1, 0, 3, 1, 4] over 5
// rows group as row 0: {2}, 1: {4}, 2: {}, 3: {0, 3}, 4: {1, 5}.
TEST_F(InterpreterTest, RowGroupsAndSegmentSumAreScatterAdd) {
  HostTensor ids({6}, IntegerType::get(&context, 64));
  ids.data = {3, -1, 0, 3, 1, 4};
  HostTensor updates = f32({6, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto r = run(R"mlir(
func.func @f(%u: tensor<6x2xf32>, %ids: tensor<6xi64>) -> (tensor<6xi32>, tensor<6xi32>, tensor<5x2xf32>, tensor<5x2xf32>) {
  %o, %p = gpuc.row_groups %ids rows = 5 : tensor<6xi64> -> tensor<6xi32>, tensor<6xi32>
  %s = gpuc.segment_sum %u, %o, %p axis = 0 : (tensor<6x2xf32>, tensor<6xi32>, tensor<6xi32>) -> tensor<5x2xf32>
  %t = gpuc.scatter_add %u, %ids axis = 0 : (tensor<6x2xf32>, tensor<6xi64>) -> tensor<5x2xf32>
  return %o, %p, %s, %t : tensor<6xi32>, tensor<6xi32>, tensor<5x2xf32>, tensor<5x2xf32>
})mlir",
               {updates, ids});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].data, (std::vector<double>{0, 1, 2, 2, 4, 6}));
  EXPECT_EQ(r[1].data, (std::vector<double>{2, 4, 0, 3, 1, 5}));
  EXPECT_EQ(r[2].data, (std::vector<double>{5, 6, 9, 10, 0, 0, 8, 10, 14, 16}));
  EXPECT_EQ(r[2].data, r[3].data);
}

} // namespace

//===- DecomposeLinearLossTest.cpp - the chunked head keeps the values ----===//
//
// gpuc-decompose runs a linear cross-entropy's loss and gradients a chunk
// of rows at a time (slices of the rows, a concat of the input's gradient,
// GEMMs accumulating the weight's). The interpreter's own rule for the op
// and the chunked ops must agree, for chunks that do and do not divide the
// rows, with and without a bias and ignored labels.
//
//===----------------------------------------------------------------------===//
#include "InterpretAndCompare.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/InitAll.h"
#include "gpuc/Interpreter/Interpreter.h"
#include "gpuc/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

constexpr const char *kWithBias = R"mlir(
func.func @f(%x: tensor<7x3xf32>, %w: tensor<5x3xf32>, %b: tensor<5xf32>, %l: tensor<7xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>, tensor<5xf32>) {
  %loss, %dx, %dw, %db = gpuc.linear_cross_entropy_grad %x, %w, %l, %g bias %b : tensor<5xf32> reduction = mean ignore_index = 2 : (tensor<7x3xf32>, tensor<5x3xf32>, tensor<7xi64>, tensor<f32>) -> (tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>, tensor<5xf32>)
  return %loss, %dx, %dw, %db : tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>, tensor<5xf32>
})mlir";

constexpr const char *kWithoutBias = R"mlir(
func.func @f(%x: tensor<7x3xf32>, %w: tensor<5x3xf32>, %l: tensor<7xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>) {
  %loss, %dx, %dw = gpuc.linear_cross_entropy_grad %x, %w, %l, %g reduction = sum : (tensor<7x3xf32>, tensor<5x3xf32>, tensor<7xi64>, tensor<f32>) -> (tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>)
  return %loss, %dx, %dw : tensor<f32>, tensor<7x3xf32>, tensor<5x3xf32>
})mlir";

class DecomposeLinearLoss : public gpuc_test::RewriteTest {
protected:
  /// Decomposes `source`'s @f in chunks of `rows` and returns how many
  /// accumulating products the result has.
  int64_t decomposeAndCompare(StringRef source, int64_t rows) {
    GpucDecomposeOptions options;
    options.lossChunkRows = rows;
    // Labels 0, 3, 1, 4, 2, ...: every class, the ignored one among them.
    OwningOpRef<ModuleOp> module =
        rewriteAndCompare(source, createGpucDecompose(options), 11,
                          [](size_t i) { return (double)(i * 3 % 5); });
    if (!module)
      return -1;
    int64_t left = 0, accumulating = 0;
    module->walk([&](Operation *op) {
      left += isa<LinearCrossEntropyGradOp>(op);
      if (auto mm = dyn_cast<MatmulOp>(op))
        accumulating += bool(mm.getAcc());
    });
    EXPECT_EQ(left, 0);
    return accumulating;
  }
};

// 16-bit logits (what gpuc-amp's low-head gives): the loss and the
// statistics in f32, the weight's gradient summed over the chunks in f32.
constexpr const char *kLow = R"mlir(
func.func @f(%x: tensor<7x3xbf16>, %w: tensor<5x3xbf16>, %b: tensor<5xbf16>, %l: tensor<7xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<7x3xbf16>, tensor<5x3xbf16>, tensor<5xbf16>) {
  %loss, %dx, %dw, %db = gpuc.linear_cross_entropy_grad %x, %w, %l, %g bias %b : tensor<5xbf16> reduction = mean ignore_index = 2 : (tensor<7x3xbf16>, tensor<5x3xbf16>, tensor<7xi64>, tensor<f32>) -> (tensor<f32>, tensor<7x3xbf16>, tensor<5x3xbf16>, tensor<5xbf16>)
  return %loss, %dx, %dw, %db : tensor<f32>, tensor<7x3xbf16>, tensor<5x3xbf16>, tensor<5xbf16>
})mlir";

TEST_F(DecomposeLinearLoss, ChunksThatDivideTheRowsOrNot) {
  // 7 rows in chunks of 3: 3 + 3 + 1, two of them accumulating.
  EXPECT_EQ(decomposeAndCompare(kWithBias, 3), 2);
  EXPECT_EQ(decomposeAndCompare(kWithoutBias, 3), 2);
  // One chunk: the plain head, nothing accumulates.
  EXPECT_EQ(decomposeAndCompare(kWithBias, 7), 0);
  EXPECT_EQ(decomposeAndCompare(kWithoutBias, 1), 6);
}

TEST_F(DecomposeLinearLoss, SixteenBitLogitsAreStoredInSixteenBits) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kLow, &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("f");
  // Arguments rounded to bf16, the interpreter rounding every result to
  // its type as the kernels store it; logits of a few units, where their
  // rounding to bf16 shows in the gradients.
  auto run = [&] {
    return gpuc_test::interpretOnRandomArguments(
        func, 5, [](size_t i) { return (double)(i * 3 % 5); },
        /*roundToTypes=*/true, /*deviation=*/2.0);
  };
  std::vector<HostTensor> before = run();
  GpucDecomposeOptions options;
  options.lossChunkRows = 3;
  PassManager pm(&context);
  pm.addPass(createGpucDecompose(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  ASSERT_TRUE(succeeded(verify(*module)));
  // The logits and their gradient are bf16 values; the weight's gradient
  // accumulates in f32 GEMMs of bf16 operands.
  int64_t lowLogits = 0, wideSums = 0;
  module->walk([&](MatmulOp mm) {
    Type operands = getElementTypeOrSelf(mm.getLhs().getType());
    EXPECT_TRUE(operands.isBF16());
    bool wide = getElementTypeOrSelf(mm.getType()).isF32();
    lowLogits += !wide && mm.getTransposeRhs();
    wideSums += wide;
  });
  EXPECT_EQ(lowLogits, 3);
  EXPECT_EQ(wideSums, 3);
  std::vector<HostTensor> after = run();
  ASSERT_EQ(before.size(), after.size());
  // Within a few bf16 steps: the reference's statistics are in double, the
  // lowering's in f32, which moves a rounding to bf16 by at most one step.
  for (size_t r = 0; r < before.size(); ++r)
    for (size_t i = 0; i < before[r].data.size(); ++i)
      EXPECT_NEAR(before[r].data[i], after[r].data[i],
                  0x1p-7 * (0.05 + std::abs(before[r].data[i])))
          << "result " << r << " element " << i;
}

} // namespace

//===- FoldLayoutsTest.cpp - layouts folded into matmuls keep the values --===//
//
// gpuc-fold-layouts turns transposes around matmuls into the matmuls'
// layouts. The interpreter, which reads a layout as the transpose it
// stands for, must give the same results before and after, and the
// transposes a GEMM can read must be gone.
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

using namespace mlir;
using namespace mlir::gpuc;

namespace {

class FoldLayouts : public gpuc_test::RewriteTest {
protected:
  /// Folds `source`'s @f and returns how many transposes are left.
  int64_t foldAndCompare(StringRef source) {
    OwningOpRef<ModuleOp> module =
        rewriteAndCompare(source, createGpucFoldLayouts(), 7,
                          [](size_t i) { return (double)(i % 3 == 1); });
    if (!module)
      return -1;
    int64_t transposes = 0;
    module->walk([&](TransposeOp) { ++transposes; });
    return transposes;
  }
};

// Attention's head split and merge: [B, T, H, D] read as [B, H, T, D], the
// product written back as [B, T, H, D].
TEST_F(FoldLayouts, HeadSplitAndMergeBecomeStrides) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32> {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = gpuc.transpose %k perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vh = gpuc.transpose %v perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %s = gpuc.matmul %qh, %kh transpose_rhs : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
  %y = gpuc.matmul %s, %vh : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %o : tensor<2x5x3x4xf32>
}
)mlir"),
            0);
}

// An operand stored with its matrix transposed and its batch levels
// swapped, and a result whose batch levels are swapped: the flag flips, and
// the batch is two levels of strides.
TEST_F(FoldLayouts, TransposedMatrixAndSwappedBatches) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%x: tensor<3x2x5x4xf32>, %w: tensor<2x3x5x6xf32>) -> tensor<3x2x4x6xf32> {
  %a = gpuc.transpose %x perm = [1, 0, 3, 2] : tensor<3x2x5x4xf32> -> tensor<2x3x4x5xf32>
  %y = gpuc.matmul %a, %w : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  %o = gpuc.transpose %y perm = [1, 0, 2, 3] : tensor<2x3x4x6xf32> -> tensor<3x2x4x6xf32>
  return %o : tensor<3x2x4x6xf32>
}
)mlir"),
            0);
}

// A layout with no contiguous matrix dimension stays a transpose, and so
// does a result read by something else as well.
TEST_F(FoldLayouts, WhatAGemmCannotReadStays) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%x: tensor<4x5x6xf32>, %w: tensor<6x5x7xf32>) -> (tensor<6x7x4xf32>, tensor<6x4x7xf32>) {
  %a = gpuc.transpose %x perm = [2, 0, 1] : tensor<4x5x6xf32> -> tensor<6x4x5xf32>
  %y = gpuc.matmul %a, %w : (tensor<6x4x5xf32>, tensor<6x5x7xf32>) -> tensor<6x4x7xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1] : tensor<6x4x7xf32> -> tensor<6x7x4xf32>
  return %o, %y : tensor<6x7x4xf32>, tensor<6x4x7xf32>
}
)mlir"),
            2);
}

// The fused attention and its gradient read the projections' [B, T, H, D]
// rows and write theirs: every head split and merge around them goes.
TEST_F(FoldLayouts, AttentionAndItsGradientTakeTheTokenLayout) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%q: tensor<2x5x3x4xf32>, %k: tensor<2x7x3x4xf32>, %v: tensor<2x7x3x6xf32>, %dy: tensor<2x5x3x6xf32>, %m: tensor<1x1x5x7xi1>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>) {
  %qh = gpuc.transpose %q perm = [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = gpuc.transpose %k perm = [0, 2, 1, 3] : tensor<2x7x3x4xf32> -> tensor<2x3x7x4xf32>
  %vh = gpuc.transpose %v perm = [0, 2, 1, 3] : tensor<2x7x3x6xf32> -> tensor<2x3x7x6xf32>
  %o, %lse = gpuc.attention %qh, %kh, %vh mask %m : tensor<1x1x5x7xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  %y = gpuc.transpose %o perm = [0, 2, 1, 3] : tensor<2x3x5x6xf32> -> tensor<2x5x3x6xf32>
  %dyh = gpuc.transpose %dy perm = [0, 2, 1, 3] : tensor<2x5x3x6xf32> -> tensor<2x3x5x6xf32>
  %dq, %dk, %dv = gpuc.attention_grad %qh, %kh, %vh, %o, %lse, %dyh mask %m : tensor<1x1x5x7xi1> scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<2x3x5x4xf32>, tensor<2x3x7x4xf32>, tensor<2x3x7x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5xf32>
  %dqt = gpuc.transpose %dq perm = [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dkt = gpuc.transpose %dk perm = [0, 2, 1, 3] : tensor<2x3x7x4xf32> -> tensor<2x7x3x4xf32>
  %dvt = gpuc.transpose %dv perm = [0, 2, 1, 3] : tensor<2x3x7x6xf32> -> tensor<2x7x3x6xf32>
  return %y, %lse, %dqt, %dkt, %dvt : tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>
}
)mlir"),
            0);
}

// nn.MultiheadAttention's heads: [T, B*H, D] read as a batch of one
// [1, B*H, T, D] through a transpose and a reshape that inserts the 1.
TEST_F(FoldLayouts, MultiheadAttentionHeadsTakeTheTokenLayout) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%q: tensor<5x6x4xf32>, %k: tensor<7x6x4xf32>, %v: tensor<7x6x3xf32>, %dy: tensor<5x6x3xf32>) -> (tensor<5x6x3xf32>, tensor<1x6x5xf32>, tensor<5x6x4xf32>, tensor<7x6x4xf32>, tensor<7x6x3xf32>) {
  %qt = gpuc.transpose %q perm = [1, 0, 2] : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %kt = gpuc.transpose %k perm = [1, 0, 2] : tensor<7x6x4xf32> -> tensor<6x7x4xf32>
  %vt = gpuc.transpose %v perm = [1, 0, 2] : tensor<7x6x3xf32> -> tensor<6x7x3xf32>
  %qh = gpuc.reshape %qt : tensor<6x5x4xf32> -> tensor<1x6x5x4xf32>
  %kh = gpuc.reshape %kt : tensor<6x7x4xf32> -> tensor<1x6x7x4xf32>
  %vh = gpuc.reshape %vt : tensor<6x7x3xf32> -> tensor<1x6x7x3xf32>
  %o, %lse = gpuc.attention %qh, %kh, %vh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x6x5x4xf32>, tensor<1x6x7x4xf32>, tensor<1x6x7x3xf32> -> tensor<1x6x5x3xf32>, tensor<1x6x5xf32>
  %o3 = gpuc.reshape %o : tensor<1x6x5x3xf32> -> tensor<6x5x3xf32>
  %y = gpuc.transpose %o3 perm = [1, 0, 2] : tensor<6x5x3xf32> -> tensor<5x6x3xf32>
  %dyt = gpuc.transpose %dy perm = [1, 0, 2] : tensor<5x6x3xf32> -> tensor<6x5x3xf32>
  %dyh = gpuc.reshape %dyt : tensor<6x5x3xf32> -> tensor<1x6x5x3xf32>
  %dq, %dk, %dv = gpuc.attention_grad %qh, %kh, %vh, %o, %lse, %dyh scale = 5.000000e-01 fill = 0xFFF0000000000000 : tensor<1x6x5x4xf32>, tensor<1x6x7x4xf32>, tensor<1x6x7x3xf32>, tensor<1x6x5x3xf32>, tensor<1x6x5xf32>
  %dq3 = gpuc.reshape %dq : tensor<1x6x5x4xf32> -> tensor<6x5x4xf32>
  %dk3 = gpuc.reshape %dk : tensor<1x6x7x4xf32> -> tensor<6x7x4xf32>
  %dv3 = gpuc.reshape %dv : tensor<1x6x7x3xf32> -> tensor<6x7x3xf32>
  %dqt = gpuc.transpose %dq3 perm = [1, 0, 2] : tensor<6x5x4xf32> -> tensor<5x6x4xf32>
  %dkt = gpuc.transpose %dk3 perm = [1, 0, 2] : tensor<6x7x4xf32> -> tensor<7x6x4xf32>
  %dvt = gpuc.transpose %dv3 perm = [1, 0, 2] : tensor<6x7x3xf32> -> tensor<7x6x3xf32>
  return %y, %lse, %dqt, %dkt, %dvt : tensor<5x6x3xf32>, tensor<1x6x5xf32>, tensor<5x6x4xf32>, tensor<7x6x4xf32>, tensor<7x6x3xf32>
}
)mlir"),
            0);
}

// nanoGPT's attention, forward and the products of its gradient: one
// projection's rows hold the queries, keys and values, split in three and
// into heads. Every product reads its window of the projection in place,
// the values unchanged; no slice and no transpose is left to copy.
TEST_F(FoldLayouts, QueryKeyValueWindowsAreReadInPlace) {
  OwningOpRef<ModuleOp> module = rewriteAndCompare(
      R"mlir(
func.func @f(%qkv: tensor<2x5x18xf32>, %g: tensor<2x3x5x2xf32>) -> (tensor<2x5x3x2xf32>, tensor<2x3x5x2xf32>, tensor<2x3x5x2xf32>) {
  %q = gpuc.slice %qkv starts = [0, 0, 0] limits = [2, 5, 6] strides = [1, 1, 1] : tensor<2x5x18xf32> -> tensor<2x5x6xf32>
  %k = gpuc.slice %qkv starts = [0, 0, 6] limits = [2, 5, 12] strides = [1, 1, 1] : tensor<2x5x18xf32> -> tensor<2x5x6xf32>
  %v = gpuc.slice %qkv starts = [0, 0, 12] limits = [2, 5, 18] strides = [1, 1, 1] : tensor<2x5x18xf32> -> tensor<2x5x6xf32>
  %q4 = gpuc.reshape %q : tensor<2x5x6xf32> -> tensor<2x5x3x2xf32>
  %k4 = gpuc.reshape %k : tensor<2x5x6xf32> -> tensor<2x5x3x2xf32>
  %v4 = gpuc.reshape %v : tensor<2x5x6xf32> -> tensor<2x5x3x2xf32>
  %qh = gpuc.transpose %q4 perm = [0, 2, 1, 3] : tensor<2x5x3x2xf32> -> tensor<2x3x5x2xf32>
  %kh = gpuc.transpose %k4 perm = [0, 2, 1, 3] : tensor<2x5x3x2xf32> -> tensor<2x3x5x2xf32>
  %vh = gpuc.transpose %v4 perm = [0, 2, 1, 3] : tensor<2x5x3x2xf32> -> tensor<2x3x5x2xf32>
  %s = gpuc.matmul %qh, %kh transpose_rhs : (tensor<2x3x5x2xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x5xf32>
  %y = gpuc.matmul %s, %vh : (tensor<2x3x5x5xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x2xf32>
  %o = gpuc.transpose %y perm = [0, 2, 1, 3] : tensor<2x3x5x2xf32> -> tensor<2x5x3x2xf32>
  %dq = gpuc.matmul %s, %kh : (tensor<2x3x5x5xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x2xf32>
  %gs = gpuc.matmul %g, %vh transpose_rhs : (tensor<2x3x5x2xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x5xf32>
  %dk = gpuc.matmul %gs, %qh transpose_lhs : (tensor<2x3x5x5xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x2xf32>
  return %o, %dq, %dk : tensor<2x5x3x2xf32>, tensor<2x3x5x2xf32>, tensor<2x3x5x2xf32>
}
)mlir",
      createGpucFoldLayouts(), 7,
      [](size_t i) { return (double)(i % 5) - 2.0; });
  ASSERT_TRUE(module);
  int64_t copies = 0, windows = 0;
  module->walk([&](Operation *op) {
    copies += isa<SliceOp, TransposeOp>(op);
    if (auto mm = dyn_cast<MatmulOp>(op))
      windows += !!mm.getLhsWindow() + !!mm.getRhsWindow();
  });
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(windows, 6);
}

// A matmul with layouts has no gradient rule: differentiation comes first.
TEST_F(FoldLayouts, LayoutsAreNotDifferentiated) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
gpuc.parameter @w trainable : tensor<2x5x3x4xf32> = dense<1.0> : tensor<2x5x3x4xf32>
func.func @forward(%x: tensor<2x3x5x4xf32> {gpuc.input = "x"}, %w: tensor<2x5x3x4xf32> {gpuc.param = @w}) -> (tensor<f32> {gpuc.output = "loss"}) {
  %y = gpuc.matmul %x, %w transpose_rhs rhs_perm = [0, 2, 1, 3] : (tensor<2x3x5x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
  %l = gpuc.reduce_sum %y axes = [0, 1, 2, 3] : tensor<2x3x5x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}
)mlir",
                                                             &context);
  ASSERT_TRUE(module);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostics += d.str();
    return success();
  });
  PassManager pm(&context);
  pm.addPass(createGpucAutodiff());
  EXPECT_TRUE(failed(pm.run(*module)));
  EXPECT_NE(diagnostics.find("differentiate before gpuc-fold-layouts"),
            std::string::npos)
      << diagnostics;
}

} // namespace

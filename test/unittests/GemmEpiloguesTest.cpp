//===- GemmEpiloguesTest.cpp - a bias epilogue keeps the layer's values ---===//
//
// gpuc-gemm-epilogues moves a linear layer's bias add into its matmul. The
// interpreter adds the bias to the sums before rounding, as the libraries
// do: the layer's values must be what they were, exactly in double, and,
// rounded as the kernels store them, within one rounding of the 16-bit
// result where the bias joins the sums instead of the rounded product.
//
//===----------------------------------------------------------------------===//
#include "InterpretAndCompare.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::gpuc;

namespace {

class GemmEpilogues : public gpuc_test::RewriteTest {
protected:
  /// Rewrites `source`'s @f and returns how many matmuls carry a bias.
  int64_t foldAndCompare(StringRef source) {
    OwningOpRef<ModuleOp> module = rewriteAndCompare(
        source, createGpucGemmEpilogues(), 3, [](size_t i) { return 0.0; });
    if (!module)
      return -1;
    int64_t biased = 0;
    module->walk([&](MatmulOp op) { biased += op.getBias() != nullptr; });
    return biased;
  }
};

const char *kLayers = R"mlir(
func.func @f(%x: tensor<6x4xbf16>, %w: tensor<8x4xbf16>, %b: tensor<8xf32>, %x32: tensor<2x3x4xf32>, %w32: tensor<4x8xf32>, %b32: tensor<1x8xf32>) -> (tensor<2x3x8xbf16>, tensor<2x3x8xf32>) {
  %p = gpuc.matmul %x, %w transpose_rhs : (tensor<6x4xbf16>, tensor<8x4xbf16>) -> tensor<6x8xbf16>
  %r = gpuc.reshape %p : tensor<6x8xbf16> -> tensor<2x3x8xbf16>
  %wide = gpuc.cast %r : tensor<2x3x8xbf16> to tensor<2x3x8xf32>
  %bb = gpuc.broadcast %b : tensor<8xf32> -> tensor<2x3x8xf32>
  %s = gpuc.add %wide, %bb : tensor<2x3x8xf32>
  %y = gpuc.cast %s : tensor<2x3x8xf32> to tensor<2x3x8xbf16>
  %x2 = gpuc.reshape %x32 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %q = gpuc.matmul %x2, %w32 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %qr = gpuc.reshape %q : tensor<6x8xf32> -> tensor<2x3x8xf32>
  %bq = gpuc.broadcast %b32 : tensor<1x8xf32> -> tensor<2x3x8xf32>
  %z = gpuc.add %bq, %qr : tensor<2x3x8xf32>
  return %y, %z : tensor<2x3x8xbf16>, tensor<2x3x8xf32>
}
)mlir";

// An f32 layer, reshaped on the way and its bias held as [1, N]: the bias
// moves into the GEMM, and the values stay exactly.
TEST_F(GemmEpilogues, F32LayerKeepsItsValues) {
  EXPECT_EQ(foldAndCompare(R"mlir(
func.func @f(%x32: tensor<2x3x4xf32>, %w32: tensor<4x8xf32>, %b32: tensor<1x8xf32>) -> tensor<2x3x8xf32> {
  %x2 = gpuc.reshape %x32 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %q = gpuc.matmul %x2, %w32 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %qr = gpuc.reshape %q : tensor<6x8xf32> -> tensor<2x3x8xf32>
  %bq = gpuc.broadcast %b32 : tensor<1x8xf32> -> tensor<2x3x8xf32>
  %z = gpuc.add %bq, %qr : tensor<2x3x8xf32>
  return %z : tensor<2x3x8xf32>
}
)mlir"),
            1);
}

// A bf16 layer stored in bf16 beside the f32 one. As the kernels store
// values (every result rounded to its type), the bf16 layer's output moves
// by a bf16 rounding or two: the bias is rounded to bf16 and joins the f32
// sums, where before it was added in f32 to the bf16-rounded product. The
// f32 layer is unchanged.
TEST_F(GemmEpilogues, RoundedOnceWithinOneBf16Step) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kLayers, &context);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("f");
  auto zeros = [](size_t) { return 0.0; };
  auto before = gpuc_test::interpretOnRandomArguments(func, 5, zeros, true);
  PassManager pm(&context);
  pm.addPass(createGpucGemmEpilogues());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  int64_t biased = 0;
  module->walk([&](MatmulOp op) { biased += op.getBias() != nullptr; });
  EXPECT_EQ(biased, 2);
  auto after = gpuc_test::interpretOnRandomArguments(func, 5, zeros, true);
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(after.size(), 2u);
  int64_t moved = 0;
  for (size_t i = 0; i < before[0].data.size(); ++i) {
    double a = before[0].data[i], b = after[0].data[i];
    // Roundings of the output, the product and the bias (arguments of
    // deviation 1): 2^-9 relative each.
    EXPECT_LE(std::abs(a - b), std::ldexp(std::abs(a) + 4.0, -8))
        << "element " << i;
    moved += a != b;
  }
  // The roundings differ somewhere (the test would pass vacuously if the
  // interpreter ignored the bias or rounded twice as before).
  EXPECT_GT(moved, 0);
  gpuc_test::expectSameResults({before[1]}, {after[1]}, 1e-6);
}

} // namespace

//===- ShapeInferenceTest.cpp - result-shape rules of gpuc ops ------------===//
#include "gpuc/Dialect/Gpuc/ShapeInference.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include <functional>
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

class ShapeInferenceTest : public ::testing::Test {
protected:
  ShapeInferenceTest()
      : handler(&context, [this](Diagnostic &d) {
          messages.push_back(d.str());
          return success();
        }) {}

  // A member, so the function_ref handed to the rules never dangles.
  EmitErrorFn emit() { return emitter; }
  std::function<InFlightDiagnostic()> emitter = [this] {
    return emitError(UnknownLoc::get(&context));
  };

  MLIRContext context;
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler;
};

TEST_F(ShapeInferenceTest, BroadcastFollowsNumpy) {
  auto shape = inferBroadcastShape({8, 1, 5}, {3, 1}, emit());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{8, 3, 5}));
  EXPECT_TRUE(isBroadcastableTo({3, 1}, {8, 3, 5}));
  EXPECT_FALSE(isBroadcastableTo({2, 5}, {8, 3, 5}));
}

TEST_F(ShapeInferenceTest, BroadcastMismatchIsReported) {
  EXPECT_TRUE(failed(inferBroadcastShape({4, 3}, {2, 3}, emit())));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("4x3 and 2x3 do not broadcast"),
            std::string::npos);
}

TEST_F(ShapeInferenceTest, ConvAndPool) {
  auto conv = inferConv2DShape({8, 3, 32, 32}, {16, 3, 5, 5}, {2, 2},
                               {2, 2, 2, 2}, {1, 1}, 1, emit());
  ASSERT_TRUE(succeeded(conv));
  EXPECT_EQ(*conv, (Shape{8, 16, 16, 16}));
  auto grouped = inferConv2DShape({1, 4, 8, 8}, {8, 2, 3, 3}, {1, 1},
                                  {0, 0, 0, 0}, {2, 2}, 2, emit());
  ASSERT_TRUE(succeeded(grouped));
  EXPECT_EQ(*grouped, (Shape{1, 8, 4, 4}));
  EXPECT_TRUE(failed(inferConv2DShape({1, 3, 8, 8}, {8, 2, 3, 3}, {1, 1},
                                      {0, 0, 0, 0}, {1, 1}, 1, emit())));
  auto pool =
      inferPool2DShape({2, 4, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, emit());
  ASSERT_TRUE(succeeded(pool));
  EXPECT_EQ(*pool, (Shape{2, 4, 4, 4}));
}

TEST_F(ShapeInferenceTest, MatmulTransposesAndBatches) {
  auto shape = inferMatmulShape({4, 7, 3}, {4, 5, 3}, false, true, emit());
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (Shape{4, 7, 5}));
  EXPECT_TRUE(
      failed(inferMatmulShape({4, 7, 3}, {2, 3, 5}, false, false, emit())));
}

TEST_F(ShapeInferenceTest, SliceGatherConcatReduce) {
  auto slice = inferSliceShape({10, 6}, {1, 0}, {10, 6}, {3, 2}, emit());
  ASSERT_TRUE(succeeded(slice));
  EXPECT_EQ(*slice, (Shape{3, 3}));
  EXPECT_TRUE(failed(inferSliceShape({10}, {2}, {11}, {1}, emit())));
  auto gather = inferGatherShape({100, 16}, {4, 8}, 0, emit());
  ASSERT_TRUE(succeeded(gather));
  EXPECT_EQ(*gather, (Shape{4, 8, 16}));
  auto concat = inferConcatShape(
      {ArrayRef<int64_t>{2, 3}, ArrayRef<int64_t>{2, 5}}, 1, emit());
  ASSERT_TRUE(succeeded(concat));
  EXPECT_EQ(*concat, (Shape{2, 8}));
  EXPECT_EQ(inferReduceShape({4, 5, 6}, {0, 2}, true), (Shape{1, 5, 1}));
  EXPECT_EQ(inferReduceShape({4, 5, 6}, {0, 2}, false), (Shape{5}));
  EXPECT_TRUE(failed(verifyAxes({2, 1}, 3, emit())));
}

} // namespace

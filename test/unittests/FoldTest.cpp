//===- FoldTest.cpp - constant folding through createOrFold ---------------===//
//
// The frontends rely on createOrFold to fold shape arithmetic as it is built;
// these tests build the chains a PyTorch export produces and check that they
// fold to the right constants.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/InitAll.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Matchers.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::gpuc;

namespace {

class FoldTest : public ::testing::Test {
protected:
  FoldTest() : builder(&context), loc(UnknownLoc::get(&context)) {
    context.loadDialect<GpucDialect>();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  Value ints(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      builder.getI64Type());
    return ConstantOp::create(builder, loc,
                              DenseElementsAttr::get(type, values));
  }
  std::vector<int64_t> constantValues(Value v) {
    DenseIntElementsAttr attr;
    EXPECT_TRUE(matchPattern(v, m_Constant(&attr)));
    std::vector<int64_t> out;
    if (attr)
      for (const APInt &i : attr.getValues<APInt>())
        out.push_back(i.getSExtValue());
    return out;
  }
  RankedTensorType i64Type(int64_t n) {
    return RankedTensorType::get({n}, builder.getI64Type());
  }

  MLIRContext context;
  OpBuilder builder;
  Location loc;
  OwningOpRef<ModuleOp> module;
};

TEST_F(FoldTest, ShapeGatherConcatChainFolds) {
  // shape = [8, 16, 32]; concat(gather(shape, [0]), [-1]) -> [8, -1]
  Value shape = ints({8, 16, 32});
  Value first =
      builder.createOrFold<GatherOp>(loc, i64Type(1), shape, ints({0}), 0);
  Value joined = builder.createOrFold<ConcatOp>(
      loc, i64Type(2), ValueRange{first, ints({-1})}, 0);
  EXPECT_EQ(constantValues(joined), (std::vector<int64_t>{8, -1}));
}

TEST_F(FoldTest, IntegerArithmeticFolds) {
  Value a = ints({6, 7}), b = ints({2, 3});
  EXPECT_EQ(constantValues(builder.createOrFold<MulOp>(loc, i64Type(2), a, b)),
            (std::vector<int64_t>{12, 21}));
  EXPECT_EQ(constantValues(builder.createOrFold<DivOp>(loc, i64Type(2), a, b)),
            (std::vector<int64_t>{3, 2}));
  // Division by zero is left for run time, not folded.
  Value byZero = builder.createOrFold<DivOp>(loc, i64Type(2), a, ints({1, 0}));
  EXPECT_TRUE(byZero.getDefiningOp<DivOp>());
}

TEST_F(FoldTest, SelectAndCompareFold) {
  Value a = ints({-1, 4}), minusOne = ints({-1, -1});
  Value isMinusOne =
      builder.createOrFold<CompareOp>(loc, ComparePredicate::eq, a, minusOne);
  Value picked = builder.createOrFold<SelectOp>(loc, i64Type(2), isMinusOne,
                                                ints({1, 1}), a);
  EXPECT_EQ(constantValues(picked), (std::vector<int64_t>{1, 4}));
}

} // namespace

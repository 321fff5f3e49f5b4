//===- InterpretAndCompare.h - a pass keeps a function's values -*- C++ -*-===//
//
// What the tests of value-preserving rewrites share: interpret a function on
// seeded random arguments (exactly, in double), and compare two runs.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H
#define GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H

#include "gpuc/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

namespace gpuc_test {

/// `func` on arguments drawn from a normal distribution seeded by `seed`;
/// integer and boolean elements are `integer(i)` of their index.
inline std::vector<mlir::gpuc::HostTensor>
interpretOnRandomArguments(mlir::func::FuncOp func, unsigned seed,
                           const std::function<double(size_t)> &integer) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<mlir::gpuc::HostTensor> args;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
    mlir::gpuc::HostTensor t(type.getShape(), type.getElementType());
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = mlir::isa<mlir::FloatType>(type.getElementType())
                      ? normal(rng)
                      : integer(i);
    args.push_back(std::move(t));
  }
  mlir::gpuc::InterpreterOptions exact;
  exact.roundToElementType = false;
  auto results = mlir::gpuc::interpret(func, args, exact);
  EXPECT_TRUE(mlir::succeeded(results));
  return mlir::succeeded(results) ? *results
                                  : std::vector<mlir::gpuc::HostTensor>{};
}

/// Every result of `after` within `tolerance` of `before`'s.
inline void expectSameResults(const std::vector<mlir::gpuc::HostTensor> &before,
                              const std::vector<mlir::gpuc::HostTensor> &after,
                              double tolerance) {
  EXPECT_EQ(before.size(), after.size());
  for (size_t r = 0; r < std::min(before.size(), after.size()); ++r) {
    EXPECT_EQ(before[r].shape, after[r].shape);
    for (size_t i = 0; i < before[r].data.size(); ++i)
      EXPECT_NEAR(before[r].data[i], after[r].data[i], tolerance)
          << "result " << r << " element " << i;
  }
}

} // namespace gpuc_test

#endif // GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H

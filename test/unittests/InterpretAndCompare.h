//===- InterpretAndCompare.h - a pass keeps a function's values -*- C++ -*-===//
//
// What the tests of value-preserving rewrites share: interpret a function on
// seeded random arguments (exactly, in double), and compare two runs.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H
#define GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H

#include "gpuc/InitAll.h"
#include "gpuc/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

namespace gpuc_test {

/// `func` on arguments drawn from a normal distribution (deviation
/// `deviation`) seeded by `seed`;
/// integer and boolean elements are `integer(i)` of their index. Exactly,
/// or with `roundToTypes` as the kernels store values: the arguments and
/// every result rounded to their element types.
inline std::vector<mlir::gpuc::HostTensor>
interpretOnRandomArguments(mlir::func::FuncOp func, unsigned seed,
                           const std::function<double(size_t)> &integer,
                           bool roundToTypes = false, double deviation = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, deviation);
  std::vector<mlir::gpuc::HostTensor> args;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
    mlir::gpuc::HostTensor t(type.getShape(), type.getElementType());
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] =
          !mlir::isa<mlir::FloatType>(type.getElementType()) ? integer(i)
          : roundToTypes
              ? mlir::gpuc::roundToType(normal(rng), type.getElementType())
              : normal(rng);
    args.push_back(std::move(t));
  }
  mlir::gpuc::InterpreterOptions options;
  options.roundToElementType = roundToTypes;
  auto results = mlir::gpuc::interpret(func, args, options);
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

/// A test of a rewrite that keeps values: a context with every dialect,
/// and a run of the pass that checks @f computes what it did before.
class RewriteTest : public ::testing::Test {
protected:
  RewriteTest() {
    mlir::DialectRegistry registry;
    mlir::gpuc::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `source`, runs `pass`, verifies, and expects @f's results on
  /// the same arguments (drawn from `seed`, integers `integer(i)`) within
  /// 1e-12 of before. Null when parsing or the pass failed.
  mlir::OwningOpRef<mlir::ModuleOp>
  rewriteAndCompare(llvm::StringRef source, std::unique_ptr<mlir::Pass> pass,
                    unsigned seed,
                    const std::function<double(size_t)> &integer) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    if (!module)
      return nullptr;
    auto func = module->lookupSymbol<mlir::func::FuncOp>("f");
    std::vector<mlir::gpuc::HostTensor> before =
        interpretOnRandomArguments(func, seed, integer);
    mlir::PassManager pm(&context);
    pm.addPass(std::move(pass));
    bool ran = mlir::succeeded(pm.run(*module));
    EXPECT_TRUE(ran);
    if (!ran)
      return nullptr;
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
    expectSameResults(before, interpretOnRandomArguments(func, seed, integer),
                      1e-12);
    return module;
  }

  mlir::MLIRContext context;
};

} // namespace gpuc_test

#endif // GPUC_TEST_UNITTESTS_INTERPRETANDCOMPARE_H

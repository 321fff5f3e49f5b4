//===- BinaryProgramTest.cpp - gpuc-remat's exact mode's 0-1 programs -----===//
//
// Small programs whose optimum is known by enumeration, in both forms the
// remat pass poses: least cost under row bounds, and least peak (z).
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/BinaryProgram.h"

#include <gtest/gtest.h>

using namespace mlir::gpuc;

namespace {

/// Three choices save 4, 3 and 3 at one point (starting at 10, bound 5):
/// the single saving of 4 is not enough; two of them are, and the cheapest
/// pair (costs 5 + 1 + 2) is the last two.
BinaryProgram coverProgram() {
  BinaryProgram program;
  program.cost = {1, 5, 2};
  program.rows = {{{0, -4}, {1, -3}, {2, -3}}};
  program.bound = {5 - 10};
  return program;
}

TEST(BinaryProgram, LeastCostUnderTheBound) {
  if (!haveBinaryProgramSolver())
    GTEST_SKIP() << "gpuc was built without COIN-OR CBC";
  BinaryProgramResult result = solveBinaryProgram(coverProgram(), 10);
  ASSERT_EQ(result.status, BinaryProgramResult::Optimal);
  EXPECT_EQ(result.chosen, (std::vector<bool>{true, false, true}));
  EXPECT_DOUBLE_EQ(result.objective, 3);
}

TEST(BinaryProgram, Infeasible) {
  if (!haveBinaryProgramSolver())
    GTEST_SKIP() << "gpuc was built without COIN-OR CBC";
  BinaryProgram program = coverProgram();
  program.bound = {-11}; // saving 11 of 10 bytes: impossible
  EXPECT_EQ(solveBinaryProgram(program, 10).status,
            BinaryProgramResult::Infeasible);
}

TEST(BinaryProgram, LeastPeak) {
  if (!haveBinaryProgramSolver())
    GTEST_SKIP() << "gpuc was built without COIN-OR CBC";
  // Two points: 10 live at the first, 9 at the second. Choice 0 moves 4
  // bytes from the first to the second; choice 1 saves 5 at the second.
  // Peaks: neither 10, choice 0 alone 13, choice 1 alone 10, both 8.
  BinaryProgram program;
  program.cost = {0.01, 0.02};
  program.rows = {{{0, -4}}, {{0, 4}, {1, -5}}};
  program.bound = {-10, -9};
  program.peakCost = 1;
  BinaryProgramResult result = solveBinaryProgram(program, 10);
  ASSERT_EQ(result.status, BinaryProgramResult::Optimal);
  EXPECT_NEAR(result.z, 8, 1e-6);
  EXPECT_EQ(result.chosen, (std::vector<bool>{true, true}));
}

TEST(BinaryProgram, WithoutSolverFails) {
  if (haveBinaryProgramSolver())
    GTEST_SKIP() << "gpuc has CBC";
  EXPECT_EQ(solveBinaryProgram(coverProgram(), 10).status,
            BinaryProgramResult::Failed);
}

} // namespace

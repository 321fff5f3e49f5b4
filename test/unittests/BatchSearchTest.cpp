//===- BatchSearchTest.cpp - --max-batch-for's search ---------------------===//
//
// Every answer in an interval, with guesses good, off, wild and absent:
// the search names the answer bisection names, and counts its plans.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Transforms/BatchSearch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir::gpuc;

namespace {

constexpr int64_t kLow = 256, kHigh = 512;

/// Plans bisection alone makes over [kLow, kHigh).
int64_t bisectionPlans(int64_t answer) {
  int64_t plans = 0;
  int64_t found = largestFittingBatch(
      kLow, kHigh, [&](int64_t b) { return b <= answer; },
      [](int64_t) { return std::optional<int64_t>(); }, &plans);
  EXPECT_EQ(found, answer);
  return plans;
}

TEST(BatchSearch, WithoutGuessesItBisects) {
  for (int64_t answer = kLow; answer < kHigh; ++answer)
    EXPECT_LE(bisectionPlans(answer), 8) << answer; // log2(256)
}

TEST(BatchSearch, AProportionalModelTakesAFewPlans) {
  // A step's bytes: persistent plus an arena growing with the batch, the
  // model the driver guesses by.
  const double persistent = 1.9e9, perSample = 2.6e7;
  for (int64_t answer = kLow; answer < kHigh; ++answer) {
    const double limit = persistent + perSample * (answer + 0.5);
    auto bytes = [&](int64_t b) { return persistent + perSample * b; };
    int64_t plans = 0;
    int64_t found = largestFittingBatch(
        kLow, kHigh, [&](int64_t b) { return bytes(b) <= limit; },
        [&](int64_t over) -> std::optional<int64_t> {
          double arena = bytes(over) - persistent;
          return (int64_t)std::floor(over * (limit - persistent) / arena);
        },
        &plans);
    EXPECT_EQ(found, answer);
    EXPECT_LE(plans, 3) << answer;
  }
}

TEST(BatchSearch, GuessesOffOrWildStillFindTheAnswer) {
  std::mt19937_64 random(7);
  for (int64_t answer = kLow; answer < kHigh; ++answer) {
    int64_t bisection = bisectionPlans(answer);
    for (int64_t off : {-40, -3, -1, 1, 3, 40}) {
      int64_t plans = 0;
      int64_t found = largestFittingBatch(
          kLow, kHigh, [&](int64_t b) { return b <= answer; },
          [&](int64_t) { return std::optional<int64_t>(answer + off); },
          &plans);
      EXPECT_EQ(found, answer) << off;
      EXPECT_LE(plans, 2 * bisection + 1) << answer << " off " << off;
    }
    int64_t plans = 0;
    int64_t found = largestFittingBatch(
        kLow, kHigh, [&](int64_t b) { return b <= answer; },
        [&](int64_t) -> std::optional<int64_t> {
          if (random() % 4 == 0)
            return std::nullopt;
          return (int64_t)(random() % 4096) - 1024;
        },
        &plans);
    EXPECT_EQ(found, answer);
    EXPECT_LE(plans, 2 * bisection + 1) << answer;
  }
}

TEST(BatchSearch, AnIntervalOfOneIsTheAnswer) {
  int64_t plans = 0;
  EXPECT_EQ(largestFittingBatch(
                41, 42,
                [](int64_t) -> bool {
                  ADD_FAILURE();
                  return false;
                },
                [](int64_t) { return std::optional<int64_t>(); }, &plans),
            41);
  EXPECT_EQ(plans, 0);
}

} // namespace

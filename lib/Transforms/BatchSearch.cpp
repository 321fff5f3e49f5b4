//===- BatchSearch.cpp - the largest batch whose step fits ----------------===//
#include "gpuc/Transforms/BatchSearch.h"

#include <algorithm>

int64_t mlir::gpuc::largestFittingBatch(
    int64_t low, int64_t high, llvm::function_ref<bool(int64_t)> fits,
    llvm::function_ref<std::optional<int64_t>(int64_t over)> guess,
    int64_t *plans) {
  bool guessing = true;
  while (high - low > 1) {
    int64_t width = high - low;
    int64_t next = low + width / 2;
    std::optional<int64_t> guessed =
        guessing ? guess(high) : std::optional<int64_t>();
    if (guessed)
      next = std::clamp(*guessed, low + 1, high - 1);
    if (plans)
      ++*plans;
    if (fits(next))
      low = next;
    else
      high = next;
    // A guess that left more than half the interval: bisect once before
    // guessing again.
    guessing = !guessed || (high - low) * 2 <= width;
  }
  return low;
}

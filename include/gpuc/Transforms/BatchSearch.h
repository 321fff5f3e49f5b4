//===- BatchSearch.h - the largest batch whose step fits ------------------===//
//
// --max-batch-for plans the step at batch after batch; at GPT-2's scale a
// plan with remat takes a minute, so the search between a batch that fits
// and one that does not is steered by guesses of where the bytes cross the
// limit. No MLIR here: the planner is the caller's.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TRANSFORMS_BATCHSEARCH_H
#define GPUC_TRANSFORMS_BATCHSEARCH_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>

namespace mlir::gpuc {

/// The largest batch in [low, high) for which `fits` holds, given that it
/// holds at `low`, not at `high`, and not above any batch where it does not
/// (the step's bytes grow with the batch). `guess(over)`, asked about a
/// batch that does not fit, may name where the answer lies; a guess is
/// tried, clamped inside the interval, as long as each one at least halves
/// it, else one step bisects. The answer is the one bisection alone finds,
/// whatever the guesses, in at most about twice bisection's plans, and in
/// two or three when they are good. (With remat `fits` is close to, not
/// exactly, monotone: remat's greedy choice meets 64 MiB for the example
/// transformer at batch 3203 but not at 3200. Either search then names a
/// batch that fits whose next one does not, not always the same one.)
/// `plans`, when given, counts the calls of `fits`.
int64_t largestFittingBatch(
    int64_t low, int64_t high, llvm::function_ref<bool(int64_t)> fits,
    llvm::function_ref<std::optional<int64_t>(int64_t over)> guess,
    int64_t *plans = nullptr);

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_BATCHSEARCH_H

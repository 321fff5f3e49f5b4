//===- GroupRowsTest.cpp - the GPU's counting sort, run by the emulator ---===//
//
// gpuc.row_groups runs on the GPU as one block of threads that synchronize
// (GroupRows.h without GPUC_CPU). No GPU is needed to check its logic: the
// emulator (EmulatedGpu.h) runs the block, and it must give exactly the
// stable counting sort.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <random>
#include <vector>

#define GPUC_EMULATE_GPU
#include "gpuc/runtime/device/Kernel.h"

namespace {

/// The sort the op defines: positions by row, each row's in increasing
/// order.
void reference(const std::vector<int64_t> &ids, int32_t rows,
               std::vector<int32_t> &offsets, std::vector<int32_t> &order) {
  offsets.assign(rows + 1, 0);
  order.assign(ids.size(), 0);
  for (int64_t id : ids)
    ++offsets[gpuc::wrapIndex(id, rows) + 1];
  for (int32_t k = 0; k < rows; ++k)
    offsets[k + 1] += offsets[k];
  std::vector<int32_t> next(offsets.begin(), offsets.end() - 1);
  for (size_t j = 0; j < ids.size(); ++j)
    order[next[gpuc::wrapIndex(ids[j], rows)]++] = (int32_t)j;
}

void runBlock(int threads, const std::vector<int64_t> &ids, int32_t rows,
              std::vector<int32_t> &offsets, std::vector<int32_t> &order) {
  // Garbage first: the kernel must not rely on zeroed outputs.
  offsets.assign(rows + 1, -7);
  order.assign(ids.size(), -7);
  gpuc::emulated::launch(1, threads, "groupRows", [&] {
    gpuc::groupRows(ids.data(), (int32_t)ids.size(), rows, offsets.data(),
                    order.data());
  });
}

struct Case {
  const char *what;
  int32_t n, rows;
  /// Ids drawn from [low, high); out-of-range ones are clamped.
  int64_t low, high;
};

TEST(GroupRows, BlockOfThreadsGivesTheStableCountingSort) {
  const Case cases[] = {
      {"a language model's step: many rows, few repeats", 1000, 5000, 0, 5000},
      {"heavy repeats across tiles", 1500, 7, 0, 7},
      {"one row only", 600, 1, 0, 1},
      {"fewer positions than threads", 37, 300, 0, 300},
      {"negative ids count from the end", 700, 40, -40, 40},
      {"out-of-range ids are clamped", 513, 20, -60, 60},
      {"more rows than threads times chunks", 100, 70000, 0, 70000},
  };
  std::mt19937_64 random(11);
  for (const Case &c : cases) {
    std::uniform_int_distribution<int64_t> draw(c.low, c.high - 1);
    std::vector<int64_t> ids(c.n);
    for (int64_t &id : ids)
      id = draw(random);
    std::vector<int32_t> wantOffsets, wantOrder, offsets, order;
    reference(ids, c.rows, wantOffsets, wantOrder);
    for (int threads : {256, 96}) {
      runBlock(threads, ids, c.rows, offsets, order);
      EXPECT_EQ(offsets, wantOffsets) << c.what << ", " << threads;
      EXPECT_EQ(order, wantOrder) << c.what << ", " << threads;
    }
  }
}

} // namespace

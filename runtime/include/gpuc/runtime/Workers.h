//===- Workers.h - a loop over indices on worker threads --------*- C++ -*-===//
#ifndef GPUC_RUNTIME_WORKERS_H
#define GPUC_RUNTIME_WORKERS_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpuc {

/// Calls `each(i)` for every i in [0, n) on `workers` threads, this one
/// among them; each thread takes the next index when it finishes one (an
/// image folder's files decode in very different times).
template <typename Each> void onWorkers(int64_t n, int workers, Each each) {
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i; (i = next++) < n;)
      each(i);
  };
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < std::min<int64_t>(std::max(workers, 1), n); ++t)
    threads.emplace_back(work);
  work();
  for (std::thread &t : threads)
    t.join();
}

} // namespace gpuc

#endif // GPUC_RUNTIME_WORKERS_H

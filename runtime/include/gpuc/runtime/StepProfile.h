//===- StepProfile.h - where a device's step time goes ----------*- C++ -*-===//
//
// GPUC_PROFILE=1 makes a device time every plan step it runs (the CPU with a
// clock around each step, the CUDA device with events between steps, its
// graphs off) and print this report at exit: time by step kind, then the
// longest steps (first run left out) with their achieved bandwidth and FLOP
// rate from the plan's bytes_read/bytes_written/flops. Header-only: the CUDA
// plugin links no part of the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_STEPPROFILE_H
#define GPUC_RUNTIME_STEPPROFILE_H

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace gpuc {

/// One step's accumulated time and what the plan says it moves and computes.
struct StepTime {
  std::string function, label;
  size_t index = 0; // in its function's steps
  bool kernel = false;
  double seconds = 0;
  int64_t runs = 0;
  double bytes = 0, flops = 0;
  int64_t seen = 0;

  /// One run's time. The first run of a step is left out: it pays for
  /// lazy module loading, library heuristics and cold caches.
  void add(double runSeconds) {
    if (seen++ == 0)
      return;
    seconds += runSeconds;
    ++runs;
  }

  static StepTime of(const std::string &function, size_t index,
                     const std::string &label, bool kernel,
                     const nlohmann::json &step) {
    StepTime t{function, label, index, kernel};
    t.bytes = step.value("bytes_read", 0.0) + step.value("bytes_written", 0.0);
    t.flops = step.value("flops", 0.0);
    return t;
  }
};

/// Prints the report to stderr; `device` names what ran the steps.
inline void printStepProfile(const char *device,
                             const std::vector<StepTime> &steps) {
  double total = 0;
  std::map<std::string, std::pair<double, int>> kinds;
  for (const StepTime &s : steps) {
    total += s.seconds;
    auto &kind = kinds[s.function + " " + (s.kernel ? "kernel" : s.label)];
    kind.first += s.seconds;
    kind.second += 1;
  }
  fprintf(stderr, "gpuc profile (%s): %.3f s in steps; by kind:\n", device,
          total);
  for (auto &[kind, entry] : kinds)
    fprintf(stderr, "  %9.4f s %5.1f%%  %s (%d steps)\n", entry.first,
            100.0 * entry.first / std::max(total, 1e-12), kind.c_str(),
            entry.second);
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return steps[a].seconds > steps[b].seconds;
  });
  fprintf(stderr, "the longest steps (per run: ms, GB/s, GFLOP/s):\n");
  for (size_t r = 0; r < order.size() && r < 15; ++r) {
    const StepTime &s = steps[order[r]];
    double each = s.seconds / std::max<int64_t>(s.runs, 1);
    fprintf(stderr,
            "  %9.4f s %5.1f%%  %8.4f ms %8.1f GB/s %9.1f GFLOP/s  %s "
            "step %zu (%s)\n",
            s.seconds, 100.0 * s.seconds / std::max(total, 1e-12), 1e3 * each,
            s.bytes / std::max(each, 1e-12) / 1e9,
            s.flops / std::max(each, 1e-12) / 1e9, s.function.c_str(), s.index,
            s.label.c_str());
  }
}

} // namespace gpuc

#endif // GPUC_RUNTIME_STEPPROFILE_H

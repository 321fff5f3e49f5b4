//===- StepProfile.h - where a device's step time goes ----------*- C++ -*-===//
//
// `train --profile FILE` makes the device time every plan step it runs (the
// CPU with a clock around each step, the CUDA device with events between
// steps, its graphs off). The trainer then writes FILE, a Chrome trace
// (chrome://tracing or ui.perfetto.dev) of a few steps: every kernel,
// library call and copy, the host's training steps and the loader's waits;
// and prints the roofline table here: per plan step its bytes and FLOPs
// (from plan.json), achieved GB/s and FLOP/s and their share of this
// machine's peaks measured at start, and a one-line verdict on what bounds
// the step. Header-only: the CUDA plugin links no part of the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_STEPPROFILE_H
#define GPUC_RUNTIME_STEPPROFILE_H

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpuc {

/// Seconds on the clock every trace event uses (the host's steady clock).
inline double profileClock() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One step's accumulated time and what the plan says it moves and computes.
struct StepTime {
  /// Runs kept for the trace, per step (after the first).
  static constexpr size_t kTraceRuns = 8;

  std::string function, label;
  size_t index = 0; // in its function's steps
  bool kernel = false;
  double seconds = 0;
  int64_t runs = 0;
  double bytes = 0, flops = 0;
  int64_t seen = 0;
  /// A row kernel split into launches (a long row's passes): this launch
  /// and their number.
  int64_t launch = 0, launches = 1;
  /// (start on profileClock(), duration) of the first kTraceRuns kept runs.
  std::vector<std::pair<double, double>> trace;

  /// One run's time. The first run of a step is left out: it pays for
  /// lazy module loading, library heuristics and cold caches.
  void add(double runSeconds, double startSeconds) {
    if (seen++ == 0)
      return;
    seconds += runSeconds;
    ++runs;
    if (trace.size() < kTraceRuns)
      trace.push_back({startSeconds, runSeconds});
  }

  static StepTime of(const std::string &function, size_t index,
                     const std::string &label, bool kernel,
                     const nlohmann::json &step) {
    StepTime t{function, label, index, kernel};
    t.bytes = step.value("bytes_read", 0.0) + step.value("bytes_written", 0.0);
    t.flops = step.value("flops", 0.0);
    if (step.contains("launch")) {
      t.launch = step["launch"][0].get<int64_t>();
      t.launches = step["launch"][1].get<int64_t>();
    }
    // Library calls: the least they move is their operands and result once.
    double element = step.value("dtype", std::string("F32")) == "F32" ? 4 : 2;
    auto count = [&](const char *key) {
      double n = 1;
      for (const auto &d : step[key])
        n *= d.get<double>();
      return n;
    };
    if (t.bytes == 0 && step.contains("m") && step.contains("k")) {
      double m = step["m"], n = step["n"], k = step["k"];
      t.bytes = element * step.value("batch", 1.0) * (m * k + k * n + m * n);
    } else if (t.bytes == 0 && step.contains("x_shape") &&
               step.contains("w_shape") && step.contains("y_shape")) {
      t.bytes =
          element * (count("x_shape") + count("w_shape") + count("y_shape"));
    }
    return t;
  }
  double perRun() const { return seconds / std::max<int64_t>(runs, 1); }
};

/// The timings of every step of `programs` (function name -> steps with a
/// `time` member), for a device's stepTimes().
template <typename Programs>
std::vector<StepTime> collectStepTimes(const Programs &programs) {
  std::vector<StepTime> times;
  for (const auto &function : programs)
    for (const auto &step : function.second)
      times.push_back(step.time);
  return times;
}

/// This machine's measured peaks; zero where the device did not measure.
struct MachinePeaks {
  double bytesPerSecond = 0, flopsPerSecond = 0;
  std::string how; // what was measured, for the report's header
};

/// What the host saw around the device's steps.
struct HostTimes {
  int64_t steps = 0;        // training steps timed
  double wallSeconds = 0;   // their wall time
  double loaderSeconds = 0; // of which the host waited for the loader
};

/// `steps` with the launches of each split kernel as one kernel: their
/// times and figures summed (the plan gives each launch an equal share of
/// the bytes and FLOPs), labelled by the kernel's name and how many
/// launches ("k9 (4)"). A launch alone is only a share of the work: a
/// pass that reads the row and one that combines the partials are not
/// comparable with the machine's peaks.
inline std::vector<StepTime> mergeKernelLaunches(std::vector<StepTime> steps) {
  std::vector<StepTime> merged;
  for (StepTime &s : steps) {
    if (s.launch > 0 && !merged.empty() &&
        merged.back().function == s.function &&
        merged.back().index + s.launch == s.index) {
      StepTime &first = merged.back();
      first.seconds += s.seconds;
      first.bytes += s.bytes;
      first.flops += s.flops;
      continue;
    }
    // (A label that is not the launch's name, cuDNN's attention in its
    // place, stays.)
    size_t pass = s.label.rfind("_p");
    if (s.launches > 1 && pass != std::string::npos &&
        pass + 2 < s.label.size() &&
        s.label.find_first_not_of("0123456789", pass + 2) == std::string::npos)
      s.label =
          s.label.substr(0, pass) + " (" + std::to_string(s.launches) + ")";
    merged.push_back(std::move(s));
  }
  return merged;
}

/// Prints the roofline table and the verdict to stderr.
inline void printRoofline(const std::string &device,
                          const std::vector<StepTime> &launches,
                          const MachinePeaks &peaks, const HostTimes &host) {
  std::vector<StepTime> steps = mergeKernelLaunches(launches);
  std::vector<const StepTime *> timed;
  for (const StepTime &s : steps)
    if (s.runs > 0)
      timed.push_back(&s);
  std::sort(timed.begin(), timed.end(),
            [](auto *a, auto *b) { return a->seconds > b->seconds; });
  std::map<std::string, double> perFunction;
  for (const StepTime *s : timed)
    perFunction[s->function] += s->perRun();
  double stepSeconds = perFunction["train_step"];
  fprintf(stderr, "gpuc profile (%s): train_step %.3f ms in device steps",
          device.c_str(), 1e3 * stepSeconds);
  if (host.steps > 0)
    fprintf(stderr, ", %.3f ms wall per training step (%lld steps)",
            1e3 * host.wallSeconds / host.steps, (long long)host.steps);
  fprintf(stderr, "\n");
  // A GPU's rates in TFLOP/s, a CPU's in GFLOP/s.
  bool tera = peaks.flopsPerSecond >= 1e13;
  double flopUnit = tera ? 1e12 : 1e9;
  const char *flopName = tera ? "TFLOP/s" : "GFLOP/s";
  if (peaks.bytesPerSecond > 0 || peaks.flopsPerSecond > 0)
    fprintf(stderr, "machine peaks: %.1f GB/s, %.1f %s (%s)\n",
            peaks.bytesPerSecond / 1e9, peaks.flopsPerSecond / flopUnit,
            flopName, peaks.how.c_str());
  // A step whose FLOPs per byte are below the machine's balance is bound
  // by memory, above it by compute.
  double balance = peaks.bytesPerSecond > 0
                       ? peaks.flopsPerSecond / peaks.bytesPerSecond
                       : 0;
  fprintf(stderr, "%-12s %-10s %5s %9s %6s %9s %10s %8s %5s %9s %5s  %s\n",
          "function", "step", "#", "ms/run", "share", "MB/run", "MFLOP/run",
          "GB/s", "%bw", flopName, "%fl", "bound");
  double memorySeconds = 0, computeSeconds = 0;
  double memoryShareOfPeak = 0, computeShareOfPeak = 0;
  for (const StepTime *s : timed) {
    double each = s->perRun();
    double gbs = s->bytes / std::max(each, 1e-12) / 1e9;
    double rate = s->flops / std::max(each, 1e-12) / flopUnit;
    double share = each / std::max(perFunction[s->function], 1e-12);
    bool computeBound =
        s->bytes <= 0 || (balance > 0 && s->flops / s->bytes >= balance);
    double bw =
        peaks.bytesPerSecond > 0 ? 100.0 * gbs * 1e9 / peaks.bytesPerSecond : 0;
    double fl = peaks.flopsPerSecond > 0
                    ? 100.0 * rate * flopUnit / peaks.flopsPerSecond
                    : 0;
    if (s->function == "train_step") {
      (computeBound ? computeSeconds : memorySeconds) += each;
      (computeBound ? computeShareOfPeak : memoryShareOfPeak) +=
          each * (computeBound ? fl : bw);
    }
    fprintf(stderr,
            "%-12s %-10s %5zu %9.4f %5.1f%% %9.3f %10.3f %8.2f %5.1f %9.2f "
            "%5.1f  %s\n",
            s->function.c_str(), s->label.c_str(), s->index, 1e3 * each,
            100 * share, s->bytes / 1e6, s->flops / 1e6, gbs, bw, rate, fl,
            computeBound ? "compute" : "memory");
  }
  // The verdict: the loader, then launches (time outside device steps),
  // then whichever of memory- and compute-bound steps takes more.
  double wall = host.steps > 0 ? host.wallSeconds / host.steps : stepSeconds;
  double loader = host.steps > 0 ? host.loaderSeconds / host.steps : 0;
  double outside = std::max(0.0, wall - loader - stepSeconds);
  std::string verdict;
  char text[256];
  if (loader > 0.25 * wall) {
    snprintf(text, sizeof text,
             "input-bound: the host waits %.0f%% of each step for the "
             "loader",
             100 * loader / wall);
  } else if (outside > 0.25 * wall) {
    snprintf(text, sizeof text,
             "launch-bound: %.0f%% of each step is outside the device's "
             "steps (host work and launch overhead)",
             100 * outside / wall);
  } else if (memorySeconds >= computeSeconds) {
    snprintf(text, sizeof text,
             "memory-bound: %.0f%% of the device time is in memory-bound "
             "steps, at %.0f%% of peak bandwidth on average",
             100 * memorySeconds / std::max(stepSeconds, 1e-12),
             memoryShareOfPeak / std::max(memorySeconds, 1e-12));
  } else {
    snprintf(text, sizeof text,
             "compute-bound: %.0f%% of the device time is in compute-bound "
             "steps, at %.0f%% of peak FLOP/s on average",
             100 * computeSeconds / std::max(stepSeconds, 1e-12),
             computeShareOfPeak / std::max(computeSeconds, 1e-12));
  }
  verdict = text;
  fprintf(stderr, "verdict: %s\n", verdict.c_str());
}

} // namespace gpuc

#endif // GPUC_RUNTIME_STEPPROFILE_H

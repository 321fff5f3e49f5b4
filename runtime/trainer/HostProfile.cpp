//===- HostProfile.cpp - the host side of train --profile -----------------===//
#include "HostProfile.h"

#include "CompiledStep.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpuc::trainer {

HostProfile::HostProfile(CompiledStep &s, const Options &o)
    : on(!o.profile.empty()) {
  if (on)
    peaks = s.device->measurePeaks();
}
void HostProfile::step(double start, int64_t step) {
  if (!on)
    return;
  double seconds = profileClock() - start;
  times.steps += 1;
  times.wallSeconds += seconds;
  if (stepSpans++ < kTraceSpans)
    events.push_back(span("step " + std::to_string(step), 2, start, seconds));
}
void HostProfile::loaderWait(double start) {
  if (!on)
    return;
  double seconds = profileClock() - start;
  times.loaderSeconds += seconds;
  if (waitSpans++ < kTraceSpans)
    events.push_back(span("loader wait", 3, start, seconds));
}
nlohmann::json HostProfile::span(const std::string &name, int tid, double start,
                                 double seconds) {
  return {{"name", name}, {"ph", "X"},         {"pid", 1},
          {"tid", tid},   {"ts", start * 1e6}, {"dur", seconds * 1e6}};
}
void HostProfile::finish(CompiledStep &s, const Options &o) {
  if (!on)
    return;
  s.device->synchronize();
  std::vector<StepTime> steps = s.device->stepTimes();
  nlohmann::json trace = nlohmann::json::array();
  auto name = [&](int tid, const char *what) {
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 1},
                     {"tid", tid},
                     {"args", {{"name", what}}}});
  };
  trace.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", 1},
                   {"args", {{"name", "train: " + s.device->describe()}}}});
  name(1, "device steps");
  name(2, "training steps (host)");
  name(3, "loader wait (host)");
  for (const StepTime &t : steps)
    for (auto [start, seconds] : t.trace) {
      nlohmann::json e = span(t.label, 1, start, seconds);
      e["cat"] = t.kernel ? "kernel" : (t.label == "copy" ? "copy" : "library");
      e["args"] = {{"function", t.function},
                   {"step", t.index},
                   {"bytes", t.bytes},
                   {"flops", t.flops}};
      trace.push_back(std::move(e));
    }
  for (nlohmann::json &e : events)
    trace.push_back(std::move(e));
  nlohmann::json file = {{"displayTimeUnit", "ms"}, {"traceEvents", trace}};
  std::string text = file.dump();
  FILE *out = fopen(o.profile.c_str(), "wb");
  if (!out)
    fail("cannot write --profile " + o.profile + ": " + strerror(errno));
  bool written = fwrite(text.data(), 1, text.size(), out) == text.size();
  if ((fclose(out) != 0) | !written)
    fail("cannot write --profile " + o.profile + ": " + strerror(errno));
  printRoofline(s.device->describe(), steps, peaks, times);
  fprintf(stderr,
          "trace: %s (%zu events; chrome://tracing or "
          "ui.perfetto.dev)\n",
          o.profile.c_str(), trace.size());
}

} // namespace gpuc::trainer

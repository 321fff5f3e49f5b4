//===- HostProfile.h - the host side of train --profile ---------*- C++ -*-===//
#ifndef GPUC_TRAINER_HOSTPROFILE_H
#define GPUC_TRAINER_HOSTPROFILE_H

#include "Options.h"

#include "gpuc/runtime/StepProfile.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace gpuc::trainer {

class CompiledStep;

/// train --profile: the host's part of the trace (its training steps and
/// the loader's waits) and what the report needs beside the device's steps.
struct HostProfile {
  /// Host spans kept for the trace, per kind.
  static constexpr int64_t kTraceSpans = 16;
  bool on = false;
  HostTimes times;
  MachinePeaks peaks;
  nlohmann::json events = nlohmann::json::array();
  int64_t stepSpans = 0, waitSpans = 0;

  HostProfile(CompiledStep &s, const Options &o);
  /// A training step the host timed from `start` (profileClock()).
  void step(double start, int64_t step);
  /// The host waited for the loader from `start`.
  void loaderWait(double start);
  /// Writes the trace to --profile and prints the roofline table.
  void finish(CompiledStep &s, const Options &o);

private:
  static nlohmann::json span(const std::string &name, int tid, double start,
                             double seconds);
};

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_HOSTPROFILE_H

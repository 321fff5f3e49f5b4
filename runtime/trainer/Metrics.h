//===- Metrics.h - the --metrics file ---------------------------*- C++ -*-===//
#ifndef GPUC_TRAINER_METRICS_H
#define GPUC_TRAINER_METRICS_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpuc::trainer {

/// The metrics file of a resumed run without the lines that the
/// interrupted run wrote after its last checkpoint (`step` > `step`): the
/// resumed run writes those steps again, and a plot would show them twice.
/// Rewritten through a temporary file and reopened for appending.
FILE *dropMetricsAfter(FILE *metrics, const std::string &path, int64_t step);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_METRICS_H

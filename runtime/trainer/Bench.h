//===- Bench.h - train --bench-steps, and the step's memory -----*- C++ -*-===//
#ifndef GPUC_TRAINER_BENCH_H
#define GPUC_TRAINER_BENCH_H

#include "Options.h"
#include "TrainingData.h"

#include "gpuc/runtime/Dataset.h"

#include <cstdint>

namespace gpuc::trainer {

class CompiledStep;

/// What the step's memory is: the plan's bytes (arena + persistent
/// buffers, what `gpuc compile --max-batch-for` adds up), what the device
/// allocated for it, and the process's peak resident set.
struct MemoryUse {
  int64_t plan = 0, device = 0, peakRss = 0;
};
MemoryUse memoryUse(const CompiledStep &s);

/// --bench-steps: times the step alone on one resident batch (the first of
/// --data; without --data, every input filled from a fixed pseudo-random
/// sequence: floats in [-1, 1), integers in [0, 10), valid tokens and
/// labels for every example model). Warm-up steps are excluded and the
/// device is drained before the clock stops.
int bench(CompiledStep &s, const Options &o, const Dataset *data,
          const ImageSamples *samples = nullptr);

/// --bench-loader: the loader alone for --epochs epochs, its batches taken
/// as fast as it fills them (with --augment, drawn on --workers threads),
/// after the decoding that loading the data did. Prints one JSON line.
int benchLoader(const CompiledStep &s, const Options &o, const Dataset &data,
                const ImageSamples &augmented, int64_t stepsPerEpoch);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_BENCH_H

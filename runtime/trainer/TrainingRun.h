//===- TrainingRun.h - epochs of steps, logged and checkpointed -*- C++ -*-===//
#ifndef GPUC_TRAINER_TRAININGRUN_H
#define GPUC_TRAINER_TRAININGRUN_H

#include "BatchLoader.h"
#include "Checkpoint.h"
#include "EventFile.h"
#include "HostProfile.h"
#include "LossReader.h"
#include "Options.h"

#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/GpuMonitor.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gpuc::trainer {

class CompiledStep;

/// A training run from `startStep` to the last step of the last epoch:
/// each step's batch from the loader, the progress line, the log and
/// evaluation points (and their --metrics lines), a checkpoint after each
/// epoch, and a clean stop on SIGINT/SIGTERM.
class TrainingRun {
public:
  /// `metrics` (may be null) is owned by the run from here on. `images`
  /// makes the samples of an image dataset that are decoded or augmented
  /// as batches need them.
  TrainingRun(CompiledStep &s, const Options &o, const Dataset &data,
              int64_t stepsPerEpoch, FILE *metrics, const ImageSamples &images);
  /// Trains from `startStep`; on a stop signal, checkpoints and exits the
  /// process with 128 + the signal.
  void run(int64_t startStep);
  /// Closes --metrics and prints the run's summary lines.
  void finish();

private:
  using Clock = std::chrono::steady_clock;

  /// Runs the steps of `epoch` from `inEpoch`; false when asked to stop.
  bool runEpoch(int64_t epoch, int64_t inEpoch, int64_t &step);
  /// Whether a stop signal reached this rank or any other.
  bool stopAsked();
  void progressLine(int64_t epoch, int64_t inEpoch, int64_t step, double rate);
  void logPoint(int64_t epoch, int64_t step, double rate);
  void evalPoint(int64_t epoch, int64_t step, Clock::time_point epochStart);
  /// The run's FLOP rate, and its share of the device's dense peak (the
  /// model FLOP utilization, by the plan's count).
  void sayFlopRate();
  [[noreturn]] void stop(int64_t stepReached, bool saved);
  /// Writes a line to --metrics at once (tail -f, a killed run).
  void metricsLine(const std::string &line);
  /// Writes scalars to --tensorboard at once (TensorBoard reloads as the
  /// run goes).
  void boardScalars(int64_t step,
                    const std::vector<std::pair<std::string, double>> &values);

  CompiledStep &s;
  const Options &o;
  const Dataset &data;
  const ImageSamples &images;
  int64_t stepsPerEpoch, totalSteps;
  FILE *metrics;
  EventFile events;
  bool tty;
  Loader loader;
  HostProfile profile;
  LossReader losses;
  CheckpointWriter checkpoints;
  Clock::time_point start;
  int64_t stepsDone = 0;
  double lastAccuracy = -1, lastLoss = -1;
  /// Since the last log point: seconds the steps waited for their batch,
  /// seconds they took in all (the wait included), and how many ran.
  double dataWait = 0, stepSeconds = 0;
  /// The whole run's time in steps (their data waits, and the waits for
  /// the device at log points, included; evaluation and checkpoints not).
  double trainingSeconds = 0;
  int64_t intervalSteps = 0, logPoints = 0;
  /// The same over log points since the last check for a data-bound run.
  double windowWait = 0, windowSeconds = 0;
  int64_t windowSteps = 0;
  bool dataBoundSaid = false;
  /// The GPU's utilization, memory and power at log points (NVML), when the
  /// steps run on a GPU and NVML is there.
  std::unique_ptr<GpuMonitor> gpuMonitor;
};

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_TRAININGRUN_H

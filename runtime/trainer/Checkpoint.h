//===- Checkpoint.h - checkpoints written, checked and resumed --*- C++ -*-===//
#ifndef GPUC_TRAINER_CHECKPOINT_H
#define GPUC_TRAINER_CHECKPOINT_H

#include "Options.h"

#include "gpuc/runtime/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpuc::trainer {

class CompiledStep;

/// --checkpoint-dir/checkpoint.safetensors.
std::string checkpointPath(const Options &o);

/// Creates --checkpoint-dir, takes its lock for the life of the process
/// and removes the temporary file of a write that was cut short.
void prepareCheckpointDir(const Options &o);

/// --resume: restores the checkpoint's parameters and state after checking
/// it (checksum, finite values, step, seed; a warning when the conditions
/// its bits depend on differ) and returns the step to continue from; 0
/// where there is nothing to resume. The lines `metrics` got after that
/// step are dropped (all of them when the run starts again).
int64_t resumeRun(CompiledStep &s, const Options &o, FILE *&metrics);

/// Writes checkpoints after an epoch or on a stop signal. A diverged run
/// (NaN or infinite values) does not replace the last good checkpoint.
class CheckpointWriter {
public:
  CheckpointWriter(CompiledStep &s, const Options &o, int64_t stepsPerEpoch)
      : s(s), o(o), stepsPerEpoch(stepsPerEpoch) {}
  /// Saves the state after `stepsDone` steps of the run; false when it was
  /// not written because the run has diverged (said once).
  bool save(int64_t stepsDone);

private:
  CompiledStep &s;
  const Options &o;
  int64_t stepsPerEpoch;
  bool divergedSaid = false;
};

/// FNV-1a (64 bits) over every tensor's name, type, shape and bytes, by
/// name, as hex: what a checkpoint's "checksum" metadata holds.
std::string checkpointChecksum(const std::vector<NamedTensor> &unordered);

/// Why `tensors` cannot be a checkpoint to train on: the first floating
/// tensor holding NaN or infinite values (a diverged run), or "".
std::string nonFiniteTensor(const std::vector<NamedTensor> &tensors);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_CHECKPOINT_H

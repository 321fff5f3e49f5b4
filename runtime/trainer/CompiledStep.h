//===- CompiledStep.h - the trainer's view of the compiled step -*- C++ -*-===//
#ifndef GPUC_TRAINER_COMPILEDSTEP_H
#define GPUC_TRAINER_COMPILEDSTEP_H

#include "Options.h"

#include "gpuc/runtime/Collective.h"
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/Safetensors.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpuc::trainer {

/// The trainer's view of the compiled step: the plan, the device that runs
/// it, and the buffers the trainer feeds and reads.
class CompiledStep {
public:
  Plan plan;
  std::unique_ptr<Device> device;
  int image = -1, label = -1, loss = -1, logits = -1, rng = -1, lr = -1;
  /// A language model's @eval scoring its tokens on the device: the batch's
  /// summed loss and correct tokens (f32 scalars) in place of `logits`.
  int evalLossSum = -1, evalCorrect = -1;
  /// Mixed precision's loss-scale state (f32 scalars), -1 without it.
  int lossScale = -1, skippedSteps = -1;
  std::string imageName, labelName;
  /// Why the trainer cannot evaluate (no class scores), or empty.
  std::string noEvalReason;
  bool evaluates() const { return logits >= 0 || evalLossSum >= 0; }
  int64_t batch = 0, classes = 0;
  /// A language model: integer tokens in, next-token labels of the same
  /// [batch, window] shape, class scores [batch, window, classes].
  bool tokens = false;
  int64_t window = 0;
  /// The model computes its loss on labels[:, 1:] itself (Hugging Face's
  /// causal LMs): a window is labelled with its own tokens.
  bool modelShiftsLabels = false;
  /// Steps whose gradients one update applies (1: every step updates).
  int64_t accumulate = 1;
  /// A data-parallel run's ranks (null when the process runs alone), this
  /// process's rank and how many there are.
  std::unique_ptr<Collective> collective;
  int rank = 0, ranks = 1;
  /// What `gpuc compile --no-weights` left out of init.safetensors: the
  /// model's weights, which --init or a checkpoint must give.
  std::vector<std::string> withheld;

  /// Loads `dir`'s plan, opens the device and uploads init.safetensors,
  /// then --init's weights.
  void open(const std::string &dir, const Options &o);
  /// Where status lines go: stderr when stdout carries results (--run-step,
  /// --bench-steps print JSON or nothing), null under --quiet otherwise.
  static FILE *statusStream(const Options &o);
  /// --device: cuda, cpu, or auto (the GPU when the artifact has GPU kernels
  /// and one is present, else the CPU, saying why).
  void openDevice(const std::string &dir, const Options &o);
  /// Joins the ranks a launcher (mpirun, srun) started, when there are
  /// several: the step's all-reduces then sum over them, and each rank
  /// applies the mean gradient of the global batch.
  void joinRanks(const std::string &dir, const Options &o);
  /// Gives every rank rank 0's parameters and state (after --init or
  /// --resume), so that they start from the same bits.
  void shareState();
  /// Fails, naming the first that differs, unless every rank has rank 0's
  /// `facts` (what, value): the ranks must train one model on one data set
  /// with one configuration, or their sums would mix unrelated things.
  void
  checkRanksAgree(const std::vector<std::pair<std::string, uint64_t>> &facts);
  /// Sums `values` element by element over the ranks (each rank gets the
  /// sums); a no-op for one process.
  void sumOverRanks(std::vector<double> &values);
  /// Uploads `tensors` into the buffers of the same names, each checked
  /// for dtype, shape and size. `complete` (a checkpoint, which holds every
  /// parameter and state buffer): a buffer it lacks is an error too;
  /// init.safetensors leaves out all-zero tensors, which devices start with.
  void restore(const std::vector<NamedTensor> &tensors, const std::string &from,
               bool complete = false);
  /// Fails, naming `from`, when `t` is a frozen mask the step computes from
  /// positions (plan.json's compiled_mask) and holds another mask.
  void checkFrozenMask(const NamedTensor &t, const std::string &from) const;
  /// Every parameter and state buffer (what a checkpoint holds), with
  /// optimizer state sharded over the ranks gathered whole: then every
  /// rank takes part. Without `gatherShards`, the sharded state is left
  /// out and the call is this rank's alone (the parameters are whole).
  std::vector<NamedTensor> snapshot(bool gatherShards = true);
  /// This rank's shard of `whole` into sharded buffer `b`.
  void uploadShard(const PlanBuffer &b, const NamedTensor &whole);
  /// Sharded buffer `b` whole, from this rank's shard `mine` and the
  /// others' (every rank takes part).
  NamedTensor gatherShard(const PlanBuffer &b, NamedTensor &mine);
  /// The RNG key (seed, step) and the learning rate of the next step.
  void setStepScalars(uint64_t seed, int64_t step, double learningRate);
  /// Runs `function` of the plan; a device error ends the trainer.
  void run(const char *function);
  /// One training step of `batch` samples; with gradient accumulation
  /// (gpuc compile --accumulate K) every K-th also applies the update.
  /// `afterStep` runs between the two: what reads the step's outputs (the
  /// loss lives in the arena, which the update's own buffers reuse).
  void trainStep(int64_t step,
                 const std::function<void()> &afterStep = nullptr);
};

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_COMPILEDSTEP_H

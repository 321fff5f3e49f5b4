//===- Trainer.cpp - the generated trainer's main -------------------------===//
//
// `gpuc compile` links this with the model's kernels into out/train. It reads
// plan.json and init.safetensors from its own directory, loads the data,
// runs the step program epoch by epoch with a loader thread preparing the
// next batch, evaluates on the test split, logs, checkpoints and resumes.
//
// Data order: epoch e visits the training samples in the permutation drawn
// from (seed, e); the last partial batch of an epoch is dropped (as
// PyTorch's drop_last=True), so every step sees a full batch. Evaluation
// pads its last batch and counts only the real samples. The dropout key of
// global step s is (seed, s). A run is therefore a function of the seed and
// the step, which is what makes resume bit-exact.
//
//===----------------------------------------------------------------------===//
#include "Bench.h"
#include "BufferFill.h"
#include "Checkpoint.h"
#include "CompiledStep.h"
#include "ExportOnnx.h"
#include "Options.h"
#include "RunStep.h"
#include "Signals.h"
#include "TrainingData.h"
#include "TrainingRun.h"

#include "gpuc/runtime/device/CpuKernelTable.h"

#include <cerrno>
#include <cstring>
#include <fstream>

using namespace gpuc;
using namespace gpuc::trainer;

namespace {

/// The steps of one epoch: a whole number of updates (an epoch ends with
/// one under --accumulate), at least one.
int64_t stepsPerEpochOf(const CompiledStep &s, const Dataset &data) {
  // A step reads a global batch: --batch samples on each rank.
  int64_t B = s.batch * s.ranks;
  int64_t steps = data.train.count / B / s.accumulate * s.accumulate;
  if (steps == 0)
    fail("the training split has " + std::to_string(data.train.count) +
         " samples, fewer than one update's " +
         std::to_string(B * s.accumulate) + " (batch " +
         std::to_string(s.batch) +
         (s.ranks > 1 ? " x " + std::to_string(s.ranks) + " ranks"
                      : std::string()) +
         (s.accumulate > 1
              ? " x " + std::to_string(s.accumulate) + " accumulated steps"
              : std::string()) +
         ")");
  return steps;
}

/// FNV-1a of `text`.
uint64_t fingerprint(const std::string &text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

/// A split's size and labels, and every 997th value of its samples: what
/// tells two copies of a data set apart without reading it all again.
uint64_t fingerprint(const Split &split) {
  std::string text = std::to_string(split.count) + " " +
                     std::to_string(split.sampleSize) + " ";
  text.append(reinterpret_cast<const char *>(split.labels.data()),
              split.labels.size() * sizeof(int64_t));
  for (size_t i = 0; i < split.samples.size(); i += 997)
    text.append(reinterpret_cast<const char *>(&split.samples[i]),
                sizeof(float));
  for (const std::string &file : split.files)
    text += file + "\n";
  return fingerprint(text);
}

/// "0.2860", or "(0.4914, 0.4822, 0.4465)" per channel.
std::string figures(const std::vector<double> &values) {
  std::string text;
  char one[32];
  for (double v : values) {
    snprintf(one, sizeof(one), "%s%.4f", text.empty() ? "" : ", ", v);
    text += one;
  }
  return values.size() > 1 ? "(" + text + ")" : text;
}

/// What the run is about to do, before it starts.
void sayWhatRuns(const CompiledStep &s, const Options &o, const Dataset &data,
                 int64_t stepsPerEpoch, const std::vector<double> &mean,
                 const std::vector<double> &stddev,
                 const ImageSamples &images) {
  if (o.quiet)
    return;
  if (s.tokens)
    printf("training on %lld windows of %lld tokens (%s; %lld held-out "
           "windows) for %lld epochs, %lld steps/epoch of %lld; labels: %s\n",
           (long long)data.train.count, (long long)s.window,
           data.format.c_str(), (long long)data.test.count, (long long)o.epochs,
           (long long)stepsPerEpoch, (long long)(s.batch * s.ranks),
           s.modelShiftsLabels
               ? "each window's own tokens (the model shifts them)"
               : "the tokens that follow");
  else
    printf("training %lld samples (%lld steps/epoch of %lld, last partial "
           "batch dropped) for %lld epochs; data %s normalized with mean "
           "%s std %s (%s)\n",
           (long long)data.train.count, (long long)stepsPerEpoch,
           (long long)(s.batch * s.ranks), (long long)o.epochs,
           data.format.c_str(), figures(mean).c_str(), figures(stddev).c_str(),
           !isFloatBuffer(s.plan.buffers[s.image]) ? "integers as they are"
           : !o.mean.empty()                       ? "given"
           : images.statisticsFrom
               ? ("the training split's, estimated from " +
                  std::to_string(images.statisticsFrom) + " of its images")
                     .c_str()
               : "the training split's");
  if (!s.evaluates())
    printf("no evaluation: %s\n", s.noEvalReason.c_str());
  if (s.accumulate > 1)
    printf("accumulating the gradients of %lld steps per update: effective "
           "batch %lld\n",
           (long long)s.accumulate, (long long)(s.accumulate * s.batch));
}

/// Ranks other than 0 train silently and write nothing: rank 0 prints,
/// logs metrics, checkpoints and exports for the run.
Options forThisRank(const CompiledStep &s, Options o) {
  if (s.rank == 0)
    return o;
  o.quiet = true;
  o.metrics.clear();
  o.tensorboard.clear();
  o.exportOnnx.clear();
  o.profile.clear();
  return o;
}

int trainerMain(int argc, char **argv) {
  takeStopSignals();
  Options given = parseOptions(argc, argv);
  const Options &o = given;
  std::string dir = artifactDir();
  if (!o.artifact.empty()) {
    // A trainer with CPU kernels holds one model's code; only a GPU-only
    // trainer (its kernels come from the artifact's cubin) serves others.
    if (gpuc_cpu_kernels[0].name)
      fail("--artifact: this trainer holds the CPU kernels of its own model "
           "and runs only the artifact beside it; use that artifact's train");
    dir = o.artifact;
  }
  CompiledStep s;
  s.open(dir, given);
  given = forThisRank(s, given);
  if (o.batchSize && o.batchSize != s.batch)
    fail("this trainer was compiled for batch " + std::to_string(s.batch) +
         "; recompile with gpuc compile --batch " +
         std::to_string(o.batchSize) + " to train with another");
  if (!o.runStepInputs.empty())
    return runStep(s, o);
  if (o.benchSteps && o.data.empty())
    return bench(s, o, nullptr);
  if (o.data.empty())
    fail(std::string("--data DIR is required\n") + kUsage);
  // Say it before training, not after hours of it.
  if (!o.exportOnnx.empty() && !std::ifstream(dir + "/model.onnx"))
    fail("--export-onnx needs the ONNX model the trainer was compiled from, "
         "but " +
         dir + "/model.onnx is missing (models from the DSL have none)");
  if (!o.exportOnnx.empty())
    exportTarget(o.exportOnnx);

  Dataset data;
  std::vector<double> mean, stddev;
  ImageSamples augmented;
  loadTrainingData(s, o, data, mean, stddev, augmented);
  int64_t stepsPerEpoch = stepsPerEpochOf(s, data);
  if (o.benchLoader)
    return benchLoader(s, o, data, augmented, stepsPerEpoch);
  s.checkRanksAgree(
      {{"artifact (plan.json)", fingerprint(s.plan.json.dump())},
       {"training data (--data " + o.data + ")", fingerprint(data.train)},
       {"test data (--data " + o.data + ")", fingerprint(data.test)},
       {"flags (--seed, --epochs, --lr, --limit-train, --held-out, "
        "--log-every, --eval-every)",
        fingerprint(
            std::to_string(o.seed) + " " + std::to_string(o.epochs) + " " +
            std::to_string(o.lr) + " " + std::to_string(o.limitTrain) + " " +
            std::to_string(o.heldOut) + " " + std::to_string(o.logEvery) + " " +
            std::to_string(o.evalEvery))}});

  // The checkpoint directory first: --metrics may live in it.
  if (s.rank == 0)
    prepareCheckpointDir(o);
  FILE *metrics = nullptr;
  if (!o.metrics.empty() && !(metrics = fopen(o.metrics.c_str(), "a")))
    fail("cannot write --metrics " + o.metrics + ": " + strerror(errno));
  int64_t startStep = resumeRun(s, o, metrics);
  s.shareState();
  if (o.benchSteps)
    return bench(s, o, &data, &augmented);

  sayWhatRuns(s, o, data, stepsPerEpoch, mean, stddev, augmented);
  TrainingRun run(s, o, data, stepsPerEpoch, metrics, augmented);
  run.run(startStep);
  run.finish();
  if (!o.exportOnnx.empty())
    exportOnnx(s, dir, o.exportOnnx);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // plan.json's structure is checked when it loads; a value of the wrong
  // type that a later reader meets (a hand-edited plan) ends here, with the
  // file named, instead of in std::terminate.
  try {
    return trainerMain(argc, argv);
  } catch (const nlohmann::json::exception &e) {
    fail(artifactDir() + "/plan.json is damaged (" + e.what() +
         "); recompile the model with gpuc compile");
  }
}

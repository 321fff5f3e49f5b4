//===- TrainingRun.cpp - epochs of steps, logged and checkpointed ---------===//
#include "TrainingRun.h"

#include "Bench.h"
#include "CompiledStep.h"
#include "Evaluate.h"
#include "Signals.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <unistd.h>

namespace gpuc::trainer {

TrainingRun::TrainingRun(CompiledStep &s, const Options &o, const Dataset &data,
                         int64_t stepsPerEpoch, FILE *metrics,
                         const ImageSamples &images)
    : s(s), o(o), data(data), images(images), stepsPerEpoch(stepsPerEpoch),
      totalSteps(stepsPerEpoch * o.epochs), metrics(metrics),
      // (mpirun hands its ranks a terminal even when its own output goes
      // to a file: several ranks log plain lines.)
      tty(isatty(fileno(stdout)) && !o.quiet && s.ranks == 1),
      loader(data.train, s.batch, s.plan.buffers[s.image], s.rank, s.ranks),
      profile(s, o), losses(*s.device, s.loss),
      checkpoints(s, o, stepsPerEpoch) {
  if (images.makesTrainingSamples(data.train))
    loader.makeSamples(&images, o.seed);
  std::string busId = s.device->pciBusId(), why;
  if (!busId.empty() && s.rank == 0 &&
      !(gpuMonitor = GpuMonitor::open(busId, why)) && !o.quiet)
    fprintf(stderr,
            "train: warning: the log has no GPU utilization, memory or "
            "power: %s\n",
            why.c_str());
  std::string error;
  if (!o.tensorboard.empty() && !events.open(o.tensorboard, error))
    fail("--tensorboard " + o.tensorboard + ": " + error);
}

void TrainingRun::run(int64_t startStep) {
  start = Clock::now();
  // Resumed: the steps after the checkpoint, which an interrupted run may
  // have logged already, are logged again.
  if (startStep > 0)
    events.restartAt(startStep + 1);
  training.store(true);
  for (int64_t step = startStep; step < totalSteps;) {
    int64_t epoch = step / stepsPerEpoch, inEpoch = step % stepsPerEpoch;
    bool stopped = !runEpoch(epoch, inEpoch, step);
    // Rank 0 writes the run's checkpoints (every rank holds the same
    // parameters, and sends its shard of a sharded optimizer state).
    bool saved = !o.checkpointDir.empty() && checkpoints.save(step);
    if (stopped)
      stop(step, saved);
  }
}

bool TrainingRun::runEpoch(int64_t epoch, int64_t inEpoch, int64_t &step) {
  loader.startEpoch(epoch, permutation(data.train.count, o.seed, epoch),
                    inEpoch, stepsPerEpoch - inEpoch);
  auto epochStart = Clock::now();
  for (; inEpoch < stepsPerEpoch; ++inEpoch, ++step) {
    double stepStart = profileClock();
    Batch b = loader.take();
    dataWait += profileClock() - stepStart;
    profile.loaderWait(stepStart);
    s.device->upload(s.plan.buffers[s.image].id, b.images.data(),
                     b.images.size());
    s.device->upload(s.label, b.labels.data(),
                     b.labels.size() * sizeof(int64_t));
    s.setStepScalars(o.seed, step, o.lr);
    s.trainStep(step, [&] { losses.submitted(step); });
    profile.step(stepStart, step);
    stepSeconds += profileClock() - stepStart;
    trainingSeconds += profileClock() - stepStart;
    ++intervalSteps;
    ++stepsDone;
    double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    double rate = stepsDone * s.batch * s.ranks / std::max(elapsed, 1e-9);
    bool lastOfEpoch = inEpoch + 1 == stepsPerEpoch;
    bool isLogPoint = (step + 1) % o.logEvery == 0 || lastOfEpoch;
    if (isLogPoint) {
      double waitStart = profileClock();
      losses.drain(true);
      trainingSeconds += profileClock() - waitStart;
    } else if (tty)
      losses.drain(false);
    if (tty)
      progressLine(epoch, inEpoch, step, rate);
    if (isLogPoint)
      logPoint(epoch, step, rate);
    if (lastOfEpoch || (o.evalEvery && (step + 1) % o.evalEvery == 0))
      evalPoint(epoch, step, epochStart);
    // Asked to stop: after an update (accumulated gradients are not
    // checkpointed mid-way), before the next step; all ranks at the same
    // step, whichever got the signal.
    if ((step + 1) % s.accumulate == 0 && step + 1 < totalSteps &&
        stopAsked()) {
      ++step;
      return false;
    }
  }
  return true;
}

void TrainingRun::progressLine(int64_t epoch, int64_t inEpoch, int64_t step,
                               double rate) {
  double eta =
      (totalSteps - step - 1) * s.batch * s.ranks / std::max(rate, 1e-9);
  printf("\repoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f samples/s  "
         "ETA %02d:%02d   ",
         (long long)epoch + 1, (long long)o.epochs, (long long)inEpoch + 1,
         (long long)stepsPerEpoch, losses.last, rate, (int)eta / 60,
         (int)eta % 60);
  fflush(stdout);
}

bool TrainingRun::stopAsked() {
  if (s.ranks == 1)
    return stopSignal != 0;
  std::vector<double> signals = {(double)stopSignal};
  s.sumOverRanks(signals);
  if (signals[0] > 0 && !stopSignal)
    stopSignal = SIGTERM; // another rank's
  return signals[0] > 0;
}

void TrainingRun::logPoint(int64_t epoch, int64_t step, double rate) {
  // The global batch's loss: every rank's steps (equal batches) count.
  std::vector<double> totals = {losses.sum, (double)losses.count};
  s.sumOverRanks(totals);
  double mean = totals[0] / std::max(totals[1], 1.0);
  // The loss scale as the step left it: read at log points only, where the
  // host waits for the device anyway.
  std::string extra, extraJson;
  std::vector<std::pair<std::string, double>> board = {
      {"train/loss", mean}, {"train/samples_per_s", rate}};
  char text[160];
  if (s.tokens) {
    board.push_back({"train/tokens_per_s", rate * s.window});
    snprintf(text, sizeof(text), " tokens/s %.0f", rate * s.window);
    extra = text;
    snprintf(text, sizeof(text), ", \"tokens_per_s\": %.1f", rate * s.window);
    extraJson = text;
  }
  if (s.lossScale >= 0 && s.skippedSteps >= 0) {
    float scale = 0, skipped = 0;
    s.device->download(s.lossScale, &scale, sizeof(scale));
    s.device->download(s.skippedSteps, &skipped, sizeof(skipped));
    snprintf(text, sizeof(text), " loss_scale %g skipped_steps %lld", scale,
             (long long)skipped);
    extra += text;
    board.push_back({"train/loss_scale", scale});
    board.push_back({"train/skipped_steps", skipped});
    snprintf(text, sizeof(text),
             ", \"loss_scale\": %.17g, \"skipped_steps\": %lld", scale,
             (long long)skipped);
    extraJson += text;
  }
  // How long the steps waited for their data, and what share of their
  // time that was.
  double waitMs = 1e3 * dataWait / std::max<int64_t>(intervalSteps, 1);
  double waitShare = stepSeconds > 0 ? dataWait / stepSeconds : 0;
  snprintf(text, sizeof(text), " data_wait_ms %.2f (%.0f%%)", waitMs,
           100 * waitShare);
  extra += text;
  snprintf(text, sizeof(text),
           ", \"data_wait_ms\": %.3f, \"data_wait_share\": %.4f", waitMs,
           waitShare);
  extraJson = text + extraJson;
  board.push_back({"train/data_wait_ms", waitMs});
  board.push_back({"train/data_wait_share", waitShare});
  // A figure of the interval: `logText` (a printf format of it) on the log
  // line, `key` in --metrics, `tag` in --tensorboard.
  auto figure = [&](const std::string &logText, const char *key,
                    const char *tag, double value) {
    extra += logText;
    snprintf(text, sizeof(text), ", \"%s\": %.1f", key, value);
    extraJson += text;
    board.push_back({tag, value});
  };
  auto formatted = [&](const char *format, double a, double b = 0) {
    snprintf(text, sizeof(text), format, a, b);
    return std::string(text);
  };
  // What one worker decodes (and augments) per second, when the loader
  // makes the samples.
  int64_t made = 0;
  double workerSeconds = 0;
  loader.takeMadeCounts(made, workerSeconds);
  if (made > 0 && workerSeconds > 0)
    figure(formatted(" images/s per worker %.0f", made / workerSeconds),
           "worker_images_per_s", "train/worker_images_per_s",
           made / workerSeconds);
  // What the GPU did meanwhile, as NVML saw it (its utilization is the
  // share of its last sample period in which a kernel ran).
  GpuSample gpu;
  std::string gpuError;
  if (gpuMonitor && !gpuMonitor->sample(gpu, gpuError)) {
    fprintf(stderr, "train: warning: GPU monitoring stops: %s\n",
            gpuError.c_str());
    gpuMonitor.reset();
  }
  if (gpu.utilization >= 0)
    figure(formatted(" gpu %.0f%%", gpu.utilization), "gpu_utilization",
           "gpu/utilization", gpu.utilization);
  if (gpu.memoryUsedMiB >= 0)
    figure(formatted(" gpu_memory %.0f/%.0f MiB", gpu.memoryUsedMiB,
                     gpu.memoryTotalMiB),
           "gpu_memory_used_mib", "gpu/memory_used_mib", gpu.memoryUsedMiB);
  if (gpu.powerW >= 0)
    figure(formatted(" gpu_power %.0f W", gpu.powerW), "gpu_power_w",
           "gpu/power_w", gpu.powerW);
  // Said once, from a window of at least 50 steps after the first log
  // point (whose first batch waits for the loader to start), when the steps
  // waited a millisecond or more and over 10 % of their time: the device
  // stood idle that long. (A shorter window would report a busy machine's
  // scheduling.)
  if (++logPoints > 1) {
    windowWait += dataWait;
    windowSeconds += stepSeconds;
    windowSteps += intervalSteps;
  }
  if (windowSteps >= 50) {
    double ms = 1e3 * windowWait / windowSteps;
    double share = windowSeconds > 0 ? windowWait / windowSeconds : 0;
    if (share > 0.1 && ms >= 1.0 && !dataBoundSaid && s.rank == 0) {
      dataBoundSaid = true;
      fprintf(stderr,
              "train: the steps waited for their data %.0f%% of the time "
              "(%.2f ms of %.2f ms per step): the loader (reading, decoding, "
              "augmenting) is slower than the device; give it more --workers "
              "or fewer --augment choices\n",
              100 * share, ms, 1e3 * windowSeconds / windowSteps);
    }
    windowWait = windowSeconds = 0;
    windowSteps = 0;
  }
  dataWait = stepSeconds = 0;
  intervalSteps = 0;
  if (!tty && !o.quiet)
    printf("epoch %lld step %lld loss %.4f samples/s %.0f%s\n",
           (long long)epoch + 1, (long long)step + 1, mean, rate,
           extra.c_str());
  // Plain lines go to logs and pipes: each is worth seeing at once.
  fflush(stdout);
  snprintf(text, sizeof(text),
           "{\"epoch\": %lld, \"step\": %lld, \"loss\": %.9g, "
           "\"samples_per_s\": %.1f",
           (long long)epoch + 1, (long long)step + 1, mean, rate);
  metricsLine(text + extraJson + "}");
  boardScalars(step + 1, board);
  losses.sum = 0;
  losses.count = 0;
}

void TrainingRun::evalPoint(int64_t epoch, int64_t step,
                            Clock::time_point epochStart) {
  lastAccuracy = evaluate(s, data.test, images, lastLoss);
  double epochSeconds =
      std::chrono::duration<double>(Clock::now() - epochStart).count();
  if (tty)
    printf("\n");
  // A language model: the held-out loss per token and its perplexity.
  std::string lm, lmJson;
  char text[200];
  if (lastLoss >= 0) {
    snprintf(text, sizeof(text), " val_loss %.4f val_perplexity %.3f", lastLoss,
             std::exp(lastLoss));
    lm = text;
    snprintf(text, sizeof(text),
             ", \"val_loss\": %.9g, \"val_perplexity\": %.9g", lastLoss,
             std::exp(lastLoss));
    lmJson = text;
  }
  if (!o.quiet && lastAccuracy >= 0)
    printf("epoch %lld step %lld%s %s %.4f (epoch time %.1f s)\n",
           (long long)epoch + 1, (long long)step + 1, lm.c_str(),
           s.tokens ? "next_token_accuracy" : "test_accuracy", lastAccuracy,
           epochSeconds);
  fflush(stdout);
  if (lastAccuracy < 0)
    return;
  snprintf(text, sizeof(text),
           "{\"epoch\": %lld, \"step\": %lld, \"test_accuracy\": %.6f",
           (long long)epoch + 1, (long long)step + 1, lastAccuracy);
  std::string line = text + lmJson;
  snprintf(text, sizeof(text), ", \"elapsed_s\": %.2f}",
           std::chrono::duration<double>(Clock::now() - start).count());
  metricsLine(line + text);
  std::vector<std::pair<std::string, double>> board = {
      {s.tokens ? "test/next_token_accuracy" : "test/accuracy", lastAccuracy}};
  if (lastLoss >= 0) {
    board.push_back({"test/loss", lastLoss});
    board.push_back({"test/perplexity", std::exp(lastLoss)});
  }
  boardScalars(step + 1, board);
}

void TrainingRun::boardScalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  if (!events.isOpen())
    return;
  events.scalars(step, values);
  std::string error;
  if (!events.flush(error))
    fail("--tensorboard " + o.tensorboard + ": " + error);
}

void TrainingRun::metricsLine(const std::string &line) {
  if (!metrics)
    return;
  fprintf(metrics, "%s\n", line.c_str());
  if (fflush(metrics) != 0)
    fail("cannot write --metrics " + o.metrics + ": " + strerror(errno));
}

void TrainingRun::stop(int64_t stepReached, bool saved) {
  losses.drain(true);
  if (metrics)
    fclose(metrics);
  std::string error;
  events.close(error);
  const char *name = stopSignal == SIGINT ? "SIGINT" : "SIGTERM";
  if (s.rank != 0) {
    // Rank 0 says what happened to the run (and wrote the checkpoint).
  } else if (o.checkpointDir.empty())
    fprintf(stderr,
            "\ntrain: %s: stopped after step %lld of %lld; nothing saved "
            "(run with --checkpoint-dir to keep the progress)\n",
            name, (long long)stepReached, (long long)totalSteps);
  else if (!saved)
    fprintf(stderr,
            "\ntrain: %s: stopped after step %lld of %lld; the run had "
            "diverged, so %s keeps the last checkpoint written before\n",
            name, (long long)stepReached, (long long)totalSteps,
            checkpointPath(o).c_str());
  else
    fprintf(stderr,
            "\ntrain: %s: stopped after step %lld of %lld; checkpoint %s "
            "written; the same command with --resume continues\n",
            name, (long long)stepReached, (long long)totalSteps,
            checkpointPath(o).c_str());
  fflush(nullptr);
  _exit(128 + stopSignal);
}

void TrainingRun::sayFlopRate() {
  // The step's FLOPs as the plan counts them (its GEMMs, convolutions and
  // kernels; a recomputed activation counts again), and the GEMMs' dtype
  // that does most of them.
  double stepFlops = 0;
  std::map<std::string, double> byDtype;
  for (const auto &step : s.plan.json["functions"]["train_step"]["steps"]) {
    double flops = step.value("flops", 0.0);
    stepFlops += flops;
    if (step.contains("dtype"))
      byDtype[step["dtype"].get<std::string>()] += flops;
  }
  if (stepsDone == 0 || trainingSeconds <= 0 || stepFlops <= 0)
    return;
  std::string dtype = "F32";
  for (const auto &[name, flops] : byDtype)
    if (flops > byDtype[dtype])
      dtype = name;
  double rate = stepFlops * stepsDone / trainingSeconds;
  double peak = s.device->densePeakFlops(dtype);
  auto scaled = [](double flops) {
    char text[32];
    if (flops >= 1e12)
      snprintf(text, sizeof(text), "%.1f TFLOP", flops / 1e12);
    else if (flops >= 1e9)
      snprintf(text, sizeof(text), "%.1f GFLOP", flops / 1e9);
    else
      snprintf(text, sizeof(text), "%.1f MFLOP", flops / 1e6);
    return std::string(text);
  };
  printf("flops: %s per step (the plan's count), %s/s over the run's steps",
         scaled(stepFlops).c_str(), scaled(rate).c_str());
  if (peak > 0)
    printf(": %.0f%% of the device's dense %s peak of %s/s", 100 * rate / peak,
           dtype.c_str(), scaled(peak).c_str());
  printf("\n");
}

void TrainingRun::finish() {
  if (metrics && (ferror(metrics) | fclose(metrics)))
    fail("cannot write --metrics " + o.metrics + ": " + strerror(errno) +
         " (the metrics written so far may be incomplete)");
  metrics = nullptr;
  std::string error;
  if (!events.close(error))
    fail("--tensorboard " + o.tensorboard + ": " + error +
         " (the events written so far may be incomplete)");
  s.device->synchronize();
  if (!o.quiet) {
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (lastLoss >= 0)
      printf("done: %lld steps in %.1f s, final val_perplexity %.3f, "
             "next_token_accuracy %.4f\n",
             (long long)stepsDone, seconds, std::exp(lastLoss), lastAccuracy);
    else if (lastAccuracy >= 0)
      printf("done: %lld steps in %.1f s, final test_accuracy %.4f\n",
             (long long)stepsDone, seconds, lastAccuracy);
    else
      printf("done: %lld steps in %.1f s (not evaluated: %s)\n",
             (long long)stepsDone, seconds,
             !s.evaluates() ? s.noEvalReason.c_str() : "no epoch ended");
    Device::Counters c = s.device->counters();
    if (!c.graphLaunches.empty() || !c.hostLaunches.empty())
      printf(
          "launches: train_step %lld graph launches for %lld steps, eval "
          "%lld graph launches, %lld host launches\n",
          (long long)c.graphLaunches["train_step"], (long long)stepsDone,
          (long long)c.graphLaunches["eval"],
          (long long)(c.hostLaunches["train_step"] + c.hostLaunches["eval"]));
    sayFlopRate();
    MemoryUse memory = memoryUse(s);
    printf("memory: plan %.2f MiB (arena + persistent buffers), the device "
           "allocated %.2f MiB, peak resident set %.2f MiB (with the data "
           "set and the runtime)\n",
           memory.plan / 1048576.0, memory.device / 1048576.0,
           memory.peakRss / 1048576.0);
  }
  profile.finish(s, o);
}

} // namespace gpuc::trainer

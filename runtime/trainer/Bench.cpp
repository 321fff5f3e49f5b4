//===- Bench.cpp - train --bench-steps, and the step's memory -------------===//
#include "Bench.h"

#include "BatchLoader.h"
#include "BufferFill.h"
#include "CompiledStep.h"
#include "HostProfile.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <sys/resource.h>

namespace gpuc::trainer {

MemoryUse memoryUse(const CompiledStep &s) {
  MemoryUse use;
  use.plan = s.plan.arenaBytes;
  for (const PlanBuffer &b : s.plan.buffers)
    if (b.persistent())
      use.plan += b.bytes;
  use.device = s.device->allocatedBytes();
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    use.peakRss = (int64_t)usage.ru_maxrss * 1024;
  return use;
}

int bench(CompiledStep &s, const Options &o, const Dataset *data,
          const ImageSamples *samples) {
  int64_t B = s.batch;
  if (data) {
    std::vector<float> images(B * data->train.sampleSize);
    sampleRange(data->train, *samples, 0, B, images.data());
    std::vector<int64_t> labels(data->train.labels.begin(),
                                data->train.labels.begin() +
                                    B * data->train.labelsPerSample);
    uploadImages(s, images);
    s.device->upload(s.label, labels.data(), labels.size() * sizeof(int64_t));
  } else {
    std::mt19937_64 rng(o.seed);
    for (auto &[name, id] :
         s.plan.json["functions"]["train_step"]["inputs"].items()) {
      const PlanBuffer &b = s.plan.buffers[id.get<int>()];
      std::vector<char> bytes(b.bytes);
      for (int64_t i = 0; i < b.numElements(); ++i)
        storeElement(b, bytes, i,
                     isFloatBuffer(b) ? (rng() >> 40) * 0x1p-23 - 1.0
                                      : (double)(rng() % 10));
      s.device->upload(b.id, bytes.data(), b.bytes);
    }
  }
  for (int i = 0; i < 3; ++i) {
    s.setStepScalars(o.seed, i, o.lr);
    s.trainStep(i);
  }
  s.device->synchronize();
  HostProfile profile(s, o);
  Device::Counters before = s.device->counters();
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.benchSteps; ++i) {
    double start = profileClock();
    s.setStepScalars(o.seed, i, o.lr);
    s.trainStep(i);
    profile.step(start, i);
  }
  s.device->synchronize();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  Device::Counters after = s.device->counters();
  MemoryUse memory = memoryUse(s);
  // One line for the run: rank 0's (the ranks step together).
  if (s.rank != 0) {
    profile.finish(s, o);
    return 0;
  }
  std::string ranks =
      s.ranks > 1 ? ", \"ranks\": " + std::to_string(s.ranks) : "";
  printf("{\"steps\": %lld, \"batch\": %lld%s, \"ms_per_step\": %.4f, "
         "\"graph_launches\": %lld, \"host_launches\": %lld, "
         "\"plan_bytes\": %lld, \"device_bytes\": %lld, "
         "\"peak_rss_bytes\": %lld}\n",
         (long long)o.benchSteps, (long long)B, ranks.c_str(),
         1000.0 * seconds / o.benchSteps,
         (long long)(after.graphLaunches["train_step"] -
                     before.graphLaunches["train_step"]),
         (long long)(after.hostLaunches["train_step"] -
                     before.hostLaunches["train_step"]),
         (long long)memory.plan, (long long)memory.device,
         (long long)memory.peakRss);
  fflush(stdout);
  profile.finish(s, o);
  return 0;
}

int benchLoader(const CompiledStep &s, const Options &o, const Dataset &data,
                const ImageSamples &augmented, int64_t stepsPerEpoch) {
  Loader loader(data.train, s.batch, s.plan.buffers[s.image], s.rank, s.ranks);
  if (augmented.makesTrainingSamples(data.train))
    loader.makeSamples(&augmented, o.seed);
  auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    loader.startEpoch(epoch, permutation(data.train.count, o.seed, epoch), 0,
                      stepsPerEpoch);
    for (int64_t k = 0; k < stepsPerEpoch; ++k)
      loader.take();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (s.rank != 0)
    return 0;
  int64_t images = o.epochs * stepsPerEpoch * s.batch;
  const Augmentation &a = augmented.augmentation;
  const char *augment = a.crop && a.flip ? "crop,flip"
                        : a.crop         ? "crop"
                        : a.flip         ? "flip"
                                         : "none";
  printf("{\"loader_epochs\": %lld, \"batch\": %lld, \"workers\": %d, "
         "\"augment\": \"%s\", \"images\": %lld, \"images_per_s\": %.1f, "
         "\"decoded\": %lld, \"decode_s\": %.4f, "
         "\"decode_images_per_s\": %.1f}\n",
         (long long)o.epochs, (long long)s.batch, augmented.workers, augment,
         (long long)images, images / std::max(seconds, 1e-9),
         (long long)augmented.decoded, augmented.decodeSeconds,
         augmented.decodeSeconds > 0
             ? augmented.decoded / augmented.decodeSeconds
             : 0.0);
  fflush(stdout);
  return 0;
}

} // namespace gpuc::trainer

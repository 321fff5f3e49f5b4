//===- BatchLoader.h - batches prepared on a thread of their own ----------===//
#ifndef GPUC_TRAINER_BATCHLOADER_H
#define GPUC_TRAINER_BATCHLOADER_H

#include "TrainingData.h"

#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/Executor.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuc::trainer {

/// A batch as the step's inputs hold it: the images already in the input's
/// storage type (converted on the loader's thread, off the step's path).
struct Batch {
  std::vector<char> images;
  std::vector<int64_t> labels;
  int64_t step = -1;
};

/// Fills batches of the epoch's permutation on its own thread, one ahead of
/// the step that consumes them. Step k of an epoch reads global batch k
/// (permutation positions [k, k + 1) x ranks x batch); each rank its slice.
class Loader {
public:
  /// Rank `rank` of `ranks` (data parallelism) reads its own `batch`
  /// samples of each global batch of `ranks` x `batch`.
  Loader(const Split &split, int64_t batch, const PlanBuffer &input,
         int rank = 0, int ranks = 1)
      : split(split), batch(batch), dtype(input.dtype),
        bytesPerSample(input.bytes / batch), rank(rank), ranks(ranks) {}
  ~Loader() { stop(); }

  /// Makes each training sample as `images` says (decoded from its file,
  /// with the epoch's random crop and flip under --augment, drawn from
  /// `seed`) on its worker threads, instead of copying the split's values.
  void makeSamples(const ImageSamples *images, uint64_t seed) {
    this->images = images;
    this->seed = seed;
  }
  /// Starts filling `batches` batches of epoch `epoch`'s `order` from batch
  /// `firstBatch`.
  void startEpoch(int64_t epoch, const std::vector<int64_t> &order,
                  int64_t firstBatch, int64_t batches);
  /// The next batch, once it is ready.
  Batch take();
  /// How many samples the workers made (decoded, augmented) since the last
  /// call, and the seconds the workers spent on them, added over workers:
  /// their ratio is the images/s of one worker.
  void takeMadeCounts(int64_t &samples, double &workerSeconds) {
    samples = made.exchange(0);
    workerSeconds = makeNanoseconds.exchange(0) * 1e-9;
  }

private:
  void produce();
  void stop();

  const Split &split;
  int64_t batch;
  std::string dtype;
  int64_t bytesPerSample;
  int rank, ranks;
  const ImageSamples *images = nullptr;
  uint64_t seed = 0;
  int64_t epoch = 0;
  std::vector<int64_t> order;
  int64_t next = 0, end = 0;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable ready, space;
  Batch slot;
  std::atomic<int64_t> made{0}, makeNanoseconds{0};
  bool full = false, done = false;
};

/// Epoch `epoch`'s visiting order of `n` samples: Fisher-Yates driven by a
/// 64-bit Mersenne Twister seeded from (seed, epoch).
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_BATCHLOADER_H

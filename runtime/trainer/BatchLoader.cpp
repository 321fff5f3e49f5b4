//===- BatchLoader.cpp - batches prepared on a thread of their own --------===//
#include "BatchLoader.h"

#include "BufferFill.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace gpuc::trainer {

void Loader::startEpoch(int64_t epoch, const std::vector<int64_t> &order,
                        int64_t firstBatch, int64_t batches) {
  stop();
  this->epoch = epoch;
  this->order = order;
  next = firstBatch;
  end = firstBatch + batches;
  done = false;
  thread = std::thread([this] { produce(); });
}

Batch Loader::take() {
  std::unique_lock<std::mutex> lock(mutex);
  ready.wait(lock, [&] { return full; });
  Batch b = std::move(slot);
  full = false;
  space.notify_one();
  return b;
}

void Loader::produce() {
  for (int64_t k = next; k < end; ++k) {
    Batch b;
    b.step = k;
    b.images.resize(batch * bytesPerSample);
    int64_t perSample = split.labelsPerSample;
    b.labels.resize(batch * perSample);
    auto fill = [&](int64_t first, int64_t step) {
      std::vector<float> values(split.sampleSize);
      for (int64_t i = first; i < batch; i += step) {
        int64_t s = order[(k * ranks + rank) * batch + i];
        if (images) {
          auto start = std::chrono::steady_clock::now();
          sampleValues(split, *images, s, images->augmentation.any(), seed,
                       epoch, values.data());
          makeNanoseconds +=
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
          ++made;
          storeFloats(dtype, values.data(), split.sampleSize,
                      &b.images[i * bytesPerSample]);
        } else {
          storeFloats(dtype, &split.samples[s * split.sampleSize],
                      split.sampleSize, &b.images[i * bytesPerSample]);
        }
        std::copy_n(&split.labels[s * perSample], perSample,
                    &b.labels[i * perSample]);
      }
    };
    // Samples decoded or augmented are made on the --workers threads.
    int workers = images ? std::max(images->workers, 1) : 1;
    std::vector<std::thread> helpers;
    for (int w = 1; w < workers; ++w)
      helpers.emplace_back(fill, w, workers);
    fill(0, workers);
    for (std::thread &t : helpers)
      t.join();
    std::unique_lock<std::mutex> lock(mutex);
    space.wait(lock, [&] { return !full || done; });
    if (done)
      return;
    slot = std::move(b);
    full = true;
    ready.notify_one();
  }
}

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    full = false;
  }
  space.notify_all();
  if (thread.joinable())
    thread.join();
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + (uint64_t)epoch + 1);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = (int64_t)(rng() % (uint64_t)(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

} // namespace gpuc::trainer

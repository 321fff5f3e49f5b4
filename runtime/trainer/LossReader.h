//===- LossReader.h - step losses read without stalling the device --------===//
#ifndef GPUC_TRAINER_LOSSREADER_H
#define GPUC_TRAINER_LOSSREADER_H

#include "Options.h"

#include "gpuc/runtime/Executor.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <utility>

namespace gpuc::trainer {

/// The loss of each step, read without stalling the device: a step's loss
/// is a ticket, taken once it has arrived, and all of them at a log point
/// (on the GPU the host then waits once per log interval, not per step).
class LossReader {
public:
  LossReader(Device &device, int id) : device(device), id(id) {}

  void submitted(int64_t step) {
    // A ticket's slot is reused by the one `capacity` later: take the
    // oldest first when all are out.
    if (pending.size() >= device.readCapacity())
      take();
    pending.push_back({device.readLater(id, sizeof(float)), step});
  }
  /// Takes the losses that have arrived; all of them when `wait`.
  void drain(bool wait) {
    while (!pending.empty() && (wait || device.ready(pending.front().first)))
      take();
  }
  double sum = 0;
  int64_t count = 0;
  float last = NAN;

private:
  void take() {
    auto [ticket, step] = pending.front();
    pending.pop_front();
    float loss;
    device.collect(ticket, &loss, sizeof(loss));
    if (!std::isfinite(loss))
      // (A NaN's sign bit says nothing; "-nan" would read as a number.)
      fail(std::string("the loss became ") +
           (std::isnan(loss) ? "nan"
            : loss > 0       ? "inf"
                             : "-inf") +
           " at step " + std::to_string(step) + "; lower --lr");
    sum += loss;
    ++count;
    last = loss;
  }

  Device &device;
  int id;
  std::deque<std::pair<uint64_t, int64_t>> pending;
};

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_LOSSREADER_H

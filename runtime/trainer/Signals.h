//===- Signals.h - SIGINT and SIGTERM stop the run cleanly ------*- C++ -*-===//
#ifndef GPUC_TRAINER_SIGNALS_H
#define GPUC_TRAINER_SIGNALS_H

#include <atomic>

namespace gpuc::trainer {

/// The signal (SIGINT, SIGTERM) that asked the training loop to stop: it
/// finishes the step in flight (and an accumulation to its update), writes
/// a checkpoint and exits. A second signal, or one before training starts,
/// ends the process at once.
extern std::atomic<int> stopSignal;
/// Set once training starts: before it, a signal ends the process at once.
extern std::atomic<bool> training;

/// SIGINT and SIGTERM are blocked in every thread and taken by one thread
/// that waits for them, so no handler ever runs on a compute thread's
/// stack. With a handler (that only set a flag) the heap was corrupted in
/// most Ctrl-C runs, detected inside oneDNN's sgemm; the likely cause is
/// JIT code keeping data below the stack pointer, where a handler frame
/// goes. Called first thing, before any thread exists, so that every
/// thread inherits the mask.
void takeStopSignals();

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_SIGNALS_H

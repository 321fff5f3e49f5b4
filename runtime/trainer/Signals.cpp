//===- Signals.cpp - SIGINT and SIGTERM stop the run cleanly --------------===//
#include "Signals.h"

#include <csignal>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace gpuc::trainer {

std::atomic<int> stopSignal{0};
std::atomic<bool> training{false};

void takeStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0)
        continue;
      if (!training.load() || stopSignal.load())
        _exit(128 + signal);
      stopSignal.store(signal);
    }
  }).detach();
}

} // namespace gpuc::trainer

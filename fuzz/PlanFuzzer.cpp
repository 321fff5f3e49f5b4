//===- PlanFuzzer.cpp - plan.json as the trainer loads it -----------------===//
#include "FuzzInput.h"
#include "gpuc/runtime/Executor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gpuc::Plan plan;
  std::string error;
  plan.load(gpuc::fuzz::writeInput("plan.json", data, size), error);
  return 0;
}

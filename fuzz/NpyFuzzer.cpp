//===- NpyFuzzer.cpp - .npy data files and --run-step inputs --------------===//
#include "FuzzInput.h"
#include "gpuc/runtime/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gpuc::NpyArray array;
  std::string error;
  gpuc::readNpy(gpuc::fuzz::writeInput("input.npy", data, size), array, error);
  return 0;
}

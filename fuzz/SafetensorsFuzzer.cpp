//===- SafetensorsFuzzer.cpp - checkpoints and init.safetensors -----------===//
#include "FuzzInput.h"
#include "gpuc/runtime/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<gpuc::NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string error;
  gpuc::readSafetensors(
      gpuc::fuzz::writeInput("checkpoint.safetensors", data, size), tensors,
      metadata, error);
  return 0;
}

//===- RunStep.cpp - one step on given inputs -----------------------------===//
#include "RunStep.h"

#include "BufferFill.h"
#include "CompiledStep.h"
#include "Directories.h"

#include "gpuc/runtime/Npy.h"
#include "gpuc/runtime/device/Float16.h"

#include <cstring>
#include <sys/stat.h>

namespace gpuc::trainer {

int runStep(CompiledStep &s, const Options &o) {
  // One step on given inputs: what tests compare with the interpreter.
  if (o.outputDir.empty())
    fail("--run-step needs --output-dir");
  std::string error;
  if (!makeDirectories(o.outputDir, error))
    fail("--output-dir: " + error);
  for (auto &[name, id] :
       s.plan.json["functions"]["train_step"]["inputs"].items()) {
    NpyArray a;
    std::string path = o.runStepInputs + "/" + name + ".npy";
    if (!readNpy(path, a, error))
      fail(error);
    const PlanBuffer &b = s.plan.buffers[id.get<int>()];
    if (a.numElements() != b.numElements())
      fail(path + " has " + std::to_string(a.numElements()) +
           " elements; the input takes " + std::to_string(b.numElements()));
    std::vector<char> bytes(b.bytes);
    for (int64_t i = 0; i < b.numElements(); ++i)
      storeElement(b, bytes, i, a.at(i));
    s.device->upload(b.id, bytes.data(), b.bytes);
  }
  s.setStepScalars(o.seed, o.step, o.lr);
  s.run("train_step");
  auto write = [&](const PlanBuffer &b, const std::string &name) {
    std::vector<char> bytes(b.bytes);
    s.device->download(b.id, bytes.data(), b.bytes);
    // Floats (f16/bf16 widened exactly) as float32, integers as int64.
    std::vector<double> values(b.numElements());
    const char *data = bytes.data();
    bool floating = b.dtype == "F32" || b.dtype == "F16" || b.dtype == "BF16";
    for (int64_t i = 0; i < b.numElements(); ++i) {
      uint16_t half = 0;
      if (b.dtype == "F16" || b.dtype == "BF16")
        memcpy(&half, data + 2 * i, 2);
      if (b.dtype == "F32")
        values[i] = ((const float *)data)[i];
      else if (b.dtype == "F16")
        values[i] = halfBitsToFloat(half);
      else if (b.dtype == "BF16")
        values[i] = bfloat16BitsToFloat(half);
      else if (b.dtype == "I32")
        values[i] = ((const int32_t *)data)[i];
      else if (b.dtype == "I8")
        values[i] = ((const int8_t *)data)[i];
      else if (b.dtype == "BOOL")
        values[i] = data[i] != 0;
      else
        values[i] = (double)((const int64_t *)data)[i];
    }
    NpyArray a = makeNpy(floating ? "<f4" : "<i8", b.shape, values);
    if (!writeNpy(o.outputDir + "/" + name + ".npy", a, error))
      fail(error);
  };
  for (auto &[name, id] :
       s.plan.json["functions"]["train_step"]["outputs"].items())
    write(s.plan.buffers[id.get<int>()], name);
  for (const PlanBuffer &b : s.plan.buffers)
    if (b.kind == "param" || b.kind == "state")
      write(b, b.name);
  return 0;
}

} // namespace gpuc::trainer

//===- CudaKernelSteps.cpp - a generated kernel's entry points ------------===//
//
// A kernel step's candidates: the kernel's own entry point and plan.json's
// alternatives to it (the same text under other bounds, block sizes or
// staging), each with its block and dynamic shared memory, which
// chooseLibraryAlgorithms times at load; and which steps may be timed
// again at exit, for --profile's report.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"

namespace gpuc {
namespace cuda_device {

bool CudaDevice::prepareSharedMemory(Step &step, int64_t bytes,
                                     std::string &error) {
  if (bytes == 0)
    return true;
  // What a block may take in all, and what the kernel declares itself.
  int most = 0, declared = 0;
  cuDeviceGetAttribute(
      &most, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
  cuFuncGetAttribute(&declared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                     step.function);
  if (bytes + declared > most) {
    error = "kernel " + step.label + " stages " + std::to_string(bytes) +
            " bytes in shared memory (and declares " +
            std::to_string(declared) + " more), beyond the " +
            std::to_string(most) +
            " this GPU gives a block; recompile with "
            "--gpu-row-stage-bytes " +
            std::to_string(std::max(0, most - declared)) +
            " or less (a row kernel's staged rows; 0 stages none), or with "
            "--attention-score-gradients recomputed (an attention "
            "gradient's tiles of stored score gradients)";
    return false;
  }
  CUresult result = cuFuncSetAttribute(
      step.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      (int)bytes);
  if (result != CUDA_SUCCESS) {
    error = "kernel " + step.label + ": cannot give it " +
            std::to_string(bytes) + " bytes of shared memory (" +
            describeResult(result) + ")";
    return false;
  }
  step.sharedBytes = (unsigned)bytes;
  return true;
}

bool CudaDevice::resolveKernelCandidates(Step &step, int64_t shared,
                                         std::string &error) {
  step.kernelCandidates = {step.function};
  step.kernelCandidateNames = {step.label};
  step.kernelCandidateBlocks = {step.block};
  std::vector<int64_t> sharedBytes = {shared};
  const nlohmann::json &kernels = plan.json["kernels"];
  if (kernels.is_array())
    for (const nlohmann::json &kernel : kernels) {
      // (A field of another type than plan.json's is absent, not an
      // exception.)
      auto text = [&](const nlohmann::json &object, const char *field) {
        return object.is_object() && object.contains(field) &&
                       object[field].is_string()
                   ? object[field].get<std::string>()
                   : std::string();
      };
      auto number = [&](const nlohmann::json &object, const char *field,
                        int64_t otherwise) {
        return object.is_object() && object.contains(field) &&
                       object[field].is_number_integer()
                   ? object[field].get<int64_t>()
                   : otherwise;
      };
      if (text(kernel, "name") != step.label ||
          !kernel.contains("alternatives"))
        continue;
      const nlohmann::json &alternatives = kernel["alternatives"];
      if (!alternatives.is_array()) {
        error = "plan.json: kernel " + step.label +
                "'s alternatives are not a list; recompile the model";
        return false;
      }
      for (const nlohmann::json &alternative : alternatives) {
        std::string name = text(alternative, "name");
        int64_t block = number(alternative, "block", 256);
        // An entry point that stages less (none of a row) takes its own
        // dynamic shared memory; otherwise the kernel's.
        int64_t bytes = number(alternative, "shared", shared);
        if (name.empty() || block < 32 || block > 1024 || block % 32 != 0 ||
            bytes < 0 || bytes > (int64_t(1) << 30)) {
          error = "plan.json: kernel " + step.label + " has an alternative " +
                  alternative.dump() +
                  " without a name, a block of 32 to 1,024 threads (a "
                  "multiple of 32) or a valid \"shared\"; recompile the model";
          return false;
        }
        // An alternative exists where the architecture has what it needs
        // (tensor cores): one this GPU's binary lacks is not a candidate.
        CUfunction function = nullptr;
        if (cuModuleGetFunction(&function, module, name.c_str()) !=
            CUDA_SUCCESS)
          continue;
        step.kernelCandidates.push_back(function);
        step.kernelCandidateNames.push_back(name);
        step.kernelCandidateBlocks.push_back((unsigned)block);
        sharedBytes.push_back(bytes);
      }
      step.kernelInputs = (int)number(kernel, "inputs", -1);
      // What names the choice in library-algorithms.json: the kernel's
      // text, so that a recompiled artifact times its own.
      std::string digest = text(kernel, "digest");
      step.shape =
          "kernel " + step.label + (digest.empty() ? "" : " ") + digest;
    }
  // Each entry point takes its shared memory.
  for (size_t c = 0; c < step.kernelCandidates.size(); ++c) {
    step.function = step.kernelCandidates[c];
    step.sharedBytes = 0;
    if (!prepareSharedMemory(step, sharedBytes[c], error))
      return false;
    step.kernelCandidateShared.push_back(step.sharedBytes);
  }
  step.function = step.kernelCandidates.front();
  step.sharedBytes = step.kernelCandidateShared.front();
  return true;
}

bool CudaDevice::timeable(const Step &step, bool atLoad) const {
  if (atLoad)
    return true;
  if (step.kernelInputs < 0 || step.kernelInputs > (int)step.argIds.size())
    return false;
  for (size_t i = step.kernelInputs; i < step.argIds.size(); ++i) {
    const std::string &kind = plan.buffers[step.argIds[i]].kind;
    if (kind != "transient" && kind != "workspace")
      return false;
  }
  return true;
}

} // namespace cuda_device
} // namespace gpuc

//===- InitialWeights.h - train --init: weights from a file -----*- C++ -*-===//
#ifndef GPUC_TRAINER_INITIALWEIGHTS_H
#define GPUC_TRAINER_INITIALWEIGHTS_H

#include "gpuc/runtime/Safetensors.h"

#include <cstdio>
#include <string>
#include <vector>

namespace gpuc::trainer {

class CompiledStep;

/// Which of `fileNames` each of `modelNames` takes its value from: the same
/// name, else the one name that extends it, or that it extends, by whole
/// dotted components ("transformer.h.0.ln_1.weight" for "h.0.ln_1.weight";
/// "_orig_mod." and "module." prefixes of wrapped models). -1 where none or
/// more than one would do (each such model name, with its candidates, is
/// added to `doubts`). A file name serves one model name at most.
std::vector<int> matchTensorNames(const std::vector<std::string> &modelNames,
                                  const std::vector<std::string> &fileNames,
                                  std::vector<std::string> *doubts = nullptr);

/// `t`'s values in `dtype` (F32, F16, BF16, I64, I32, BOOL), from any
/// floating type to a floating one and any integer or boolean type to any
/// type; false with `error` when the conversion would lose what the values
/// mean (a float into an integer buffer, an integer out of range).
bool convertTensor(NamedTensor &t, const std::string &dtype,
                   std::string &error);

/// train --init FILE: the model's parameters and buffers from a safetensors
/// file (a PyTorch state_dict saved with safetensors, an HF checkpoint), by
/// name, converted to the model's types and checked for shape. Every
/// parameter (and what `gpuc compile --no-weights` left out) must be found;
/// the file's tensors the model has no buffer for are listed on `status`
/// (nothing is said where it is null).
void loadInitialWeights(CompiledStep &s, const std::string &path, FILE *status);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_INITIALWEIGHTS_H

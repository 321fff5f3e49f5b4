//===- BufferFill.h - host values in a buffer's storage type ----*- C++ -*-===//
#ifndef GPUC_TRAINER_BUFFERFILL_H
#define GPUC_TRAINER_BUFFERFILL_H

#include "gpuc/runtime/Executor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpuc::trainer {

class CompiledStep;

/// `n` floats in the storage type `dtype` (F32, or F16/BF16 rounded to
/// nearest even: a mixed-precision step reads its images in 16 bits; token
/// ids in I64/I32) at `dst`.
void storeFloats(const std::string &dtype, const float *src, int64_t n,
                 void *dst);

/// Whether `b` holds floats (f32, or f16/bf16 under mixed precision).
bool isFloatBuffer(const PlanBuffer &b);

/// Element `i` of a host copy of buffer `b` set to `v`, rounded to nearest
/// even for a 16-bit float buffer, converted for an integer one.
void storeElement(const PlanBuffer &b, std::vector<char> &bytes, int64_t i,
                  double v);

/// Uploads `images` (floats) into the data input, converting to its type.
void uploadImages(CompiledStep &s, const std::vector<float> &images);

} // namespace gpuc::trainer

#endif // GPUC_TRAINER_BUFFERFILL_H

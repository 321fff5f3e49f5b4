//===- StepProgram.h - a module's steps as kernels, calls and copies ------===//
//
// After gpuc-form-kernels, @train_step and @eval are sequences of fusions,
// library calls, reshapes and constants over static shapes. Lowering them
// gives the step program: every value gets a buffer (persistent: parameters,
// optimizer state, constants; transient: offsets in one arena, reused once a
// value is dead), every fusion a generated kernel, every matmul/conv a
// library call, every parameter update a copy into the parameter.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_CODEGEN_STEPPROGRAM_H
#define GPUC_CODEGEN_STEPPROGRAM_H

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlir::gpuc {

/// A persistent tensor's initial contents (parameters, state, constants):
/// the module's attribute, its bytes made only for what is written (a
/// language model's weights are 0.5 GB, which a --no-weights artifact and
/// a plan alone never write).
struct InitialTensor {
  std::string name;
  std::string dtype; // safetensors spelling: F32, I64, I32, BOOL
  std::vector<int64_t> shape;
  /// Valid while the lowered module is.
  ElementsAttr value;

  /// The tensor's bytes, little-endian, one element after another.
  std::vector<char> bytes() const;
  /// Whether every byte is 0 (optimizer moments: a splat, never expanded).
  bool allZero() const;
};

/// One kernel's text: its CUDA source, its CPU launchers and the names the
/// CPU launch table lists.
struct KernelText {
  std::string source;
  std::string cpuLaunchers;
  std::vector<std::string> launchNames;
  /// Parameters of each launch's entry point.
  int arguments = 0;
  /// The alternatives' entry points (kernels.cu defines them on the GPU
  /// and for the host CUDA), each with the macro it also needs ("" for
  /// none).
  std::vector<std::pair<std::string, std::string>> alternativeNames;
};

struct StepProgram {
  /// plan.json: buffers, arena size, kernels, and each function's steps.
  nlohmann::json plan;
  /// kernels.cu: every kernel, plus the CPU launch table under GPUC_CPU.
  std::string kernelSource;
  /// The same kernels one by one, for a host compile split into
  /// translation units (cpuKernelUnit, cpuKernelTable).
  std::vector<KernelText> kernels;
  std::vector<InitialTensor> initialTensors;
};

/// Lowers @train_step and @eval (those present) of `module`. Errors name the
/// op that cannot be lowered.
FailureOr<StepProgram> buildStepProgram(ModuleOp module);

/// A translation unit for the CPU target holding `kernels` and their
/// launchers; kernels.cu's kernels split among such units, plus the one
/// cpuKernelTable, link into the same trainer kernels.cu alone does.
std::string cpuKernelUnit(llvm::ArrayRef<KernelText> kernels);
/// The translation unit with the CPU launch table `gpuc_cpu_kernels` of
/// `kernels`, whose launchers are defined in other units.
std::string cpuKernelTable(llvm::ArrayRef<KernelText> kernels);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_STEPPROGRAM_H

//===- Signature.h - the roles of step arguments and results ----*- C++ -*-===//
//
// Arguments and results of gpuc functions carry their role as attributes
// (gpuc.input, gpuc.param, gpuc.rng, gpuc.hyper; gpuc.output, gpuc.update,
// gpuc.grad). The passes, the interpreter CLI and later the planner all find
// and extend signatures through these helpers.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_DIALECT_GPUC_SIGNATURE_H
#define GPUC_DIALECT_GPUC_SIGNATURE_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::gpuc {

/// The argument whose `attrName` attribute equals `value` (any value when
/// `value` is null).
std::optional<unsigned> findArgument(func::FuncOp func, StringRef attrName,
                                     Attribute value = {});
/// The result whose `attrName` attribute equals `value` (any value when null).
std::optional<unsigned> findResult(func::FuncOp func, StringRef attrName,
                                   Attribute value = {});

/// The gpuc.parameter an argument holds (gpuc.param), or null.
ParameterOp getArgumentParameter(func::FuncOp func, unsigned index);

/// The gpuc.parameter holding mixed precision's loss scale (marked
/// gpuc.loss_scale by gpuc-amp), or null.
ParameterOp findLossScaleParameter(ModuleOp module);

/// Appends an argument with one role attribute.
BlockArgument appendArgument(func::FuncOp func, Type type, NamedAttribute role,
                             Location loc);

/// The scalar f32 hyperparameter argument `name` (gpuc.hyper), appended
/// with `defaultValue` (gpuc.default) when the function has none yet.
BlockArgument hyperArgument(func::FuncOp func, StringRef name,
                            double defaultValue, Location loc);

/// The argument holding optimizer state `name` (a zero-initialized,
/// non-trainable gpuc.parameter marked gpuc.optimizer_state, created
/// before `func` when the module has none), appended when `func` has none.
BlockArgument optimizerStateArgument(func::FuncOp func, StringRef name,
                                     RankedTensorType type, Location loc);

/// Appends results (with one role attribute each) to the function's single
/// return.
void appendResults(func::FuncOp func, ArrayRef<Value> values,
                   ArrayRef<NamedAttribute> roles);

/// Removes the results at `indices` from the function and its return.
void eraseResults(func::FuncOp func, ArrayRef<unsigned> indices);

/// Erases the pure ops of the function's body that nothing reads (what
/// only fed results erased before), readers first.
void eraseDeadOps(func::FuncOp func);

/// A human-readable name of an argument's role, for messages and file names:
/// the input name, the parameter symbol, "rng", or the hyperparameter name.
std::string describeArgument(func::FuncOp func, unsigned index);
std::string describeResult(func::FuncOp func, unsigned index);

} // namespace mlir::gpuc

#endif // GPUC_DIALECT_GPUC_SIGNATURE_H

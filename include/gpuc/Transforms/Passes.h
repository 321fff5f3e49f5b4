//===- Passes.h - the passes of gpuc ----------------------------*- C++ -*-===//
#ifndef GPUC_TRANSFORMS_PASSES_H
#define GPUC_TRANSFORMS_PASSES_H

#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::gpuc {

#define GEN_PASS_DECL
#include "gpuc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "gpuc/Transforms/Passes.h.inc"

} // namespace mlir::gpuc

#endif // GPUC_TRANSFORMS_PASSES_H

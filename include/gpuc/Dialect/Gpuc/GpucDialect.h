//===- GpucDialect.h - the gpuc dialect -------------------------*- C++ -*-===//
#ifndef GPUC_DIALECT_GPUC_GPUCDIALECT_H
#define GPUC_DIALECT_GPUC_GPUCDIALECT_H

#include "mlir/IR/Dialect.h"

#include "gpuc/Dialect/Gpuc/GpucOpsDialect.h.inc"

#endif // GPUC_DIALECT_GPUC_GPUCDIALECT_H

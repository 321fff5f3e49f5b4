//===- GpucAttributes.h - attributes of the gpuc dialect --------*- C++ -*-===//
#ifndef GPUC_DIALECT_GPUC_GPUCATTRIBUTES_H
#define GPUC_DIALECT_GPUC_GPUCATTRIBUTES_H

#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#define GET_ATTRDEF_CLASSES
#include "gpuc/Dialect/Gpuc/GpucAttributes.h.inc"

#endif // GPUC_DIALECT_GPUC_GPUCATTRIBUTES_H

//===- GpucOps.h - operations of the gpuc dialect ----------------*- C++
//-*-===//
#ifndef GPUC_DIALECT_GPUC_GPUCOPS_H
#define GPUC_DIALECT_GPUC_GPUCOPS_H

#include "gpuc/Dialect/Gpuc/GpucDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "gpuc/Dialect/Gpuc/GpucEnums.h.inc"
#include "gpuc/Dialect/Gpuc/GpucInterfaces.h.inc"

#define GET_OP_CLASSES
#include "gpuc/Dialect/Gpuc/GpucOps.h.inc"

#endif // GPUC_DIALECT_GPUC_GPUCOPS_H

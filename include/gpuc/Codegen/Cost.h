//===- Cost.h - bytes and FLOPs of ops and kernels --------------*- C++ -*-===//
//
// What `gpuc compile --report` counts. Bytes are the buffers a kernel reads
// and writes (each once: inputs and results of the fusion; of an input the
// kernel reads only through slices or as a gather's table, what those take);
// FLOPs count one
// per element of an elementwise op, one per input element of a reduction,
// the window per output element of pooling, 2·M·N·K for GEMMs and
// convolutions. "Unfused" is the same program with one kernel per core op,
// each reading its operands and writing its result.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_CODEGEN_COST_H
#define GPUC_CODEGEN_COST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <nlohmann/json.hpp>

namespace mlir::gpuc {

/// Bytes an element of `type` takes in a buffer (i1 as one byte).
int64_t elementBytes(Type type);
int64_t tensorBytes(Value value);
int64_t flopsOf(Operation *op);
/// Bytes a kernel reads of `input` through `arg`, its value inside the
/// kernel: all of it, or only the elements its slices and gathers take
/// where those are all that read it (an embedding's table: the rows of the
/// batch's tokens).
int64_t kernelInputBytes(Value input, Value arg);

/// {"ops", "library_calls", "bytes_non_gemm", "flops"} of `func` run one
/// kernel per core op (call before gpuc-form-kernels).
nlohmann::json unfusedCost(func::FuncOp func);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_COST_H

//===- DslParser.h - gpuc's small model language ----------------*- C++ -*-===//
#ifndef GPUC_FRONTEND_DSLPARSER_H
#define GPUC_FRONTEND_DSLPARSER_H

#include "gpuc/Frontend/Limits.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::gpuc {

struct DslOptions {
  /// The value of the batch dimension `B`.
  std::optional<int64_t> batch;
  /// Mixed into the seed of every parameter initializer.
  uint64_t seed = 0;
  /// The most elements of a parameter initialized at compile time (the
  /// fuzzer lowers it: a legal 2^27-element parameter takes seconds to draw
  /// under its sanitizers).
  int64_t maxInitializedElements = kMaxInitializedElements;
};

/// Parses a .gdsl model (see README.md, "The model DSL") into a module with
/// `func.func @forward` and its `gpuc.parameter`s. Diagnostics point at the
/// source line; returns null on error.
OwningOpRef<ModuleOp> parseDslFile(StringRef path, MLIRContext *context,
                                   llvm::SourceMgr &sourceMgr,
                                   const DslOptions &options);

} // namespace mlir::gpuc

#endif // GPUC_FRONTEND_DSLPARSER_H

//===- InitAll.h - register gpuc's dialects and passes ----------*- C++ -*-===//
//
// The one registration helper every gpuc tool uses.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_INITALL_H
#define GPUC_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::gpuc {

/// The dialects that gpuc's IR is made of.
void registerAllDialects(DialectRegistry &registry);

/// gpuc's passes and the upstream ones its pipelines use (canonicalize, CSE).
void registerAllPasses();

} // namespace mlir::gpuc

#endif // GPUC_INITALL_H

//===- AtomicFile.h - a file written whole or not at all --------*- C++ -*-===//
//
// Checkpoints, metrics rewritten after a resume, an exported model and the
// CUDA device's kept algorithm choices are read again by later runs, and
// data-parallel ranks on one machine may write the same file at once. Each
// is written to a temporary file of its own beside the target, flushed to
// disk, and renamed over the target: a reader (or a run after a crash)
// finds the old file or the new one, never a part or a mix of two.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_ATOMICFILE_H
#define GPUC_RUNTIME_ATOMICFILE_H

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace gpuc {

/// Writes `path` through `write`, which fills the open temporary file and
/// returns whether it could. The temporary is `path` + ".tmp." + this
/// process's id, so two processes writing one path never share it; when
/// they race, the last rename wins. Returns false with `error` set (the
/// path and the system's reason) and nothing left behind when any step
/// fails; `path` is then as it was.
bool writeFileAtomically(const std::string &path,
                         const std::function<bool(FILE *)> &write,
                         std::string &error);

/// `bytes` as the whole of `path`, as above.
bool writeFileAtomically(const std::string &path, std::string_view bytes,
                         std::string &error);

/// Removes the temporary files that writes of `path` cut short (a process
/// killed mid-write) left beside it. Only for a caller that knows no other
/// process is writing `path` now (it holds the directory's lock).
void removeTemporariesOf(const std::string &path);

} // namespace gpuc

#endif // GPUC_RUNTIME_ATOMICFILE_H

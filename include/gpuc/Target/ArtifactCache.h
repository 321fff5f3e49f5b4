//===- ArtifactCache.h - whole artifacts reused by what made them ---------===//
//
// A compile whose inputs are all unchanged (the model and its external
// data, the command line, gpuc and its runtime, the host compiler, NVRTC
// and ptxas, this CPU) copies the artifact an earlier one wrote instead of
// importing, planning and compiling again: a warm `gpuc compile` of a model
// takes as long as hashing it.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TARGET_ARTIFACTCACHE_H
#define GPUC_TARGET_ARTIFACTCACHE_H

#include "gpuc/Target/Artifact.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace mlir::gpuc {

/// The cache entry (a directory under options.cacheDir/artifacts) of a
/// compile of options.modelPath with the command line `args` (the words
/// after `gpuc compile`); "" when there is no cache directory or a file it
/// hashes cannot be read.
std::string artifactCacheEntry(llvm::ArrayRef<std::string> args,
                               const ArtifactOptions &options);

/// Copies the artifact stored as `entry` into options.outputDir and prints
/// its summary line, when the entry is complete and the external data files
/// it was made from are unchanged. False (nothing printed) otherwise.
bool restoreArtifact(const std::string &entry, const ArtifactOptions &options);

/// Stores the artifact writeArtifact just wrote into options.outputDir as
/// `entry`, with the external data files its import read, then trims the
/// cache's other artifacts, least recently used first, until they hold at
/// most $GPUC_ARTIFACT_CACHE_MAX bytes (default kMaxArtifactCacheBytes).
/// A cache that cannot be written only costs the next compile its time.
void storeArtifact(const std::string &entry, const ArtifactOptions &options,
                   llvm::ArrayRef<std::string> externalFiles);

/// What the cache keeps of whole artifacts at most (they hold the model's
/// initial weights).
constexpr int64_t kMaxArtifactCacheBytes = int64_t(4) << 30;

} // namespace mlir::gpuc

#endif // GPUC_TARGET_ARTIFACTCACHE_H

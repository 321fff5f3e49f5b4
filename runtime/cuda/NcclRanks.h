//===- NcclRanks.h - gradients summed over GPUs inside the step -*- C++ -*-===//
//
// The CUDA device's side of a data-parallel run: one NCCL communicator over
// the ranks (one GPU per process), its unique id made by rank 0 and shared
// through the MPI collective the trainer joined. The device issues each
// bucket's all-reduce on its own stream, forked from the compute stream
// when the bucket's gradients are done and joined where the optimizer
// reads the sums; stream capture then records the collectives into the
// step's CUDA Graph (NCCL 2.9 or later), so a step is still one launch.
//
// NCCL is opened at run time (libnccl.so.2, as PyTorch's wheels and the
// CUDA toolkit ship it): the plugin loads, and a single process runs,
// where it is absent.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_CUDA_NCCLRANKS_H
#define GPUC_RUNTIME_CUDA_NCCLRANKS_H

#include "gpuc/runtime/Collective.h"

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

namespace gpuc {

class NcclLibrary;

class NcclRanks {
public:
  /// Opens `library` (libnccl.so.2 by default) and joins the ranks of
  /// `mpi` on the GPU of `context`: rank 0's unique id is broadcast over
  /// it. A null `mpi` makes a communicator of this process alone (what a
  /// one-GPU measurement of the collectives' cost runs). Null with `error`
  /// saying why, also when the others do not join within timeoutSeconds.
  static std::unique_ptr<NcclRanks> join(Collective *mpi, CUcontext context,
                                         double timeoutSeconds,
                                         std::string &error,
                                         const char *library = nullptr);
  /// Only opens `library` and finds its functions (join's first half):
  /// null with `error` naming what is missing.
  static std::unique_ptr<NcclLibrary> open(const char *library,
                                           std::string &error);
  ~NcclRanks();

  int rank() const { return myRank; }
  int size() const { return ranks; }
  /// "NCCL 2.28.3, 2 ranks".
  std::string describe() const;

  /// Sums `buffers` over the ranks, in place, on `stream`: one group of
  /// NCCL calls (captured into a graph when `stream` is capturing).
  bool allReduce(const std::vector<ReduceBuffer> &buffers, CUstream stream,
                 std::string &error);
  /// Optimizer-state sharding, on `stream`: each whole tensor summed over
  /// the ranks into rank r's shard (reduceScatter), or each rank's shard
  /// copied into its place in every rank's whole tensor (allGather); a
  /// reduce and a broadcast per rank (the last ranks' shards run past a
  /// tensor's end, which NCCL's own reduce-scatter cannot express without
  /// padded copies). reduceScatter zeroes this rank's shard past the end.
  bool reduceScatter(const std::vector<ShardBuffer> &buffers, CUstream stream,
                     std::string &error);
  bool allGather(const std::vector<ShardBuffer> &buffers, CUstream stream,
                 std::string &error);

  /// Waits for `done` (an event after the collectives) the way a rank must:
  /// polling, so that a communicator error or a rank that stopped or
  /// hangs (nothing for timeoutSeconds) ends the wait. Then the
  /// communicator is aborted, which releases this GPU's kernels waiting on
  /// the others, and `error` names what happened.
  bool wait(CUevent done, std::string &error);

private:
  NcclRanks() = default;
  std::unique_ptr<NcclLibrary> nccl;
  void *comm = nullptr;
  int myRank = 0, ranks = 1;
  double timeoutSeconds = 300;
  bool aborted = false;
};

} // namespace gpuc

#endif // GPUC_RUNTIME_CUDA_NCCLRANKS_H

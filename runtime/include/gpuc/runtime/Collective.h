//===- Collective.h - the ranks of a data-parallel run ----------*- C++ -*-===//
//
// A data-parallel trainer is one process per rank, started by a launcher
// (mpirun, srun). The ranks meet in collectives: the step's all-reduces of
// gradients, and the trainer's own sums (the logged loss, evaluation
// counts) and broadcasts (the initial state). The implementation lives in
// a plugin, libgpuc_mpi.so (runtime/mpi/), opened only when the launcher
// started more than one rank, so a single process needs no MPI at all.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_COLLECTIVE_H
#define GPUC_RUNTIME_COLLECTIVE_H

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpuc {

/// One tensor of an all-reduce: `count` elements of `dtype` (plan.json's
/// names: "F32", "F64", "I64") at `data`.
struct ReduceBuffer {
  void *data = nullptr;
  int64_t count = 0;
  std::string dtype;
};

/// One tensor of a sharded collective (optimizer-state sharding): the
/// whole tensor of `count` elements at `whole`, and this rank's shard at
/// `shard`, shardElements(count, size()) elements of the same `dtype`.
struct ShardBuffer {
  void *whole = nullptr;
  void *shard = nullptr;
  int64_t count = 0;
  std::string dtype;
};

class Collective {
public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Starts summing every buffer element by element over the ranks, in
  /// place; each rank gets the same sums once finish(ticket) returns. The
  /// buffers are the collective's until then. False with `error` when the
  /// library refuses.
  virtual bool start(const std::vector<ReduceBuffer> &buffers, int &ticket,
                     std::string &error) = 0;
  /// Starts putting into each shard this rank's shard of its whole
  /// tensor summed over the ranks (zero past the tensor's end); finished
  /// by finish(ticket), like start().
  virtual bool startReduceScatter(const std::vector<ShardBuffer> &buffers,
                                  int &ticket, std::string &error) = 0;
  /// Starts filling each whole tensor with every rank's shard of it, in
  /// rank order; finished by finish(ticket).
  virtual bool startAllGather(const std::vector<ShardBuffer> &buffers,
                              int &ticket, std::string &error) = 0;
  /// Lets started collectives advance (MPI moves them only inside its own
  /// calls): cheap, called between the steps they overlap.
  virtual void progress() = 0;
  /// Waits for collective `ticket`. False with `error` when the other
  /// ranks do not take part within the timeout (a rank stopped or hangs)
  /// or the library fails.
  virtual bool finish(int ticket, std::string &error) = 0;
  /// start() and finish() at once.
  bool allReduceSum(const std::vector<ReduceBuffer> &buffers,
                    std::string &error) {
    int ticket = 0;
    return start(buffers, ticket, error) && finish(ticket, error);
  }
  /// Copies `bytes` at `data` from rank `root` to every rank.
  virtual bool broadcast(void *data, int64_t bytes, int root,
                         std::string &error) = 0;
  /// What the ranks run on, for the trainer's first line ("Open MPI 4.1.4").
  virtual std::string describe() const = 0;
};

/// The number of ranks the launcher started this process among (Open MPI's
/// mpirun, MPICH's and Intel MPI's, Slurm's srun), with the launcher's name
/// in `launcher`; 1 when the process runs alone. These three read the
/// environment inline: the CUDA device plugin links no part of the runtime.
inline int launchedRanks(std::string *launcher = nullptr) {
  // Each launcher tells its processes how many they are.
  static const std::pair<const char *, const char *> sizes[] = {
      {"OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
      {"PMI_SIZE", "mpirun (MPICH / Intel MPI)"},
      {"SLURM_STEP_NUM_TASKS", "srun"}};
  for (auto [variable, name] : sizes)
    if (const char *value = getenv(variable)) {
      int n = atoi(value);
      if (n > 1) {
        if (launcher)
          *launcher = name;
        return n;
      }
    }
  return 1;
}
/// This process's rank as the launcher numbers it (0 when it runs alone):
/// what the trainer knows before it joins the ranks.
inline int launchedRank() {
  for (const char *variable :
       {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char *value = getenv(variable))
      return atoi(value);
  return 0;
}
/// This process's rank among those the launcher started on this machine
/// (Open MPI's, MPICH's and Intel MPI's local rank, Slurm's local id; 0
/// when none says): the GPU a rank takes.
inline int launchedLocalRank() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *value = getenv(name))
      return atoi(value);
  return 0;
}

/// Joins the run through libgpuc_mpi.so in `artifactDir` (or
/// $GPUC_MPI_PLUGIN); a collective that waits longer than `timeoutSeconds`
/// for the other ranks fails. Null with `error` saying why.
std::unique_ptr<Collective> loadMpiCollective(const std::string &artifactDir,
                                              double timeoutSeconds,
                                              std::string &error);

/// The plugin's entry point (extern "C", looked up by loadMpiCollective).
using CreateMpiCollectiveFn = Collective *(*)(double timeoutSeconds,
                                              std::string &error);
constexpr const char *kCreateMpiCollectiveSymbol = "gpuc_create_mpi_collective";

} // namespace gpuc

#endif // GPUC_RUNTIME_COLLECTIVE_H

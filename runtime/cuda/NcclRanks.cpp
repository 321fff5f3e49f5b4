//===- NcclRanks.cpp - NCCL, opened at run time ---------------------------===//
#include "NcclRanks.h"

#include "gpuc/runtime/PlanSteps.h"

#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <future>
#include <thread>
#include <type_traits>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define GPUC_HAVE_NCCL_H 1
#endif

namespace gpuc {

#ifdef GPUC_HAVE_NCCL_H

/// The NCCL functions the device calls, looked up in the opened library.
class NcclLibrary {
public:
  void *handle = nullptr;
  std::string path;
  ncclResult_t (*getVersion)(int *) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t,
                         ncclRedOp_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  const char *(*errorString)(ncclResult_t) = nullptr;

  ~NcclLibrary() {
    if (handle)
      dlclose(handle);
  }
  std::string say(ncclResult_t result) const {
    return errorString ? errorString(result)
                       : "NCCL error " + std::to_string((int)result);
  }
};

std::unique_ptr<NcclLibrary> NcclRanks::open(const char *library,
                                             std::string &error) {
  auto nccl = std::make_unique<NcclLibrary>();
  nccl->path = library ? library : "libnccl.so.2";
  nccl->handle = dlopen(nccl->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nccl->handle) {
    const char *why = dlerror();
    error = nccl->path + " cannot be loaded (" + (why ? why : "dlopen") +
            "): data-parallel training on GPUs needs NCCL (pip's "
            "nvidia-nccl-cu13, which PyTorch installs, or the CUDA "
            "toolkit's); put its directory on LD_LIBRARY_PATH";
    return nullptr;
  }
  auto find = [&](auto &function, const char *name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
        dlsym(nccl->handle, name));
    if (!function && error.empty())
      error = nccl->path + " has no " + name + ": it is not NCCL 2.9 or later";
    return function != nullptr;
  };
  error.clear();
  bool all = find(nccl->getVersion, "ncclGetVersion") &
             find(nccl->getUniqueId, "ncclGetUniqueId") &
             find(nccl->commInitRank, "ncclCommInitRank") &
             find(nccl->commDestroy, "ncclCommDestroy") &
             find(nccl->commAbort, "ncclCommAbort") &
             find(nccl->commGetAsyncError, "ncclCommGetAsyncError") &
             find(nccl->allReduce, "ncclAllReduce") &
             find(nccl->reduce, "ncclReduce") &
             find(nccl->broadcast, "ncclBroadcast") &
             find(nccl->groupStart, "ncclGroupStart") &
             find(nccl->groupEnd, "ncclGroupEnd") &
             find(nccl->errorString, "ncclGetErrorString");
  if (!all)
    return nullptr;
  // Graph capture of collectives needs NCCL 2.9 (version code 20900).
  int version = 0;
  if (nccl->getVersion(&version) != ncclSuccess || version < 20900) {
    error = nccl->path + " is NCCL " + std::to_string(version / 10000) + "." +
            std::to_string(version / 100 % 100) +
            ": collectives inside a CUDA Graph need NCCL 2.9 or later";
    return nullptr;
  }
  return nccl;
}

std::unique_ptr<NcclRanks> NcclRanks::join(Collective *mpi, CUcontext context,
                                           double timeoutSeconds,
                                           std::string &error,
                                           const char *library) {
  std::unique_ptr<NcclRanks> ranks(new NcclRanks());
  ranks->nccl = open(library, error);
  if (!ranks->nccl)
    return nullptr;
  ranks->timeoutSeconds = timeoutSeconds;
  ranks->myRank = mpi ? mpi->rank() : 0;
  ranks->ranks = mpi ? mpi->size() : 1;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (ranks->myRank == 0) {
    ncclResult_t made = ranks->nccl->getUniqueId(&id);
    if (made != ncclSuccess) {
      error = "ncclGetUniqueId failed: " + ranks->nccl->say(made);
      return nullptr;
    }
  }
  if (mpi && !mpi->broadcast(&id, sizeof(id), 0, error)) {
    error = "sharing NCCL's unique id over MPI: " + error;
    return nullptr;
  }
  // ncclCommInitRank blocks until every rank has called it: a rank that
  // stopped after the id was shared would hang this one. It runs on a
  // thread of its own, waited for at most the collective timeout.
  struct Init {
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclInProgress;
  };
  auto init = std::make_shared<Init>();
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  NcclLibrary *nccl = ranks->nccl.get();
  int size = ranks->ranks, rank = ranks->myRank;
  std::thread joiner([=] {
    cuCtxSetCurrent(context);
    init->result = nccl->commInitRank(&init->comm, size, id, rank);
    finished->set_value();
  });
  if (done.wait_for(std::chrono::duration<double>(timeoutSeconds)) !=
      std::future_status::ready) {
    // The thread stays blocked in NCCL; the trainer stops with this error.
    joiner.detach();
    ranks->nccl.release();
    error = "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
            std::to_string(size) + ") did not return within " +
            std::to_string((int)timeoutSeconds) +
            " s (--collective-timeout): another rank stopped or hangs";
    return nullptr;
  }
  joiner.join();
  ncclComm_t comm = init->comm;
  ncclResult_t joined = init->result;
  if (joined != ncclSuccess) {
    error = "ncclCommInitRank (rank " + std::to_string(ranks->myRank) + " of " +
            std::to_string(ranks->ranks) +
            ") failed: " + ranks->nccl->say(joined) +
            (ranks->ranks > 1 ? " (each rank needs a GPU of its own: start "
                                "at most as many ranks on a machine as it "
                                "has GPUs)"
                              : "");
    return nullptr;
  }
  ranks->comm = comm;
  return ranks;
}

NcclRanks::~NcclRanks() {
  if (comm && nccl)
    (aborted ? nccl->commAbort : nccl->commDestroy)((ncclComm_t)comm);
}

std::string NcclRanks::describe() const {
  int version = 0;
  nccl->getVersion(&version);
  return "NCCL " + std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100) + ", " + std::to_string(ranks) +
         (ranks == 1 ? " rank" : " ranks");
}

/// NCCL's type for a plan dtype; false for one it does not carry here.
static bool ncclTypeOf(const std::string &dtype, ncclDataType_t &t) {
  if (dtype == "F32")
    t = ncclFloat32;
  else if (dtype == "F16")
    t = ncclFloat16;
  else if (dtype == "BF16")
    t = ncclBfloat16;
  else if (dtype == "F64")
    t = ncclFloat64;
  else if (dtype == "I64")
    t = ncclInt64;
  else if (dtype == "I32")
    t = ncclInt32;
  else
    return false;
  return true;
}

/// One group of NCCL calls: `issue` makes a buffer's calls given its NCCL
/// type; `what` names the collective in errors.
template <typename Buffer, typename Issue>
static bool issueGroup(NcclLibrary &nccl, const std::vector<Buffer> &buffers,
                       const char *what, Issue issue, std::string &error) {
  ncclResult_t st = nccl.groupStart();
  for (const Buffer &b : buffers) {
    ncclDataType_t t;
    if (!ncclTypeOf(b.dtype, t)) {
      nccl.groupEnd();
      error = std::string(what) + " of " + b.dtype +
              " values, which NCCL does not carry here; recompile";
      return false;
    }
    if (st == ncclSuccess)
      st = issue(b, t);
  }
  ncclResult_t ended = nccl.groupEnd();
  if (st == ncclSuccess)
    st = ended;
  if (st != ncclSuccess) {
    error = std::string(what) + " failed: " + nccl.say(st);
    return false;
  }
  return true;
}

bool NcclRanks::allReduce(const std::vector<ReduceBuffer> &buffers,
                          CUstream stream, std::string &error) {
  return issueGroup(
      *nccl, buffers, "an all-reduce",
      [&](const ReduceBuffer &b, ncclDataType_t t) {
        return nccl->allReduce(b.data, b.data, (size_t)b.count, t, ncclSum,
                               (ncclComm_t)comm, (cudaStream_t)stream);
      },
      error);
}

/// `call(r, rank r's part of b.whole, its elements)` for each rank whose
/// shard holds any of the tensor (the last ones may hold only padding),
/// until one fails.
template <typename Call>
static ncclResult_t forEachShard(const ShardBuffer &b, int ranks, Call call) {
  int64_t bytes = dtypeBytes(b.dtype), shard = shardElements(b.count, ranks);
  ncclResult_t st = ncclSuccess;
  for (int r = 0; r < ranks && st == ncclSuccess; ++r)
    if (int64_t filled = shardFilled(b.count, ranks, r); filled > 0)
      st = call(r, static_cast<char *>(b.whole) + r * shard * bytes,
                (size_t)filled);
  return st;
}

bool NcclRanks::reduceScatter(const std::vector<ShardBuffer> &buffers,
                              CUstream stream, std::string &error) {
  bool issued = issueGroup(
      *nccl, buffers, "a reduce-scatter (ncclReduce per rank)",
      [&](const ShardBuffer &b, ncclDataType_t t) {
        return forEachShard(b, ranks, [&](int r, char *whole, size_t filled) {
          return nccl->reduce(whole, b.shard, filled, t, ncclSum, r,
                              (ncclComm_t)comm, (cudaStream_t)stream);
        });
      },
      error);
  if (!issued)
    return false;
  // This rank's shard past its tensor's end is padding: zero.
  for (const ShardBuffer &b : buffers) {
    int64_t bytes = dtypeBytes(b.dtype), shard = shardElements(b.count, ranks);
    int64_t mine = shardFilled(b.count, ranks, myRank);
    if (mine < shard &&
        cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(b.shard) + mine * bytes,
                        0, (shard - mine) * bytes, stream) != CUDA_SUCCESS) {
      error = "cuMemsetD8Async (a shard's padding) failed";
      return false;
    }
  }
  return true;
}

bool NcclRanks::allGather(const std::vector<ShardBuffer> &buffers,
                          CUstream stream, std::string &error) {
  return issueGroup(
      *nccl, buffers, "an all-gather (ncclBroadcast per rank)",
      [&](const ShardBuffer &b, ncclDataType_t t) {
        return forEachShard(b, ranks, [&](int r, char *whole, size_t filled) {
          return nccl->broadcast(b.shard, whole, filled, t, r, (ncclComm_t)comm,
                                 (cudaStream_t)stream);
        });
      },
      error);
}

bool NcclRanks::wait(CUevent done, std::string &error) {
  if (!comm) {
    error = "the NCCL communicator was aborted";
    return false;
  }
  auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    CUresult state = cuEventQuery(done);
    if (state == CUDA_SUCCESS)
      return true;
    if (state != CUDA_ERROR_NOT_READY) {
      const char *name = nullptr;
      cuGetErrorName(state, &name);
      error =
          std::string("waiting for the step: ") + (name ? name : "CUDA error");
      return false;
    }
    ncclResult_t async = ncclSuccess;
    nccl->commGetAsyncError((ncclComm_t)comm, &async);
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if ((async != ncclSuccess && async != ncclInProgress) ||
        waited > timeoutSeconds) {
      nccl->commAbort((ncclComm_t)comm);
      aborted = true;
      comm = nullptr;
      error = async != ncclSuccess && async != ncclInProgress
                  ? "NCCL failed during the step's all-reduce: " +
                        nccl->say(async) + " (another rank stopped?)"
                  : "the other ranks did not finish the step's all-reduce "
                    "within " +
                        std::to_string((int)timeoutSeconds) +
                        " s (--collective-timeout): a rank stopped or "
                        "hangs; the NCCL communicator was aborted";
      return false;
    }
    // Spin briefly (a step is milliseconds), then yield the core.
    if (polls > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

#else // no nccl.h at build time

class NcclLibrary {};

std::unique_ptr<NcclLibrary> NcclRanks::open(const char *, std::string &error) {
  error = "this gpuc was built without nccl.h: data-parallel training on "
          "GPUs needs NCCL at build time (the CUDA toolkit's)";
  return nullptr;
}
std::unique_ptr<NcclRanks> NcclRanks::join(Collective *, CUcontext, double,
                                           std::string &error, const char *) {
  open(nullptr, error);
  return nullptr;
}
NcclRanks::~NcclRanks() = default;
std::string NcclRanks::describe() const { return "NCCL"; }
bool NcclRanks::allReduce(const std::vector<ReduceBuffer> &, CUstream,
                          std::string &error) {
  open(nullptr, error);
  return false;
}
bool NcclRanks::reduceScatter(const std::vector<ShardBuffer> &, CUstream,
                              std::string &error) {
  open(nullptr, error);
  return false;
}
bool NcclRanks::allGather(const std::vector<ShardBuffer> &, CUstream,
                          std::string &error) {
  open(nullptr, error);
  return false;
}
bool NcclRanks::wait(CUevent, std::string &error) {
  open(nullptr, error);
  return false;
}

#endif

} // namespace gpuc

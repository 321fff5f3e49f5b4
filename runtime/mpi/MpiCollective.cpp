//===- MpiCollective.cpp - the ranks' collectives over MPI ----------------===//
//
// libgpuc_mpi.so: the trainer opens it when a launcher started several
// ranks. Every collective is non-blocking and polled against a deadline,
// so a rank that stopped or hangs ends the others with an error instead of
// a hang (a rank that dies is also seen by mpirun, which ends the job).
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Collective.h"
#include "gpuc/runtime/PlanSteps.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

namespace gpuc {
namespace {

class MpiCollective final : public Collective {
public:
  explicit MpiCollective(double timeoutSeconds)
      : timeoutSeconds(timeoutSeconds) {}

  bool init(std::string &error) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // Only the thread running the steps calls MPI.
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
          MPI_SUCCESS) {
        error = "MPI_Init_thread failed";
        return false;
      }
      owned = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    // Failures come back as codes, never as MPI's own abort.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &myRank);
    MPI_Comm_size(comm, &mySize);
    return true;
  }

  ~MpiCollective() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    MPI_Comm_free(&comm);
    if (owned)
      MPI_Finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, length);
    // The first line, "Open MPI v4.1.4, package: ...": up to the comma.
    text = text.substr(0, text.find_first_of(",\n"));
    return text + ", " + std::to_string(mySize) + " ranks";
  }

  bool start(const std::vector<ReduceBuffer> &buffers, int &ticket,
             std::string &error) override {
    std::vector<MPI_Request> requests;
    for (const ReduceBuffer &b : buffers) {
      MPI_Datatype type;
      int64_t elementBytes;
      if (!typeOf(b.dtype, type, elementBytes, error))
        return false;
      // One request per at most INT_MAX elements (MPI counts are int).
      for (int64_t first = 0; first < b.count; first += INT_MAX) {
        int n = (int)std::min<int64_t>(INT_MAX, b.count - first);
        MPI_Request request;
        int code = MPI_Iallreduce(
            MPI_IN_PLACE, static_cast<char *>(b.data) + first * elementBytes, n,
            type, MPI_SUM, comm, &request);
        if (code != MPI_SUCCESS)
          return failed("an all-reduce", code, error);
        requests.push_back(request);
      }
    }
    ticket = nextTicket++;
    inFlight[ticket] = {std::move(requests), {}, "an all-reduce"};
    return true;
  }

  bool startReduceScatter(const std::vector<ShardBuffer> &buffers, int &ticket,
                          std::string &error) override {
    return startSharded(buffers, /*gather=*/false, ticket, error);
  }

  bool startAllGather(const std::vector<ShardBuffer> &buffers, int &ticket,
                      std::string &error) override {
    return startSharded(buffers, /*gather=*/true, ticket, error);
  }

  void progress() override {
    for (auto &[ticket, call] : inFlight) {
      int done = 0;
      MPI_Testall((int)call.requests.size(), call.requests.data(), &done,
                  MPI_STATUSES_IGNORE);
    }
  }

  bool finish(int ticket, std::string &error) override {
    auto it = inFlight.find(ticket);
    if (it == inFlight.end())
      return true;
    InFlight call = std::move(it->second);
    inFlight.erase(it);
    return wait(call.requests, call.what, error);
  }

  bool broadcast(void *data, int64_t bytes, int root,
                 std::string &error) override {
    std::vector<MPI_Request> requests;
    for (int64_t first = 0; first < bytes; first += INT_MAX) {
      int n = (int)std::min<int64_t>(INT_MAX, bytes - first);
      MPI_Request request;
      int code = MPI_Ibcast(static_cast<char *>(data) + first, n, MPI_BYTE,
                            root, comm, &request);
      if (code != MPI_SUCCESS)
        return failed("a broadcast", code, error);
      requests.push_back(request);
    }
    return wait(requests, "a broadcast", error);
  }

private:
  /// The requests of a started collective, and the count and displacement
  /// arrays MPI reads until they complete.
  struct InFlight {
    std::vector<MPI_Request> requests;
    std::vector<std::vector<int>> arrays;
    const char *what;
  };

  bool startSharded(const std::vector<ShardBuffer> &buffers, bool gather,
                    int &ticket, std::string &error) {
    const char *what = gather ? "an all-gather" : "a reduce-scatter";
    InFlight call{{}, {}, what};
    for (const ShardBuffer &b : buffers) {
      MPI_Datatype type;
      int64_t elementBytes;
      if (!typeOf(b.dtype, type, elementBytes, error))
        return false;
      int64_t shard = shardElements(b.count, mySize);
      if (b.count > INT_MAX) {
        error = std::string(what) + " of a tensor of " +
                std::to_string(b.count) +
                " elements: MPI counts stop at 2^31 - 1 elements";
        return false;
      }
      std::vector<int> counts(mySize), displacements(mySize);
      for (int r = 0; r < mySize; ++r) {
        counts[r] = (int)shardFilled(b.count, mySize, r);
        displacements[r] = (int)std::min<int64_t>(r * shard, b.count);
      }
      // The part of this rank's shard past the tensor's end stays zero.
      int mine = counts[myRank];
      memset(static_cast<char *>(b.shard) + mine * elementBytes, 0,
             (shard - mine) * elementBytes);
      MPI_Request request;
      int code =
          gather ? MPI_Iallgatherv(b.shard, mine, type, b.whole, counts.data(),
                                   displacements.data(), type, comm, &request)
                 : MPI_Ireduce_scatter(b.whole, b.shard, counts.data(), type,
                                       MPI_SUM, comm, &request);
      if (code != MPI_SUCCESS)
        return failed(what, code, error);
      call.requests.push_back(request);
      call.arrays.push_back(std::move(counts));
      call.arrays.push_back(std::move(displacements));
    }
    ticket = nextTicket++;
    inFlight[ticket] = std::move(call);
    return true;
  }

  static bool typeOf(const std::string &dtype, MPI_Datatype &type,
                     int64_t &bytes, std::string &error) {
    if (dtype == "F32") {
      type = MPI_FLOAT;
      bytes = 4;
    } else if (dtype == "F64") {
      type = MPI_DOUBLE;
      bytes = 8;
    } else if (dtype == "I64") {
      type = MPI_INT64_T;
      bytes = 8;
    } else {
      error = "cannot sum " + dtype +
              " tensors over the ranks (F32, F64 and "
              "I64 only)";
      return false;
    }
    return true;
  }

  bool failed(const char *what, int code, std::string &error) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    error = std::string(what) + " failed: " + std::string(text, length);
    return false;
  }

  /// Polls `requests` until they complete or the deadline passes; between
  /// polls the thread yields (ranks often share cores).
  bool wait(std::vector<MPI_Request> &requests, const char *what,
            std::string &error) {
    auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      int code = MPI_Testall((int)requests.size(), requests.data(), &done,
                             MPI_STATUSES_IGNORE);
      if (code != MPI_SUCCESS)
        return failed(what, code, error);
      if (done)
        return true;
      if (polls < 64) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      if (waited > timeoutSeconds) {
        char text[256];
        snprintf(text, sizeof(text),
                 "%s waited %.0f s for the other ranks "
                 "(--collective-timeout): one of them has stopped or hangs",
                 what, waited);
        error = text;
        return false;
      }
    }
  }

  double timeoutSeconds;
  /// Started collectives by ticket.
  std::map<int, InFlight> inFlight;
  int nextTicket = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  int myRank = 0, mySize = 1;
  bool owned = false;
};

} // namespace
} // namespace gpuc

extern "C" gpuc::Collective *gpuc_create_mpi_collective(double timeoutSeconds,
                                                        std::string &error) {
  auto collective = std::make_unique<gpuc::MpiCollective>(timeoutSeconds);
  if (!collective->init(error))
    return nullptr;
  return collective.release();
}

//===- CommunicationEstimate.cpp - a data-parallel step on paper ----------===//
//
// What a data-parallel step would cost on N GPUs joined by a given link,
// from the plan alone: each step's time on an H100 (a roofline at stated
// efficiencies), each bucket's all-reduce in the alpha-beta model, as a
// ring (2(N-1) latencies and 2(N-1)/N of its bytes at the link's bus
// bandwidth) or a double binary tree (2 log2 N latencies and twice its
// bytes), whichever is faster, as NCCL picks between them; and the
// buckets' communication played against the backward steps that
// follow their start, one collective at a time, as the step program orders
// them. What does not overlap is added to the step.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Target/CommunicationEstimate.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace mlir::gpuc {
namespace {

using json = nlohmann::json;

/// A link's per-collective latency and the bus bandwidth NCCL's ring
/// all-reduce reaches on it (nccl-tests' busbw at large sizes).
struct Link {
  const char *name;
  double latency;   // seconds per ring hop
  double bandwidth; // bytes per second
  const char *what;
};

constexpr Link kLinks[] = {
    {"nvlink", 10e-6, 450e9,
     "NVLink 4 through NVSwitch (HGX H100), 450 GB/s bus bandwidth, 10 us "
     "per hop"},
    {"pcie", 15e-6, 40e9,
     "PCIe Gen5 without NVLink, 40 GB/s bus bandwidth, 15 us per hop"},
    {"infiniband", 25e-6, 45e9,
     "InfiniBand NDR, one 400 Gb/s NIC per GPU, 45 GB/s bus bandwidth, 25 us "
     "per hop"},
};

// The H100 SXM's dense peaks, and the shares of them a step reaches.
constexpr double kPeakF32 = 67e12, kPeakHalf = 989e12, kPeakBandwidth = 3.35e12;
constexpr double kLibraryEfficiency = 0.5, kKernelEfficiency = 0.7;

double stepSeconds(const json &step) {
  const std::string &op = step["op"].get_ref<const std::string &>();
  double flops = step.value("flops", (int64_t)0);
  if (op == "kernel") {
    double bytes = step.value("bytes_read", (int64_t)0) +
                   step.value("bytes_written", (int64_t)0);
    return std::max(flops / (kPeakF32 * kKernelEfficiency),
                    bytes / (kPeakBandwidth * kKernelEfficiency));
  }
  if (op == "copy")
    return 2.0 * step.value("bytes", (int64_t)0) /
           (kPeakBandwidth * kKernelEfficiency);
  std::string dtype = step.value("dtype", "F32");
  double peak = dtype == "F32" ? kPeakF32 : kPeakHalf;
  return flops / (peak * kLibraryEfficiency);
}

} // namespace

bool estimateCommunication(const json &plan, int64_t ranks,
                           const std::string &linkName, json &estimate,
                           std::string &error) {
  const Link *link = nullptr;
  for (const Link &l : kLinks)
    if (linkName == l.name)
      link = &l;
  if (!link) {
    error = "--link " + linkName + " is not one of nvlink, pcie, infiniband";
    return false;
  }
  if (ranks < 1 || ranks > 1024) {
    error = "--ranks " + std::to_string(ranks) + " is not from 1 to 1024";
    return false;
  }
  if (!plan.contains("data_parallel")) {
    error = "--ranks estimates a data-parallel step: compile with "
            "--data-parallel";
    return false;
  }
  auto halfRing = [&](double bytes) {
    if (ranks == 1)
      return 0.0;
    double hops = ranks - 1.0;
    return hops * link->latency + hops / ranks * bytes / link->bandwidth;
  };
  auto allReduce = [&](double bytes) {
    if (ranks == 1)
      return 0.0;
    double hops = 2.0 * (ranks - 1);
    double ringSeconds =
        hops * link->latency + hops / ranks * bytes / link->bandwidth;
    double treeSeconds = 2.0 * std::log2((double)ranks) * link->latency +
                         2.0 * bytes / link->bandwidth;
    return std::min(ringSeconds, treeSeconds);
  };
  double now = 0, compute = 0, communication = 0, linkFree = 0, waited = 0;
  std::map<int64_t, double> done;
  // One update: the step K times, then (gradient accumulation) the update
  // that sums the accumulated gradients over the ranks.
  int64_t accumulate = 1;
  if (plan.contains("trainer"))
    accumulate = plan["trainer"].value("accumulate", (int64_t)1);
  std::vector<const json *> program(std::max<int64_t>(accumulate, 1),
                                    &plan["functions"]["train_step"]["steps"]);
  if (plan["functions"].contains("apply_update"))
    program.push_back(&plan["functions"]["apply_update"]["steps"]);
  for (const json *steps : program)
    for (const json &step : *steps) {
      const std::string &op = step["op"].get_ref<const std::string &>();
      if (op == "all_reduce" || op == "reduce_scatter" || op == "all_gather") {
        // A ring all-reduce is a reduce-scatter then an all-gather: each of
        // those is half of it.
        double seconds = op == "all_reduce"
                             ? allReduce(step["bytes"].get<double>())
                             : halfRing(step["bytes"].get<double>());
        double start = std::max(now, linkFree);
        linkFree = done[step["bucket"].get<int64_t>()] = start + seconds;
        communication += seconds;
      } else if (op == "collective_wait") {
        double ready = done[step["bucket"].get<int64_t>()];
        if (ready > now) {
          waited += ready - now;
          now = ready;
        }
      } else {
        double seconds = stepSeconds(step);
        now += seconds;
        compute += seconds;
      }
    }
  estimate = {{"ranks", ranks},
              {"link", link->name},
              {"link_model", link->what},
              {"compute_ms", compute * 1e3},
              {"communication_ms", communication * 1e3},
              {"exposed_ms", waited * 1e3},
              {"step_ms", now * 1e3},
              {"overlapped", communication > 0
                                 ? (communication - waited) / communication
                                 : 1.0},
              {"scaling_efficiency", now > 0 ? compute / now : 1.0},
              {"steps_per_update", std::max<int64_t>(accumulate, 1)}};
  return true;
}

bool isCollectiveStep(const std::string &op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "all_gather" ||
         op == "collective_wait";
}

std::string formatCommunication(const json &e) {
  return llvm::formatv(
             "data parallel on {0} GPUs over {1} (estimate; {2}; each step "
             "on an H100 at {3}% of its dense peak in library calls and "
             "{4}% of its bandwidth in kernels): compute {5:f2} ms, "
             "all-reduces {6:f2} ms of which {7:f0}% overlap backward, {10} "
             "{8:f2} ms, scaling efficiency {9:f0}%\n",
             e["ranks"].get<int64_t>(), e["link"].get<std::string>(),
             e["link_model"].get<std::string>(),
             (int)(kLibraryEfficiency * 100), (int)(kKernelEfficiency * 100),
             e["compute_ms"].get<double>(), e["communication_ms"].get<double>(),
             100.0 * e["overlapped"].get<double>(), e["step_ms"].get<double>(),
             100.0 * e["scaling_efficiency"].get<double>(),
             e.value("steps_per_update", (int64_t)1) > 1
                 ? "update of " +
                       std::to_string(e["steps_per_update"].get<int64_t>()) +
                       " steps"
                 : std::string("step"))
      .str();
}

} // namespace mlir::gpuc

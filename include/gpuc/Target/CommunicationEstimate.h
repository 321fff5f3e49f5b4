//===- CommunicationEstimate.h - a data-parallel step on paper --*- C++ -*-===//
#ifndef GPUC_TARGET_COMMUNICATIONESTIMATE_H
#define GPUC_TARGET_COMMUNICATIONESTIMATE_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace mlir::gpuc {

/// The estimated step of `plan` (compiled with --data-parallel) on `ranks`
/// GPUs joined by `link` (nvlink, pcie or infiniband): compute, all-reduce
/// time, the share of it that overlaps backward, the step and the scaling
/// efficiency (compute / step). False with `error` for a bad link, rank
/// count or plan.
bool estimateCommunication(const nlohmann::json &plan, int64_t ranks,
                           const std::string &link, nlohmann::json &estimate,
                           std::string &error);

/// Whether plan step `op` is communication between the ranks (a
/// collective, or the wait for one) rather than work on the device.
bool isCollectiveStep(const std::string &op);

/// The estimate as --report prints it (one line).
std::string formatCommunication(const nlohmann::json &estimate);

} // namespace mlir::gpuc

#endif // GPUC_TARGET_COMMUNICATIONESTIMATE_H

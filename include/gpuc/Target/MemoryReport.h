//===- MemoryReport.h - the plan's memory, as numbers and a picture -------===//
//
// Serializers of the memory plan that gpuc-plan-memory recorded and the step
// program carries in plan.json: the bytes by kind for report.json and
// --report, and the SVG of --memory-picture (buffers over the step's
// timeline). Neither decides anything.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TARGET_MEMORYREPORT_H
#define GPUC_TARGET_MEMORYREPORT_H

#include <nlohmann/json.hpp>
#include <string>

namespace mlir::gpuc {

/// report.json's "memory": bytes of parameters, optimizer state, model
/// state, inputs, constants; the training step's arena_peak, lower_bound and
/// kept_for_backward; the arena the artifact allocates and the total.
nlohmann::json memorySummary(const nlohmann::json &plan);

/// The lines --report prints for `memorySummary`.
std::string formatMemorySummary(const nlohmann::json &memory);

/// An SVG of @train_step's arena: one rectangle per transient buffer (x: the
/// steps it is live over, y: its bytes in the arena), coloured by what it
/// holds (forward temporary, kept for backward, backward), with the end of
/// the forward pass marked.
std::string memoryPicture(const nlohmann::json &plan);

} // namespace mlir::gpuc

#endif // GPUC_TARGET_MEMORYREPORT_H

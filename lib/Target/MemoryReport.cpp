//===- MemoryReport.cpp - the plan's memory, as numbers and a picture -----===//
#include "gpuc/Target/MemoryReport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using json = nlohmann::json;

namespace mlir::gpuc {

json memorySummary(const json &plan) {
  int64_t params = 0, optimizer = 0, state = 0, inputs = 0, constants = 0,
          workspace = 0;
  for (const json &b : plan["buffers"]) {
    const std::string &kind = b["kind"].get_ref<const std::string &>();
    int64_t bytes = b["bytes"];
    if (kind == "param")
      params += bytes;
    else if (kind == "state")
      (b.value("optimizer", false) ? optimizer : state) += bytes;
    else if (kind == "input" || kind == "hyper" || kind == "rng")
      inputs += bytes;
    else if (kind == "constant")
      constants += bytes;
    else if (kind == "workspace")
      workspace += bytes;
  }
  const json &step = plan["functions"]["train_step"];
  int64_t arena = plan["arena_bytes"];
  json memory = {
      {"parameters", params},
      {"optimizer_state", optimizer},
      {"model_state", state},
      {"inputs", inputs},
      {"constants", constants},
      {"kernel_workspace", workspace},
      {"arena_peak", step.value("arena_peak", (int64_t)0)},
      {"lower_bound", step.value("lower_bound", (int64_t)0)},
      {"kept_for_backward", step.value("kept_for_backward", (int64_t)0)},
      {"arena_bytes", arena},
      {"total",
       params + optimizer + state + inputs + constants + workspace + arena}};
  if (step.contains("remat"))
    memory["remat"] = step["remat"];
  if (plan["functions"].contains("eval"))
    memory["eval_arena_peak"] =
        plan["functions"]["eval"].value("arena_peak", (int64_t)0);
  return memory;
}

std::string formatMemorySummary(const json &memory) {
  auto mib = [&](const char *key) {
    return memory[key].get<int64_t>() / 1048576.0;
  };
  int64_t bound = memory["lower_bound"];
  double ratio =
      bound ? memory["arena_peak"].get<int64_t>() / (double)bound : 1.0;
  return llvm::formatv(
             "memory: parameters {0:f2} MiB, optimizer state {1:f2} MiB, "
             "model state {2:f2} MiB, inputs {3:f2} MiB, constants {4:f2} "
             "MiB\nmemory: train_step arena peak {5:f2} MiB (liveness lower "
             "bound {6:f2} MiB, x{7:f3}), kept from forward for backward "
             "{8:f2} MiB; total {9:f2} MiB\n",
             mib("parameters"), mib("optimizer_state"), mib("model_state"),
             mib("inputs"), mib("constants"), mib("arena_peak"),
             mib("lower_bound"), ratio, mib("kept_for_backward"), mib("total"))
             .str() +
         (memory.contains("remat")
              ? llvm::formatv(
                    "memory: remat recomputes {0} values ({4}{1:f1} MFLOP "
                    "more per step): arena peak {2:f2} MiB without, "
                    "budget {3}\n",
                    memory["remat"]["recomputed"].get<int64_t>(),
                    memory["remat"]["extra_flops"].get<int64_t>() / 1e6,
                    memory["remat"]["peak_before"].get<int64_t>() / 1048576.0,
                    memory["remat"]["budget"].get<int64_t>() > 0
                        ? llvm::formatv(
                              "{0:f2} MiB",
                              memory["remat"]["budget"].get<int64_t>() /
                                  1048576.0)
                              .str()
                        : std::string("auto"),
                    memory["remat"].value("merged", (int64_t)0) > 0
                        ? llvm::formatv(
                              "{0} repeated recomputations merged, ",
                              memory["remat"]["merged"].get<int64_t>())
                              .str()
                        : std::string())
                    .str()
              : std::string());
}

/// The buffers a step reads or writes.
static std::vector<int64_t> buffersOf(const json &step) {
  std::vector<int64_t> ids;
  if (step.contains("args"))
    for (const json &a : step["args"])
      ids.push_back(a);
  for (const char *key : {"a", "b", "c", "x", "w", "y", "src", "dst"})
    if (step.contains(key))
      ids.push_back(step[key]);
  return ids;
}

static std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string memoryPicture(const json &plan) {
  const json &func = plan["functions"]["train_step"];
  const json &steps = func["steps"];
  const json &buffers = plan["buffers"];
  int64_t count = std::max<int64_t>(1, steps.size());
  int64_t forward = func.value("forward_steps", (int64_t)-1);
  // Each transient's first and last step.
  std::map<int64_t, std::pair<int64_t, int64_t>> live;
  for (int64_t s = 0; s < (int64_t)steps.size(); ++s)
    for (int64_t id : buffersOf(steps[s])) {
      if (!buffers[id].contains("offset"))
        continue;
      auto [it, inserted] = live.try_emplace(id, s, s);
      it->second.second = s;
    }
  for (auto &[name, id] : func["outputs"].items())
    if (live.count(id))
      live[id].second = count - 1;
  int64_t peak = std::max<int64_t>(1, func.value("arena_peak", (int64_t)1));

  const double left = 90, top = 50, width = 1000, height = 560;
  std::string svg = llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n",
      left + width + 200, top + height + 60);
  svg += llvm::formatv(
      "<text x=\"{0}\" y=\"25\" font-size=\"15\">{1}: train_step arena, "
      "{2:f2} MiB peak (lower bound {3:f2} MiB), {4} steps</text>\n",
      left, escape(plan.value("model", std::string("model"))), peak / 1048576.0,
      func.value("lower_bound", (int64_t)0) / 1048576.0, steps.size());
  svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                       "height=\"{3}\" fill=\"none\" stroke=\"#444\"/>\n",
                       left, top, width, height);
  const char *colours[] = {"#4e79a7", "#f28e2b", "#59a14f"};
  const char *labels[] = {"forward temporary", "kept for backward", "backward"};
  for (auto &[id, span] : live) {
    const json &b = buffers[id];
    int64_t offset = b["offset"], bytes = b["bytes"];
    int kind = 2;
    if (forward >= 0 && span.first < forward)
      kind = span.second >= forward ? 1 : 0;
    double x = left + width * span.first / count;
    double w = width * (span.second - span.first + 1) / count;
    double h = std::max(0.5, height * (double)bytes / peak);
    double y = top + height - height * (double)(offset + bytes) / peak;
    svg += llvm::formatv(
        "<rect x=\"{0:f2}\" y=\"{1:f2}\" width=\"{2:f2}\" height=\"{3:f2}\" "
        "fill=\"{4}\" fill-opacity=\"0.8\" stroke=\"#222\" "
        "stroke-width=\"0.3\"><title>{5}: {6} bytes at {7}, steps {8}-{9}"
        "</title></rect>\n",
        x, y, w, h, colours[kind], escape(b["name"].get<std::string>()), bytes,
        offset, span.first, span.second);
  }
  if (forward >= 0) {
    double x = left + width * forward / count;
    svg += llvm::formatv(
        "<line x1=\"{0:f2}\" y1=\"{1}\" x2=\"{0:f2}\" y2=\"{2}\" "
        "stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n<text x=\"{3:f2}\" "
        "y=\"{4}\" fill=\"#c00\">end of forward</text>\n",
        x, top, top + height, x + 4, top + 14);
  }
  // Axes.
  for (int i = 0; i <= 4; ++i) {
    double y = top + height - height * i / 4;
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1:f2}\" "
                         "text-anchor=\"end\">{2:f1} MiB</text>\n",
                         left - 6, y + 4, peak * i / 4 / 1048576.0);
  }
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">"
                       "step (program point)</text>\n",
                       left + width / 2, top + height + 30);
  for (int i = 0; i < 3; ++i) {
    double y = top + 20 + 22 * i;
    svg += llvm::formatv(
        "<rect x=\"{0}\" y=\"{1}\" width=\"14\" height=\"14\" fill=\"{2}\"/>"
        "<text x=\"{3}\" y=\"{4}\">{5}</text>\n",
        left + width + 15, y, colours[i], left + width + 35, y + 12, labels[i]);
  }
  svg += "</svg>\n";
  return svg;
}

} // namespace mlir::gpuc

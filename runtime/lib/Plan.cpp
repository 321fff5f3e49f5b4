//===- Plan.cpp - read plan.json ------------------------------------------===//
#include "gpuc/runtime/Executor.h"

#include <fstream>
#include <sstream>

namespace gpuc {

bool Plan::load(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path + " (is this a gpuc compile output?)";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded() || !json.contains("buffers") ||
      !json.contains("functions")) {
    error = path + ": not a gpuc plan (bad JSON or missing buffers/functions)";
    return false;
  }
  if (json.value("version", 0) != 1) {
    error = path + ": plan version " +
            std::to_string(json.value("version", 0)) +
            " is not the 1 this runtime reads; recompile the model";
    return false;
  }
  arenaBytes = json.value("arena_bytes", (int64_t)0);
  for (const auto &b : json["buffers"]) {
    PlanBuffer buffer;
    buffer.id = b["id"];
    buffer.name = b["name"];
    buffer.kind = b["kind"];
    buffer.dtype = b["dtype"];
    buffer.shape = b["shape"].get<std::vector<int64_t>>();
    buffer.bytes = b["bytes"];
    buffer.offset = b.value("offset", (int64_t)-1);
    if (b.contains("default")) {
      buffer.hasDefault = true;
      buffer.defaultValue = b["default"];
    }
    if (buffer.id != (int)buffers.size()) {
      error = path + ": buffer ids are not 0..n-1 in order";
      return false;
    }
    if (!buffer.persistent() &&
        (buffer.offset < 0 || buffer.offset + buffer.bytes > arenaBytes)) {
      error = path + ": buffer " + buffer.name + " lies outside the arena";
      return false;
    }
    buffers.push_back(buffer);
  }
  return true;
}

const PlanBuffer *Plan::find(const std::string &name) const {
  for (const PlanBuffer &b : buffers)
    if (b.name == name)
      return &b;
  return nullptr;
}

int Plan::functionBuffer(const std::string &function, const char *role,
                         const std::string &name) const {
  if (!json["functions"].contains(function))
    return -1;
  const auto &map = json["functions"][function][role];
  return map.contains(name) ? map[name].get<int>() : -1;
}

} // namespace gpuc

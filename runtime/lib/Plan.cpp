//===- Plan.cpp - read plan.json ------------------------------------------===//
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/PlanSteps.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <sstream>

namespace gpuc {
namespace {
/// Every field of a step that names a buffer, and every count a library
/// call sizes its loops with, checked against the plan's buffers: a value
/// the compiler never writes (a damaged or hand-edited plan) is an error
/// here, not an out-of-bounds access or an abort in a library.
/// A library step's operands against their buffers (checkStep has made
/// sure the step carries its fields): the elements a GEMM
/// or convolution of the step's sizes reads or writes must lie inside each
/// buffer (a damaged count would have the library run past it), and a
/// convolution's shapes must agree with each other.
bool checkLibraryOperands(const nlohmann::json &step,
                          const std::vector<PlanBuffer> &buffers,
                          const std::string &where, std::string &error) {
  auto fits = [&](const char *field, __int128 needed) {
    const PlanBuffer &b = buffers[step[field].get<int64_t>()];
    if (needed <= b.numElements())
      return true;
    error = where + ": its sizes reach element " +
            std::to_string((long long)std::min<__int128>(needed, INT64_MAX)) +
            " of '" + field + "' (buffer " + b.name + " holds " +
            std::to_string(b.numElements()) +
            "); the plan is damaged, recompile the model";
    return false;
  };
  const std::string &op = step["op"].get_ref<const std::string &>();
  // Each operand's buffer holds the type the library reads or writes it in
  // (a 2-byte buffer read as f32 would be read past its end).
  auto holds = [&](const char *field, const std::string &dtype) {
    const PlanBuffer &b = buffers[step[field].get<int64_t>()];
    if (b.dtype == dtype)
      return true;
    error = where + ": '" + field + "' is buffer " + b.name + " of " + b.dtype +
            ", but the step computes " + dtype +
            "; the plan is damaged, recompile the model";
    return false;
  };
  const std::string dtype = step.value("dtype", "F32");
  if (op == "gemm") {
    if (!holds("a", dtype) || !holds("b", dtype) ||
        !holds("c", step.value("c_dtype", dtype)))
      return false;
    GemmStep g = gemmStepOf(step);
    // A leading dimension shorter than its row would have the library
    // read rows over each other.
    if (g.lda < g.cols(0) || g.ldb < g.cols(1) || g.ldc < g.cols(2)) {
      error = where + ": a leading dimension (lda " + std::to_string(g.lda) +
              ", ldb " + std::to_string(g.ldb) + ", ldc " +
              std::to_string(g.ldc) +
              ") is shorter than its row; the plan is damaged, recompile the "
              "model";
      return false;
    }
    // The bias epilogue: n values of the result's type.
    if (step.contains("bias") &&
        !(holds("bias", step.value("c_dtype", dtype)) && fits("bias", g.n)))
      return false;
    // (An offset is a size: checkStep refused a negative one.)
    return fits("a", g.offsetA + g.extent(0)) &&
           fits("b", g.offsetB + g.extent(1)) &&
           fits("c", g.offsetC + g.extent(2));
  }
  if (op.rfind("conv2d", 0) != 0)
    return true;
  if (!holds("x", dtype) || !holds("w", dtype) || !holds("y", dtype))
    return false;
  std::vector<int64_t> shapes[3];
  const char *shapeFields[] = {"x_shape", "w_shape", "y_shape"};
  for (int i = 0; i < 3; ++i) {
    const char *field = shapeFields[i];
    if (!step.contains(field) || !step[field].is_array() ||
        step[field].size() != 4) {
      error = where + ": '" + field + "' is not a shape of 4 dimensions";
      return false;
    }
    for (const auto &d : step[field]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1 ||
          d.get<int64_t>() > (int64_t(1) << 31)) {
        error = where + ": '" + field + "' is " + step[field].dump() +
                ", not a shape";
        return false;
      }
      shapes[i].push_back(d.get<int64_t>());
    }
  }
  for (const char *field : {"strides", "pads", "dilations"}) {
    bool counts = step.contains(field) && step[field].is_array() &&
                  step[field].size() >= 2;
    for (size_t i = 0; counts && i < step[field].size(); ++i) {
      const auto &v = step[field][i];
      counts = v.is_number_integer() && v.get<int64_t>() >= 0 &&
               v.get<int64_t>() <= (int64_t(1) << 31) &&
               (field[0] == 'p' || v.get<int64_t>() >= 1);
    }
    if (!counts) {
      error = where + ": '" + field + "' is not a list of 2 or more counts";
      return false;
    }
  }
  if (step.contains("layout") &&
      !(step["layout"].is_string() &&
        (step["layout"] == "nchw" || step["layout"] == "nhwc"))) {
    error = where + ": 'layout' is " + step["layout"].dump() +
            ", not \"nchw\" or \"nhwc\"; the plan is damaged, recompile";
    return false;
  }
  const std::vector<int64_t> &x = shapes[0], &w = shapes[1], &y = shapes[2];
  int64_t groups = step.contains("groups") && step["groups"].is_number_integer()
                       ? step["groups"].get<int64_t>()
                       : 0;
  if (groups < 1 || x[1] != w[1] * groups || w[0] % groups || y[0] != x[0] ||
      y[1] != w[0]) {
    error = where + ": shapes x " + step["x_shape"].dump() + ", w " +
            step["w_shape"].dump() + ", y " + step["y_shape"].dump() +
            " with groups " + std::to_string(groups) +
            " are not one convolution; the plan is damaged, recompile";
    return false;
  }
  auto product = [](const std::vector<int64_t> &s) {
    __int128 n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  return fits("x", product(x)) && fits("w", product(w)) &&
         fits("y", product(y));
}

bool checkStep(const nlohmann::json &step,
               const std::vector<PlanBuffer> &planBuffers,
               const std::string &where, std::string &error) {
  size_t buffers = planBuffers.size();

  if (!step.is_object() || !step.contains("op") || !step["op"].is_string()) {
    error = where + " has no op";
    return false;
  }
  auto bufferId = [&](const nlohmann::json &v, const std::string &field) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0 &&
        v.get<int64_t>() < (int64_t)buffers)
      return true;
    error = where + ": '" + field + "' is " + v.dump() +
            ", not one of the plan's " + std::to_string(buffers) + " buffers";
    return false;
  };
  // The fields each kind of step is executed with.
  static const std::map<std::string, std::vector<const char *>> required = {
      {"kernel", {"kernel", "args"}},
      {"copy", {"src", "dst", "bytes"}},
      {"gemm",
       {"a",
        "b",
        "c",
        "m",
        "n",
        "k",
        "trans_a",
        "trans_b",
        "lda",
        "ldb",
        "ldc",
        "batch",
        "stride_a",
        "stride_b",
        "stride_c",
        "calls",
        "call_stride_a",
        "call_stride_b",
        "call_stride_c",
        "dtype"}},
      {"conv2d", {"x", "w", "y", "groups", "dtype"}},
      {"conv2d_backward_input", {"x", "w", "y", "groups", "dtype"}},
      {"conv2d_backward_filter", {"x", "w", "y", "groups", "dtype"}},
      {"all_reduce", {"bucket", "buffers"}},
      {"reduce_scatter", {"bucket", "ranks", "pairs"}},
      {"all_gather", {"bucket", "ranks", "pairs"}},
      {"rank_shard", {"ranks", "pairs"}},
      {"collective_wait", {"bucket"}}};
  auto fields = required.find(step["op"].get<std::string>());
  if (fields != required.end())
    for (const char *field : fields->second)
      if (!step.contains(field)) {
        error = where + ": " + step["op"].get<std::string>() + " has no '" +
                field + "'";
        return false;
      }
  for (const char *field : {"a", "b", "c", "bias", "x", "w", "y", "src", "dst"})
    if (step.contains(field) && !bufferId(step[field], field))
      return false;
  if (step.contains("args")) {
    if (!step["args"].is_array()) {
      error = where + ": 'args' is not a list of buffers";
      return false;
    }
    for (const auto &id : step["args"])
      if (!bufferId(id, "args"))
        return false;
  }
  if (step.contains("buffers")) {
    if (!step["buffers"].is_array()) {
      error = where + ": 'buffers' is not a list of buffers";
      return false;
    }
    for (const auto &id : step["buffers"])
      if (!bufferId(id, "buffers"))
        return false;
  }
  // A sharded collective's pairs: a whole tensor and a shard of it over
  // `ranks`, of one element type.
  if (step.contains("pairs")) {
    if (!step["pairs"].is_array() || !step["ranks"].is_number_integer() ||
        step["ranks"].get<int64_t>() < 1) {
      error = where + ": 'pairs' or 'ranks' is damaged";
      return false;
    }
    int64_t ranks = step["ranks"];
    for (const auto &pair : step["pairs"]) {
      if (!pair.is_object() || !pair.contains("whole") ||
          !pair.contains("shard") || !bufferId(pair["whole"], "whole") ||
          !bufferId(pair["shard"], "shard"))
        return error.empty() ? (error = where + ": a pair is damaged", false)
                             : false;
      const PlanBuffer &whole = planBuffers[pair["whole"].get<int>()];
      const PlanBuffer &shard = planBuffers[pair["shard"].get<int>()];
      if (whole.dtype != shard.dtype ||
          shard.numElements() != shardElements(whole.numElements(), ranks)) {
        error = where + ": buffer " + shard.name + " is not a shard of " +
                whole.name + " over " + std::to_string(ranks) + " ranks";
        return false;
      }
    }
  }
  if (step.contains("bucket") && (!step["bucket"].is_number_integer() ||
                                  step["bucket"].get<int64_t>() < 0)) {
    error = where + ": 'bucket' is " + step["bucket"].dump() +
            ", not a collective's number";
    return false;
  }
  for (const char *field :
       {"m", "n", "k", "batch", "calls", "lda", "ldb", "ldc", "grid"})
    if (step.contains(field) &&
        (!step[field].is_number_integer() || step[field].get<int64_t>() < 1 ||
         step[field].get<int64_t>() > (int64_t(1) << 31))) {
      error = where + ": '" + field + "' is " + step[field].dump() +
              ", not a count from 1 to 2^31";
      return false;
    }
  for (const char *field :
       {"bytes", "stride_a", "stride_b", "stride_c", "call_stride_a",
        "call_stride_b", "call_stride_c", "a_offset", "b_offset", "c_offset",
        "launches", "bytes_read", "bytes_written", "shared"})
    if (step.contains(field) &&
        (!step[field].is_number_integer() || step[field].get<int64_t>() < 0)) {
      error =
          where + ": '" + field + "' is " + step[field].dump() + ", not a size";
      return false;
    }
  for (const char *field : {"kernel", "dtype", "c_dtype"})
    if (step.contains(field) && !step[field].is_string()) {
      error =
          where + ": '" + field + "' is " + step[field].dump() + ", not a name";
      return false;
    }
  for (const char *field : {"dtype", "c_dtype"})
    if (step.contains(field) &&
        !dtypeBytes(step[field].get_ref<const std::string &>())) {
      error = where + ": " + field + " " + step[field].dump() +
              " is not one the runtime computes";
      return false;
    }
  if (step.contains("flops") && !step["flops"].is_number()) {
    error = where + ": 'flops' is " + step["flops"].dump() + ", not a count";
    return false;
  }
  for (const char *field : {"trans_a", "trans_b"})
    if (step.contains(field) && !step[field].is_boolean()) {
      error = where + ": '" + field + "' is " + step[field].dump() +
              ", not true or false";
      return false;
    }
  return checkLibraryOperands(step, planBuffers, where, error);
}
} // namespace

bool Plan::load(const std::string &path, std::string &error) {
  // A JSON value of the wrong type anywhere (the compiler writes none) is
  // reported with the file, as every other damage is.
  try {
    return loadChecked(path, error);
  } catch (const nlohmann::json::exception &e) {
    error = path + ": damaged plan (" + e.what() +
            "); recompile the model with gpuc compile";
    return false;
  }
}

bool Plan::loadChecked(const std::string &path, std::string &error) {
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
  if (arenaBytes < 0) {
    error = path + ": arena_bytes is negative";
    return false;
  }
  for (const auto &b : json["buffers"]) {
    PlanBuffer buffer;
    // at(), not [], on fields that must be there: a missing one throws
    // (reported by load() with the file) where [] reads past the object.
    buffer.id = b.at("id");
    buffer.name = b.at("name");
    buffer.kind = b.at("kind");
    buffer.dtype = b.at("dtype");
    buffer.shape = b.at("shape").get<std::vector<int64_t>>();
    buffer.bytes = b.at("bytes");
    buffer.offset = b.value("offset", (int64_t)-1);
    if (b.contains("default")) {
      buffer.hasDefault = true;
      buffer.defaultValue = b.at("default");
    }
    if (b.contains("shard_of"))
      buffer.shardOf = b.at("shard_of").get<std::vector<int64_t>>();
    if (b.contains("aliases"))
      buffer.aliases = b.at("aliases").get<std::vector<std::string>>();
    if (buffer.id != (int)buffers.size()) {
      error = path + ": buffer ids are not 0..n-1 in order";
      return false;
    }
    int64_t elements = 1;
    for (int64_t d : buffer.shape) {
      if (d < 0 || d > (int64_t(1) << 31)) {
        error = path + ": buffer " + buffer.name + " has dimension " +
                std::to_string(d);
        return false;
      }
      elements =
          d == 0 ? 0 : (elements > (int64_t(1) << 40) / d ? -1 : elements * d);
      if (elements < 0) {
        error = path + ": buffer " + buffer.name + " has over 2^40 elements";
        return false;
      }
    }
    if (!dtypeBytes(buffer.dtype) ||
        buffer.bytes != elements * dtypeBytes(buffer.dtype)) {
      error = path + ": buffer " + buffer.name + " (" + buffer.dtype + ", " +
              std::to_string(elements) + " elements) says " +
              std::to_string(buffer.bytes) + " bytes";
      return false;
    }
    if (!buffer.persistent() &&
        (buffer.offset < 0 || buffer.offset > arenaBytes - buffer.bytes)) {
      error = path + ": buffer " + buffer.name + " lies outside the arena";
      return false;
    }
    buffers.push_back(buffer);
  }
  if (!json["functions"].is_object()) {
    error = path + ": 'functions' is not a map of functions";
    return false;
  }
  for (const auto &[name, function] : json["functions"].items()) {
    if (!function.contains("steps") || !function["steps"].is_array()) {
      error = path + ": function " + name + " has no steps";
      return false;
    }
    for (size_t i = 0; i < function["steps"].size(); ++i)
      if (!checkStep(function["steps"][i], buffers,
                     path + ": " + name + " step " + std::to_string(i), error))
        return false;
    for (const char *role : {"inputs", "outputs"})
      if (function.contains(role))
        for (const auto &[value, id] : function[role].items())
          if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
              id.get<int64_t>() >= (int64_t)buffers.size()) {
            error = path + ": " + name + " " + role + " '" + value +
                    "' names buffer " + id.dump() + ", which does not exist";
            return false;
          }
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

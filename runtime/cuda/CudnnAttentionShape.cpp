//===- CudnnAttentionShape.cpp - a plan step's cudnn_attention, checked ---===//
//
// The descriptor comes from plan.json, which a user can damage: every
// field is checked, and every operand's last element must lie inside its
// argument, before cuDNN is given a pointer.
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"

namespace gpuc {
namespace cuda_device {

/// Whether `name` is one of the key-side operands (keys, values and their
/// gradients).
static bool keySide(const std::string &name) {
  return name == "k" || name == "v" || name == "dk" || name == "dv";
}

int64_t CudnnAttentionShape::headsOf(const std::string &name) const {
  return keySide(name) ? keyHeads : heads;
}

int64_t CudnnAttentionShape::rowsOf(const std::string &name) const {
  return keySide(name) ? keys : queries;
}

int64_t CudnnAttentionShape::widthOf(const std::string &name) const {
  if (name == "lse")
    return 1;
  bool valueRows =
      name == "v" || name == "dv" || name == "out" || name == "d_out";
  return valueRows ? valueWidth : width;
}

std::vector<std::string> CudnnAttentionShape::outputs() const {
  if (backward)
    return {"dq", "dk", "dv"};
  return {"out", "lse"};
}

bool parseCudnnAttention(const nlohmann::json &desc,
                         const std::vector<size_t> &argBytes,
                         CudnnAttentionShape &shape, std::string &error) {
  auto fail = [&](const std::string &what) {
    error = "cudnn_attention: " + what + "; recompile the model";
    return false;
  };
  if (!desc.is_object())
    return fail("not an object");
  auto count = [&](const char *field, int64_t most, int64_t &value) {
    if (!desc.contains(field) || !desc[field].is_number_integer() ||
        desc[field].get<int64_t>() < 1 || desc[field].get<int64_t>() > most)
      return fail(std::string("'") + field + "' is not a count from 1 to " +
                  std::to_string(most));
    value = desc[field].get<int64_t>();
    return true;
  };
  int64_t launches = 0;
  if (!count("batch", 1 << 20, shape.batch) ||
      !count("heads", 1 << 16, shape.heads) ||
      !count("queries", 1 << 24, shape.queries) ||
      !count("keys", 1 << 24, shape.keys) ||
      !count("width", 512, shape.width) ||
      !count("value_width", 512, shape.valueWidth) ||
      !count("launches", 8, launches))
    return false;
  shape.launches = (int)launches;
  // (Absent: as many key heads as query heads.)
  shape.keyHeads = shape.heads;
  if (desc.contains("key_heads")) {
    if (!count("key_heads", shape.heads, shape.keyHeads))
      return false;
    if (shape.heads % shape.keyHeads != 0)
      return fail("'key_heads' (" + std::to_string(shape.keyHeads) +
                  ") does not divide 'heads' (" + std::to_string(shape.heads) +
                  ")");
  }
  if (!desc.contains("direction") || !desc["direction"].is_string() ||
      (desc["direction"] != "forward" && desc["direction"] != "backward"))
    return fail("'direction' is not forward or backward");
  shape.backward = desc["direction"] == "backward";
  if (!desc.contains("dtype") || !desc["dtype"].is_string() ||
      (desc["dtype"] != "BF16" && desc["dtype"] != "F16"))
    return fail("'dtype' is not BF16 or F16");
  shape.bf16 = desc["dtype"] == "BF16";
  if (!desc.contains("scale") || !desc["scale"].is_number() ||
      !(desc["scale"].get<double>() > 0) || desc["scale"].get<double>() > 1e6)
    return fail("'scale' is not a positive number");
  shape.scale = (float)desc["scale"].get<double>();
  if (!desc.contains("causal") || !desc["causal"].is_boolean())
    return fail("'causal' is not true or false");
  shape.causal = desc["causal"].get<bool>();
  // (A plan written before the field existed means "agrees".)
  const nlohmann::json &when = desc.value("when", nlohmann::json("agrees"));
  if (!when.is_string() || (when != "agrees" && when != "faster"))
    return fail("'when' is not agrees or faster");
  shape.timed = when == "faster";
  if (!desc.contains("operands") || !desc["operands"].is_object())
    return fail("'operands' is not an object");
  std::vector<std::string> names = {"q", "k", "v", "out", "lse"};
  if (shape.backward)
    names.insert(names.end(), {"d_out", "dq", "dk", "dv"});
  for (const std::string &name : names) {
    const nlohmann::json &o = desc["operands"].value(name, nlohmann::json());
    if (!o.is_object() || !o.contains("arg") || !o["arg"].is_number_integer() ||
        !o.contains("offset") || !o["offset"].is_number_integer() ||
        !o.contains("strides") || !o["strides"].is_array() ||
        o["strides"].size() != 3)
      return fail("operand '" + name +
                  "' lacks an arg, an offset or three strides");
    CudnnAttentionShape::Operand operand;
    int64_t arg = o["arg"].get<int64_t>();
    operand.offset = o["offset"].get<int64_t>();
    if (arg < 0 || arg >= (int64_t)argBytes.size())
      return fail("operand '" + name + "' names argument " +
                  std::to_string(arg) + " of a step of " +
                  std::to_string(argBytes.size()));
    operand.arg = (int)arg;
    for (int d = 0; d < 3; ++d) {
      if (!o["strides"][d].is_number_integer() ||
          o["strides"][d].get<int64_t>() < 0 ||
          o["strides"][d].get<int64_t>() > (int64_t(1) << 40))
        return fail("operand '" + name + "' has a stride out of range");
      operand.strides[d] = o["strides"][d].get<int64_t>();
    }
    // Its last element, and the argument's elements.
    size_t element = name == "lse" ? 4 : 2;
    int64_t last = operand.offset + (shape.batch - 1) * operand.strides[0] +
                   (shape.headsOf(name) - 1) * operand.strides[1] +
                   (shape.rowsOf(name) - 1) * operand.strides[2] +
                   shape.widthOf(name) - 1;
    if (operand.offset < 0 || last < 0 ||
        (size_t)last >= argBytes[operand.arg] / element)
      return fail("operand '" + name + "' reaches past its argument (element " +
                  std::to_string(last) + " of " +
                  std::to_string(argBytes[operand.arg] / element) + ")");
    shape.operands[name] = operand;
  }
  return true;
}

} // namespace cuda_device
} // namespace gpuc

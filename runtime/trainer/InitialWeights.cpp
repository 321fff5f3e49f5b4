//===- InitialWeights.cpp - train --init: a model's weights from a file ---===//
//
// PyTorch saves a state_dict under the module paths of the Python model
// ("transformer.h.0.attn.c_attn.weight"); an ONNX export of it names its
// initializers the same way, less the prefixes of whatever wrapped the
// model when it was exported or saved. Names are therefore matched whole
// first, then by whole dotted components at either end, and only where
// that leaves no doubt.
//
//===----------------------------------------------------------------------===//
#include "InitialWeights.h"

#include "Checkpoint.h"
#include "CompiledStep.h"

#include "gpuc/runtime/device/Float16.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace gpuc::trainer {
namespace {

bool extendsByComponents(const std::string &longer,
                         const std::string &shorter) {
  return longer.size() > shorter.size() &&
         longer.compare(longer.size() - shorter.size(), shorter.size(),
                        shorter) == 0 &&
         longer[longer.size() - shorter.size() - 1] == '.';
}

int64_t elementSize(const std::string &dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U64", 8},  {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

bool isFloating(const std::string &dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

double readFloat(const std::string &dtype, const char *p) {
  if (dtype == "F64") {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  if (dtype == "F32") {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  unsigned short bits;
  memcpy(&bits, p, 2);
  return dtype == "F16" ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
}

/// An integer or boolean element as a signed 64-bit value; U64 beyond
/// INT64_MAX saturates (and is then out of every buffer's range).
int64_t readInteger(const std::string &dtype, const char *p) {
  auto as = [&](auto v) {
    memcpy(&v, p, sizeof(v));
    return v;
  };
  if (dtype == "I64")
    return as(int64_t());
  if (dtype == "I32")
    return as(int32_t());
  if (dtype == "I16")
    return as(int16_t());
  if (dtype == "I8")
    return as(int8_t());
  if (dtype == "U64") {
    uint64_t v = as(uint64_t());
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
  }
  if (dtype == "U32")
    return as(uint32_t());
  if (dtype == "U16")
    return as(uint16_t());
  return as(uint8_t()); // U8, BOOL
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The dimensions other than 1: shapes that agree on them hold the same
/// values in the same order.
std::vector<int64_t> withoutOnes(const std::vector<int64_t> &shape) {
  std::vector<int64_t> out;
  for (int64_t d : shape)
    if (d != 1)
      out.push_back(d);
  return out;
}

/// "1 tensor", "3 tensors", "1 of the model's parameters": `what` is
/// plural, and loses its s for one when it is a bare noun.
std::string countOf(size_t n, const std::string &what) {
  bool noun = what.find(' ') == std::string::npos;
  return std::to_string(n) + " " +
         (n == 1 && noun ? what.substr(0, what.size() - 1) : what);
}

/// "a, b, c and 4 more".
std::string someNames(const std::vector<std::string> &names) {
  std::string text;
  size_t shown = std::min<size_t>(names.size(), 8);
  for (size_t i = 0; i < shown; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > shown)
    text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

} // namespace

std::vector<int> matchTensorNames(const std::vector<std::string> &modelNames,
                                  const std::vector<std::string> &fileNames,
                                  std::vector<std::string> *doubts) {
  std::vector<int> match(modelNames.size(), -1);
  std::map<std::string, int> byName;
  for (size_t f = 0; f < fileNames.size(); ++f)
    byName.emplace(fileNames[f], (int)f);
  std::vector<bool> used(fileNames.size(), false);
  for (size_t m = 0; m < modelNames.size(); ++m) {
    auto it = byName.find(modelNames[m]);
    if (it != byName.end()) {
      match[m] = it->second;
      used[it->second] = true;
    }
  }
  // The rest: a candidate counts when it is the model name's only one and
  // the model name is the candidate's only one.
  std::vector<std::vector<int>> candidates(modelNames.size());
  std::vector<int> claims(fileNames.size(), 0);
  for (size_t m = 0; m < modelNames.size(); ++m) {
    if (match[m] >= 0)
      continue;
    for (size_t f = 0; f < fileNames.size(); ++f)
      if (!used[f] && (extendsByComponents(fileNames[f], modelNames[m]) ||
                       extendsByComponents(modelNames[m], fileNames[f]))) {
        candidates[m].push_back((int)f);
        ++claims[f];
      }
  }
  for (size_t m = 0; m < modelNames.size(); ++m) {
    if (candidates[m].size() == 1 && claims[candidates[m][0]] == 1) {
      match[m] = candidates[m][0];
      continue;
    }
    if (!doubts || candidates[m].empty())
      continue;
    std::string doubt = modelNames[m] + " (";
    for (size_t i = 0; i < candidates[m].size(); ++i)
      doubt += (i ? " or " : "") + fileNames[candidates[m][i]];
    if (candidates[m].size() == 1)
      doubt += ", which another of the model's names also ends with";
    doubts->push_back(doubt + ")");
  }
  return match;
}

bool convertTensor(NamedTensor &t, const std::string &dtype,
                   std::string &error) {
  int64_t from = elementSize(t.dtype), to = elementSize(dtype);
  if (!to) {
    error = "the model's buffer for " + t.name + " has dtype " + dtype +
            ", which no tensor converts to";
    return false;
  }
  if (!from) {
    error = "tensor " + t.name + " has dtype " + t.dtype +
            ", which gpuc does not read (F64, F32, F16, BF16, integers, BOOL)";
    return false;
  }
  int64_t count = 1;
  for (int64_t d : t.shape)
    count *= d;
  if ((int64_t)t.data.size() != count * from) {
    error = "tensor " + t.name + " holds " + std::to_string(t.data.size()) +
            " bytes where " + t.dtype + shapeText(t.shape) + " needs " +
            std::to_string(count * from) + " (a damaged file)";
    return false;
  }
  if (t.dtype == dtype)
    return true;
  if (isFloating(t.dtype) && !isFloating(dtype)) {
    error = "tensor " + t.name + " is " + t.dtype + " but the model's " +
            "buffer holds " + dtype + " values; a floating tensor is not " +
            "converted to integers";
    return false;
  }
  std::vector<char> out(count * to);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = t.data.data() + i * from;
    char *q = out.data() + i * to;
    if (isFloating(dtype)) {
      double v = isFloating(t.dtype) ? readFloat(t.dtype, p)
                                     : (double)readInteger(t.dtype, p);
      if (dtype == "F64") {
        memcpy(q, &v, 8);
      } else if (dtype == "F32") {
        float f = (float)v;
        memcpy(q, &f, 4);
      } else {
        unsigned short bits = dtype == "F16" ? floatToHalfBits((float)v)
                                             : floatToBFloat16Bits((float)v);
        memcpy(q, &bits, 2);
      }
      continue;
    }
    int64_t v = readInteger(t.dtype, p);
    int64_t lo = dtype == "I32" ? INT32_MIN : dtype == "BOOL" ? 0 : INT64_MIN;
    int64_t hi = dtype == "I32" ? INT32_MAX : dtype == "BOOL" ? 1 : INT64_MAX;
    if (v < lo || v > hi) {
      error = "tensor " + t.name + " (" + t.dtype + ") holds " +
              std::to_string(v) + " at element " + std::to_string(i) +
              ", which the model's " + dtype + " buffer cannot hold";
      return false;
    }
    if (dtype == "I64")
      memcpy(q, &v, 8);
    else if (dtype == "I32") {
      int32_t w = (int32_t)v;
      memcpy(q, &w, 4);
    } else {
      *q = (char)v;
    }
  }
  t.dtype = dtype;
  t.data = std::move(out);
  return true;
}

void loadInitialWeights(CompiledStep &s, const std::string &path,
                        FILE *status) {
  std::vector<NamedTensor> file;
  std::map<std::string, std::string> metadata;
  std::string error;
  if (!readSafetensors(path, file, metadata, error))
    fail("--init: " + error);
  std::set<std::string> withheld(s.withheld.begin(), s.withheld.end());
  std::vector<const PlanBuffer *> buffers;
  std::vector<std::string> modelNames, fileNames;
  for (const PlanBuffer &b : s.plan.buffers)
    if (b.kind == "param" || b.kind == "state") {
      buffers.push_back(&b);
      modelNames.push_back(b.name);
    }
  // fileNames[f] names file[source[f]]. A weight tied to another is
  // stored once (safetensors.torch.save_model keeps one name and records
  // each dropped one in the metadata as dropped -> kept): the dropped names
  // match too.
  std::vector<int> source;
  std::map<std::string, int> indexOf;
  for (const NamedTensor &t : file) {
    indexOf[t.name] = (int)fileNames.size();
    fileNames.push_back(t.name);
    source.push_back((int)source.size());
  }
  for (const auto &[alias, kept] : metadata) {
    auto it = indexOf.find(kept);
    if (it == indexOf.end() || indexOf.count(alias))
      continue;
    fileNames.push_back(alias);
    source.push_back(it->second);
  }
  std::vector<std::string> doubts;
  std::vector<int> match = matchTensorNames(modelNames, fileNames, &doubts);
  // A tied weight the model lists under several names (a dynamo export of
  // Hugging Face's GPT-2 keeps lm_head.weight, whose checkpoint stores
  // transformer.wte.weight) is found by any of them.
  std::vector<std::string> aliasNames;
  std::vector<size_t> aliasOwner;
  for (size_t m = 0; m < buffers.size(); ++m)
    if (match[m] < 0)
      for (const std::string &alias : buffers[m]->aliases) {
        aliasNames.push_back(alias);
        aliasOwner.push_back(m);
      }
  std::vector<bool> byModelAlias(match.size(), false);
  if (!aliasNames.empty()) {
    std::vector<int> aliasMatch = matchTensorNames(aliasNames, fileNames);
    for (size_t a = 0; a < aliasNames.size(); ++a)
      if (aliasMatch[a] >= 0 && match[aliasOwner[a]] < 0) {
        match[aliasOwner[a]] = aliasMatch[a];
        byModelAlias[aliasOwner[a]] = true;
      }
  }
  // Per model name, the file's tensor and whether a tied name found it; a
  // tensor that serves several of the model's names is copied, not moved.
  std::vector<int> tensorOf(match.size(), -1), users(file.size(), 0);
  std::vector<bool> byTiedName(match.size(), false);
  for (size_t m = 0; m < match.size(); ++m)
    if (match[m] >= 0) {
      tensorOf[m] = source[match[m]];
      byTiedName[m] = (size_t)match[m] >= file.size();
      ++users[tensorOf[m]];
    }
  if (!doubts.empty())
    fail("--init " + path + ": " +
         countOf(doubts.size(), "of the model's "
                                "tensors") +
         " could take " + (doubts.size() == 1 ? "its" : "their") +
         " value from more than one of the file's: " + someNames(doubts) +
         "; give a file whose names are the model's");

  // Mixed precision keeps a 16-bit copy of each parameter P as the state
  // P.f16 or P.bf16 (gpuc-amp-weight-copies), which starts as P rounded to
  // nearest even: it is derived from the value given here, not read.
  std::map<std::string, const PlanBuffer *> copies;
  for (const PlanBuffer *b : buffers)
    for (const char *suffix : {".f16", ".bf16"})
      if (b->kind == "param")
        if (const PlanBuffer *copy = s.plan.find(b->name + suffix))
          if (copy->shape == b->shape &&
              (copy->dtype == "F16" || copy->dtype == "BF16"))
            copies[b->name] = copy;
  std::set<std::string> derived;
  for (auto &[param, copy] : copies)
    derived.insert(copy->name);

  std::vector<std::string> missing, wrongShape;
  std::vector<bool> used(file.size(), false);
  std::vector<NamedTensor> chosen;
  int converted = 0, renamed = 0, tied = 0, aliased = 0;
  for (size_t m = 0; m < buffers.size(); ++m) {
    const PlanBuffer &b = *buffers[m];
    if (derived.count(b.name))
      continue;
    if (tensorOf[m] < 0) {
      if (b.kind == "param" || withheld.count(b.name))
        missing.push_back(b.name);
      continue;
    }
    int f = tensorOf[m];
    NamedTensor &t = file[f];
    used[f] = true;
    if (t.shape != b.shape && withoutOnes(t.shape) != withoutOnes(b.shape)) {
      wrongShape.push_back(t.name + " is " + shapeText(t.shape) +
                           " where the model's " + b.name + " is " +
                           shapeText(b.shape));
      continue;
    }
    NamedTensor value = --users[f] > 0 ? t : std::move(t);
    if (value.dtype != b.dtype)
      ++converted;
    if (byTiedName[m])
      ++tied;
    else if (byModelAlias[m])
      ++aliased;
    else if (value.name != b.name)
      ++renamed;
    if (!convertTensor(value, b.dtype, error))
      fail("--init " + path + ": " + error);
    value.name = b.name;
    value.shape = b.shape;
    if (b.kind == "param") {
      std::string bad = nonFiniteTensor({value});
      if (!bad.empty())
        fail("--init " + path + ": " + bad +
             "; initial weights must be finite");
    }
    auto copy = copies.find(b.name);
    if (copy != copies.end()) {
      NamedTensor rounded = value;
      if (!convertTensor(rounded, copy->second->dtype, error))
        fail("--init " + path + ": " + error);
      rounded.name = copy->second->name;
      chosen.push_back(std::move(rounded));
    }
    chosen.push_back(std::move(value));
  }
  if (!missing.empty())
    fail("--init " + path + " has no tensor for " +
         countOf(missing.size(),
                 std::string("of the model's ") +
                     (withheld.empty() ? "parameters" : "weights")) +
         ": " + someNames(missing) +
         ". Its names must be the model's (a state_dict of the module that "
         "was exported; export with do_constant_folding=False, which keeps "
         "the initializers' names), or end with them");
  if (!wrongShape.empty())
    fail("--init " + path + ": " +
         countOf(wrongShape.size(), "of its tensors") +
         (wrongShape.size() == 1 ? " has" : " have") +
         " another shape than the model's: " + someNames(wrongShape) +
         " (a checkpoint of another model, or of a " +
         "layer that stores its weight transposed?)");
  s.restore(chosen, "--init " + path);
  std::vector<std::string> unused;
  for (size_t f = 0; f < file.size(); ++f)
    if (!used[f])
      unused.push_back(file[f].name);
  if (!status)
    return;
  std::string line =
      "initial weights: " + countOf(chosen.size(), "tensors") + " from " + path;
  if (converted)
    line +=
        ", " + std::to_string(converted) + " converted to the model's types";
  if (renamed)
    line += ", " + std::to_string(renamed) + " matched by the end of the name";
  if (tied)
    line += ", " + std::to_string(tied) +
            " by the name of a tied weight in the file's metadata";
  if (aliased)
    line += ", " + std::to_string(aliased) +
            " by another name the model gives a tied weight";
  fprintf(status, "%s\n", line.c_str());
  if (!unused.empty())
    fprintf(status,
            "initial weights: %s of %s: nothing in the model has %s name, "
            "left unused: %s\n",
            countOf(unused.size(), "tensors").c_str(), path.c_str(),
            unused.size() == 1 ? "its" : "their", someNames(unused).c_str());
}

} // namespace gpuc::trainer

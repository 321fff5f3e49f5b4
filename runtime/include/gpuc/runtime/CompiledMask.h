//===- CompiledMask.h - a frozen mask the kernels compute -------*- C++ -*-===//
//
// gpuc-decompose computes a causal attention mask from the query and key
// positions instead of reading the frozen buffer that holds it (nanoGPT's
// tril). plan.json records, for that buffer, `{compare, with,
// key_vs_query}`: `value compare with` equals `key key_vs_query query` at
// every [..., query, key]. The step is right only for values that agree, so
// the trainer checks each value it loads (the model's own, --init,
// --resume) against the record.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_COMPILEDMASK_H
#define GPUC_RUNTIME_COMPILEDMASK_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpuc {

/// Whether `a predicate b` for a predicate named as gpuc.compare's.
inline bool compiledMaskHolds(const std::string &predicate, double a,
                              double b) {
  if (predicate == "eq")
    return a == b;
  if (predicate == "ne")
    return a != b;
  if (predicate == "lt")
    return a < b;
  if (predicate == "le")
    return a <= b;
  if (predicate == "gt")
    return a > b;
  return predicate == "ge" && a >= b;
}

inline const char *compiledMaskSymbol(const std::string &predicate) {
  if (predicate == "eq")
    return "==";
  if (predicate == "ne")
    return "!=";
  if (predicate == "lt")
    return "<";
  if (predicate == "le")
    return "<=";
  if (predicate == "gt")
    return ">";
  return ">=";
}

/// "where value == 0: key > query".
inline std::string describeCompiledMask(const nlohmann::json &record) {
  std::string compare = record.value("compare", ""),
              keyVsQuery = record.value("key_vs_query", "");
  char with[32];
  snprintf(with, sizeof with, "%g", record.value("with", 0.0));
  return std::string("where value ") + compiledMaskSymbol(compare) + " " +
         with + ": key " + compiledMaskSymbol(keyVsQuery) + " query";
}

/// Whether the F32 tensor `data` of `shape` agrees with `record`; if not,
/// `where` names the first position that does not.
inline bool checkCompiledMask(const nlohmann::json &record,
                              const std::vector<int64_t> &shape,
                              const std::vector<char> &data,
                              std::string &where) {
  if (shape.size() < 2)
    return false;
  int64_t queries = shape[shape.size() - 2], keys = shape.back();
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  if ((int64_t)data.size() != count * 4)
    return false;
  std::string compare = record.value("compare", ""),
              keyVsQuery = record.value("key_vs_query", "");
  double with = record.value("with", 0.0);
  for (int64_t i = 0; i < count; ++i) {
    float v;
    std::memcpy(&v, data.data() + 4 * i, 4);
    int64_t q = (i / keys) % queries, k = i % keys;
    if (compiledMaskHolds(compare, v, with) !=
        compiledMaskHolds(keyVsQuery, (double)k, (double)q)) {
      where = "[query " + std::to_string(q) + ", key " + std::to_string(k) +
              "] holds " + std::to_string(v);
      return false;
    }
  }
  return true;
}

} // namespace gpuc

#endif // GPUC_RUNTIME_COMPILEDMASK_H

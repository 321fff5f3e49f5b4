//===- NvrtcParts.cpp - kernels.cu to PTX as parts on several threads -----===//
//
// NVRTC compiles one program on one thread, and most of its time is NVVM's
// optimizer working through the entry points one by one (a model with
// attention has dozens: its alternatives). kernels.cu is cut between entry
// points into programs, each with everything the entries share (the
// device headers, the kernels' bodies); NVRTC compiles them on threads of
// their own, and their PTX is merged into one module as NVVM writes one:
//  - the module's declarations, each once, in an order every part keeps
//    (NVVM declares the shared variables first, then the others);
//  - a shared variable only one entry of a part uses is "demoted" into
//    that entry by NVVM; where the module has other users it is the
//    module's again;
//  - the functions in the parts' order, each block label numbered by its
//    function's place in the merged module ($L__BB<function>_<block>).
// On GPT-2 124M (109 entry points) the merged module is the one program's
// text for text, whatever the cut. It need not be: NVVM's code for an entry
// can depend on the other entries it is compiled with (on a small
// attention model, the instructions that bound an index). So the cut
// depends on the source alone, never on --jobs: one source, one PTX.
//
//===----------------------------------------------------------------------===//
#include "gpuc/Codegen/Nvrtc.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>

using namespace mlir::gpuc;
using llvm::StringRef;

namespace {

/// kernels.cu's top-level items: a line at column 0 other than a closing
/// brace starts one where braces (counted in each conditional's first
/// branch, as the `#ifdef GPUC_CPU ... #else` loops repeat their openings)
/// are balanced and no preprocessor conditional is open.
struct SourceItem {
  StringRef text;
  bool entry = false;
};

std::vector<SourceItem> topLevelItems(StringRef source) {
  std::vector<SourceItem> items;
  size_t itemBegin = 0, at = 0;
  int depth = 0;
  std::vector<bool> counting;
  while (at < source.size()) {
    size_t end = source.find('\n', at);
    if (end == StringRef::npos)
      end = source.size();
    StringRef line = source.slice(at, end);
    if (depth == 0 && counting.empty() && at > itemBegin && !line.empty() &&
        !llvm::isSpace(line.front()) && line.front() != '}') {
      items.push_back({source.slice(itemBegin, at)});
      itemBegin = at;
    }
    StringRef trimmed = line.ltrim();
    if (trimmed.starts_with("#if")) {
      counting.push_back(true);
    } else if (trimmed.starts_with("#else") || trimmed.starts_with("#elif")) {
      if (!counting.empty())
        counting.back() = false;
    } else if (trimmed.starts_with("#endif")) {
      if (!counting.empty())
        counting.pop_back();
    } else if (llvm::all_of(counting, [](bool c) { return c; })) {
      depth += (int)line.count('{') - (int)line.count('}');
    }
    at = end + 1;
  }
  if (itemBegin < source.size())
    items.push_back({source.substr(itemBegin)});
  for (SourceItem &item : items)
    item.entry = item.text.contains("extern \"C\" __global__");
  return items;
}

/// One part's PTX: its header, its module-scope declarations and its
/// functions (each with the `// .globl` line before it, if any).
struct PtxModule {
  std::string header;
  std::vector<std::string> declarations;
  std::vector<std::string> functions;
};

bool parsePtx(StringRef ptx, PtxModule &module) {
  size_t at = ptx.find("\n.address_size");
  if (at == StringRef::npos)
    return false;
  at = ptx.find('\n', at + 1);
  if (at == StringRef::npos)
    return false;
  module.header = ptx.take_front(at + 1).str();
  std::string pending; // a `// .globl` line waiting for its function
  std::string function;
  bool inFunction = false;
  for (StringRef rest = ptx.drop_front(at + 1); !rest.empty();) {
    auto [line, tail] = rest.split('\n');
    rest = tail;
    if (inFunction) {
      function += line.str() + "\n";
      if (line == "}") {
        module.functions.push_back(std::move(function));
        function.clear();
        inFunction = false;
      }
      continue;
    }
    if (line.empty())
      continue;
    if (line.ltrim().starts_with("// .globl")) {
      pending = line.str() + "\n";
      continue;
    }
    // A device function NVVM did not inline (a `.func`, defined or
    // declared) would be in every part that calls it: such a module is
    // not merged.
    if (line.contains(".func"))
      return false;
    if (line.contains(".entry ") && !line.ends_with(";")) {
      function = pending + line.str() + "\n";
      pending.clear();
      inFunction = true;
      continue;
    }
    if ((line.starts_with(".") && line.ends_with(";")) ||
        (line.starts_with("// ") && line.ends_with(" has been demoted")))
      module.declarations.push_back(line.str());
    else if (!line.starts_with("//"))
      return false;
  }
  return !inFunction;
}

/// The name a module-scope declaration declares (`.shared .align 4 .b8
/// name[128];` -> name).
StringRef declaredName(StringRef declaration) {
  StringRef head = declaration.split('=').first.rtrim().rtrim(';').rtrim();
  head = head.split('[').first;
  return head.rsplit(' ').second;
}

/// Numbers each `$L__BB<n>_` label as function `index`'s.
std::string renumberLabels(StringRef function, size_t index) {
  std::string out;
  out.reserve(function.size());
  const StringRef prefix = "$L__BB";
  size_t at = 0;
  while (true) {
    size_t found = function.find(prefix, at);
    if (found == StringRef::npos)
      break;
    size_t digits = found + prefix.size(), end = digits;
    while (end < function.size() && llvm::isDigit(function[end]))
      ++end;
    out += function.slice(at, digits).str();
    if (end > digits && end < function.size() && function[end] == '_')
      out += std::to_string(index);
    else
      out += function.slice(digits, end).str();
    at = end;
  }
  out += function.substr(at).str();
  return out;
}

} // namespace

/// What an entry point costs NVVM, in bytes of kernels.cu: its text, and
/// for an attention's, whose one line instantiates the device header's
/// tiled loops, about what 200 KB of other kernels cost (NVRTC took 7 of
/// GPT-2's 12 seconds on its 9 attention entries, 5 on 1.3 MB of the
/// others).
static size_t entryCost(StringRef item) {
  constexpr size_t kAttentionEntryCost = 200 << 10;
  return item.size() +
         (item.contains("gpuc::attention") ? kAttentionEntryCost : 0);
}

std::vector<std::string>
mlir::gpuc::splitKernelSource(const std::string &source) {
  // About 400 KB of cost a part: each part parses the device headers
  // again (about half a second), so a small model stays one program.
  constexpr size_t kPartCost = 400 << 10;
  constexpr size_t kMostParts = 16;
  // The launch table and the CPU's launchers stay out: NVRTC never sees
  // them (GPUC_CPU).
  StringRef text = source;
  size_t cpu = text.find("\n#ifdef GPUC_CPU\n");
  StringRef gpu = cpu == StringRef::npos ? text : text.take_front(cpu + 1);
  std::vector<SourceItem> items = topLevelItems(gpu);
  size_t total = 0, entries = 0;
  for (const SourceItem &item : items)
    if (item.entry) {
      total += entryCost(item.text);
      ++entries;
    }
  size_t parts =
      std::min({(total + kPartCost - 1) / kPartCost, kMostParts, entries});
  if (parts <= 1)
    return {source};
  // Consecutive runs of entry points of about equal cost.
  std::vector<std::string> sources(parts);
  size_t seen = 0;
  for (const SourceItem &item : items) {
    if (!item.entry) {
      for (std::string &part : sources)
        part += item.text.str();
      continue;
    }
    size_t cost = entryCost(item.text);
    size_t part = std::min(parts - 1, (seen + cost / 2) * parts / total);
    sources[part] += item.text.str();
    seen += cost;
  }
  // A part left without an entry point (beside a costly one) is no part.
  llvm::erase_if(sources, [&](const std::string &part) {
    return !StringRef(part).contains("extern \"C\" __global__");
  });
  return sources;
}

bool mlir::gpuc::mergePartsPtx(const std::vector<std::string> &ptxs,
                               std::string &merged, std::string &error) {
  if (ptxs.size() == 1) {
    merged = ptxs.front();
    return true;
  }
  std::vector<PtxModule> modules(ptxs.size());
  for (auto [ptx, module] : llvm::zip(ptxs, modules))
    if (!parsePtx(ptx, module)) {
      error = "a part's PTX is not in the form the merge reads (a header, "
              "declarations, functions)";
      return false;
    }
  // The shared variables NVVM demoted into a part's only user (`// NAME
  // has been demoted` where the module would declare it, the declaration
  // in the user), with how many users each has in the whole module.
  const StringRef demoted = "\t// demoted variable\n";
  const StringRef demotedNote = " has been demoted";
  llvm::StringMap<int> users;
  llvm::StringMap<std::string> demotedDeclaration;
  for (const PtxModule &module : modules) {
    for (StringRef declaration : module.declarations)
      if (!declaration.ends_with(demotedNote))
        users[declaredName(declaration)] += 2;
    for (StringRef function : module.functions)
      for (size_t at = function.find(demoted); at != StringRef::npos;
           at = function.find(demoted, at + 1)) {
        StringRef line = function.substr(at + demoted.size()).split('\n').first;
        StringRef declaration = line.trim();
        demotedDeclaration[declaredName(declaration)] = declaration.str();
        users[declaredName(declaration)] += 1;
      }
  }
  // The module's items in an order each part's keeps (each part's is the
  // whole program's, less what it lacks): a part's new item goes after the
  // item before it in that part, or first (as NVVM puts GPT-2's reductions'
  // shared arrays, which its first entries do not use). A variable demoted
  // in a part whose other users are in other parts is the module's, as in
  // the whole program, declared where its note stood.
  std::vector<std::string> ordered;
  for (const PtxModule &module : modules) {
    size_t insertAt = 0;
    for (StringRef item : module.declarations) {
      std::string text = item.str();
      if (item.ends_with(demotedNote)) {
        StringRef name = item.drop_front(3).drop_back(demotedNote.size());
        if (users[name] > 1)
          text = demotedDeclaration[name];
      }
      auto found = llvm::find(ordered, text);
      if (found != ordered.end()) {
        insertAt = found - ordered.begin() + 1;
        continue;
      }
      ordered.insert(ordered.begin() + insertAt++, std::move(text));
    }
  }
  // Where the parts leave the order open, NVVM's: the shared variables
  // (and the notes of demoted ones), the globals, then what is external.
  auto rank = [](StringRef item) {
    return item.starts_with(".extern")                             ? 2
           : item.starts_with(".shared") || item.starts_with("//") ? 0
                                                                   : 1;
  };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const std::string &a, const std::string &b) {
                     return rank(a) < rank(b);
                   });
  merged = modules.front().header + "\n";
  bool first = true;
  size_t index = 0;
  for (const PtxModule &module : modules)
    for (StringRef function : module.functions) {
      std::string text = function.str();
      // A function with no demoted variable left has an empty line where
      // they were, as the whole program's.
      size_t firstRemoved = std::string::npos;
      for (size_t at = text.find(demoted.str()); at != std::string::npos;) {
        size_t lineEnd = text.find('\n', at + demoted.size());
        StringRef declaration =
            StringRef(text).slice(at + demoted.size(), lineEnd).trim();
        if (users[declaredName(declaration)] <= 1) {
          at = text.find(demoted.str(), at + 1);
          continue;
        }
        text.erase(at, lineEnd + 1 - at);
        firstRemoved = std::min(firstRemoved, at);
        at = text.find(demoted.str(), at);
      }
      if (firstRemoved != std::string::npos &&
          text.find(demoted.str()) == std::string::npos)
        text.insert(firstRemoved, "\n");
      StringRef body = text;
      if (body.ltrim().starts_with("// .globl")) {
        auto [globl, rest] = body.split('\n');
        merged += globl.str() + "\n";
        body = rest;
      }
      if (first) {
        // The module's declarations follow the first function's `.globl`.
        for (const std::string &declaration : ordered)
          merged += declaration + "\n";
        merged += "\n";
        first = false;
      }
      merged += renumberLabels(body, index++);
    }
  merged += "\n";
  return true;
}

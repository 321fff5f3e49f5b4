//===- KernelEmitterTestSupport.h - the emitter tests' helpers --*- C++ -*-===//
//
// What the kernel emitter's tests share: the kernel of a module's first
// fusion, and the modules and text searches they read kernels with.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_TEST_UNITTESTS_KERNELEMITTERTESTSUPPORT_H
#define GPUC_TEST_UNITTESTS_KERNELEMITTERTESTSUPPORT_H

#include "gpuc/Codegen/KernelEmitter.h"
#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <sstream>
#include <string>
#include <vector>

namespace gpuc_test {
using namespace mlir;
using namespace mlir::gpuc;

// The kernel of the first fusion in `source`.
inline FailureOr<EmittedKernel> emitFirstFusion(const std::string &source) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  FusionOp fusion;
  if (module)
    module->walk([&](FusionOp op) { fusion = op; });
  if (!fusion)
    return failure();
  return emitKernel(fusion, "k");
}

// A kernel's text up to its entry points under other bounds (the GPU's
// alternatives, which repeat its body).
inline std::string withoutAlternatives(const std::string &source) {
  return source.substr(
      0, source.find("#if (defined(GPUC_NVRTC) || defined(GPUC_HOST_CUDA))"));
}

// An elementwise kernel over `n` elements (a type only: nothing is
// allocated).
inline std::string elementwise(int64_t n) {
  std::string t = "tensor<" + std::to_string(n) + "xf32>";
  return "func.func @f(%a: " + t + ") -> " + t +
         " {\n  %r = gpuc.fusion(%a) : (" + t + ") -> " + t +
         " {\n  ^bb0(%x: " + t + "):\n    %s = gpuc.add %x, %x : " + t +
         "\n    gpuc.yield %s : " + t + "\n  }\n  return %r : " + t + "\n}\n";
}

// A row kernel over `rows` rows (columns of a [65536, rows] tensor) of
// 65,536: the per-row sum plus an operand of one value per row (%b), and the
// centred row.
inline std::string rowKernel(int rows, const std::string &element = "f32",
                             int64_t length = 65536) {
  std::string r = std::to_string(rows),
              t = "tensor<" + std::to_string(length) + "x" + r + "x" + element +
                  ">",
              v = "tensor<" + r + "x" + element + ">";
  return "func.func @f(%a: " + t + ", %b: " + v + ") -> (" + v + ", " + t +
         ") {\n  %r:2 = gpuc.fusion(%a, %b) : (" + t + ", " + v + ") -> (" + v +
         ", " + t + ") {\n  ^bb0(%x: " + t + ", %y: " + v +
         "):\n    %s = gpuc.reduce_sum %x axes = [0] : " + t + " -> " + v +
         "\n    %p = gpuc.add %s, %y : " + v +
         "\n    %m = gpuc.broadcast %s : " + v + " -> " + t +
         "\n    %c = gpuc.sub %x, %m : " + t +
         "\n    gpuc.yield %p, %c : " + v + ", " + t +
         "\n  }\n  return %r#0, %r#1 : " + v + ", " + t + "\n}\n";
}

// Batch norm's statistics over a concatenation of kernel inputs along the
// channel axis (DenseNet): `spatial` elements per channel and image.
inline std::string statisticsOfConcat(int64_t spatial) {
  auto t = [&](int64_t c) {
    return "tensor<4x" + std::to_string(c) + "x" + std::to_string(spatial) +
           "xf32>";
  };
  std::string v = "tensor<8xf32>";
  return "func.func @f(%a: " + t(3) + ", %b: " + t(5) + ") -> " + v +
         " {\n  %r = gpuc.fusion(%a, %b) : (" + t(3) + ", " + t(5) + ") -> " +
         v + " {\n  ^bb0(%x: " + t(3) + ", %y: " + t(5) +
         "):\n    %c = gpuc.concat %x, %y axis = 1 : (" + t(3) + ", " + t(5) +
         ") -> " + t(8) + "\n    %q = gpuc.mul %c, %c : " + t(8) +
         "\n    %s = gpuc.reduce_sum %c axes = [0, 2] : " + t(8) + " -> " + v +
         "\n    %s2 = gpuc.reduce_sum %q axes = [0, 2] : " + t(8) + " -> " + v +
         "\n    gpuc.yield %s2 : " + v + "\n  }\n  return %r : " + v + "\n}\n";
}

inline size_t occurrences(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1))
    ++n;
  return n;
}

/// A softmax over the rows of a 64 x `length` tensor of `element` (cast to
/// f32 first unless it is f32), in a module with `attributes` (MLIR text
/// such as "attributes {...}"; empty: none).
inline std::string softmaxModule(int64_t length, StringRef element = "f32",
                                 StringRef attributes = "") {
  std::string in = llvm::formatv("tensor<64x{0}x{1}>", length, element);
  std::string row = llvm::formatv("tensor<64x{0}xf32>", length);
  std::string cast =
      element == "f32"
          ? std::string("")
          : llvm::formatv("    %x = gpuc.cast %a0 : {0} to {1}\n", in, row)
                .str();
  std::string x = element == "f32" ? "%a0" : "%x";
  return llvm::formatv(R"mlir(module {0} {{
func.func @f(%a: {1}) -> {2} {{
  %r = gpuc.fusion(%a) : ({1}) -> {2} {{
  ^bb0(%a0: {1}):
{3}    %m = gpuc.reduce_max {4} axes = [1] : {2} -> tensor<64xf32>
    %m1 = gpuc.reshape %m : tensor<64xf32> -> tensor<64x1xf32>
    %mb = gpuc.broadcast %m1 : tensor<64x1xf32> -> {2}
    %d = gpuc.sub {4}, %mb : {2}
    %e = gpuc.exp %d : {2}
    %s = gpuc.reduce_sum %e axes = [1] : {2} -> tensor<64xf32>
    %s1 = gpuc.reshape %s : tensor<64xf32> -> tensor<64x1xf32>
    %sb = gpuc.broadcast %s1 : tensor<64x1xf32> -> {2}
    %p = gpuc.div %e, %sb : {2}
    gpuc.yield %p : {2}
  }
  return %r : {2}
}
}
)mlir",
                       attributes, in, row, cast, x)
      .str();
}

// The lines of a kernel's text that one target compiles: those outside
// every GPUC_CPU conditional, and those of its own branches (up to the
// entry points under other bounds, which repeat the kernel's body).
inline std::string targetText(const std::string &source, bool cpu) {
  std::string src = withoutAlternatives(source);
  std::string text, lineText;
  // Per open conditional: whether it tests GPUC_CPU, and whether the
  // lines in its current branch are the other target's.
  std::vector<std::pair<bool, bool>> open;
  std::istringstream lines(src);
  while (std::getline(lines, lineText)) {
    std::string t =
        lineText.substr(lineText.find_first_not_of(' ') == std::string::npos
                            ? 0
                            : lineText.find_first_not_of(' '));
    if (t.rfind("#if", 0) == 0) {
      bool tests = t.find("GPUC_CPU") != std::string::npos;
      bool gpuBranch = t.rfind("#ifndef", 0) == 0;
      open.push_back({tests, tests && (gpuBranch == cpu)});
      continue;
    }
    if (t.rfind("#else", 0) == 0 && !open.empty()) {
      if (open.back().first)
        open.back().second = !open.back().second;
      continue;
    }
    if (t.rfind("#endif", 0) == 0 && !open.empty()) {
      open.pop_back();
      continue;
    }
    if (llvm::none_of(open, [](auto &o) { return o.second; }))
      text += lineText + "\n";
  }
  return text;
}

// The suffixes of a kernel's alternatives, with their threads and bounds.
inline std::vector<std::string> alternativesOf(const EmittedKernel &kernel) {
  std::vector<std::string> names;
  for (const KernelAlternative &alternative : kernel.alternatives)
    names.push_back(llvm::formatv("{0} {1} {2}", alternative.suffix,
                                  alternative.blockThreads,
                                  alternative.minBlocksPerSm)
                        .str());
  return names;
}

} // namespace gpuc_test

#endif // GPUC_TEST_UNITTESTS_KERNELEMITTERTESTSUPPORT_H

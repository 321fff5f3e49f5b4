//===- KernelReport.cpp - report.json: the step's kernels and traffic -----===//
#include "Backend.h"

#include "gpuc/Target/CommunicationEstimate.h"
#include "gpuc/Target/MemoryReport.h"
#include "gpuc/runtime/CompiledMask.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mlir::gpuc {

/// report.json, and with --report the same on stdout.
/// Bytes of the optimizer state this rank holds of a sharded run.
static int64_t shardedStateBytes(const nlohmann::json &plan) {
  int64_t bytes = 0;
  for (const nlohmann::json &b : plan["buffers"])
    if (b.contains("shard_of"))
      bytes += b["bytes"].get<int64_t>();
  return bytes;
}

bool writeKernelReport(const nlohmann::json &plan,
                       const ArtifactOptions &options) {
  using json = nlohmann::json;
  const json &steps = plan["functions"]["train_step"]["steps"];
  json kernels = json::array();
  int64_t launches = 0, library = 0, copies = 0, bytes = 0, flops = 0;
  for (const json &s : steps) {
    const std::string &op = s["op"].get_ref<const std::string &>();
    if (op == "copy" || op == "rank_shard") {
      ++copies;
      continue;
    }
    // Collectives are no launches (data parallel's line counts them).
    if (isCollectiveStep(op))
      continue;
    flops += s.value("flops", (int64_t)0);
    if (op != "kernel") {
      ++library;
      continue;
    }
    ++launches;
    int64_t read = s["bytes_read"], written = s["bytes_written"];
    bytes += read + written;
    // A split kernel's launches (a long row's passes, each with its share of
    // the figures) are one entry, as the profile shows them: a pass that
    // reads the rows and one that combines partials are each only a part.
    if (s.contains("launch") && s["launch"][0].get<int64_t>() > 0 &&
        !kernels.empty()) {
      json &kernel = kernels.back();
      kernel["bytes_read"] = kernel["bytes_read"].get<int64_t>() + read;
      kernel["bytes_written"] =
          kernel["bytes_written"].get<int64_t>() + written;
      kernel["flops"] =
          kernel["flops"].get<int64_t>() + s["flops"].get<int64_t>();
      continue;
    }
    std::string name = s["kernel"];
    int64_t kernelLaunches = 1;
    if (s.contains("launch")) {
      kernelLaunches = s["launch"][1].get<int64_t>();
      name = name.substr(0, name.rfind("_p"));
    }
    kernels.push_back({{"kernel", name},
                       {"launches", kernelLaunches},
                       {"ops", s["ops"]},
                       {"bytes_read", read},
                       {"bytes_written", written},
                       {"flops", s["flops"]}});
  }
  const json &unfused = options.unfused;
  int64_t unfusedOps = unfused.value("ops", (int64_t)0);
  int64_t unfusedBytes = unfused.value("bytes_non_gemm", (int64_t)0);
  json report = {
      {"function", "train_step"},
      {"kernels", launches},
      {"library_calls", library},
      {"copies", copies},
      {"launches", launches + library},
      {"unfused_ops", unfusedOps},
      {"bytes_non_gemm", bytes},
      {"unfused_bytes_non_gemm", unfusedBytes},
      {"flops", flops},
      {"precision", options.precision},
      {"memory", memorySummary(plan)},
      {"frozen", plan.value("frozen", json::array())},
      {"chunked_losses", plan.value("chunked_losses", json::array())},
      {"per_kernel", kernels}};
  if (plan.contains("data_parallel"))
    report["data_parallel"] = plan["data_parallel"];
  json estimate;
  if (options.estimateRanks > 0) {
    std::string error;
    if (!estimateCommunication(plan, options.estimateRanks,
                               options.estimateLink, estimate, error)) {
      llvm::errs() << "gpuc compile: " << error << "\n";
      return false;
    }
    report["data_parallel_estimate"] = estimate;
  }
  if (!writeFile(options.outputDir + "/report.json", report.dump(1)))
    return false;
  if (!options.report)
    return true;
  auto mib = [](int64_t b) { return b / 1048576.0; };
  llvm::outs() << llvm::formatv("{0,-10} {1,5} {2,10} {3,10} {4,10}  ops\n",
                                "kernel", "#ops", "read MiB", "write MiB",
                                "MFLOP");
  for (const json &k : kernels) {
    std::string ops;
    for (const json &o : k["ops"]) {
      if (ops.size() > 70) {
        ops += " ...";
        break;
      }
      ops += (ops.empty() ? "" : " ") + o.get<std::string>();
    }
    // "k9 (3)": a kernel of three launches.
    std::string name = k["kernel"];
    if (k["launches"].get<int64_t>() > 1)
      name += " (" + std::to_string(k["launches"].get<int64_t>()) + ")";
    llvm::outs() << llvm::formatv(
        "{0,-10} {1,5} {2,10:f2} {3,10:f2} {4,10:f1}  {5}\n", name,
        k["ops"].size(), mib(k["bytes_read"]), mib(k["bytes_written"]),
        k["flops"].get<int64_t>() / 1e6, ops);
  }
  llvm::outs() << llvm::formatv(
      "train_step: {0} kernels + {1} library calls = {2} launches (+{3} "
      "copies) against {4} ops unfused ({5:f2}x); non-GEMM traffic {6:f1} MiB "
      "against {7:f1} MiB unfused ({8:f2}x)\n",
      launches, library, launches + library, copies, unfusedOps,
      unfusedOps ? (double)(launches + library) / unfusedOps : 0.0, mib(bytes),
      mib(unfusedBytes), unfusedBytes ? (double)bytes / unfusedBytes : 0.0);
  if (options.precision.contains("storage"))
    llvm::outs() << "precision: "
                 << options.precision["storage"].get<std::string>()
                 << " storage, loss scaling "
                 << options.precision["loss_scale"].get<std::string>() << "\n";
  if (plan.value("tf32", false))
    llvm::outs() << "tf32: on the GPU, F32 "
                 << (plan.value("f32_gemms", "") == "bf16"
                         ? "convolutions use TF32 tensor cores (--tf32)\n"
                         : "GEMMs and convolutions use TF32 tensor cores "
                           "(--tf32)\n");
  if (plan.value("f32_gemms", "") == "bf16")
    llvm::outs() << "f32 gemms: on the GPU, F32 GEMMs round their operands "
                    "to bf16 on tensor cores, f32 sums (--f32-gemms=bf16)\n";
  if (plan.contains("data_parallel")) {
    const json &dp = plan["data_parallel"];
    llvm::outs() << llvm::formatv(
        "data parallel: {0:f2} MiB of gradients summed over the ranks in {1} "
        "all-reduce(s) of up to {2:f2} MiB, each where backward has computed "
        "its bucket\n",
        mib(dp["gradient_bytes"]), dp["buckets"].get<int64_t>(),
        mib(dp["bucket_bytes"]));
    if (dp.contains("shard_ranks"))
      llvm::outs() << llvm::formatv(
          "optimizer state sharded over {0} ranks (ZeRO stage 1): each rank "
          "keeps {1:f2} MiB of it and updates its shard of the parameters; "
          "the gradients are reduce-scattered and the parameters "
          "all-gathered\n",
          dp["shard_ranks"].get<int64_t>(), mib(shardedStateBytes(plan)));
  }
  if (!estimate.is_null())
    llvm::outs() << formatCommunication(estimate);
  llvm::outs() << formatMemorySummary(report["memory"]);
  for (const json &c : report["chunked_losses"]) {
    int64_t rows = c["rows"], classes = c["classes"], chunk = c["chunk_rows"],
            bytes = c["element_bytes"];
    std::string padded =
        c.contains("padded_from")
            ? llvm::formatv(" (classes padded from {0}: --pad-classes)",
                            c["padded_from"].get<int64_t>())
                  .str()
            : "";
    llvm::outs() << llvm::formatv(
        "head: linear cross-entropy over {0} x {1} {7} logits{6} in {2} "
        "chunks of {3} rows: {4:f2} MiB of logits at a time, not {5:f2} "
        "MiB\n",
        rows, classes, (rows + chunk - 1) / chunk, chunk,
        mib(std::min(chunk, rows) * classes * bytes),
        mib(rows * classes * bytes), padded,
        c.value("logits", std::string("f32")));
  }
  for (const json &f : report["frozen"]) {
    llvm::outs() << "frozen: @" << f["name"].get<std::string>() << ": "
                 << f["why"].get<std::string>();
    if (f.contains("compiled_mask"))
      llvm::outs() << "; the attention mask it holds ("
                   << ::gpuc::describeCompiledMask(f["compiled_mask"])
                   << ") is computed from the positions, and the trainer "
                      "checks the values it loads against it";
    llvm::outs() << "\n";
  }
  return true;
}

} // namespace mlir::gpuc

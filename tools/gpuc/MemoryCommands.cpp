//===- MemoryCommands.cpp - --max-batch-for and --remat-sweep -------------===//
#include "Driver.h"

#include "gpuc/Dialect/Gpuc/GpucOps.h"
#include "gpuc/Transforms/BatchSearch.h"

#include <map>

using namespace mlir;

namespace mlir::gpuc::driver {

/// --remat-sweep: gpuc-remat at fractions of the peak without it, each on
/// a copy of the kernel-formed module, with each solver this gpuc has.
LogicalResult printRematSweep(ModuleOp module) {
  MLIRContext *context = module.getContext();
  struct Point {
    int64_t peak = 0, extraFlops = 0;
    bool reached = true, optimal = false;
  };
  // A budget < 0 plans without remat.
  auto plan = [&](int64_t budget, StringRef solver) -> std::optional<Point> {
    OwningOpRef<ModuleOp> copy = module.clone();
    PassManager pm(context);
    if (budget >= 0)
      pm.addPass(
          gpuc::createGpucRemat(gpuc::GpucRematOptions{budget, solver.str()}));
    pm.addPass(gpuc::createGpucPlanMemory());
    // An unreachable budget is a result of the sweep, not an error.
    ScopedDiagnosticHandler quiet(context,
                                  [](Diagnostic &) { return success(); });
    bool ok = succeeded(pm.run(*copy));
    auto step = copy->lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return std::nullopt;
    auto integer = [](DictionaryAttr dict, StringRef key) {
      auto value = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
      return value ? value.getInt() : 0;
    };
    if (budget < 0)
      return Point{integer(step->getAttrOfType<DictionaryAttr>(
                               gpuc::GpucDialect::kMemoryAttrName),
                           "arena_peak"),
                   0, ok};
    auto remat =
        step->getAttrOfType<DictionaryAttr>(gpuc::GpucDialect::kRematAttrName);
    if (!remat)
      return std::nullopt;
    auto optimal = remat.getAs<BoolAttr>("optimal");
    return Point{integer(remat, "peak"), integer(remat, "extra_flops"), ok,
                 optimal && optimal.getValue()};
  };
  std::optional<Point> base = plan(-1, "greedy");
  if (!base || !base->reached) {
    llvm::errs() << "gpuc compile: --remat-sweep needs a kernel-formed "
                    "@train_step\n";
    return failure();
  }
  SmallVector<StringRef> solvers{"greedy"};
  if (gpuc::haveBinaryProgramSolver())
    solvers.push_back("milp");
  llvm::outs() << llvm::formatv(
      "remat sweep: arena peak without remat {0:f2} MiB; per solver, the "
      "peak reached (MiB) and the recomputed MFLOP\n{1,8} {2,10}",
      base->peak / 1048576.0, "budget", "MiB");
  for (StringRef solver : solvers)
    llvm::outs() << llvm::formatv(" {0,10} {1,14}", (solver + " peak").str(),
                                  (solver + " MFLOP").str());
  llvm::outs() << "\n";
  bool anyUnreachable = false;
  for (int percent : {100, 90, 75, 50, 30}) {
    int64_t budget = base->peak * percent / 100;
    llvm::outs() << llvm::formatv("{0,7}% {1,10:f2}", percent,
                                  budget / 1048576.0);
    for (StringRef solver : solvers) {
      std::optional<Point> point = plan(budget, solver);
      if (!point)
        return failure();
      std::string flops =
          !point->reached
              ? std::string("unreachable")
              : llvm::formatv("{0:f1}{1}", point->extraFlops / 1e6,
                              solver == "milp" && !point->optimal ? "?" : "")
                    .str();
      anyUnreachable |= !point->reached;
      llvm::outs() << llvm::formatv(" {0,10:f2} {1,14}",
                                    point->peak / 1048576.0, flops);
    }
    llvm::outs() << "\n";
  }
  if (anyUnreachable)
    llvm::outs() << "(unreachable: the peak shown is the lowest reached)\n";
  if (solvers.size() == 1)
    llvm::outs() << "(the exact solver needs a gpuc built with COIN-OR CBC)\n";
  else
    llvm::outs() << "(milp: least FLOPs under the liveness model; '?': CBC's "
                    "time limit ran out before it proved optimality)\n";
  return success();
}

/// report.json's "memory" of a planned module (its step program's buffers).
FailureOr<nlohmann::json> stepMemory(ModuleOp module) {
  FailureOr<gpuc::StepProgram> program = gpuc::buildStepProgram(module);
  if (failed(program))
    return failure();
  return gpuc::memorySummary(program->plan);
}

/// The whole step's bytes at `batch`, planned (with gpuc-remat to
/// `arenaBudget` when given), or nullopt when it cannot be planned there
/// (the budget is out of reach). Diagnostics are the caller's to show.
std::optional<nlohmann::json> planAtBatch(int64_t batch,
                                          std::optional<int64_t> arenaBudget,
                                          bool quiet, int64_t *rematArena) {
  batchSize = batch;
  ModelLoader loader;
  std::optional<ScopedDiagnosticHandler> silence;
  if (quiet)
    silence.emplace(loader.context.get(),
                    [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = loader.load();
  if (!module)
    return std::nullopt;
  std::optional<std::string> lossOutput = chooseLossOutput(*module);
  if (!lossOutput)
    return std::nullopt;
  std::string why;
  std::string scored =
      scoredEvalOutput(*module, chooseEvalOutput(*module, *lossOutput, why));
  PassManager pm(loader.context.get());
  addStepPipeline(pm, *lossOutput, scored);
  addKernelPipeline(pm, arenaBudget.has_value());
  addPlanPipeline(pm, arenaBudget);
  if (failed(pm.run(*module))) {
    // gpuc-remat records the peak it reached before it gives up.
    auto step = module->lookupSymbol<func::FuncOp>("train_step");
    auto remat = step ? step->getAttrOfType<DictionaryAttr>(
                            gpuc::GpucDialect::kRematAttrName)
                      : DictionaryAttr();
    if (rematArena && remat)
      if (auto peak = remat.getAs<IntegerAttr>("peak"))
        *rematArena = peak.getInt();
    return std::nullopt;
  }
  FailureOr<gpuc::StepProgram> program = gpuc::buildStepProgram(*module);
  if (failed(program))
    return std::nullopt;
  nlohmann::json memory = gpuc::memorySummary(program->plan);
  // The step's FLOPs, recomputations included (what they add is judged
  // against the rest).
  int64_t flops = 0;
  for (const nlohmann::json &step :
       program->plan["functions"]["train_step"]["steps"])
    flops += step.value("flops", (int64_t)0);
  memory["step_flops"] = flops;
  return memory;
}

/// Whether gpuc-form-attention finds an attention in the model: only then
/// does the attention lowering change its step.
static bool formsAttention() {
  ModelLoader loader;
  ScopedDiagnosticHandler silence(loader.context.get(),
                                  [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = loader.load();
  if (!module)
    return false;
  PassManager pm(loader.context.get());
  // As addStepPipeline begins.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(gpuc::createGpucFormAttention());
  if (failed(pm.run(*module)))
    return false;
  bool found = false;
  module->walk([&](gpuc::AttentionOp) { found = true; });
  return found;
}

void chooseAttentionForBudget(int64_t budget) {
  if (attentionOption != "auto" || !formsAttention())
    return;
  std::optional<nlohmann::json> gemm =
      planAtBatch(batchSize, std::nullopt, true);
  if (!gemm || (*gemm)["arena_bytes"].get<int64_t>() <= budget)
    return;
  attentionOption = "flash";
  std::optional<nlohmann::json> flash =
      planAtBatch(batchSize, std::nullopt, true);
  if (!flash || (*flash)["arena_bytes"].get<int64_t>() >=
                    (*gemm)["arena_bytes"].get<int64_t>()) {
    attentionOption = "auto";
    return;
  }
  llvm::outs() << llvm::formatv(
      "gpuc compile: attention: flash (--attention auto): the GEMM "
      "lowering's arena, {0:f2} MiB, is over the --memory-budget of {1:f2} "
      "MiB; the fused kernels' is {2:f2} MiB\n",
      (*gemm)["arena_bytes"].get<int64_t>() / 1048576.0, budget / 1048576.0,
      (*flash)["arena_bytes"].get<int64_t>() / 1048576.0);
}

/// --max-batch-for SIZE: the largest batch whose step fits, by doubling
/// and then narrowing with largestFittingBatch (the step's bytes grow with
/// the batch).
int runMaxBatchFor() {
  std::optional<int64_t> limit =
      sizeOption("--max-batch-for", maxBatchFor, false);
  if (!limit)
    return 1;
  // Batch 1 with diagnostics shown: a model that does not compile says so.
  std::optional<nlohmann::json> one = planAtBatch(1, std::nullopt, false);
  if (!one)
    return 1;
  auto describe = [](const nlohmann::json &m) {
    int64_t total = m["total"], arena = m["arena_bytes"];
    return llvm::formatv("{0} bytes ({1:f2} MiB: persistent {2:f2} + arena "
                         "{3:f2})",
                         total, total / 1048576.0, (total - arena) / 1048576.0,
                         arena / 1048576.0)
        .str();
  };
  llvm::outs() << llvm::formatv("max batch for {0} bytes ({1:f2} MiB):\n",
                                *limit, *limit / 1048576.0);
  // Each answer shows when it is found: the search with remat plans a
  // language model's step a dozen times more, minutes at GPT-2's size.
  llvm::outs().flush();
  constexpr int64_t kLargestBatch = int64_t(1) << 24;
  // Each batch's step without remat is planned once: the search with remat
  // plans it again first, and the batch above each answer is shown.
  std::map<int64_t, std::optional<nlohmann::json>> plainPlans;
  auto planPlain = [&](int64_t batch) -> const std::optional<nlohmann::json> & {
    auto it = plainPlans.find(batch);
    if (it == plainPlans.end())
      it = plainPlans.emplace(batch, planAtBatch(batch, {}, true)).first;
    return it->second;
  };
  // The lowest arena remat reached at each batch where it fell short.
  std::map<int64_t, int64_t> rematShortOf;
  // The largest batch found without remat (1 when none fits): remat's
  // search starts there, as every batch up to it fits without recomputing.
  int64_t plainLargest = 1;
  auto search = [&](bool remat, StringRef how) {
    // With remat the arena may use what the persistent buffers leave.
    auto fits = [&](int64_t batch) -> std::optional<nlohmann::json> {
      const std::optional<nlohmann::json> &plain = planPlain(batch);
      if (!plain)
        return std::nullopt;
      if ((*plain)["total"].get<int64_t>() <= *limit)
        return plain;
      if (!remat)
        return std::nullopt;
      int64_t persistent = (*plain)["total"].get<int64_t>() -
                           (*plain)["arena_bytes"].get<int64_t>();
      if (persistent >= *limit)
        return std::nullopt;
      int64_t reached = -1;
      std::optional<nlohmann::json> recomputed =
          planAtBatch(batch, *limit - persistent, true, &reached);
      if (recomputed && (*recomputed)["total"].get<int64_t>() <= *limit)
        return recomputed;
      if (reached >= 0)
        rematShortOf[batch] = reached;
      return std::nullopt;
    };
    int64_t low = remat ? plainLargest : 1;
    std::optional<nlohmann::json> best = fits(low);
    if (!best) {
      llvm::outs() << "  " << how << ": none; batch 1 needs " << describe(*one)
                   << "\n";
      llvm::outs().flush();
      return;
    }
    int64_t high = low * 2;
    while (high <= kLargestBatch) {
      std::optional<nlohmann::json> at = fits(high);
      if (!at)
        break;
      low = high;
      best = at;
      high *= 2;
    }
    // Where the bytes cross the limit, judged from a batch that does not
    // fit: its arena (with remat, the lowest remat reached) taken to grow
    // in proportion to the batch, as activations do; nullopt when that
    // batch tells nothing.
    auto guess = [&](int64_t over) -> std::optional<int64_t> {
      const std::optional<nlohmann::json> &plain = planPlain(over);
      if (!plain)
        return std::nullopt;
      int64_t arena = (*plain)["arena_bytes"].get<int64_t>();
      int64_t persistent = (*plain)["total"].get<int64_t>() - arena;
      if (remat) {
        auto shortOf = rematShortOf.find(over);
        if (shortOf == rematShortOf.end())
          return std::nullopt;
        arena = shortOf->second;
      }
      if (arena <= 0 || persistent >= *limit)
        return std::nullopt;
      return (int64_t)((long double)over * (*limit - persistent) / arena);
    };
    // (Past the largest batch tried, every batch fit: that one is the
    // answer, with nothing above it.)
    if (high <= kLargestBatch) {
      low = gpuc::largestFittingBatch(
          low, high,
          [&](int64_t batch) {
            std::optional<nlohmann::json> at = fits(batch);
            if (!at)
              return false;
            best = std::move(at);
            return true;
          },
          guess);
      high = low + 1;
    }
    if (!remat)
      plainLargest = low;
    llvm::outs() << "  " << how << ": batch " << low << " needs "
                 << describe(*best);
    if (best->contains("remat")) {
      double extra = (*best)["remat"].value("extra_flops", (int64_t)0);
      double step = best->value("step_flops", (int64_t)0) - extra;
      llvm::outs() << llvm::formatv(", recomputing {0:f1} MFLOP", extra / 1e6);
      if (step > 0)
        llvm::outs() << llvm::formatv(" ({0:f2}x the step's own)",
                                      extra / step);
    }
    if (high <= kLargestBatch) {
      const std::optional<nlohmann::json> &above = planPlain(high);
      auto shortOf = rematShortOf.find(high);
      if (remat && above && shortOf != rematShortOf.end()) {
        // What remat reached there, in place of the arena without it.
        nlohmann::json reached = *above;
        int64_t persistent = reached["total"].get<int64_t>() -
                             reached["arena_bytes"].get<int64_t>();
        reached["arena_bytes"] = shortOf->second;
        reached["total"] = persistent + shortOf->second;
        llvm::outs() << "; batch " << high << " needs " << describe(reached)
                     << " with remat at best";
      } else {
        llvm::outs() << "; batch " << high << " needs "
                     << (above ? describe(*above) : std::string("more"))
                     << (remat ? " before remat" : "");
      }
    }
    llvm::outs() << "\n";
    llvm::outs().flush();
  };
  search(false, "without remat");
  search(true, "with remat   ");
  // The GEMM lowering keeps each attention's [B, H, Tq, Tk] weights for
  // backward; the fused kernels keep none (GPT-2 fp32: twice the batch,
  // without recomputing anything).
  if (attentionLowering("gpuc") == std::string("gemm") && formsAttention()) {
    std::string chosen = attentionOption;
    attentionOption = "flash";
    plainPlans.clear();
    search(false, "--attention flash, without remat");
    attentionOption = chosen;
  }
  return 0;
}

} // namespace mlir::gpuc::driver

//===- CompiledStep.cpp - the trainer's view of the compiled step -------===//
#include "CompiledStep.h"

#include "InitialWeights.h"

#include "gpuc/runtime/CompiledMask.h"
#include "gpuc/runtime/PlanSteps.h"
#include "gpuc/runtime/Safetensors.h"
#include "gpuc/runtime/device/CpuKernelTable.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

namespace gpuc::trainer {

void CompiledStep::open(const std::string &dir, const Options &o) {
  std::string error;
  if (!plan.load(dir + "/plan.json", error))
    fail(error);
  openDevice(dir, o);
  const auto &t = plan.json["trainer"];
  imageName = t.value("data_input", "");
  labelName = t.value("label_input", "");
  image = plan.functionBuffer("train_step", "inputs", imageName);
  label = plan.functionBuffer("train_step", "inputs", labelName);
  loss = plan.functionBuffer("train_step", "outputs",
                             t.value("loss_output", "loss"));
  logits = plan.functionBuffer("eval", "outputs", t.value("eval_output", ""));
  if (t.contains("eval_scores")) {
    const auto &scores = t["eval_scores"];
    evalLossSum =
        plan.functionBuffer("eval", "outputs", scores.value("loss_sum", ""));
    evalCorrect =
        plan.functionBuffer("eval", "outputs", scores.value("correct", ""));
    classes = scores.value("classes", (int64_t)0);
    if (evalLossSum < 0 || evalCorrect < 0 || classes < 1)
      fail(dir + "/plan.json: the trainer's eval_scores name no loss_sum "
                 "and correct outputs of eval, or no classes; recompile");
  }
  noEvalReason = t.value("no_eval_reason", "");
  if (!evaluates() && noEvalReason.empty())
    noEvalReason = "the plan names no output to evaluate";
  if (const PlanBuffer *b = plan.find("rng"))
    rng = b->id;
  if (const PlanBuffer *b = plan.find("hyper.lr"))
    lr = b->id;
  if (const PlanBuffer *b = plan.find("amp.loss_scale"))
    lossScale = b->id;
  if (const PlanBuffer *b = plan.find("amp.skipped_steps"))
    skippedSteps = b->id;
  if (image < 0 || loss < 0)
    fail(dir + "/plan.json has no train_step with a data input and a loss");
  batch = plan.buffers[image].shape[0];
  accumulate = t.value("accumulate", (int64_t)1);
  if (accumulate < 1 ||
      (accumulate > 1 && !plan.json["functions"].contains("apply_update")))
    fail(dir + "/plan.json asks for accumulate " + std::to_string(accumulate) +
         " but has no apply_update function; recompile");
  const PlanBuffer &in = plan.buffers[image];
  tokens = (in.dtype == "I64" || in.dtype == "I32") && in.shape.size() == 2 &&
           label >= 0 && plan.buffers[label].shape == in.shape;
  if (tokens)
    window = in.shape[1];
  modelShiftsLabels = tokens && t.value("labels_shifted_by_model", false);
  if (evalLossSum >= 0 && !tokens)
    fail(dir + "/plan.json scores a language model's tokens in eval, but "
               "its data input and labels are not [batch, tokens] token ids; "
               "recompile with --eval-logits");
  if (logits >= 0 && plan.buffers[logits].shape.size() >= 2)
    classes = tokens ? plan.buffers[logits].shape.back()
                     : plan.buffers[logits].shape[1];
  // Hyperparameters other than the learning rate keep their compiled
  // defaults; they are set once.
  for (const PlanBuffer &b : plan.buffers)
    if (b.kind == "hyper" && b.id != lr && b.hasDefault) {
      float v = (float)b.defaultValue;
      device->upload(b.id, &v, sizeof(v));
    }
  joinRanks(dir, o);
  // Initial weights, optimizer state and constants.
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
  if (!readSafetensors(dir + "/init.safetensors", tensors, metadata, error))
    fail(error);
  restore(tensors, "init.safetensors");
  withheld = t.value("weights_withheld", std::vector<std::string>());
  if (!o.init.empty())
    loadInitialWeights(*this, o.init, statusStream(o));
  // Only training resumes; --run-step and a data-less --bench-steps take
  // the initial weights.
  bool resumes = !o.resume.empty() && o.runStepInputs.empty() &&
                 !(o.benchSteps && o.data.empty());
  if (o.init.empty() && !withheld.empty() && !resumes)
    fail(dir + " was compiled with --no-weights: give the model's initial "
               "weights with --init FILE.safetensors (a state_dict saved "
               "with safetensors), or --resume a checkpoint");
}

void CompiledStep::joinRanks(const std::string &dir, const Options &o) {
  std::string launcher;
  int launched = launchedRanks(&launcher);
  int64_t shardRanks = 0;
  if (plan.json.contains("data_parallel"))
    shardRanks = plan.json["data_parallel"].value("shard_ranks", (int64_t)0);
  if (shardRanks > 0 && launched != shardRanks)
    fail(dir + " keeps 1/" + std::to_string(shardRanks) +
         " of the optimizer state on each of " + std::to_string(shardRanks) +
         " ranks (gpuc compile --shard-optimizer --ranks " +
         std::to_string(shardRanks) + "), but " +
         (launched <= 1 ? std::string("the trainer runs alone")
                        : launcher + " started " + std::to_string(launched)) +
         ": start it with mpirun -np " + std::to_string(shardRanks) +
         ", or recompile with --ranks for this run");
  if (launched <= 1)
    return;
  if (!plan.json.contains("data_parallel"))
    fail(launcher + " started " + std::to_string(launched) + " ranks, but " +
         dir +
         " was compiled for one process: every rank would train the whole "
         "model alone. Compile with gpuc compile --data-parallel to train "
         "on several ranks, or run the trainer without a launcher");
  std::string error;
  collective = loadMpiCollective(dir, o.collectiveTimeout, error);
  if (!collective)
    fail(error);
  rank = collective->rank();
  ranks = collective->size();
  setRankForErrors(rank, ranks);
  if (!device->setCollective(collective.get(), error))
    fail(error + "; train on the CPU with --device cpu");
  // The optimizer applies the mean of the ranks' summed gradients.
  if (const PlanBuffer *b = plan.find("hyper.ranks_reciprocal")) {
    float reciprocal = 1.0f / (float)ranks;
    device->upload(b->id, &reciprocal, sizeof(reciprocal));
  }
  if (FILE *status = rank == 0 ? statusStream(o) : nullptr)
    fprintf(status, "data parallel: %s, global batch %lld (%d x %lld)\n",
            collective->describe().c_str(), (long long)(batch * ranks), ranks,
            (long long)batch);
}

void CompiledStep::shareState() {
  if (!collective)
    return;
  std::string error;
  for (const PlanBuffer &b : plan.buffers) {
    // (A rank's shard of the optimizer state is its own.)
    if (!b.persistent() || b.kind == "input" || b.kind == "hyper" ||
        b.kind == "rng" || b.kind == "workspace" || b.kind == "constant" ||
        !b.shardOf.empty())
      continue;
    std::vector<char> bytes(b.bytes);
    device->download(b.id, bytes.data(), bytes.size());
    if (!collective->broadcast(bytes.data(), b.bytes, 0, error))
      fail(error);
    device->upload(b.id, bytes.data(), bytes.size());
  }
}

void CompiledStep::checkRanksAgree(
    const std::vector<std::pair<std::string, uint64_t>> &facts) {
  if (!collective)
    return;
  std::vector<uint64_t> mine, rank0;
  for (const auto &fact : facts)
    mine.push_back(fact.second);
  rank0 = mine;
  std::string error;
  if (!collective->broadcast(
          rank0.data(), (int64_t)(rank0.size() * sizeof(uint64_t)), 0, error))
    fail(error);
  for (size_t i = 0; i < facts.size(); ++i)
    if (mine[i] != rank0[i])
      fail("not the same " + facts[i].first +
           " as rank 0: every rank of a data-parallel run must train the "
           "same artifact on the same data with the same flags (copy them "
           "to every machine, and start all ranks with one command)");
}

void CompiledStep::sumOverRanks(std::vector<double> &values) {
  if (!collective || values.empty())
    return;
  std::string error;
  if (!collective->allReduceSum(
          {ReduceBuffer{values.data(), (int64_t)values.size(), "F64"}}, error))
    fail(error);
}

FILE *CompiledStep::statusStream(const Options &o) {
  if (!o.runStepInputs.empty() || o.benchSteps)
    return stderr;
  return o.quiet ? nullptr : stdout;
}

void CompiledStep::openDevice(const std::string &dir, const Options &o) {
  std::vector<std::string> targets = {"cpu"};
  if (plan.json.contains("targets"))
    targets = plan.json["targets"].get<std::vector<std::string>>();
  bool hasCpu = std::count(targets.begin(), targets.end(), "cpu") > 0;
  bool hasCuda = std::count(targets.begin(), targets.end(), "cuda") > 0;
  std::string error, why;
  if (o.device == "cuda" && !hasCuda)
    fail("--device cuda: " + dir +
         " has no GPU kernels; compile with gpuc compile --target cuda "
         "(or all)");
  if (o.device == "cpu" && !hasCpu)
    fail("--device cpu: " + dir +
         " was compiled with --target cuda and has no CPU kernels; "
         "recompile with --target cpu (or all)");
  if (o.device != "cpu" && hasCuda) {
    CudaOptions options;
    options.graphs = o.graphs;
    options.profile = !o.profile.empty();
    options.collectiveTimeout = o.collectiveTimeout;
    device = loadCudaDevice(plan, dir, options, error);
    if (!device && o.device == "cuda")
      fail("--device cuda: " + error +
           (hasCpu ? "; train on the CPU with --device cpu" : ""));
    why = error;
  }
  if (!device) {
    if (!hasCpu)
      fail("this artifact has GPU kernels only (gpuc compile --target "
           "cuda) and the GPU cannot be used: " +
           why + "; recompile with --target all to train on the CPU");
    device = createCpuDevice(plan, gpuc_cpu_kernels, !o.profile.empty(), error);
    if (!device)
      fail(error);
  }
  std::string line = "device: " + device->describe();
  if (o.device == "auto" && !why.empty())
    line += " [no GPU: " + why + "]";
  // (Of several ranks, rank 0 speaks for the run.)
  if (FILE *status = launchedRank() == 0 ? statusStream(o) : nullptr)
    fprintf(status, "%s\n", line.c_str());
}

void CompiledStep::checkFrozenMask(const NamedTensor &t,
                                   const std::string &from) const {
  const nlohmann::json &frozen = plan.json.contains("frozen")
                                     ? plan.json["frozen"]
                                     : nlohmann::json::array();
  for (const nlohmann::json &entry : frozen) {
    if (entry.value("name", "") != t.name || !entry.contains("compiled_mask"))
      continue;
    const nlohmann::json &mask = entry["compiled_mask"];
    std::string where;
    if (t.dtype != "F32" || !checkCompiledMask(mask, t.shape, t.data, where))
      fail(from + ": " + t.name +
           " is a frozen attention mask that the "
           "compiled step computes from the positions (" +
           describeCompiledMask(mask) +
           "), but the value given is another "
           "mask (at " +
           (where.empty() ? "its dtype " + t.dtype : where) +
           "); compile the model with that mask in it instead");
  }
}

void CompiledStep::restore(const std::vector<NamedTensor> &tensors,
                           const std::string &from, bool complete) {
  auto shapeText = [](const std::vector<int64_t> &shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  };
  std::set<std::string> restored;
  for (const NamedTensor &t : tensors) {
    const PlanBuffer *b = plan.find(t.name);
    if (!b)
      continue;
    // Checkpoints hold sharded optimizer state whole: this rank takes its
    // shard.
    if (!b->shardOf.empty() && t.shape == b->shardOf && t.dtype == b->dtype) {
      uploadShard(*b, t);
      restored.insert(t.name);
      continue;
    }
    if ((int64_t)t.data.size() != b->bytes || t.dtype != b->dtype ||
        t.shape != b->shape)
      fail(from + ": tensor " + t.name + " is " + t.dtype + shapeText(t.shape) +
           " (" + std::to_string(t.data.size()) +
           " bytes) but the model's buffer is " + b->dtype +
           shapeText(b->shape) + " (" + std::to_string(b->bytes) +
           " bytes) (checkpoint of another model?)");
    checkFrozenMask(t, from);
    device->upload(b->id, t.data.data(), t.data.size());
    restored.insert(t.name);
  }
  if (complete)
    for (const PlanBuffer &b : plan.buffers)
      if ((b.kind == "param" || b.kind == "state") && !restored.count(b.name))
        fail(from + " has no tensor " + b.name +
             ", which the model's checkpoints hold (a damaged checkpoint, "
             "or one of another model?)");
}

std::vector<NamedTensor> CompiledStep::snapshot(bool gatherShards) {
  std::vector<NamedTensor> out;
  for (const PlanBuffer &b : plan.buffers) {
    if (b.kind != "param" && b.kind != "state")
      continue;
    NamedTensor t{b.name, b.dtype, b.shape, std::vector<char>(b.bytes)};
    device->download(b.id, t.data.data(), b.bytes);
    if (!b.shardOf.empty()) {
      if (!gatherShards)
        continue;
      t = gatherShard(b, t);
    }
    out.push_back(std::move(t));
  }
  return out;
}

void CompiledStep::uploadShard(const PlanBuffer &b, const NamedTensor &whole) {
  int64_t elementBytes = dtypeBytes(b.dtype), count = 1;
  for (int64_t d : b.shardOf)
    count *= d;
  int64_t shard = b.numElements();
  int64_t filled = shardFilled(count, ranks, rank);
  std::vector<char> mine(b.bytes, 0);
  memcpy(mine.data(),
         whole.data.data() + std::min(rank * shard, count) * elementBytes,
         filled * elementBytes);
  device->upload(b.id, mine.data(), mine.size());
}

NamedTensor CompiledStep::gatherShard(const PlanBuffer &b, NamedTensor &mine) {
  int64_t count = 1;
  for (int64_t d : b.shardOf)
    count *= d;
  NamedTensor whole{b.name, b.dtype, b.shardOf,
                    std::vector<char>(count * dtypeBytes(b.dtype))};
  std::string error;
  int ticket = 0;
  if (!collective ||
      !collective->startAllGather(
          {ShardBuffer{whole.data.data(), mine.data.data(), count, b.dtype}},
          ticket, error) ||
      !collective->finish(ticket, error))
    fail("gathering the optimizer state " + b.name + ": " +
         (collective ? error : "this process runs alone"));
  return whole;
}

void CompiledStep::setStepScalars(uint64_t seed, int64_t step,
                                  double learningRate) {
  if (rng >= 0) {
    // A rank draws its samples' masks of the global batch (Philox.h).
    int64_t key[2] = {(int64_t)seed,
                      (int64_t)((uint64_t)step | (uint64_t)rank << 48)};
    device->upload(rng, key, sizeof(key));
  }
  if (lr >= 0) {
    const PlanBuffer &b = plan.buffers[lr];
    float v = (float)(learningRate > 0 ? learningRate : b.defaultValue);
    device->upload(lr, &v, sizeof(v));
  }
}

void CompiledStep::run(const char *function) {
  std::string error;
  if (!device->run(function, error))
    fail(error);
}

void CompiledStep::trainStep(int64_t step,
                             const std::function<void()> &afterStep) {
  run("train_step");
  if (afterStep)
    afterStep();
  if (accumulate > 1 && (step + 1) % accumulate == 0)
    run("apply_update");
}

} // namespace gpuc::trainer

//===- Trainer.cpp - the generated trainer's main -------------------------===//
//
// `gpuc compile` links this with the model's kernels into out/train. It reads
// plan.json and init.safetensors from its own directory, loads the data,
// runs the step program epoch by epoch with a loader thread preparing the
// next batch, evaluates on the test split, logs, checkpoints and resumes.
//
// Data order: epoch e visits the training samples in the permutation drawn
// from (seed, e); the last partial batch of an epoch is dropped (as
// PyTorch's drop_last=True), so every step sees a full batch. Evaluation
// pads its last batch and counts only the real samples. The dropout key of
// global step s is (seed, s). A run is therefore a function of the seed and
// the step, which is what makes resume bit-exact.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/Npy.h"
#include "gpuc/runtime/Safetensors.h"
#include "gpuc/runtime/device/CpuKernelTable.h"
#include "gpuc/runtime/device/Float16.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <limits.h>
#include <mutex>
#include <pthread.h>
#include <random>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace gpuc;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string data, checkpointDir, resume, exportOnnx, metrics;
  std::string runStepInputs, outputDir, profile;
  std::string device = "auto";
  std::string artifact;
  bool graphs = true;
  int64_t epochs = 1, batchSize = 0, limitTrain = 0, benchSteps = 0;
  int64_t evalEvery = 0, logEvery = 50, step = 0;
  uint64_t seed = 0;
  double lr = -1, heldOut = 0.1;
  bool quiet = false;
};

[[noreturn]] void fail(const std::string &message) {
  fprintf(stderr, "train: %s\n", message.c_str());
  exit(1);
}

const char *kUsage =
    "usage: train --data DIR [--epochs E] [--batch-size N] [--seed S]\n"
    "             [--lr LR] [--eval-every STEPS] [--log-every STEPS]\n"
    "             [--checkpoint-dir DIR] [--resume [FILE]]\n"
    "             [--export-onnx trained.onnx] [--metrics metrics.jsonl]\n"
    "             [--limit-train N] [--bench-steps N] [--quiet]\n"
    "             [--profile trace.json]\n"
    "             [--device auto|cpu|cuda] [--no-graph] [--artifact DIR]\n"
    "       train --run-step IN_DIR --output-dir OUT_DIR [--seed S] [--step "
    "K]\n"
    "  --data: MNIST-family IDX files (e.g. "
    "/usr/share/datasets/fashion-mnist)\n"
    "          or train_x.npy, train_y.npy, test_x.npy, test_y.npy;\n"
    "          for a language model (token input and labels [batch, T]) a\n"
    "          token file: a .npy of integer ids, or any file read as bytes\n"
    "  --held-out F: a language model's test split, the last fraction F of\n"
    "          the token file (0.1)\n"
    "  --run-step: one step of the step program on IN_DIR/<input>.npy,\n"
    "          writing outputs and every parameter/state to OUT_DIR as .npy\n"
    "  --device: cuda runs the step on the GPU (one CUDA Graph launch per\n"
    "          step), cpu on this machine's cores; auto (default) takes the\n"
    "          GPU when the artifact has GPU kernels and a GPU is present\n"
    "  --no-graph: on the GPU, launch kernel by kernel instead of replaying\n"
    "          a CUDA Graph (to compare)\n"
    "  --artifact DIR: the compiled model in DIR instead of the trainer's\n"
    "          own folder (GPU-only trainers, which hold no model code)\n";

Options parseOptions(int argc, char **argv) {
  Options o;
  auto value = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      fail(std::string(argv[i]) + " needs a value\n" + kUsage);
    return argv[++i];
  };
  auto integer = [&](int &i, int64_t min) {
    std::string flag = argv[i], v = value(i);
    char *end;
    long long n = strtoll(v.c_str(), &end, 10);
    if (*end || v.empty() || n < min)
      fail(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
           v + "'");
    return (int64_t)n;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data")
      o.data = value(i);
    else if (a == "--epochs")
      o.epochs = integer(i, 1);
    else if (a == "--batch-size")
      o.batchSize = integer(i, 1);
    else if (a == "--seed")
      o.seed = integer(i, 0);
    else if (a == "--step")
      o.step = integer(i, 0);
    else if (a == "--eval-every")
      o.evalEvery = integer(i, 0);
    else if (a == "--log-every")
      o.logEvery = integer(i, 1);
    else if (a == "--limit-train")
      o.limitTrain = integer(i, 1);
    else if (a == "--bench-steps")
      o.benchSteps = integer(i, 1);
    else if (a == "--checkpoint-dir")
      o.checkpointDir = value(i);
    else if (a == "--resume") {
      o.resume = (i + 1 < argc && argv[i + 1][0] != '-') ? value(i) : "auto";
    } else if (a == "--export-onnx")
      o.exportOnnx = value(i);
    else if (a == "--metrics")
      o.metrics = value(i);
    else if (a == "--profile")
      o.profile = value(i);
    else if (a == "--run-step")
      o.runStepInputs = value(i);
    else if (a == "--output-dir")
      o.outputDir = value(i);
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--artifact")
      o.artifact = value(i);
    else if (a == "--no-graph")
      o.graphs = false;
    else if (a == "--device") {
      o.device = value(i);
      if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
        fail("--device expects auto, cpu or cuda, got '" + o.device + "'");
    } else if (a == "--held-out") {
      std::string v = value(i);
      char *end;
      o.heldOut = strtod(v.c_str(), &end);
      if (*end || v.empty() || !(o.heldOut >= 0 && o.heldOut < 1))
        fail("--held-out expects a fraction in [0, 1), got '" + v + "'");
    } else if (a == "--lr") {
      std::string v = value(i);
      char *end;
      o.lr = strtod(v.c_str(), &end);
      if (*end || v.empty() || !(o.lr > 0))
        fail("--lr expects a positive number, got '" + v + "'");
    } else if (a == "--help" || a == "-h") {
      printf("%s", kUsage);
      exit(0);
    } else {
      fail("unknown option '" + a + "'\n" + kUsage);
    }
  }
  return o;
}

std::string artifactDir() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0)
    return ".";
  path[n] = 0;
  std::string p(path);
  return p.substr(0, p.rfind('/'));
}

/// The trainer's view of the compiled step.
class Session {
public:
  Plan plan;
  std::unique_ptr<Device> device;
  int image = -1, label = -1, loss = -1, logits = -1, rng = -1, lr = -1;
  /// Mixed precision's loss-scale state (f32 scalars), -1 without it.
  int lossScale = -1, skippedSteps = -1;
  std::string imageName, labelName;
  /// Why the trainer cannot evaluate (no class scores), or empty.
  std::string noEvalReason;
  int64_t batch = 0, classes = 0;
  /// A language model: integer tokens in, next-token labels of the same
  /// [batch, window] shape, class scores [batch, window, classes].
  bool tokens = false;
  int64_t window = 0;
  /// Steps whose gradients one update applies (1: every step updates).
  int64_t accumulate = 1;

  void open(const std::string &dir, const Options &o) {
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
    noEvalReason = t.value("no_eval_reason", "");
    if (logits < 0 && noEvalReason.empty())
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
      fail(dir + "/plan.json asks for accumulate " +
           std::to_string(accumulate) +
           " but has no apply_update function; recompile");
    const PlanBuffer &in = plan.buffers[image];
    tokens = (in.dtype == "I64" || in.dtype == "I32") && in.shape.size() == 2 &&
             label >= 0 && plan.buffers[label].shape == in.shape;
    if (tokens)
      window = in.shape[1];
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
    // Initial weights, optimizer state and constants.
    std::vector<NamedTensor> tensors;
    std::map<std::string, std::string> metadata;
    if (!readSafetensors(dir + "/init.safetensors", tensors, metadata, error))
      fail(error);
    restore(tensors, "init.safetensors");
  }

  /// --device: cuda, cpu, or auto (the GPU when the artifact has GPU kernels
  /// and one is present, else the CPU, saying why).
  void openDevice(const std::string &dir, const Options &o) {
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
      device =
          createCpuDevice(plan, gpuc_cpu_kernels, !o.profile.empty(), error);
      if (!device)
        fail(error);
    }
    std::string line = "device: " + device->describe();
    if (o.device == "auto" && !why.empty())
      line += " [no GPU: " + why + "]";
    // Status goes to stderr when stdout carries results (--run-step,
    // --bench-steps print JSON or nothing).
    bool toStderr = !o.runStepInputs.empty() || o.benchSteps;
    if (!o.quiet || toStderr)
      fprintf(toStderr ? stderr : stdout, "%s\n", line.c_str());
  }

  /// Uploads named tensors into the persistent buffers of the same name.
  /// Uploads `tensors` into the buffers of the same names, each checked
  /// for dtype, shape and size. `complete` (a checkpoint, which holds every
  /// parameter and state buffer): a buffer it lacks is an error too;
  /// init.safetensors leaves out all-zero tensors, which devices start with.
  void restore(const std::vector<NamedTensor> &tensors, const std::string &from,
               bool complete = false) {
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
      if ((int64_t)t.data.size() != b->bytes || t.dtype != b->dtype ||
          t.shape != b->shape)
        fail(from + ": tensor " + t.name + " is " + t.dtype +
             shapeText(t.shape) + " (" + std::to_string(t.data.size()) +
             " bytes) but the model's buffer is " + b->dtype +
             shapeText(b->shape) + " (" + std::to_string(b->bytes) +
             " bytes) (checkpoint of another model?)");
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

  /// Every parameter and state buffer (what a checkpoint holds).
  std::vector<NamedTensor> snapshot() {
    std::vector<NamedTensor> out;
    for (const PlanBuffer &b : plan.buffers)
      if (b.kind == "param" || b.kind == "state") {
        NamedTensor t{b.name, b.dtype, b.shape, std::vector<char>(b.bytes)};
        device->download(b.id, t.data.data(), b.bytes);
        out.push_back(std::move(t));
      }
    return out;
  }

  void setStepScalars(uint64_t seed, int64_t step, double learningRate) {
    if (rng >= 0) {
      int64_t key[2] = {(int64_t)seed, step};
      device->upload(rng, key, sizeof(key));
    }
    if (lr >= 0) {
      const PlanBuffer &b = plan.buffers[lr];
      float v = (float)(learningRate > 0 ? learningRate : b.defaultValue);
      device->upload(lr, &v, sizeof(v));
    }
  }

  void run(const char *function) {
    std::string error;
    if (!device->run(function, error))
      fail(error);
  }

  /// One training step of `batch` samples; with gradient accumulation
  /// (gpuc compile --accumulate K) every K-th also applies the update.
  /// `afterStep` runs between the two: what reads the step's outputs (the
  /// loss lives in the arena, which the update's own buffers reuse).
  void trainStep(int64_t step,
                 const std::function<void()> &afterStep = nullptr) {
    run("train_step");
    if (afterStep)
      afterStep();
    if (accumulate > 1 && (step + 1) % accumulate == 0)
      run("apply_update");
  }
};

/// A batch prepared by the loader thread.
/// `n` floats in the storage type `dtype` (F32, or F16/BF16 rounded to
/// nearest even: a mixed-precision step reads its images in 16 bits) at
/// `dst`. The type is dispatched once per call: per element, the string
/// compares cost 40 ns and made an H100's batch-128 CNN step 5 ms of host
/// work instead of 0.3 ms of GPU work.
void storeFloats(const std::string &dtype, const float *src, int64_t n,
                 void *dst) {
  if (dtype == "F32") {
    memcpy(dst, src, n * sizeof(float));
  } else if (dtype == "F16") {
    auto *bits = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = floatToHalfBits(src[i]);
  } else if (dtype == "BF16") {
    auto *bits = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = floatToBFloat16Bits(src[i]);
  } else if (dtype == "I64") { // token ids (exact in a float up to 2^24)
    auto *ids = static_cast<int64_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      ids[i] = (int64_t)std::lround(src[i]);
  } else if (dtype == "I32") { // token ids, or byte images (integerSamples)
    auto *ids = static_cast<int32_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      ids[i] = (int32_t)std::lround(src[i]);
  } else {
    fail("the data input has type " + dtype +
         ", which the trainer cannot fill with images");
  }
}

/// A batch as the step's inputs hold it: the images already in the input's
/// storage type (converted on the loader's thread, off the step's path).
struct Batch {
  std::vector<char> images;
  std::vector<int64_t> labels;
  int64_t step = -1;
};

/// Fills batches of the epoch's permutation on its own thread, one ahead of
/// the step that consumes them.
class Loader {
public:
  Loader(const Split &split, int64_t batch, const PlanBuffer &input)
      : split(split), batch(batch), dtype(input.dtype),
        bytesPerSample(input.bytes / batch) {}
  ~Loader() { stop(); }

  void startEpoch(const std::vector<int64_t> &order, int64_t firstBatch,
                  int64_t batches) {
    stop();
    this->order = order;
    next = firstBatch;
    end = firstBatch + batches;
    done = false;
    thread = std::thread([this] { produce(); });
  }

  Batch take() {
    std::unique_lock<std::mutex> lock(mutex);
    ready.wait(lock, [&] { return full; });
    Batch b = std::move(slot);
    full = false;
    space.notify_one();
    return b;
  }

private:
  void produce() {
    for (int64_t k = next; k < end; ++k) {
      Batch b;
      b.step = k;
      b.images.resize(batch * bytesPerSample);
      int64_t perSample = split.labelsPerSample;
      b.labels.resize(batch * perSample);
      for (int64_t i = 0; i < batch; ++i) {
        int64_t s = order[k * batch + i];
        storeFloats(dtype, &split.samples[s * split.sampleSize],
                    split.sampleSize, &b.images[i * bytesPerSample]);
        std::copy_n(&split.labels[s * perSample], perSample,
                    &b.labels[i * perSample]);
      }
      std::unique_lock<std::mutex> lock(mutex);
      space.wait(lock, [&] { return !full || done; });
      if (done)
        return;
      slot = std::move(b);
      full = true;
      ready.notify_one();
    }
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
      full = false;
    }
    space.notify_all();
    if (thread.joinable())
      thread.join();
  }

  const Split &split;
  int64_t batch;
  std::string dtype;
  int64_t bytesPerSample;
  std::vector<int64_t> order;
  int64_t next = 0, end = 0;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable ready, space;
  Batch slot;
  bool full = false, done = false;
};

/// The loss of each step, read without stalling the device: a step's loss
/// is a ticket, taken once it has arrived, and all of them at a log point
/// (on the GPU the host then waits once per log interval, not per step).
class LossReader {
public:
  LossReader(Device &device, int id) : device(device), id(id) {}

  void submitted(int64_t step) {
    // A ticket's slot is reused by the one `capacity` later: take the
    // oldest first when all are out.
    if (pending.size() >= device.readCapacity())
      take();
    pending.push_back({device.readLater(id, sizeof(float)), step});
  }
  /// Takes the losses that have arrived; all of them when `wait`.
  void drain(bool wait) {
    while (!pending.empty() && (wait || device.ready(pending.front().first)))
      take();
  }
  double sum = 0;
  int64_t count = 0;
  float last = NAN;

private:
  void take() {
    auto [ticket, step] = pending.front();
    pending.pop_front();
    float loss;
    device.collect(ticket, &loss, sizeof(loss));
    if (!std::isfinite(loss))
      fail("the loss became " + std::to_string(loss) + " at step " +
           std::to_string(step) + "; lower --lr");
    sum += loss;
    ++count;
    last = loss;
  }

  Device &device;
  int id;
  std::deque<std::pair<uint64_t, int64_t>> pending;
};

/// Epoch `epoch`'s visiting order of `n` samples: Fisher-Yates driven by a
/// 64-bit Mersenne Twister seeded from (seed, epoch).
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + (uint64_t)epoch + 1);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = (int64_t)(rng() % (uint64_t)(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

/// Whether `b` holds floats (f32, or f16/bf16 under mixed precision).
bool isFloatBuffer(const PlanBuffer &b) {
  return b.dtype == "F32" || b.dtype == "F16" || b.dtype == "BF16";
}

/// Element `i` of a host copy of buffer `b` set to `v`, rounded to nearest
/// even for a 16-bit float buffer (a mixed-precision step reads its images
/// in 16 bits), converted for an integer one.
void storeElement(const PlanBuffer &b, std::vector<char> &bytes, int64_t i,
                  double v) {
  if (b.dtype == "F32")
    ((float *)bytes.data())[i] = (float)v;
  else if (b.dtype == "F16")
    ((uint16_t *)bytes.data())[i] = floatToHalfBits((float)v);
  else if (b.dtype == "BF16")
    ((uint16_t *)bytes.data())[i] = floatToBFloat16Bits((float)v);
  else if (b.dtype == "I32")
    ((int32_t *)bytes.data())[i] = (int32_t)v;
  else if (b.dtype == "I8")
    ((int8_t *)bytes.data())[i] = (int8_t)v;
  else if (b.dtype == "I64")
    ((int64_t *)bytes.data())[i] = (int64_t)v;
  else if (b.dtype == "BOOL")
    ((uint8_t *)bytes.data())[i] = v != 0;
  else
    fail("input '" + b.name + "' has type " + b.dtype +
         ", which the trainer cannot fill");
}

/// Uploads `images` (floats) into the data input, converting to its type.
void uploadImages(Session &s, const std::vector<float> &images) {
  const PlanBuffer &b = s.plan.buffers[s.image];
  if (b.dtype == "F32") {
    s.device->upload(b.id, images.data(), b.bytes);
    return;
  }
  std::vector<char> bytes(b.bytes);
  storeFloats(b.dtype, images.data(), b.numElements(), bytes.data());
  s.device->upload(b.id, bytes.data(), b.bytes);
}

/// A language model on the test split's windows: the mean cross-entropy
/// per token (nats) in `meanLoss`, and the next-token accuracy returned.
double evaluateTokens(Session &s, const Split &test, double &meanLoss) {
  int64_t B = s.batch, T = s.window, V = s.classes;
  std::vector<float> tokens(B * T), logits(B * T * V);
  double loss = 0;
  int64_t correct = 0, counted = 0;
  for (int64_t first = 0; first < test.count; first += B) {
    int64_t n = std::min(B, test.count - first);
    std::fill(tokens.begin(), tokens.end(), 0.0f);
    std::copy_n(&test.samples[first * T], n * T, tokens.data());
    uploadImages(s, tokens);
    s.run("eval");
    s.device->download(s.logits, logits.data(), logits.size() * sizeof(float));
    for (int64_t i = 0; i < n * T; ++i) {
      const float *row = &logits[i * V];
      int64_t best = 0;
      float top = row[0];
      for (int64_t c = 1; c < V; ++c)
        if (row[c] > top)
          top = row[c], best = c;
      double sum = 0;
      for (int64_t c = 0; c < V; ++c)
        sum += std::exp((double)row[c] - top);
      int64_t label = test.labels[first * T + i];
      loss += std::log(sum) + top - row[label];
      correct += best == label;
      ++counted;
    }
  }
  meanLoss = loss / std::max<int64_t>(counted, 1);
  return (double)correct / std::max<int64_t>(counted, 1);
}

double evaluate(Session &s, const Split &test, double &meanLoss) {
  meanLoss = -1;
  if (s.logits < 0 || s.classes <= 0)
    return -1;
  if (s.tokens)
    return evaluateTokens(s, test, meanLoss);
  int64_t B = s.batch, C = s.classes, correct = 0;
  std::vector<float> images(B * test.sampleSize), logits(B * C);
  for (int64_t first = 0; first < test.count; first += B) {
    int64_t n = std::min(B, test.count - first);
    std::fill(images.begin(), images.end(), 0.0f);
    memcpy(images.data(), &test.samples[first * test.sampleSize],
           n * test.sampleSize * sizeof(float));
    uploadImages(s, images);
    s.run("eval");
    s.device->download(s.logits, logits.data(), B * C * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (logits[i * C + c] > logits[i * C + best])
          best = c;
      correct += best == test.labels[first + i];
    }
  }
  return (double)correct / std::max<int64_t>(test.count, 1);
}

/// An integer data input (a model whose images are UINT8, say, and which
/// casts and scales them itself) gets the data's integer values: bytes as
/// 0..255, not the [0, 1] floats float inputs get. Data that is neither
/// bytes nor integral is refused rather than truncated.
void integerSamples(const Session &s, Dataset &data, const std::string &dir) {
  const PlanBuffer &input = s.plan.buffers[s.image];
  for (Split *split : {&data.train, &data.test}) {
    if (split->fromBytes) {
      for (float &v : split->samples)
        v = std::round(v * 255.0f);
      continue;
    }
    for (float v : split->samples)
      if (v != std::floor(v) || !std::isfinite(v))
        fail("the model's data input '" + input.name + "' is " + input.dtype +
             " (an integer type; UINT8/INT8/UINT16/INT16 in an ONNX model are "
             "read as I32) but the samples in " +
             dir + " are not integers (" + std::to_string(v) +
             "): give it byte images (IDX, or a .npy of uint8) or integer "
             "values");
  }
}

void checkData(const Session &s, const Dataset &data, const std::string &dir) {
  const PlanBuffer &in = s.plan.buffers[s.image];
  if (s.tokens) {
    // Token ids index the embedding and the class scores: one outside the
    // vocabulary would read past them.
    for (const Split *split : {&data.train, &data.test})
      for (size_t i = 0; i < split->labels.size(); ++i)
        if (s.classes && (split->labels[i] >= s.classes ||
                          split->samples[i] >= (float)s.classes))
          fail(dir + ": token " +
               std::to_string(std::max<int64_t>(split->labels[i],
                                                (int64_t)split->samples[i])) +
               " is outside the model's vocabulary of " +
               std::to_string(s.classes) +
               " (its class scores); a byte file needs a vocabulary of 256");
    return;
  }
  int64_t perSample = in.numElements() / in.shape[0];
  if (data.train.sampleSize != perSample)
    fail(dir + ": samples have " + std::to_string(data.train.sampleSize) +
         " values, but the model's input '" + s.imageName + "' takes " +
         std::to_string(perSample) + " per sample");
  if (s.label < 0 || s.plan.buffers[s.label].shape.size() != 1)
    fail("the trainer feeds one class label per sample, but this model's "
         "labels input is not [batch]; use --run-step to drive it");
  for (const Split *split : {&data.train, &data.test})
    for (int64_t i = 0; i < split->count; ++i)
      if (split->labels[i] < 0 || (s.classes && split->labels[i] >= s.classes))
        fail(dir + ": label " + std::to_string(split->labels[i]) +
             " of sample " + std::to_string(i) + " is outside [0, " +
             std::to_string(s.classes) + "), the model's classes");
}

/// The metrics file of a resumed run without the lines that the
/// interrupted run wrote after its last checkpoint (`step` > `step`): the
/// resumed run writes those steps again, and a plot would show them twice.
/// Rewritten through a temporary file and reopened for appending.
FILE *dropMetricsAfter(FILE *metrics, const std::string &path, int64_t step) {
  fclose(metrics);
  std::ifstream in(path);
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    size_t at = line.find("\"step\": ");
    // A line cut short (the process killed while writing it) goes too.
    if ((at != std::string::npos &&
         strtoll(line.c_str() + at + 8, nullptr, 10) > step) ||
        line.empty() || line.back() != '}') {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (dropped) {
    std::string tmp = path + ".tmp";
    FILE *out = fopen(tmp.c_str(), "w");
    if (!out || fwrite(kept.data(), 1, kept.size(), out) != kept.size() ||
        fclose(out) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
      std::string reason = strerror(errno);
      unlink(tmp.c_str());
      fail("cannot rewrite --metrics " + path + " without the " +
           std::to_string(dropped) +
           " lines written after the checkpoint: " + reason);
    }
  }
  FILE *reopened = fopen(path.c_str(), "a");
  if (!reopened)
    fail("cannot write --metrics " + path + ": " + strerror(errno));
  return reopened;
}

/// The signal (SIGINT, SIGTERM) that asked the training loop to stop: it
/// finishes the step in flight (and an accumulation to its update), writes
/// a checkpoint and exits. A second signal, or one before training starts,
/// ends the process at once.
std::atomic<int> stopSignal{0};
std::atomic<bool> training{false};

/// SIGINT and SIGTERM are blocked in every thread and taken by one thread
/// that waits for them, so no handler ever runs on a compute thread's
/// stack. With a handler (that only set a flag) the heap was corrupted in
/// most Ctrl-C runs, detected inside oneDNN's sgemm; the likely cause is
/// JIT code keeping data below the stack pointer, where a handler frame
/// goes. Called first thing, before any thread exists, so that every
/// thread inherits the mask.
void takeStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0)
        continue;
      if (!training.load() || stopSignal.load())
        _exit(128 + signal);
      stopSignal.store(signal);
    }
  }).detach();
}

/// FNV-1a (64 bits) over every tensor's name, type, shape and bytes, by
/// name (a safetensors header lists them sorted, not in the plan's order),
/// as hex: what a checkpoint's "checksum" metadata holds.
std::string checkpointChecksum(const std::vector<NamedTensor> &unordered) {
  std::vector<const NamedTensor *> tensors;
  for (const NamedTensor &t : unordered)
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor *a, const NamedTensor *b) {
              return a->name < b->name;
            });
  uint64_t hash = 0xcbf29ce484222325ull;
  auto add = [&](const void *data, size_t n) {
    const unsigned char *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  };
  for (const NamedTensor *t : tensors) {
    add(t->name.data(), t->name.size() + 1);
    add(t->dtype.data(), t->dtype.size() + 1);
    add(t->shape.data(), t->shape.size() * sizeof(int64_t));
    add(t->data.data(), t->data.size());
  }
  char text[32];
  snprintf(text, sizeof(text), "fnv1a64:%016llx", (unsigned long long)hash);
  return text;
}

/// Why `tensors` cannot be a checkpoint to train on: the first floating
/// tensor holding NaN or infinite values (a diverged run), or "".
std::string nonFiniteTensor(const std::vector<NamedTensor> &tensors) {
  for (const NamedTensor &t : tensors) {
    // Exponent bits all set: infinity or NaN, in every IEEE width.
    size_t width = t.dtype == "F32"    ? 4
                   : t.dtype == "F16"  ? 2
                   : t.dtype == "BF16" ? 2
                                       : 0;
    if (!width)
      continue;
    uint32_t exponent = t.dtype == "F32"   ? 0x7f800000u
                        : t.dtype == "F16" ? 0x7c00u
                                           : 0x7f80u;
    int64_t count = 0, first = -1;
    for (size_t i = 0; i + width <= t.data.size(); i += width) {
      uint32_t bits = 0;
      memcpy(&bits, t.data.data() + i, width);
      if ((bits & exponent) == exponent && !count++)
        first = (int64_t)(i / width);
    }
    if (count)
      return "'" + t.name + "' holds " + std::to_string(count) +
             " NaN or infinite values (the first at element " +
             std::to_string(first) + ")";
  }
  return "";
}

std::string checkpointPath(const Options &o) {
  return o.checkpointDir + "/checkpoint.safetensors";
}

/// The file --export-onnx writes: it replaces a regular file only. A
/// symbolic link is followed (the link stays, its file gets the model); a
/// device, FIFO or directory is refused rather than renamed over. Checked
/// before training too, so a bad path costs no run.
std::string exportTarget(const std::string &path) {
  std::string target = path;
  struct stat info;
  if (lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    char *real = realpath(path.c_str(), nullptr);
    if (!real)
      fail("--export-onnx " + path +
           " is a symbolic link to a missing file; name a file");
    target = real;
    free(real);
  }
  if (stat(target.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    fail("--export-onnx " + path +
         " exists and is not a regular file; name a .onnx file to write");
  return target;
}

void exportOnnx(Session &s, const std::string &dir, const std::string &path) {
  std::string source = dir + "/model.onnx";
  std::ifstream in(source, std::ios::binary);
  if (!in)
    fail("--export-onnx needs the ONNX model the trainer was compiled from, "
         "but " +
         source + " is missing (models from the DSL have none)");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    fail(source + ": not a valid ONNX model");
  int replaced = 0;
  for (const NamedTensor &t : s.snapshot()) {
    for (auto &init : *model.mutable_graph()->mutable_initializer()) {
      if (init.name() != t.name)
        continue;
      if (init.data_type() != onnx::TensorProto::FLOAT || t.dtype != "F32")
        continue;
      init.clear_float_data();
      init.set_raw_data(std::string(t.data.begin(), t.data.end()));
      ++replaced;
    }
  }
  std::string target = exportTarget(path);
  std::string tmp = target + ".tmp";
  bool written;
  {
    std::ofstream out(tmp, std::ios::binary);
    written = out && model.SerializeToOstream(&out) && out.flush();
  }
  if (!written || rename(tmp.c_str(), target.c_str()) != 0) {
    std::string reason = strerror(errno);
    unlink(tmp.c_str());
    fail("cannot write --export-onnx " + path + ": " + reason);
  }
  printf("exported %d trained tensors into %s\n", replaced, path.c_str());
}

int runStep(Session &s, const Options &o) {
  // One step on given inputs: what tests compare with the interpreter.
  if (o.outputDir.empty())
    fail("--run-step needs --output-dir");
  mkdir(o.outputDir.c_str(), 0755);
  std::string error;
  for (auto &[name, id] :
       s.plan.json["functions"]["train_step"]["inputs"].items()) {
    NpyArray a;
    std::string path = o.runStepInputs + "/" + name + ".npy";
    if (!readNpy(path, a, error))
      fail(error);
    const PlanBuffer &b = s.plan.buffers[id.get<int>()];
    if (a.numElements() != b.numElements())
      fail(path + " has " + std::to_string(a.numElements()) +
           " elements; the input takes " + std::to_string(b.numElements()));
    std::vector<char> bytes(b.bytes);
    for (int64_t i = 0; i < b.numElements(); ++i)
      storeElement(b, bytes, i, a.at(i));
    s.device->upload(b.id, bytes.data(), b.bytes);
  }
  s.setStepScalars(o.seed, o.step, o.lr);
  s.run("train_step");
  auto write = [&](const PlanBuffer &b, const std::string &name) {
    std::vector<char> bytes(b.bytes);
    s.device->download(b.id, bytes.data(), b.bytes);
    // Floats (f16/bf16 widened exactly) as float32, integers as int64.
    std::vector<double> values(b.numElements());
    const char *data = bytes.data();
    bool floating = b.dtype == "F32" || b.dtype == "F16" || b.dtype == "BF16";
    for (int64_t i = 0; i < b.numElements(); ++i) {
      uint16_t half = 0;
      if (b.dtype == "F16" || b.dtype == "BF16")
        memcpy(&half, data + 2 * i, 2);
      if (b.dtype == "F32")
        values[i] = ((const float *)data)[i];
      else if (b.dtype == "F16")
        values[i] = halfBitsToFloat(half);
      else if (b.dtype == "BF16")
        values[i] = bfloat16BitsToFloat(half);
      else if (b.dtype == "I32")
        values[i] = ((const int32_t *)data)[i];
      else if (b.dtype == "I8")
        values[i] = ((const int8_t *)data)[i];
      else if (b.dtype == "BOOL")
        values[i] = data[i] != 0;
      else
        values[i] = (double)((const int64_t *)data)[i];
    }
    NpyArray a = makeNpy(floating ? "<f4" : "<i8", b.shape, values);
    if (!writeNpy(o.outputDir + "/" + name + ".npy", a, error))
      fail(error);
  };
  for (auto &[name, id] :
       s.plan.json["functions"]["train_step"]["outputs"].items())
    write(s.plan.buffers[id.get<int>()], name);
  for (const PlanBuffer &b : s.plan.buffers)
    if (b.kind == "param" || b.kind == "state")
      write(b, b.name);
  return 0;
}

/// What the step's memory is: the plan's bytes (arena + persistent
/// buffers, what `gpuc compile --max-batch-for` adds up), what the device
/// allocated for it, and the process's peak resident set.
struct MemoryUse {
  int64_t plan = 0, device = 0, peakRss = 0;
};
MemoryUse memoryUse(const Session &s) {
  MemoryUse use;
  use.plan = s.plan.arenaBytes;
  for (const PlanBuffer &b : s.plan.buffers)
    if (b.persistent())
      use.plan += b.bytes;
  use.device = s.device->allocatedBytes();
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    use.peakRss = (int64_t)usage.ru_maxrss * 1024;
  return use;
}

/// --bench-steps: times the step alone on one resident batch (the first of
/// --data; without --data, every input filled from a fixed pseudo-random
/// sequence: floats in [-1, 1), integers in [0, 10), valid tokens and
/// labels for every example model). Warm-up steps are excluded and the
/// device is drained before the clock stops.
/// train --profile: the host's part of the trace (its training steps and
/// the loader's waits) and what the report needs beside the device's steps.
struct HostProfile {
  /// Host spans kept for the trace, per kind.
  static constexpr int64_t kTraceSpans = 16;
  bool on = false;
  HostTimes times;
  MachinePeaks peaks;
  nlohmann::json events = nlohmann::json::array();
  int64_t stepSpans = 0, waitSpans = 0;

  HostProfile(Session &s, const Options &o) : on(!o.profile.empty()) {
    if (on)
      peaks = s.device->measurePeaks();
  }
  /// A training step the host timed from `start` (profileClock()).
  void step(double start, int64_t step) {
    if (!on)
      return;
    double seconds = profileClock() - start;
    times.steps += 1;
    times.wallSeconds += seconds;
    if (stepSpans++ < kTraceSpans)
      events.push_back(span("step " + std::to_string(step), 2, start, seconds));
  }
  /// The host waited for the loader from `start`.
  void loaderWait(double start) {
    if (!on)
      return;
    double seconds = profileClock() - start;
    times.loaderSeconds += seconds;
    if (waitSpans++ < kTraceSpans)
      events.push_back(span("loader wait", 3, start, seconds));
  }
  static nlohmann::json span(const std::string &name, int tid, double start,
                             double seconds) {
    return {{"name", name}, {"ph", "X"},         {"pid", 1},
            {"tid", tid},   {"ts", start * 1e6}, {"dur", seconds * 1e6}};
  }
  /// Writes the trace to --profile and prints the roofline table.
  void finish(Session &s, const Options &o) {
    if (!on)
      return;
    s.device->synchronize();
    std::vector<StepTime> steps = s.device->stepTimes();
    nlohmann::json trace = nlohmann::json::array();
    auto name = [&](int tid, const char *what) {
      trace.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", 1},
                       {"tid", tid},
                       {"args", {{"name", what}}}});
    };
    trace.push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", 1},
                     {"args", {{"name", "train: " + s.device->describe()}}}});
    name(1, "device steps");
    name(2, "training steps (host)");
    name(3, "loader wait (host)");
    for (const StepTime &t : steps)
      for (auto [start, seconds] : t.trace) {
        nlohmann::json e = span(t.label, 1, start, seconds);
        e["cat"] =
            t.kernel ? "kernel" : (t.label == "copy" ? "copy" : "library");
        e["args"] = {{"function", t.function},
                     {"step", t.index},
                     {"bytes", t.bytes},
                     {"flops", t.flops}};
        trace.push_back(std::move(e));
      }
    for (nlohmann::json &e : events)
      trace.push_back(std::move(e));
    nlohmann::json file = {{"displayTimeUnit", "ms"}, {"traceEvents", trace}};
    std::string text = file.dump();
    FILE *out = fopen(o.profile.c_str(), "wb");
    if (!out)
      fail("cannot write --profile " + o.profile + ": " + strerror(errno));
    bool written = fwrite(text.data(), 1, text.size(), out) == text.size();
    if ((fclose(out) != 0) | !written)
      fail("cannot write --profile " + o.profile + ": " + strerror(errno));
    printRoofline(s.device->describe(), steps, peaks, times);
    fprintf(stderr,
            "trace: %s (%zu events; chrome://tracing or "
            "ui.perfetto.dev)\n",
            o.profile.c_str(), trace.size());
  }
};

int bench(Session &s, const Options &o, const Dataset *data) {
  int64_t B = s.batch;
  if (data) {
    std::vector<float> images(&data->train.samples[0],
                              &data->train.samples[B * data->train.sampleSize]);
    std::vector<int64_t> labels(data->train.labels.begin(),
                                data->train.labels.begin() +
                                    B * data->train.labelsPerSample);
    uploadImages(s, images);
    s.device->upload(s.label, labels.data(), labels.size() * sizeof(int64_t));
  } else {
    std::mt19937_64 rng(o.seed);
    for (auto &[name, id] :
         s.plan.json["functions"]["train_step"]["inputs"].items()) {
      const PlanBuffer &b = s.plan.buffers[id.get<int>()];
      std::vector<char> bytes(b.bytes);
      for (int64_t i = 0; i < b.numElements(); ++i)
        storeElement(b, bytes, i,
                     isFloatBuffer(b) ? (rng() >> 40) * 0x1p-23 - 1.0
                                      : (double)(rng() % 10));
      s.device->upload(b.id, bytes.data(), b.bytes);
    }
  }
  for (int i = 0; i < 3; ++i) {
    s.setStepScalars(o.seed, i, o.lr);
    s.trainStep(i);
  }
  s.device->synchronize();
  HostProfile profile(s, o);
  Device::Counters before = s.device->counters();
  auto t0 = Clock::now();
  for (int64_t i = 0; i < o.benchSteps; ++i) {
    double start = profileClock();
    s.setStepScalars(o.seed, i, o.lr);
    s.trainStep(i);
    profile.step(start, i);
  }
  s.device->synchronize();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  Device::Counters after = s.device->counters();
  MemoryUse memory = memoryUse(s);
  printf("{\"steps\": %lld, \"batch\": %lld, \"ms_per_step\": %.4f, "
         "\"graph_launches\": %lld, \"host_launches\": %lld, "
         "\"plan_bytes\": %lld, \"device_bytes\": %lld, "
         "\"peak_rss_bytes\": %lld}\n",
         (long long)o.benchSteps, (long long)B, 1000.0 * seconds / o.benchSteps,
         (long long)(after.graphLaunches["train_step"] -
                     before.graphLaunches["train_step"]),
         (long long)(after.hostLaunches["train_step"] -
                     before.hostLaunches["train_step"]),
         (long long)memory.plan, (long long)memory.device,
         (long long)memory.peakRss);
  fflush(stdout);
  profile.finish(s, o);
  return 0;
}

int trainerMain(int argc, char **argv) {
  takeStopSignals();
  Options o = parseOptions(argc, argv);
  std::string dir = artifactDir();
  if (!o.artifact.empty()) {
    // A trainer with CPU kernels holds one model's code; only a GPU-only
    // trainer (its kernels come from the artifact's cubin) serves others.
    if (gpuc_cpu_kernels[0].name)
      fail("--artifact: this trainer holds the CPU kernels of its own model "
           "and runs only the artifact beside it; use that artifact's train");
    dir = o.artifact;
  }
  Session s;
  s.open(dir, o);
  if (o.batchSize && o.batchSize != s.batch)
    fail("this trainer was compiled for batch " + std::to_string(s.batch) +
         "; recompile with gpuc compile --batch " +
         std::to_string(o.batchSize) + " to train with another");
  if (!o.runStepInputs.empty())
    return runStep(s, o);
  if (o.benchSteps && o.data.empty())
    return bench(s, o, nullptr);
  if (o.data.empty())
    fail(std::string("--data DIR is required\n") + kUsage);
  // Say it before training, not after hours of it.
  if (!o.exportOnnx.empty() && !std::ifstream(dir + "/model.onnx"))
    fail("--export-onnx needs the ONNX model the trainer was compiled from, "
         "but " +
         dir +
         "/model.onnx is missing (models from the DSL have "
         "none)");
  if (!o.exportOnnx.empty())
    exportTarget(o.exportOnnx);

  Dataset data;
  std::string error;
  if (s.tokens ? !loadTokenStream(o.data, s.window, o.heldOut, data, error)
               : !loadDataset(o.data, data, error))
    fail(error);
  double mean = 0, stddev = 1;
  if (isFloatBuffer(s.plan.buffers[s.image]))
    normalize(data, mean, stddev);
  else if (!s.tokens)
    integerSamples(s, data, o.data);
  checkData(s, data, o.data);
  if (o.limitTrain && o.limitTrain < data.train.count)
    data.train.count = o.limitTrain;

  int64_t B = s.batch;
  // An epoch ends with an update: its steps are a multiple of --accumulate.
  int64_t stepsPerEpoch = data.train.count / B / s.accumulate * s.accumulate;
  if (stepsPerEpoch == 0)
    fail("the training split has " + std::to_string(data.train.count) +
         " samples, fewer than one update's " +
         std::to_string(B * s.accumulate) + " (batch " + std::to_string(B) +
         (s.accumulate > 1
              ? " x " + std::to_string(s.accumulate) + " accumulated steps"
              : std::string()) +
         ")");

  // The checkpoint directory first: --metrics may live in it.
  if (!o.checkpointDir.empty() && mkdir(o.checkpointDir.c_str(), 0755) != 0 &&
      errno != EEXIST)
    fail("cannot create --checkpoint-dir " + o.checkpointDir + ": " +
         strerror(errno));
  // A checkpoint write cut short (the process killed mid-write) leaves its
  // temporary file; the checkpoint itself is replaced only by rename.
  if (!o.checkpointDir.empty())
    unlink((checkpointPath(o) + ".tmp").c_str());
  FILE *metrics = nullptr;
  if (!o.metrics.empty() && !(metrics = fopen(o.metrics.c_str(), "a")))
    fail("cannot write --metrics " + o.metrics + ": " + strerror(errno));

  // Resume: parameters, optimizer state and the position in the data.
  int64_t startStep = 0;
  std::string resumePath;
  if (!o.resume.empty()) {
    if (o.resume == "auto" && o.checkpointDir.empty())
      fail("--resume without a file needs --checkpoint-dir");
    resumePath = o.resume == "auto" ? checkpointPath(o) : o.resume;
    // --resume without a file where no checkpoint was written yet starts
    // the run (what a job script that always passes --resume needs); a
    // named file must exist.
    if (o.resume == "auto" && access(resumePath.c_str(), F_OK) != 0 &&
        errno == ENOENT) {
      if (!o.quiet)
        printf("no checkpoint in %s yet: starting from the initial "
               "weights\n",
               o.checkpointDir.c_str());
      resumePath.clear();
      // The lines of a run that never reached a checkpoint: it starts again.
      if (metrics)
        metrics = dropMetricsAfter(metrics, o.metrics, 0);
    }
  }
  if (!resumePath.empty()) {
    const std::string &path = resumePath;
    std::vector<NamedTensor> tensors;
    std::map<std::string, std::string> meta;
    if (!readSafetensors(path, tensors, meta, error))
      fail(error);
    s.restore(tensors, path, /*complete=*/true);
    // Checkpoints carry a checksum of their tensors (names, types, shapes,
    // bytes); a flipped byte would otherwise resume silently. Checked after
    // restore(), whose diagnosis of another model's tensors is the sharper
    // one (the process ends either way before a step runs).
    // Checkpoints written before the checksum's text had room for all 16
    // digits hold its first 15.
    std::string checksum = checkpointChecksum(tensors);
    if (meta.count("checksum") && meta["checksum"] != checksum &&
        meta["checksum"] != checksum.substr(0, 23))
      fail(path + ": its tensors do not match the checksum it was written "
                  "with: the checkpoint is damaged; resume from a copy, or "
                  "start again without --resume");
    // A diverged run's values would train on as NaN from the first step.
    std::string diverged = nonFiniteTensor(tensors);
    if (!diverged.empty())
      fail(path + ": " + diverged +
           ": the run had diverged when it was saved; resume from an "
           "earlier checkpoint (with a lower --lr), or start again without "
           "--resume");
    // The position in the data: a whole number of steps within the run.
    const std::string &stepText = meta["step"];
    char *end = nullptr;
    errno = 0;
    long long step = strtoll(stepText.c_str(), &end, 10);
    if (stepText.empty() || *end || errno || step < 0)
      fail(path + ": its 'step' metadata is '" + stepText +
           "', not a step number; the checkpoint is damaged or not the "
           "trainer's (checkpoints come from --checkpoint-dir)");
    startStep = step;
    if (meta.count("seed") &&
        (meta["seed"].empty() ||
         meta["seed"].find_first_not_of("0123456789") != std::string::npos))
      fail(path + ": its 'seed' metadata is '" + meta["seed"] +
           "', not a seed; the checkpoint is damaged or not the trainer's");
    if (meta.count("seed") && std::stoull(meta["seed"]) != o.seed)
      fail(path + " was written by a run with --seed " + meta["seed"] +
           "; resume with the same seed to continue it exactly");
    if (!o.quiet)
      printf("resumed from %s at step %lld\n", path.c_str(),
             (long long)startStep);
    if (metrics)
      metrics = dropMetricsAfter(metrics, o.metrics, startStep);
  }
  if (o.benchSteps)
    return bench(s, o, &data);

  bool tty = isatty(fileno(stdout)) && !o.quiet;
  if (!o.quiet && s.tokens)
    printf("training on %lld windows of %lld tokens (%s; %lld held-out "
           "windows) for %lld epochs, %lld steps/epoch of %lld\n",
           (long long)data.train.count, (long long)s.window,
           data.format.c_str(), (long long)data.test.count, (long long)o.epochs,
           (long long)stepsPerEpoch, (long long)B);
  else if (!o.quiet)
    printf("training %lld samples (%lld steps/epoch of %lld, last partial "
           "batch dropped) for %lld epochs; data %s normalized with mean "
           "%.4f std %.4f\n",
           (long long)data.train.count, (long long)stepsPerEpoch, (long long)B,
           (long long)o.epochs, data.format.c_str(), mean, stddev);
  if (!o.quiet && s.logits < 0)
    printf("no evaluation: %s\n", s.noEvalReason.c_str());
  if (!o.quiet && s.accumulate > 1)
    printf("accumulating the gradients of %lld steps per update: effective "
           "batch %lld\n",
           (long long)s.accumulate, (long long)(s.accumulate * B));
  int64_t totalSteps = stepsPerEpoch * o.epochs;
  Loader loader(data.train, B, s.plan.buffers[s.image]);
  HostProfile profile(s, o);
  auto start = Clock::now();
  int64_t stepsDone = 0;
  LossReader losses(*s.device, s.loss);
  double lastAccuracy = -1, lastLoss = -1;
  bool divergedSaid = false;
  auto saveCheckpoint = [&](int64_t stepsDoneInRun) {
    std::vector<NamedTensor> tensors = s.snapshot();
    // A diverged run does not replace the last good checkpoint.
    std::string diverged = nonFiniteTensor(tensors);
    if (!diverged.empty()) {
      if (!divergedSaid)
        fprintf(stderr,
                "train: checkpoint at step %lld not written: %s; the run "
                "has diverged (lower --lr), and %s keeps the last checkpoint "
                "written before\n",
                (long long)stepsDoneInRun, diverged.c_str(),
                checkpointPath(o).c_str());
      divergedSaid = true;
      return false;
    }
    std::map<std::string, std::string> meta = {
        {"step", std::to_string(stepsDoneInRun)},
        {"epoch", std::to_string(stepsDoneInRun / stepsPerEpoch)},
        {"seed", std::to_string(o.seed)},
        {"checksum", checkpointChecksum(tensors)}};
    if (!writeSafetensors(checkpointPath(o), tensors, meta, error))
      fail(error);
    return true;
  };
  training.store(true);
  bool stopped = false;
  int64_t stepReached = startStep;
  bool saved = false;
  for (int64_t step = startStep; step < totalSteps && !stopped;) {
    int64_t epoch = step / stepsPerEpoch, inEpoch = step % stepsPerEpoch;
    loader.startEpoch(permutation(data.train.count, o.seed, epoch), inEpoch,
                      stepsPerEpoch - inEpoch);
    auto epochStart = Clock::now();
    for (; inEpoch < stepsPerEpoch; ++inEpoch, ++step) {
      double stepStart = profileClock();
      Batch b = loader.take();
      profile.loaderWait(stepStart);
      s.device->upload(s.plan.buffers[s.image].id, b.images.data(),
                       b.images.size());
      s.device->upload(s.label, b.labels.data(),
                       b.labels.size() * sizeof(int64_t));
      s.setStepScalars(o.seed, step, o.lr);
      s.trainStep(step, [&] { losses.submitted(step); });
      profile.step(stepStart, step);
      ++stepsDone;
      double elapsed =
          std::chrono::duration<double>(Clock::now() - start).count();
      double rate = stepsDone * B / std::max(elapsed, 1e-9);
      bool logPoint =
          (step + 1) % o.logEvery == 0 || inEpoch + 1 == stepsPerEpoch;
      if (logPoint)
        losses.drain(true);
      else if (tty)
        losses.drain(false);
      if (tty) {
        double eta = (totalSteps - step - 1) * B / std::max(rate, 1e-9);
        printf("\repoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f samples/s  "
               "ETA %02d:%02d   ",
               (long long)epoch + 1, (long long)o.epochs,
               (long long)inEpoch + 1, (long long)stepsPerEpoch, losses.last,
               rate, (int)eta / 60, (int)eta % 60);
        fflush(stdout);
      }
      if (logPoint) {
        double mean = losses.sum / std::max<int64_t>(losses.count, 1);
        // The loss scale as the step left it: read at log points only,
        // where the host waits for the device anyway.
        std::string scaling, scalingJson;
        if (s.lossScale >= 0 && s.skippedSteps >= 0) {
          float scale = 0, skipped = 0;
          s.device->download(s.lossScale, &scale, sizeof(scale));
          s.device->download(s.skippedSteps, &skipped, sizeof(skipped));
          char text[160];
          snprintf(text, sizeof(text), " loss_scale %g skipped_steps %lld",
                   scale, (long long)skipped);
          scaling = text;
          snprintf(text, sizeof(text),
                   ", \"loss_scale\": %.17g, \"skipped_steps\": %lld", scale,
                   (long long)skipped);
          scalingJson = text;
        }
        if (s.tokens) {
          char text[96];
          snprintf(text, sizeof(text), " tokens/s %.0f", rate * s.window);
          scaling = text + scaling;
          snprintf(text, sizeof(text), ", \"tokens_per_s\": %.1f",
                   rate * s.window);
          scalingJson = text + scalingJson;
        }
        if (!tty && !o.quiet)
          printf("epoch %lld step %lld loss %.4f samples/s %.0f%s\n",
                 (long long)epoch + 1, (long long)step + 1, mean, rate,
                 scaling.c_str());
        // Plain lines go to logs and pipes: each is worth seeing at once.
        fflush(stdout);
        if (metrics)
          fprintf(metrics,
                  "{\"epoch\": %lld, \"step\": %lld, \"loss\": %.9g, "
                  "\"samples_per_s\": %.1f%s}\n",
                  (long long)epoch + 1, (long long)step + 1, mean, rate,
                  scalingJson.c_str());
        // Each line reaches the file at once (tail -f, a killed run).
        if (metrics && fflush(metrics) != 0)
          fail("cannot write --metrics " + o.metrics + ": " + strerror(errno));
        losses.sum = 0;
        losses.count = 0;
      }
      bool evalPoint = o.evalEvery && (step + 1) % o.evalEvery == 0 &&
                       inEpoch + 1 != stepsPerEpoch;
      if (evalPoint || inEpoch + 1 == stepsPerEpoch) {
        lastAccuracy = evaluate(s, data.test, lastLoss);
        double epochSeconds =
            std::chrono::duration<double>(Clock::now() - epochStart).count();
        if (tty)
          printf("\n");
        // A language model: the held-out loss per token and its perplexity.
        std::string lm, lmJson;
        if (lastLoss >= 0) {
          char text[160];
          snprintf(text, sizeof(text), " val_loss %.4f val_perplexity %.3f",
                   lastLoss, std::exp(lastLoss));
          lm = text;
          snprintf(text, sizeof(text),
                   ", \"val_loss\": %.9g, \"val_perplexity\": %.9g", lastLoss,
                   std::exp(lastLoss));
          lmJson = text;
        }
        if (!o.quiet && lastAccuracy >= 0)
          printf("epoch %lld step %lld%s %s %.4f (epoch time %.1f s)\n",
                 (long long)epoch + 1, (long long)step + 1, lm.c_str(),
                 s.tokens ? "next_token_accuracy" : "test_accuracy",
                 lastAccuracy, epochSeconds);
        fflush(stdout);
        if (metrics && lastAccuracy >= 0)
          fprintf(
              metrics,
              "{\"epoch\": %lld, \"step\": %lld, \"test_accuracy\": %.6f%s, "
              "\"elapsed_s\": %.2f}\n",
              (long long)epoch + 1, (long long)step + 1, lastAccuracy,
              lmJson.c_str(),
              std::chrono::duration<double>(Clock::now() - start).count());
        if (metrics && fflush(metrics) != 0)
          fail("cannot write --metrics " + o.metrics + ": " + strerror(errno));
      }
      // Asked to stop: after an update (accumulated gradients are not
      // checkpointed mid-way), before the next step.
      if (stopSignal && (step + 1) % s.accumulate == 0 &&
          step + 1 < totalSteps) {
        ++step;
        stopped = true;
        break;
      }
    }
    stepReached = step;
    saved = !o.checkpointDir.empty() && saveCheckpoint(step);
  }
  if (stopped) {
    losses.drain(true);
    if (metrics)
      fclose(metrics);
    const char *name = stopSignal == SIGINT ? "SIGINT" : "SIGTERM";
    if (o.checkpointDir.empty())
      fprintf(stderr,
              "\ntrain: %s: stopped after step %lld of %lld; nothing saved "
              "(run with --checkpoint-dir to keep the progress)\n",
              name, (long long)stepReached, (long long)totalSteps);
    else if (!saved)
      fprintf(stderr,
              "\ntrain: %s: stopped after step %lld of %lld; the run had "
              "diverged, so %s keeps the last checkpoint written before\n",
              name, (long long)stepReached, (long long)totalSteps,
              checkpointPath(o).c_str());
    else
      fprintf(stderr,
              "\ntrain: %s: stopped after step %lld of %lld; checkpoint %s "
              "written; the same command with --resume continues\n",
              name, (long long)stepReached, (long long)totalSteps,
              checkpointPath(o).c_str());
    fflush(nullptr);
    _exit(128 + stopSignal);
  }
  if (metrics && (ferror(metrics) | fclose(metrics)))
    fail("cannot write --metrics " + o.metrics + ": " + strerror(errno) +
         " (the metrics written so far may be incomplete)");
  s.device->synchronize();
  if (!o.quiet) {
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (lastLoss >= 0)
      printf("done: %lld steps in %.1f s, final val_perplexity %.3f, "
             "next_token_accuracy %.4f\n",
             (long long)stepsDone, seconds, std::exp(lastLoss), lastAccuracy);
    else if (lastAccuracy >= 0)
      printf("done: %lld steps in %.1f s, final test_accuracy %.4f\n",
             (long long)stepsDone, seconds, lastAccuracy);
    else
      printf("done: %lld steps in %.1f s (not evaluated: %s)\n",
             (long long)stepsDone, seconds,
             s.logits < 0 ? s.noEvalReason.c_str() : "no epoch ended");
    Device::Counters c = s.device->counters();
    if (!c.graphLaunches.empty() || !c.hostLaunches.empty())
      printf(
          "launches: train_step %lld graph launches for %lld steps, eval "
          "%lld graph launches, %lld host launches\n",
          (long long)c.graphLaunches["train_step"], (long long)stepsDone,
          (long long)c.graphLaunches["eval"],
          (long long)(c.hostLaunches["train_step"] + c.hostLaunches["eval"]));
    MemoryUse memory = memoryUse(s);
    printf("memory: plan %.2f MiB (arena + persistent buffers), the device "
           "allocated %.2f MiB, peak resident set %.2f MiB (with the data "
           "set and the runtime)\n",
           memory.plan / 1048576.0, memory.device / 1048576.0,
           memory.peakRss / 1048576.0);
  }
  profile.finish(s, o);
  if (!o.exportOnnx.empty())
    exportOnnx(s, dir, o.exportOnnx);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // plan.json's structure is checked when it loads; a value of the wrong
  // type that a later reader meets (a hand-edited plan) ends here, with the
  // file named, instead of in std::terminate.
  try {
    return trainerMain(argc, argv);
  } catch (const nlohmann::json::exception &e) {
    fail(artifactDir() + "/plan.json is damaged (" + e.what() +
         "); recompile the model with gpuc compile");
  }
}

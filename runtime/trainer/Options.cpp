//===- Options.cpp - the trainer's command line ---------------------------===//
#include "Options.h"

#include "gpuc/runtime/Numbers.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace gpuc::trainer {

static std::string rankPrefix;

void setRankForErrors(int rank, int ranks) {
  rankPrefix =
      "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ": ";
}

[[noreturn]] void fail(const std::string &message) {
  fprintf(stderr, "train: %s%s\n", rankPrefix.c_str(), message.c_str());
  exit(1);
}

const char *const kUsage =
    "usage: train --data DIR [--epochs E] [--batch-size N] [--seed S]\n"
    "             [--lr LR] [--eval-every STEPS] [--log-every STEPS]\n"
    "             [--checkpoint-dir DIR] [--resume [FILE]]\n"
    "             [--export-onnx trained.onnx] [--metrics metrics.jsonl]\n"
    "             [--tensorboard DIR]\n"
    "             [--limit-train N] [--bench-steps N] [--quiet]\n"
    "             [--profile trace.json] [--bench-loader]\n"
    "             [--device auto|cpu|cuda] [--no-graph] [--artifact DIR]\n"
    "             [--init weights.safetensors] [--collective-timeout S]\n"
    "             [--workers N] [--cache-decoded] [--augment crop,flip]\n"
    "             [--mean M[,M,M] --std S[,S,S]]\n"
    "       train --run-step IN_DIR --output-dir OUT_DIR [--seed S] [--step "
    "K]\n"
    "  --data: MNIST-family IDX files (e.g. "
    "/usr/share/datasets/fashion-mnist)\n"
    "          or train_x.npy, train_y.npy, test_x.npy, test_y.npy;\n"
    "          for a language model (token input and labels [batch, T]) a\n"
    "          token file: a .npy of integer ids, or any file read as bytes;\n"
    "          images: DIR/train/<class>/*.jpg|png and DIR/val (or test),\n"
    "          or CIFAR-10/100's binary batches, resized and center-cropped\n"
    "          to the model's input\n"
    "  --workers N: threads decoding image files (default: one per core)\n"
    "  --cache-decoded: decode an image folder once, before training, and\n"
    "          keep it in memory (when it fits; else images are decoded as\n"
    "          batches need them, on the --workers threads)\n"
    "  --augment crop,flip|crop|flip|none: each epoch, a random resized crop\n"
    "          and a horizontal flip of each training image (torchvision's\n"
    "          recipe), drawn from (seed, epoch, sample)\n"
    "  --tensorboard DIR: event files TensorBoard reads (tensorboard\n"
    "          --logdir DIR): the loss, throughput, data wait and accuracy\n"
    "  --mean, --std: normalize float inputs with these (per channel: "
    "ImageNet's\n"
    "          0.485,0.456,0.406 and 0.229,0.224,0.225 on 0..1 pixels)\n"
    "          instead of the training split's own statistics\n"
    "  --bench-loader: decode --data and run the loader (with --augment, on\n"
    "          --workers) for --epochs epochs without training; prints\n"
    "          images/s as JSON\n"
    "  --held-out F: a language model's test split, the last fraction F of\n"
    "          the token file (0.1)\n"
    "  --run-step: one step of the step program on IN_DIR/<input>.npy,\n"
    "          writing outputs and every parameter/state to OUT_DIR as .npy\n"
    "  --device: cuda runs the step on the GPU (one CUDA Graph launch per\n"
    "          step), cpu on this machine's cores; auto (default) takes the\n"
    "          GPU when the artifact has GPU kernels and a GPU is present\n"
    "  --no-graph: on the GPU, launch kernel by kernel instead of replaying\n"
    "          a CUDA Graph (to compare)\n"
    "  --init FILE: initial weights from a safetensors file (a PyTorch\n"
    "          state_dict, an HF checkpoint) by name, instead of the\n"
    "          model's own; required by gpuc compile --no-weights artifacts\n"
    "  --collective-timeout S: data parallel (mpirun -np N train ...): a\n"
    "          rank that waits S seconds (300) for the others in a\n"
    "          collective ends the run with an error\n"
    "  --artifact DIR: the compiled model in DIR instead of the trainer's\n"
    "          own folder (GPU-only trainers, which hold no model code)\n"
    "  OMP_NUM_THREADS: the CPU device's threads (default: all). Results\n"
    "          are bit-identical for the same device, processor and thread\n"
    "          count; a checkpoint records them, and --resume under others\n"
    "          continues with a warning\n";

Options parseOptions(int argc, char **argv) {
  Options o;
  auto value = [&](int &i) -> std::string {
    if (i + 1 >= argc)
      fail(std::string(argv[i]) + " needs a value\n" + kUsage);
    return argv[++i];
  };
  auto integer = [&](int &i, int64_t min) {
    std::string flag = argv[i], v = value(i);
    int64_t n = 0;
    if (!parseInteger(v, min, INT64_MAX, n))
      fail(flag + " expects an integer from " + std::to_string(min) +
           " to 2^63-1, got '" + v + "'");
    return n;
  };
  auto finite = [&](int &i, double &out) {
    std::string flag = argv[i], v = value(i);
    if (!parseFinite(v, out))
      fail(flag + " expects a finite number, got '" + v + "'");
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data")
      o.data = value(i);
    else if (a == "--epochs")
      o.epochs = integer(i, 1);
    else if (a == "--batch-size")
      o.batchSize = integer(i, 1);
    else if (a == "--seed") {
      std::string v = value(i);
      if (!parseUnsigned(v, o.seed))
        fail("--seed expects an integer from 0 to 2^64-1, got '" + v + "'");
    } else if (a == "--step")
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
    else if (a == "--tensorboard")
      o.tensorboard = value(i);
    else if (a == "--profile")
      o.profile = value(i);
    else if (a == "--run-step")
      o.runStepInputs = value(i);
    else if (a == "--output-dir")
      o.outputDir = value(i);
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--bench-loader")
      o.benchLoader = true;
    else if (a == "--cache-decoded")
      o.cacheDecoded = true;
    else if (a == "--artifact")
      o.artifact = value(i);
    else if (a == "--init")
      o.init = value(i);
    else if (a == "--no-graph")
      o.graphs = false;
    else if (a == "--device") {
      o.device = value(i);
      if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
        fail("--device expects auto, cpu or cuda, got '" + o.device + "'");
    } else if (a == "--augment") {
      std::string v = value(i), rest = v;
      o.augmentCrop = o.augmentFlip = false;
      while (!rest.empty() && v != "none") {
        size_t comma = rest.find(',');
        std::string part = rest.substr(0, comma);
        if (part == "crop")
          o.augmentCrop = true;
        else if (part == "flip")
          o.augmentFlip = true;
        else
          fail("--augment expects crop, flip, crop,flip or none, got '" + v +
               "'");
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      }
    } else if (a == "--mean" || a == "--std") {
      // A comma-separated list: one value per channel, or one for all.
      std::string v = value(i), rest = v;
      std::vector<double> &out = a == "--mean" ? o.mean : o.stddev;
      out.clear();
      for (;;) {
        size_t comma = rest.find(',');
        double x = 0;
        if (!parseFinite(rest.substr(0, comma), x) ||
            (a == "--std" && !(x > 0)))
          fail(a + " expects " +
               (a == "--std" ? "positive numbers" : "finite numbers") +
               " separated by commas (one per channel, or one for all), "
               "got '" +
               v + "'");
        out.push_back(x);
        if (comma == std::string::npos)
          break;
        rest = rest.substr(comma + 1);
      }
    } else if (a == "--workers") {
      o.workers = integer(i, 1);
    } else if (a == "--collective-timeout") {
      std::string v = finite(i, o.collectiveTimeout);
      if (!(o.collectiveTimeout > 0))
        fail("--collective-timeout expects seconds above 0, got '" + v + "'");
    } else if (a == "--held-out") {
      std::string v = finite(i, o.heldOut);
      if (!(o.heldOut >= 0 && o.heldOut < 1))
        fail("--held-out expects a fraction in [0, 1), got '" + v + "'");
    } else if (a == "--lr") {
      std::string v = finite(i, o.lr);
      if (!(o.lr > 0))
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

} // namespace gpuc::trainer

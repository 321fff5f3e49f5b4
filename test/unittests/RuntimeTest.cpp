//===- RuntimeTest.cpp - checkpoints, files, datasets and plans -----------===//
#include "gpuc/runtime/AtomicFile.h"
#include "gpuc/runtime/Dataset.h"
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/GpuMonitor.h"
#include "gpuc/runtime/Npy.h"
#include "gpuc/runtime/Safetensors.h"
#include "gpuc/runtime/StepProfile.h"
#include "gpuc/runtime/TokenScores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace gpuc;

namespace {
/// The scratch directories made so far, removed when the tests exit.
struct ScratchDirs {
  std::vector<std::filesystem::path> made;
  ~ScratchDirs() {
    for (const std::filesystem::path &dir : made) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }
};

/// A fresh directory under the temporary directory for one test.
std::string scratchDir(const std::string &name) {
  static ScratchDirs dirs;
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("gpuc-runtime-test-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::create_directories(dir);
  dirs.made.push_back(dir);
  return dir.string();
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> namesIn(const std::string &dir) {
  std::set<std::string> names;
  if (DIR *entries = opendir(dir.c_str())) {
    while (dirent *entry = readdir(entries))
      if (entry->d_name[0] != '.')
        names.insert(entry->d_name);
    closedir(entries);
  }
  return names;
}

TEST(AtomicFile, ReplacesTheFileWhole) {
  std::string dir = scratchDir("replace");
  std::string path = dir + "/choices.json";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "old\n", error)) << error;
  ASSERT_TRUE(writeFileAtomically(path, "new, and longer\n", error)) << error;
  EXPECT_EQ(readText(path), "new, and longer\n");
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"choices.json"});
}

TEST(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  std::string dir = scratchDir("fail");
  std::string path = dir + "/model.onnx";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "old\n", error)) << error;
  EXPECT_FALSE(writeFileAtomically(
      path,
      [](FILE *f) {
        fputs("half of it", f);
        return false;
      },
      error));
  EXPECT_NE(error.find("cannot write " + path), std::string::npos) << error;
  EXPECT_EQ(readText(path), "old\n");
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"model.onnx"});
  // A directory that does not exist: the error names the file.
  EXPECT_FALSE(writeFileAtomically(dir + "/missing/x.json", "x", error));
  EXPECT_NE(error.find("missing/x.json"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos)
      << error;
}

TEST(AtomicFile, ProcessesWritingOnePathLeaveOneWholeFile) {
  // Two processes (data-parallel ranks on one machine) write the same file
  // many times at once, each its own large content: a reader sees one of
  // them whole, never a mix, and no temporary is left.
  std::string dir = scratchDir("race");
  std::string path = dir + "/library-algorithms.json";
  std::string contents[2] = {std::string(1 << 20, 'a') + "\n",
                             std::string(1 << 19, 'b') + "\n"};
  pid_t writers[2];
  for (int w = 0; w < 2; ++w) {
    writers[w] = fork();
    ASSERT_GE(writers[w], 0);
    if (writers[w] == 0) {
      std::string error;
      for (int k = 0; k < 20; ++k)
        if (!writeFileAtomically(path, contents[w], error))
          _exit(1);
      _exit(0);
    }
  }
  for (int k = 0; k < 200; ++k) {
    std::string text = readText(path);
    EXPECT_TRUE(text.empty() || text == contents[0] || text == contents[1])
        << "a mix of " << text.size() << " bytes";
  }
  for (pid_t writer : writers) {
    int status = 0;
    waitpid(writer, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::string last = readText(path);
  EXPECT_TRUE(last == contents[0] || last == contents[1]);
  EXPECT_EQ(namesIn(dir), std::set<std::string>{"library-algorithms.json"});
}

TEST(AtomicFile, TemporariesOfAPathAreRemovedAndNothingElse) {
  std::string dir = scratchDir("temporaries");
  std::string path = dir + "/checkpoint.safetensors";
  for (const char *name :
       {"checkpoint.safetensors", "checkpoint.safetensors.tmp",
        "checkpoint.safetensors.tmp.4242", "checkpoint.safetensors.tmp.x1",
        "checkpoint.safetensors.tmpfile", "other.safetensors.tmp.4242"})
    std::ofstream(dir + "/" + name) << "x";
  removeTemporariesOf(path);
  EXPECT_EQ(namesIn(dir),
            (std::set<std::string>{"checkpoint.safetensors",
                                   "checkpoint.safetensors.tmp.x1",
                                   "checkpoint.safetensors.tmpfile",
                                   "other.safetensors.tmp.4242"}));
}

// A language model's held-out rows: the loss and accuracy of rows scored on
// several threads are those of one thread, bit for bit, and what the
// definition says.
TEST(TokenScores, ThreadsGiveTheSameBitsAsOne) {
  const int64_t rows = 103, classes = 50257;
  std::vector<float> logits(rows * classes);
  std::vector<int64_t> labels(rows);
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float &x : logits)
    x = normal(random);
  for (int64_t i = 0; i < rows; ++i) {
    labels[i] = (i * 7919) % classes;
    // Every third row's label holds its largest logit.
    if (i % 3 == 0)
      logits[i * classes + labels[i]] = 20.0f;
  }
  gpuc::TokenScores one;
  gpuc::scoreTokenRows(logits.data(), labels.data(), rows, classes, 1, one);
  double expected = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float *row = &logits[i * classes];
    float top = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp((double)row[c] - top);
    expected += std::log(sum) + top - row[labels[i]];
    correct += row[labels[i]] == top;
  }
  EXPECT_EQ(one.correct, correct);
  EXPECT_EQ(correct, (rows + 2) / 3);
  EXPECT_EQ(one.lossSum, expected);
  // Scores add onto a running total (the batches before) in row order.
  gpuc::TokenScores sequential{0.5, 1};
  gpuc::scoreTokenRows(logits.data(), labels.data(), rows, classes, 1,
                       sequential);
  EXPECT_EQ(sequential.correct, correct + 1);
  for (unsigned threads : {2u, 3u, 8u}) {
    gpuc::TokenScores many{0.5, 1};
    gpuc::scoreTokenRows(logits.data(), labels.data(), rows, classes, threads,
                         many);
    EXPECT_EQ(many.correct, sequential.correct) << threads << " threads";
    EXPECT_EQ(many.lossSum, sequential.lossSum) << threads << " threads";
  }
}

TEST(Safetensors, RoundTripKeepsTensorsAndMetadata) {
  std::string path = scratchDir("st") + "/c.safetensors";
  std::vector<NamedTensor> tensors = {
      {"w", "F32", {2, 2}, std::vector<char>(16, 3)},
      {"optimizer.step", "I64", {}, std::vector<char>(8, 1)}};
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, tensors, {{"step", "42"}}, error))
      << error;
  std::vector<NamedTensor> read;
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(readSafetensors(path, read, meta, error)) << error;
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(meta["step"], "42");
  for (const NamedTensor &t : read) {
    const NamedTensor &want = t.name == "w" ? tensors[0] : tensors[1];
    EXPECT_EQ(t.dtype, want.dtype);
    EXPECT_EQ(t.shape, want.shape);
    EXPECT_EQ(t.data, want.data);
  }
}

TEST(Safetensors, TruncatedFileIsAnErrorNamingIt) {
  std::string path = scratchDir("trunc") + "/c.safetensors";
  std::string error;
  ASSERT_TRUE(writeSafetensors(
      path, {{"w", "F32", {64}, std::vector<char>(256, 1)}}, {}, error));
  ASSERT_EQ(truncate(path.c_str(), 100), 0);
  std::vector<NamedTensor> read;
  std::map<std::string, std::string> meta;
  EXPECT_FALSE(readSafetensors(path, read, meta, error));
  EXPECT_NE(error.find(path), std::string::npos) << error;
}

TEST(Dataset, NpyImagesAreScaledAndCounted) {
  std::string dir = scratchDir("npy");
  std::string error;
  std::vector<double> pixels(3 * 4, 255.0), labels = {0, 1, 2};
  ASSERT_TRUE(
      writeNpy(dir + "/train_x.npy", makeNpy("|u1", {3, 2, 2}, pixels), error));
  ASSERT_TRUE(
      writeNpy(dir + "/train_y.npy", makeNpy("<i8", {3}, labels), error));
  ASSERT_TRUE(
      writeNpy(dir + "/test_x.npy", makeNpy("|u1", {3, 2, 2}, pixels), error));
  ASSERT_TRUE(
      writeNpy(dir + "/test_y.npy", makeNpy("<i8", {3}, labels), error));
  Dataset data;
  ASSERT_TRUE(loadDataset(dir, data, error)) << error;
  EXPECT_EQ(data.format, "npy");
  EXPECT_EQ(data.train.count, 3);
  EXPECT_EQ(data.train.sampleSize, 4);
  EXPECT_FLOAT_EQ(data.train.samples[0], 1.0f);
  EXPECT_EQ(data.test.labels[2], 2);
}

TEST(Dataset, FloatLabelsAndMismatchedCountsAreRefused) {
  std::string dir = scratchDir("badnpy");
  std::string error;
  ASSERT_TRUE(writeNpy(dir + "/train_x.npy",
                       makeNpy("<f4", {3, 4}, std::vector<double>(12)), error));
  ASSERT_TRUE(
      writeNpy(dir + "/train_y.npy", makeNpy("<f4", {3}, {0, 1, 2}), error));
  Dataset data;
  EXPECT_FALSE(loadDataset(dir, data, error));
  EXPECT_NE(error.find("labels must be integers"), std::string::npos) << error;
  ASSERT_TRUE(
      writeNpy(dir + "/train_y.npy", makeNpy("<i8", {2}, {0, 1}), error));
  EXPECT_FALSE(loadDataset(dir, data, error));
  EXPECT_NE(error.find("disagree"), std::string::npos) << error;
}

TEST(Dataset, NormalizationUsesTheTrainingSplit) {
  Dataset data;
  data.train.samples = {0.0f, 1.0f, 0.0f, 1.0f};
  data.test.samples = {0.5f};
  double mean, stddev;
  normalize(data, mean, stddev);
  EXPECT_DOUBLE_EQ(mean, 0.5);
  EXPECT_DOUBLE_EQ(stddev, 0.5);
  EXPECT_FLOAT_EQ(data.train.samples[1], 1.0f);
  EXPECT_FLOAT_EQ(data.test.samples[0], 0.0f);
}

TEST(Plan, RefusesWhatIsNotAPlan) {
  std::string dir = scratchDir("plan");
  Plan plan;
  std::string error;
  EXPECT_FALSE(plan.load(dir + "/missing.json", error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  writeText(dir + "/bad.json", "{\"buffers\": ");
  EXPECT_FALSE(plan.load(dir + "/bad.json", error));
  EXPECT_NE(error.find("not a gpuc plan"), std::string::npos) << error;
  writeText(dir + "/old.json",
            R"({"version": 0, "buffers": [], "functions": {}})");
  EXPECT_FALSE(plan.load(dir + "/old.json", error));
  EXPECT_NE(error.find("recompile"), std::string::npos) << error;
  writeText(dir + "/outside.json",
            R"({"version": 1, "arena_bytes": 64, "functions": {},
                "buffers": [{"id": 0, "name": "t0", "kind": "transient",
                             "dtype": "F32", "shape": [32], "bytes": 128,
                             "offset": 0}]})");
  EXPECT_FALSE(plan.load(dir + "/outside.json", error));
  EXPECT_NE(error.find("outside the arena"), std::string::npos) << error;
}
} // namespace

// Without NVML (no NVIDIA driver: CI and this machine), or with a library
// that is not NVML, the monitor is absent and says which; the trainer then
// logs without GPU figures. (Sampling a GPU runs in the GPU bundle.)
TEST(GpuMonitor, MissingOrForeignLibraryIsNamed) {
  std::string why;
  EXPECT_EQ(
      gpuc::GpuMonitor::open("0000:00:00.0", why, "libnvidia-ml-absent.so.1"),
      nullptr);
  EXPECT_NE(why.find("libnvidia-ml-absent.so.1 cannot be loaded"),
            std::string::npos)
      << why;
  EXPECT_EQ(gpuc::GpuMonitor::open("0000:00:00.0", why, "libz.so.1"), nullptr);
  EXPECT_NE(why.find("libz.so.1 has no nvmlInit_v2"), std::string::npos) << why;
}

// A row kernel split into launches (a 50k-class cross-entropy's passes) is
// one kernel in the profile's table: its launches' times, bytes and FLOPs
// summed, next to the steps around it unchanged.
TEST(StepProfile, SplitKernelLaunchesAreOneKernel) {
  auto step = [](const char *kernel, int64_t launch, int64_t launches) {
    nlohmann::json json = {{"op", "kernel"},
                           {"kernel", kernel},
                           {"bytes_read", 100},
                           {"bytes_written", 20},
                           {"flops", 7}};
    if (launches > 1)
      json["launch"] = {launch, launches};
    return json;
  };
  std::vector<StepTime> steps;
  const char *names[] = {"k1", "k2_p0", "k2_p1", "k2_p2", "k3"};
  int64_t launch[] = {0, 0, 1, 2, 0}, launches[] = {1, 3, 3, 3, 1};
  for (size_t i = 0; i < 5; ++i) {
    steps.push_back(StepTime::of("train_step", i, names[i], true,
                                 step(names[i], launch[i], launches[i])));
    steps.back().add(1.0, 0.0); // left out: a first run
    steps.back().add(0.001 * (i + 1), 0.0);
  }
  std::vector<StepTime> merged = mergeKernelLaunches(steps);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].label, "k1");
  EXPECT_EQ(merged[1].label, "k2 (3)");
  EXPECT_EQ(merged[1].index, 1u);
  EXPECT_DOUBLE_EQ(merged[1].perRun(), 0.002 + 0.003 + 0.004);
  EXPECT_DOUBLE_EQ(merged[1].bytes, 360);
  EXPECT_DOUBLE_EQ(merged[1].flops, 21);
  EXPECT_EQ(merged[2].label, "k3");
  EXPECT_DOUBLE_EQ(merged[2].bytes, 120);
}

//===- CudaDevice.cpp - the step program on an NVIDIA GPU -----------------===//
//
// Built as the plugin libgpuc_cuda.so, which the trainer opens at run time
// (CudaLoader.cpp), so the trainer itself needs no CUDA library.
//
// - Kernels come from the artifact's cubin for this GPU (same major
//   architecture, highest minor not above the GPU's), else its PTX (JIT);
//   GEMMs are cuBLASLt with the algorithm chosen once per shape at load
//   time; convolutions and their two gradients are cuDNN, likewise chosen
//   once (deterministic algorithms, FP32 FMA math: the CPU device is the
//   reference and TF32 would be 1e-3 away from it).
// - Memory is one allocation: the arena at the plan's offsets, the
//   persistent buffers, the library workspace and two staging slots.
// - Each function is captured once per staging slot into a CUDA Graph and
//   replayed with one launch per call. Per-step values (the batch, labels,
//   learning rate, RNG key) are "staged": an upload writes pinned host
//   memory, a second stream copies it into the device slot of the next
//   run while the current run computes, and the graph's first nodes copy
//   the slot into the plan's buffers. So a learning-rate schedule never
//   re-captures, and the host never waits for the step it just submitted:
//   it waits only before reusing a staging slot, two runs later.
// - Small reads (the loss) go to a ring of pinned slots with an event each,
//   read when the trainer logs.
//
//===----------------------------------------------------------------------===//
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/PlanSteps.h"
#include "gpuc/runtime/StepProfile.h"

#include <cublasLt.h>
#include <cuda.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace gpuc {
namespace {

std::string describeResult(CUresult result) {
  const char *name = nullptr, *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA error") + ": " +
         (text ? text : "unknown");
}

constexpr int64_t kAlignment = 256;
constexpr size_t kGemmWorkspace = 32 << 20;
constexpr size_t kConvWorkspaceLimit = 512 << 20;
constexpr size_t kReadSlotBytes = 16;
constexpr size_t kReadSlots = 1024;
constexpr int kGemmCandidates = 6;

int64_t alignUp(int64_t bytes) {
  return (std::max<int64_t>(bytes, 1) + kAlignment - 1) / kAlignment *
         kAlignment;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// One plan step, resolved at load time.
struct Step {
  StepKind kind = StepKind::Kernel;
  std::string label;
  // Kernel.
  CUfunction function = nullptr;
  unsigned grid = 1;
  std::vector<int> argIds;
  std::vector<CUdeviceptr> argValues;
  std::vector<void *> argPointers;
  // GEMM: cuBLASLt descriptors and the algorithm chosen at load. `calls`
  // > 1 when a broadcast operand (batch stride 0) is issued per batch.
  cublasLtMatmulDesc_t gemmDesc = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr,
                         layoutC = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// The heuristic's candidate algorithms, the one measured fastest, and
  /// the shape that names the choice.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  size_t chosen = 0;
  std::string shape;
  int64_t calls = 1, callStrideA = 0, callStrideB = 0, callStrideC = 0;
  bool accumulate = false; // C += op(A) op(B)
  // Convolutions.
  cudnnTensorDescriptor_t xDesc = nullptr, yDesc = nullptr;
  cudnnFilterDescriptor_t wDesc = nullptr;
  cudnnConvolutionDescriptor_t convDesc = nullptr;
  int convAlgo = 0;
  // Operands (GEMM: a, b, c; conv: x, w, y; copy: src, dst): buffer ids,
  // and their addresses once memory is allocated.
  int id0 = -1, id1 = -1, id2 = -1;
  CUdeviceptr p0 = 0, p1 = 0, p2 = 0;
  size_t bytes = 0;
  /// train --profile: time between the events around this step.
  StepTime time;
};

class CudaDevice : public Device {
public:
  CudaDevice(const Plan &plan, const CudaOptions &options)
      : plan(plan), options(options) {}
  ~CudaDevice() override;

  bool init(const std::string &dir, std::string &error);

  std::string describe() const override { return description; }
  /// Datasheet dense peaks (no sparsity): tensor cores for BF16 and F16,
  /// FMA for F32 (TF32 is off).
  double densePeakFlops(const std::string &dtype) override {
    bool half = dtype == "BF16" || dtype == "F16";
    auto has = [&](const char *part) {
      return gpu.find(part) != std::string::npos;
    };
    if (has("H100") && has("PCIe"))
      return half ? 756e12 : 51.2e12;
    if (has("H100") || has("H200") || has("GH200"))
      return half ? 989.4e12 : 66.9e12;
    if (has("A100"))
      return half ? 312e12 : 19.5e12;
    return 0;
  }
  std::string pciBusId() const override {
    char id[32] = {0};
    if (cuDeviceGetPCIBusId(id, sizeof(id), device) != CUDA_SUCCESS)
      return "";
    return id;
  }
  Numerics numerics() const override { return {"cuda", gpu, 0}; }
  void upload(int id, const void *src, size_t bytes) override;
  void download(int id, void *dst, size_t bytes) override;
  bool run(const std::string &function, std::string &error) override;
  uint64_t readLater(int id, size_t bytes) override;
  bool ready(uint64_t ticket) override;
  void collect(uint64_t ticket, void *dst, size_t bytes) override;
  size_t readCapacity() const override { return kReadSlots; }
  void synchronize() override;
  Counters counters() const override { return launchCounters; }
  int64_t allocatedBytes() const override { return allocated; }
  std::vector<StepTime> stepTimes() const override {
    return profile ? collectStepTimes(programs) : std::vector<StepTime>();
  }

private:
  bool check(CUresult result, const char *what, std::string &error) {
    if (result == CUDA_SUCCESS)
      return true;
    error = std::string(what) + " failed: " + describeResult(result);
    return false;
  }
  /// Errors after load (a GPU fault, a lost device) cannot be handed back
  /// through upload/download: the trainer stops with the reason.
  void orDie(CUresult result, const char *what) {
    if (result == CUDA_SUCCESS)
      return;
    fprintf(stderr, "train: CUDA device: %s failed: %s\n", what,
            describeResult(result).c_str());
    exit(1);
  }
  bool loadModule(const std::string &dir, std::string &error);
  bool allocate(std::string &error);
  bool resolveSteps(std::string &error);
  void bindPointers();
  bool prepareGemm(Step &step, const nlohmann::json &s, std::string &error);
  /// Times the GEMM candidates once per shape (or takes the choice kept
  /// in the artifact); train --profile reports all of them.
  void chooseGemmAlgorithms(const std::string &dir);
  bool timeGemm(Step &step, size_t candidate, double &us);
  void reportGemmCandidates();
  CUevent timingStart = nullptr, timingStop = nullptr;
  bool prepareConv(Step &step, const nlohmann::json &s, std::string &error);
  /// Issues `function`'s steps on `stream`: into a graph being captured, or
  /// launched one by one.
  bool issue(const std::string &function, int slot, CUstream stream,
             std::string &error);
  bool issueStep(const Step &step, CUstream stream, std::string &error);
  bool staged(int id) const { return stagingOffset[id] >= 0; }
  void waitSlotCopied(int slot) {
    if (copyRecorded[slot])
      orDie(cuEventSynchronize(copyDone[slot]), "cuEventSynchronize");
  }

  const Plan &plan;
  CudaOptions options;
  std::string description;
  /// The GPU's name and compute capability (numerics()).
  std::string gpu;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUstream compute = nullptr, copies = nullptr;
  cublasLtHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;

  CUdeviceptr memory = 0;
  int64_t allocated = 0;
  std::vector<CUdeviceptr> pointers;
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = kGemmWorkspace;

  // Staging: per buffer, its offset in a slot (-1: not staged).
  std::vector<int64_t> stagingOffset;
  std::vector<int> stagedIds;
  int64_t stagingBytes = 0;
  CUdeviceptr stagingDevice[2] = {0, 0};
  char *stagingHost[2] = {nullptr, nullptr};
  std::vector<uint64_t> version, hostVersion[2], deviceVersion[2];
  CUevent copyDone[2] = {nullptr, nullptr}, consumed[2] = {nullptr, nullptr};
  bool copyRecorded[2] = {false, false};
  int nextSlot = 0;

  std::map<std::string, std::vector<Step>> programs;
  std::map<std::string, CUgraphExec> graphs[2];

  char *readHost = nullptr;
  CUevent readEvents[kReadSlots] = {};
  uint64_t nextTicket = 0;

  Counters launchCounters;

  /// train --profile: steps are launched one by one (no graphs) between
  /// events (stepTimes()); cuBLASLt's candidates are printed at exit.
  bool profile = options.profile;
  std::vector<CUevent> stepEvents;
};

bool CudaDevice::loadModule(const std::string &dir, std::string &error) {
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       device);
  int capability = major * 10 + minor;
  // The artifact's architectures, from the files present (a bundle may
  // carry only the cubin it needs).
  auto present = [&](int arch, const char *suffix) {
    return (bool)std::ifstream(dir + "/kernels.sm_" + std::to_string(arch) +
                               suffix);
  };
  // A cubin runs on GPUs of its major architecture with an equal or higher
  // minor; PTX is compiled by the driver for any newer GPU.
  int cubin = -1, ptx = -1;
  std::string available;
  for (int arch = 50; arch <= 150; ++arch) {
    bool hasCubin = present(arch, ".cubin"), hasPtx = present(arch, ".ptx");
    if (hasCubin || hasPtx)
      available += (available.empty() ? "sm_" : ", sm_") +
                   std::to_string(arch) + (hasCubin ? "" : " (PTX only)");
    if (hasCubin && arch / 10 == major && arch <= capability)
      cubin = std::max(cubin, arch);
    if (hasPtx && arch <= capability)
      ptx = std::max(ptx, arch);
  }
  if (available.empty()) {
    error = dir + " has no kernels.sm_XX.cubin/.ptx: compile the model with "
                  "gpuc compile --target cuda (or all)";
    return false;
  }
  std::string file;
  std::string image;
  if (cubin >= 0) {
    file = "kernels.sm_" + std::to_string(cubin) + ".cubin";
    image = readFile(dir + "/" + file);
  }
  if (image.empty() && ptx >= 0) {
    file = "kernels.sm_" + std::to_string(ptx) + ".ptx (JIT)";
    image = readFile(dir + "/kernels.sm_" + std::to_string(ptx) + ".ptx");
  }
  if (image.empty()) {
    error = "no kernels for this GPU (compute capability " +
            std::to_string(major) + "." + std::to_string(minor) + "): " + dir +
            " has " + available +
            "; recompile for an older architecture or update gpuc";
    return false;
  }
  image.push_back('\0'); // PTX must be a C string.
  char log[8192] = {0};
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult result = cuModuleLoadDataEx(&module, image.data(), 2, keys, values);
  if (result != CUDA_SUCCESS) {
    error = "cannot load " + dir + "/" + file + ": " + describeResult(result) +
            (log[0] ? std::string("\n") + log : "");
    return false;
  }
  char name[256] = {0};
  cuDeviceGetName(name, sizeof(name), device);
  int sms = 0;
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  gpu = std::string(name) + " (sm_" + std::to_string(capability) + ")";
  description = std::string("cuda: ") + name + " (sm_" +
                std::to_string(capability) + ", " + std::to_string(sms) +
                " SMs), kernels from " + file;
  return true;
}

bool CudaDevice::allocate(std::string &error) {
  // Staging slots for the values that change from run to run.
  stagingOffset.assign(plan.buffers.size(), -1);
  for (const PlanBuffer &b : plan.buffers)
    if (b.kind == "input" || b.kind == "hyper" || b.kind == "rng") {
      stagingOffset[b.id] = stagingBytes;
      stagingBytes += alignUp(b.bytes);
      stagedIds.push_back(b.id);
    }
  version.assign(plan.buffers.size(), 0);
  for (int slot = 0; slot < 2; ++slot) {
    hostVersion[slot].assign(plan.buffers.size(), 0);
    deviceVersion[slot].assign(plan.buffers.size(), 0);
  }

  int64_t persistentBytes = 0;
  for (const PlanBuffer &b : plan.buffers)
    if (b.persistent())
      persistentBytes += alignUp(b.bytes);
  int64_t arena = alignUp(plan.arenaBytes);
  int64_t total = arena + persistentBytes + (int64_t)workspaceBytes +
                  2 * std::max<int64_t>(stagingBytes, kAlignment);
  size_t freeBytes = 0, totalBytes = 0;
  cuMemGetInfo(&freeBytes, &totalBytes);
  CUresult result = cuMemAlloc(&memory, total);
  allocated = total;
  if (result != CUDA_SUCCESS) {
    auto mib = [](double b) { return std::to_string((int64_t)(b / 1048576)); };
    error = "out of GPU memory: the plan needs " + mib(total) + " MiB (arena " +
            mib(arena) + ", parameters/state/inputs " + mib(persistentBytes) +
            ", library workspace " + mib(workspaceBytes) +
            ") and the GPU has " + mib(freeBytes) + " MiB free of " +
            mib(totalBytes) + "; compile with a smaller --batch (" +
            describeResult(result) + ")";
    return false;
  }
  CUdeviceptr at = memory + arena;
  for (const PlanBuffer &b : plan.buffers) {
    if (b.persistent()) {
      pointers.push_back(at);
      at += alignUp(b.bytes);
    } else {
      pointers.push_back(memory + b.offset);
    }
  }
  if (!check(cuMemsetD8(memory + arena, 0, persistentBytes), "cuMemsetD8",
             error))
    return false;
  workspace = at;
  at += workspaceBytes;
  for (int slot = 0; slot < 2; ++slot) {
    stagingDevice[slot] = at;
    at += std::max<int64_t>(stagingBytes, kAlignment);
    void *host = nullptr;
    if (!check(cuMemAllocHost(&host, std::max<int64_t>(stagingBytes, 1)),
               "cuMemAllocHost (staging)", error))
      return false;
    stagingHost[slot] = static_cast<char *>(host);
    if (!check(cuEventCreate(&copyDone[slot], CU_EVENT_DISABLE_TIMING),
               "cuEventCreate", error) ||
        !check(cuEventCreate(&consumed[slot], CU_EVENT_DISABLE_TIMING),
               "cuEventCreate", error))
      return false;
  }
  void *host = nullptr;
  if (!check(cuMemAllocHost(&host, kReadSlots * kReadSlotBytes),
             "cuMemAllocHost (reads)", error))
    return false;
  readHost = static_cast<char *>(host);
  for (CUevent &event : readEvents)
    if (!check(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate",
               error))
      return false;
  description += ", " + std::to_string(total >> 20) + " MiB on the GPU";
  return true;
}

bool CudaDevice::prepareGemm(Step &step, const nlohmann::json &s,
                             std::string &error) {
  GemmStep g = gemmStepOf(s);
  int64_t batch = g.batch, m = g.m, n = g.n, k = g.k;
  int64_t strideA = g.strideA, strideB = g.strideB, strideC = g.strideC;
  bool transA = g.transA, transB = g.transB;
  // f16/bf16 operands and result (mixed precision), accumulated in f32.
  std::string dtype = s.value("dtype", "F32");
  cudaDataType_t dataType = dtype == "F16"    ? CUDA_R_16F
                            : dtype == "BF16" ? CUDA_R_16BF
                                              : CUDA_R_32F;
  if (dataType == CUDA_R_32F && dtype != "F32") {
    error = "plan.json: a gemm step of dtype " + dtype +
            " (the CUDA device computes F32, F16 and BF16 ones); recompile";
    return false;
  }
  int64_t elementBytes = dataType == CUDA_R_32F ? 4 : 2;
  step.id0 = s["a"];
  step.id1 = s["b"];
  step.id2 = s["c"];
  step.accumulate = g.accumulate;
  // A weight shared by every batch entry (stride 0) folds the batch into
  // the rows of one GEMM when A's and C's rows are one matrix.
  if (batch > 1 && strideB == 0 && !transA && g.calls == 1 && g.lda == k &&
      strideA == m * k && g.ldc == n && strideC == m * n) {
    m *= batch;
    batch = 1;
  }
  int64_t layoutBatch = batch;
  // Batches whose entries are not one stride apart (layouts folded into
  // the GEMM) are calls of strided batches.
  step.calls = g.calls;
  step.callStrideA = g.callStrideA * elementBytes;
  step.callStrideB = g.callStrideB * elementBytes;
  step.callStrideC = g.callStrideC * elementBytes;
  if (batch > 1 && (strideA == 0 || strideB == 0)) {
    // Other broadcasts: one GEMM per batch entry (cuBLASLt's strided
    // batches need a nonzero stride).
    if (g.calls > 1) {
      error = "plan.json: a gemm step with both calls and a broadcast "
              "operand; recompile";
      return false;
    }
    step.calls = batch;
    step.callStrideA = strideA * elementBytes;
    step.callStrideB = strideB * elementBytes;
    step.callStrideC = strideC * elementBytes;
    layoutBatch = 1;
  }
  // Row-major C[m,n] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
  // cuBLASLt's first operand is B's memory, its second A's.
  cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto fail = [&](cublasStatus_t status, const char *what) {
    error = std::string("cuBLASLt ") + what + " failed for GEMM " +
            std::to_string(m) + "x" + std::to_string(n) + "x" +
            std::to_string(k) + ": " + cublasLtGetStatusString(status);
    return false;
  };
  cublasStatus_t st;
  if ((st = cublasLtMatmulDescCreate(&step.gemmDesc, CUBLAS_COMPUTE_32F,
                                     CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS)
    return fail(st, "cublasLtMatmulDescCreate");
  cublasLtMatmulDescSetAttribute(step.gemmDesc, CUBLASLT_MATMUL_DESC_TRANSA,
                                 &opFirst, sizeof(opFirst));
  cublasLtMatmulDescSetAttribute(step.gemmDesc, CUBLASLT_MATMUL_DESC_TRANSB,
                                 &opSecond, sizeof(opSecond));
  auto layout = [&](cublasLtMatrixLayout_t &l, uint64_t rows, uint64_t cols,
                    int64_t ld, int64_t stride) {
    if ((st = cublasLtMatrixLayoutCreate(&l, dataType, rows, cols, ld)) !=
        CUBLAS_STATUS_SUCCESS)
      return false;
    if (layoutBatch > 1) {
      int32_t count = (int32_t)layoutBatch;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
    }
    return true;
  };
  // First operand: B's memory, [k,n] row-major (= n x k column-major) or,
  // transposed, [n,k] (= k x n column-major).
  if (!layout(step.layoutA, transB ? k : n, transB ? n : k, g.ldb, strideB))
    return fail(st, "cublasLtMatrixLayoutCreate");
  if (!layout(step.layoutB, transA ? m : k, transA ? k : m, g.lda, strideA))
    return fail(st, "cublasLtMatrixLayoutCreate");
  if (!layout(step.layoutC, n, m, g.ldc, strideC))
    return fail(st, "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  uint64_t limit = workspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &limit, sizeof(limit));
  // The heuristic's candidates, in its order; chooseGemmAlgorithms times
  // them once the memory is there.
  cublasLtMatmulHeuristicResult_t results[kGemmCandidates] = {};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(
      blas, step.gemmDesc, step.layoutA, step.layoutB, step.layoutC,
      step.layoutC, preference, kGemmCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return fail(st == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_SUPPORTED : st,
                "cublasLtMatmulAlgoGetHeuristic");
  step.algo = results[0].algo;
  for (int i = 0; i < found; ++i)
    step.candidates.push_back(results[i].algo);
  step.shape =
      std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
      (transA ? " A^T" : "") + (transB ? " B^T" : "") +
      (layoutBatch > 1 ? " batch " + std::to_string(layoutBatch) : "") +
      (step.calls > 1 ? " x" + std::to_string(step.calls) + " calls" : "");
  return true;
}

bool CudaDevice::timeGemm(Step &step, size_t candidate, double &us) {
  std::string error;
  step.algo = step.candidates[candidate];
  if (!issueStep(step, compute, error)) // warm-up
    return false;
  cuEventRecord(timingStart, compute);
  for (int r = 0; r < 10; ++r)
    issueStep(step, compute, error);
  cuEventRecord(timingStop, compute);
  if (cuEventSynchronize(timingStop) != CUDA_SUCCESS)
    return false;
  float ms = 0;
  cuEventElapsedTime(&ms, timingStart, timingStop);
  us = 1e3 * ms / 10;
  return true;
}

void CudaDevice::chooseGemmAlgorithms(const std::string &dir) {
  // A measured choice can differ from one process to the next, and two
  // algorithms may round differently: the choices are kept beside the plan
  // (gemm-algorithms.json, per GPU), so every later run of the artifact on
  // this GPU takes the same ones and replays stay bit-identical.
  std::string path = dir + "/gemm-algorithms.json";
  nlohmann::json cache = nlohmann::json::object();
  if (std::ifstream in(path); in)
    cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cache.is_object())
    cache = nlohmann::json::object();
  std::string gpu = description.substr(0, description.find(" (sm_"));
  nlohmann::json &choices = cache[gpu];
  if (!choices.is_object())
    choices = nlohmann::json::object();
  bool changed = false;
  for (auto &[name, steps] : programs)
    for (Step &step : steps) {
      if (step.kind != StepKind::Gemm || step.candidates.empty())
        continue;
      step.chosen = 0;
      auto known = choices.find(step.shape);
      if (known != choices.end() && known->is_number_unsigned() &&
          known->get<size_t>() < step.candidates.size()) {
        step.chosen = known->get<size_t>();
      } else if (step.candidates.size() > 1) {
        // The first in the heuristic's order within 10 % of the fastest:
        // a near tie keeps the heuristic's pick.
        std::vector<double> us(step.candidates.size(), 1e30);
        for (size_t c = 0; c < step.candidates.size(); ++c)
          if (!timeGemm(step, c, us[c]))
            us[c] = 1e30;
        double best = *std::min_element(us.begin(), us.end());
        while (step.chosen + 1 < us.size() && us[step.chosen] > 1.1 * best)
          ++step.chosen;
        choices[step.shape] = step.chosen;
        changed = true;
      }
      step.algo = step.candidates[step.chosen];
    }
  if (changed) {
    std::ofstream out(path);
    if (out)
      out << cache.dump(1) << "\n";
  }
}

void CudaDevice::reportGemmCandidates() {
  fprintf(stderr, "gpuc profile (cuda): cuBLASLt GEMMs, us per call of each "
                  "candidate algorithm (heuristic order):\n");
  for (auto &[name, steps] : programs)
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &step = steps[i];
      if (step.kind != StepKind::Gemm || step.candidates.size() < 2)
        continue;
      std::string line;
      for (size_t c = 0; c < step.candidates.size(); ++c) {
        double us = 0;
        if (!timeGemm(step, c, us))
          continue;
        char text[40];
        snprintf(text, sizeof text, " #%zu %.1f%s", c, us,
                 c == step.chosen ? "*" : "");
        line += text;
      }
      step.algo = step.candidates[step.chosen];
      fprintf(stderr, "  %s step %zu (%s):%s\n", name.c_str(), i,
              step.shape.c_str(), line.c_str());
    }
}

bool CudaDevice::prepareConv(Step &step, const nlohmann::json &s,
                             std::string &error) {
  ConvGeometry g = convGeometryOf(s);
  step.id0 = s["x"];
  step.id1 = s["w"];
  step.id2 = s["y"];
  auto fail = [&](cudnnStatus_t status, const char *what) {
    error = std::string("cuDNN ") + what + " failed for " + step.label + " " +
            s["x_shape"].dump() + " * " + s["w_shape"].dump() + ": " +
            cudnnGetErrorString(status);
    return false;
  };
  std::string dtype = s.value("dtype", "F32");
  cudnnDataType_t dataType = dtype == "F16"    ? CUDNN_DATA_HALF
                             : dtype == "BF16" ? CUDNN_DATA_BFLOAT16
                                               : CUDNN_DATA_FLOAT;
  if (dataType == CUDNN_DATA_FLOAT && dtype != "F32") {
    error = "plan.json: a " + step.label + " step of dtype " + dtype +
            " (the CUDA device computes F32, F16 and BF16 ones); recompile";
    return false;
  }
  cudnnStatus_t st;
  if ((st = cudnnCreateTensorDescriptor(&step.xDesc)) ||
      (st = cudnnCreateTensorDescriptor(&step.yDesc)) ||
      (st = cudnnCreateFilterDescriptor(&step.wDesc)) ||
      (st = cudnnCreateConvolutionDescriptor(&step.convDesc)))
    return fail(st, "descriptor creation");
  // f32 accumulation for every data type; tensor cores for f16/bf16 (f32
  // stays on FMA: TF32 would be 1e-3 away from the interpreter).
  if ((st = cudnnSetTensor4dDescriptor(step.xDesc, CUDNN_TENSOR_NCHW, dataType,
                                       g.n, g.c, g.h, g.w)) ||
      (st = cudnnSetTensor4dDescriptor(step.yDesc, CUDNN_TENSOR_NCHW, dataType,
                                       g.n, g.k, g.oh, g.ow)) ||
      (st = cudnnSetFilter4dDescriptor(step.wDesc, dataType, CUDNN_TENSOR_NCHW,
                                       g.k, g.cg, g.kh, g.kw)) ||
      (st = cudnnSetConvolution2dDescriptor(
           step.convDesc, g.py, g.px, g.sy, g.sx, g.dy, g.dx,
           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
      (st = cudnnSetConvolutionGroupCount(step.convDesc, g.groups)) ||
      (st = cudnnSetConvolutionMathType(
           step.convDesc, dataType == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH
                                                       : CUDNN_TENSOR_OP_MATH)))
    return fail(st, "descriptor setup");
  // The first deterministic FMA algorithm cuDNN's heuristics rank that fits
  // the workspace limit: the same choice on every run of this GPU, so runs
  // are reproducible and graph replay matches kernel-by-kernel launches.
  auto choose = [&](auto *perfs, int count, size_t &memory) -> int {
    for (int i = 0; i < count; ++i)
      if (perfs[i].status == CUDNN_STATUS_SUCCESS &&
          perfs[i].determinism == CUDNN_DETERMINISTIC &&
          perfs[i].mathType != CUDNN_TENSOR_OP_MATH &&
          perfs[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
          perfs[i].memory <= kConvWorkspaceLimit) {
        memory = perfs[i].memory;
        return (int)perfs[i].algo;
      }
    return -1;
  };
  size_t memory = 0;
  int count = 0;
  if (step.kind == StepKind::Conv) {
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if ((st = cudnnGetConvolutionForwardAlgorithm_v7(
             dnn, step.xDesc, step.wDesc, step.convDesc, step.yDesc,
             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionForwardAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  } else if (step.kind == StepKind::ConvBackwardInput) {
    cudnnConvolutionBwdDataAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if ((st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
             dnn, step.wDesc, step.yDesc, step.convDesc, step.xDesc,
             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if ((st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
             dnn, step.xDesc, step.yDesc, step.convDesc, step.wDesc,
             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perfs)))
      return fail(st, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    step.convAlgo = choose(perfs, count, memory);
  }
  if (step.convAlgo < 0)
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "algorithm choice (no deterministic FP32 algorithm)");
  workspaceBytes = std::max(workspaceBytes, memory);
  return true;
}

bool CudaDevice::resolveSteps(std::string &error) {
  for (auto &[name, function] : plan.json["functions"].items()) {
    std::vector<Step> &steps = programs[name];
    for (const auto &s : function["steps"]) {
      Step step;
      const std::string &op = s["op"].get_ref<const std::string &>();
      step.label = op == "kernel" ? s["kernel"].get<std::string>() : op;
      if (!stepKindOf(op, step.kind, error))
        return false;
      step.time = StepTime::of(name, steps.size(), step.label,
                               step.kind == StepKind::Kernel, s);
      if (step.kind == StepKind::Kernel) {
        CUresult result =
            cuModuleGetFunction(&step.function, module, step.label.c_str());
        if (result != CUDA_SUCCESS) {
          error = "the GPU binary has no kernel " + step.label +
                  " that plan.json names (" + describeResult(result) +
                  "); recompile the model";
          return false;
        }
        int64_t grid = s["grid"];
        if (grid < 1 || grid > 0x7fffffff) {
          error = "kernel " + step.label + " has a grid of " +
                  std::to_string(grid) + " blocks, beyond what CUDA launches";
          return false;
        }
        step.grid = (unsigned)grid;
        step.argIds = s["args"].get<std::vector<int>>();
      } else if (step.kind == StepKind::Gemm) {
        if (!prepareGemm(step, s, error))
          return false;
      } else if (step.kind == StepKind::Copy) {
        step.id0 = s["src"];
        step.id1 = s["dst"];
        step.bytes = s["bytes"].get<size_t>();
      } else if (step.kind == StepKind::AllReduce ||
                 step.kind == StepKind::CollectiveWait) {
        // One process: the sum over its one rank is the value itself (the
        // device joins no ranks; see setCollective).
      } else if (isCollective(step.kind)) {
        error = "the GPU device does not run optimizer-state sharding "
                "(gpuc compile --shard-optimizer) yet";
        return false;
      } else if (!prepareConv(step, s, error)) {
        return false;
      }
      steps.push_back(std::move(step));
    }
  }
  return true;
}

void CudaDevice::bindPointers() {
  auto at = [&](int id) { return id >= 0 ? pointers[id] : CUdeviceptr(0); };
  for (auto &[name, steps] : programs)
    for (Step &step : steps) {
      step.p0 = at(step.id0);
      step.p1 = at(step.id1);
      step.p2 = at(step.id2);
      for (int id : step.argIds)
        step.argValues.push_back(pointers[id]);
      // cuLaunchKernel takes a pointer to each argument's value.
      for (CUdeviceptr &value : step.argValues)
        step.argPointers.push_back(&value);
    }
}

bool CudaDevice::init(const std::string &dir, std::string &error) {
  CUresult result = cuInit(0);
  if (result != CUDA_SUCCESS) {
    error = "no usable NVIDIA GPU (cuInit: " + describeResult(result) + ")";
    return false;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    error = "no NVIDIA GPU found (cuDeviceGetCount is 0)";
    return false;
  }
  // The primary context is the one the CUDA runtime (inside cuBLASLt and
  // cuDNN) uses: the libraries and the kernels share it.
  if (!check(cuDeviceGet(&device, 0), "cuDeviceGet", error) ||
      !check(cuDevicePrimaryCtxRetain(&context, device),
             "cuDevicePrimaryCtxRetain", error) ||
      !check(cuCtxSetCurrent(context), "cuCtxSetCurrent", error))
    return false;
  if (!loadModule(dir, error))
    return false;
  if (!check(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING), "cuStreamCreate",
             error) ||
      !check(cuStreamCreate(&copies, CU_STREAM_NON_BLOCKING), "cuStreamCreate",
             error))
    return false;
  if (cublasStatus_t st = cublasLtCreate(&blas); st != CUBLAS_STATUS_SUCCESS) {
    error =
        std::string("cublasLtCreate failed: ") + cublasLtGetStatusString(st);
    return false;
  }
  if (cudnnStatus_t st = cudnnCreate(&dnn); st != CUDNN_STATUS_SUCCESS) {
    error = std::string("cudnnCreate failed: ") + cudnnGetErrorString(st);
    return false;
  }
  cudnnSetStream(dnn, compute);
  // Library algorithms are chosen before the allocation: the workspace is
  // their largest need.
  if (!resolveSteps(error) || !allocate(error))
    return false;
  bindPointers();
  if (!check(cuEventCreate(&timingStart, CU_EVENT_DEFAULT), "cuEventCreate",
             error) ||
      !check(cuEventCreate(&timingStop, CU_EVENT_DEFAULT), "cuEventCreate",
             error))
    return false;
  chooseGemmAlgorithms(dir);
  if (profile) {
    // Timing a step needs events between steps, which a replayed graph
    // does not have.
    options.graphs = false;
    size_t most = 0;
    for (auto &[name, steps] : programs)
      most = std::max(most, steps.size());
    stepEvents.resize(most + 1);
    for (CUevent &event : stepEvents)
      if (!check(cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate",
                 error))
        return false;
  }
  description += options.graphs ? ", one CUDA Graph launch per step"
                 : profile      ? ", kernel-by-kernel launches timed one by "
                                  "one (--profile)"
                                : ", kernel-by-kernel launches (--no-graph)";
  return true;
}

CudaDevice::~CudaDevice() {
  if (compute)
    cuStreamSynchronize(compute);
  if (copies)
    cuStreamSynchronize(copies);
  if (profile && !stepEvents.empty())
    reportGemmCandidates();
  for (CUevent event : stepEvents)
    cuEventDestroy(event);
  for (CUevent event : {timingStart, timingStop})
    if (event)
      cuEventDestroy(event);
  for (auto &slot : graphs)
    for (auto &[name, exec] : slot)
      cuGraphExecDestroy(exec);
  for (auto &[name, steps] : programs)
    for (Step &step : steps) {
      if (step.gemmDesc)
        cublasLtMatmulDescDestroy(step.gemmDesc);
      for (auto l : {step.layoutA, step.layoutB, step.layoutC})
        if (l)
          cublasLtMatrixLayoutDestroy(l);
      if (step.xDesc)
        cudnnDestroyTensorDescriptor(step.xDesc);
      if (step.yDesc)
        cudnnDestroyTensorDescriptor(step.yDesc);
      if (step.wDesc)
        cudnnDestroyFilterDescriptor(step.wDesc);
      if (step.convDesc)
        cudnnDestroyConvolutionDescriptor(step.convDesc);
    }
  if (dnn)
    cudnnDestroy(dnn);
  if (blas)
    cublasLtDestroy(blas);
  for (int slot = 0; slot < 2; ++slot) {
    if (stagingHost[slot])
      cuMemFreeHost(stagingHost[slot]);
    if (copyDone[slot])
      cuEventDestroy(copyDone[slot]);
    if (consumed[slot])
      cuEventDestroy(consumed[slot]);
  }
  for (CUevent event : readEvents)
    if (event)
      cuEventDestroy(event);
  if (readHost)
    cuMemFreeHost(readHost);
  if (memory)
    cuMemFree(memory);
  if (module)
    cuModuleUnload(module);
  if (compute)
    cuStreamDestroy(compute);
  if (copies)
    cuStreamDestroy(copies);
  if (context)
    cuDevicePrimaryCtxRelease(device);
}

void CudaDevice::synchronize() {
  orDie(cuStreamSynchronize(copies), "cuStreamSynchronize");
  orDie(cuStreamSynchronize(compute), "cuStreamSynchronize");
}

void CudaDevice::upload(int id, const void *src, size_t bytes) {
  bytes = std::min<size_t>(bytes, plan.buffers[id].bytes);
  if (!staged(id)) {
    // Parameters, state, constants: before any run, or between runs when
    // a checkpoint is restored.
    synchronize();
    orDie(cuMemcpyHtoD(pointers[id], src, bytes), "cuMemcpyHtoD");
    return;
  }
  // Into the pinned slot of the next run, once the copy that last read it
  // (two runs ago) is done.
  int slot = nextSlot;
  waitSlotCopied(slot);
  memcpy(stagingHost[slot] + stagingOffset[id], src, bytes);
  hostVersion[slot][id] = ++version[id];
}

void CudaDevice::download(int id, void *dst, size_t bytes) {
  synchronize();
  bytes = std::min<size_t>(bytes, plan.buffers[id].bytes);
  orDie(cuMemcpyDtoH(dst, pointers[id], bytes), "cuMemcpyDtoH");
}

uint64_t CudaDevice::readLater(int id, size_t bytes) {
  uint64_t ticket = nextTicket++;
  size_t slot = ticket % kReadSlots;
  bytes = std::min({bytes, kReadSlotBytes, (size_t)plan.buffers[id].bytes});
  orDie(cuMemcpyDtoHAsync(readHost + slot * kReadSlotBytes, pointers[id], bytes,
                          compute),
        "cuMemcpyDtoHAsync");
  orDie(cuEventRecord(readEvents[slot], compute), "cuEventRecord");
  return ticket;
}

bool CudaDevice::ready(uint64_t ticket) {
  return cuEventQuery(readEvents[ticket % kReadSlots]) == CUDA_SUCCESS;
}

void CudaDevice::collect(uint64_t ticket, void *dst, size_t bytes) {
  size_t slot = ticket % kReadSlots;
  orDie(cuEventSynchronize(readEvents[slot]), "cuEventSynchronize");
  memcpy(dst, readHost + slot * kReadSlotBytes,
         std::min(bytes, kReadSlotBytes));
}

bool CudaDevice::issueStep(const Step &step, CUstream stream,
                           std::string &error) {
  static const float one = 1.0f, zero = 0.0f;
  switch (step.kind) {
  case StepKind::Kernel:
    return check(
        cuLaunchKernel(step.function, step.grid, 1, 1, 256, 1, 1, 0, stream,
                       const_cast<void **>(step.argPointers.data()), nullptr),
        "cuLaunchKernel", error);
  case StepKind::Copy:
    return check(cuMemcpyDtoDAsync(step.p1, step.p0, step.bytes, stream),
                 "cuMemcpyDtoDAsync", error);
  case StepKind::AllReduce:
  case StepKind::CollectiveWait:
    return true;
  case StepKind::ReduceScatter:
  case StepKind::AllGather:
  case StepKind::RankShard:
    error = "optimizer-state sharding does not run on the GPU device";
    return false;
  case StepKind::Gemm:
    for (int64_t call = 0; call < step.calls; ++call) {
      CUdeviceptr a = step.p0 + call * step.callStrideA,
                  b = step.p1 + call * step.callStrideB,
                  c = step.p2 + call * step.callStrideC;
      // cuBLASLt's first operand is B (see prepareGemm).
      cublasStatus_t st = cublasLtMatmul(
          blas, step.gemmDesc, &one, reinterpret_cast<void *>(b), step.layoutA,
          reinterpret_cast<void *>(a), step.layoutB,
          step.accumulate ? &one : &zero, reinterpret_cast<void *>(c),
          step.layoutC, reinterpret_cast<void *>(c), step.layoutC, &step.algo,
          reinterpret_cast<void *>(workspace), workspaceBytes,
          reinterpret_cast<cudaStream_t>(stream));
      if (st != CUBLAS_STATUS_SUCCESS) {
        error = std::string("cublasLtMatmul failed: ") +
                cublasLtGetStatusString(st);
        return false;
      }
    }
    return true;
  case StepKind::Conv:
  case StepKind::ConvBackwardInput:
  case StepKind::ConvBackwardFilter: {
    void *x = reinterpret_cast<void *>(step.p0),
         *w = reinterpret_cast<void *>(step.p1),
         *y = reinterpret_cast<void *>(step.p2),
         *ws = reinterpret_cast<void *>(workspace);
    cudnnStatus_t st;
    if (step.kind == StepKind::Conv)
      st = cudnnConvolutionForward(dnn, &one, step.xDesc, x, step.wDesc, w,
                                   step.convDesc,
                                   (cudnnConvolutionFwdAlgo_t)step.convAlgo, ws,
                                   workspaceBytes, &zero, step.yDesc, y);
    else if (step.kind == StepKind::ConvBackwardInput)
      st = cudnnConvolutionBackwardData(
          dnn, &one, step.wDesc, w, step.yDesc, y, step.convDesc,
          (cudnnConvolutionBwdDataAlgo_t)step.convAlgo, ws, workspaceBytes,
          &zero, step.xDesc, x);
    else
      st = cudnnConvolutionBackwardFilter(
          dnn, &one, step.xDesc, x, step.yDesc, y, step.convDesc,
          (cudnnConvolutionBwdFilterAlgo_t)step.convAlgo, ws, workspaceBytes,
          &zero, step.wDesc, w);
    if (st != CUDNN_STATUS_SUCCESS) {
      error = "cuDNN " + step.label + " failed: " + cudnnGetErrorString(st);
      return false;
    }
    return true;
  }
  }
  return true;
}

bool CudaDevice::issue(const std::string &function, int slot, CUstream stream,
                       std::string &error) {
  // The staged values of this run, from its slot into the plan's buffers.
  for (int id : stagedIds)
    if (!check(cuMemcpyDtoDAsync(pointers[id],
                                 stagingDevice[slot] + stagingOffset[id],
                                 plan.buffers[id].bytes, stream),
               "cuMemcpyDtoDAsync (staging)", error))
      return false;
  std::vector<Step> &steps = programs[function];
  bool timed = profile && !options.graphs;
  double issued = timed ? profileClock() : 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (timed &&
        !check(cuEventRecord(stepEvents[i], stream), "cuEventRecord", error))
      return false;
    if (!issueStep(steps[i], stream, error))
      return false;
  }
  if (!timed)
    return true;
  if (!check(cuEventRecord(stepEvents[steps.size()], stream), "cuEventRecord",
             error) ||
      !check(cuEventSynchronize(stepEvents[steps.size()]), "cuEventSynchronize",
             error))
    return false;
  // The trace places the steps back to back from when the host issued the
  // first: the GPU's own clock is not the host's.
  double start = issued;
  for (size_t i = 0; i < steps.size(); ++i) {
    float ms = 0;
    cuEventElapsedTime(&ms, stepEvents[i], stepEvents[i + 1]);
    steps[i].time.add(ms / 1e3, start);
    start += ms / 1e3;
  }
  return true;
}

bool CudaDevice::run(const std::string &function, std::string &error) {
  if (!programs.count(function)) {
    error = "the plan has no function " + function;
    return false;
  }
  int slot = nextSlot;
  // Bring this slot's staged values up to date: pinned memory first (a
  // value uploaded before the other slot's run lives there), then the
  // device slot, on the copy stream once the run that last read this slot
  // is done.
  bool waited = false;
  for (int id : stagedIds) {
    if (deviceVersion[slot][id] == version[id])
      continue;
    if (hostVersion[slot][id] != version[id]) {
      waitSlotCopied(slot);
      int other = 1 - slot;
      memcpy(stagingHost[slot] + stagingOffset[id],
             stagingHost[other] + stagingOffset[id], plan.buffers[id].bytes);
      hostVersion[slot][id] = version[id];
    }
    if (!waited) {
      if (!check(cuStreamWaitEvent(copies, consumed[slot], 0),
                 "cuStreamWaitEvent", error))
        return false;
      waited = true;
    }
    if (!check(cuMemcpyHtoDAsync(stagingDevice[slot] + stagingOffset[id],
                                 stagingHost[slot] + stagingOffset[id],
                                 plan.buffers[id].bytes, copies),
               "cuMemcpyHtoDAsync", error))
      return false;
    deviceVersion[slot][id] = version[id];
  }
  if (!check(cuEventRecord(copyDone[slot], copies), "cuEventRecord", error) ||
      !check(cuStreamWaitEvent(compute, copyDone[slot], 0), "cuStreamWaitEvent",
             error))
    return false;
  copyRecorded[slot] = true;

  if (options.graphs) {
    auto it = graphs[slot].find(function);
    if (it == graphs[slot].end()) {
      // Captured once per (function, slot); every later run replays it.
      if (!check(cuStreamBeginCapture(compute,
                                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                 "cuStreamBeginCapture", error))
        return false;
      std::string issueError;
      bool issued = issue(function, slot, compute, issueError);
      CUgraph graph = nullptr;
      CUresult ended = cuStreamEndCapture(compute, &graph);
      if (!issued) {
        error = "capturing " + function + " into a CUDA Graph: " + issueError;
        return false;
      }
      if (!check(ended, "cuStreamEndCapture", error))
        return false;
      CUgraphExec exec = nullptr;
      CUresult made = cuGraphInstantiate(&exec, graph, 0);
      cuGraphDestroy(graph);
      if (!check(made, "cuGraphInstantiate", error))
        return false;
      it = graphs[slot].emplace(function, exec).first;
    }
    if (!check(cuGraphLaunch(it->second, compute), "cuGraphLaunch", error))
      return false;
    ++launchCounters.graphLaunches[function];
  } else {
    if (!issue(function, slot, compute, error))
      return false;
    launchCounters.hostLaunches[function] += programs[function].size();
  }
  if (!check(cuEventRecord(consumed[slot], compute), "cuEventRecord", error))
    return false;
  nextSlot = 1 - slot;
  return true;
}

} // namespace
} // namespace gpuc

extern "C" gpuc::Device *
gpuc_create_cuda_device(const gpuc::Plan &plan, const std::string &artifactDir,
                        const gpuc::CudaOptions &options, std::string &error) {
  auto device = std::make_unique<gpuc::CudaDevice>(plan, options);
  if (!device->init(artifactDir, error))
    return nullptr;
  return device.release();
}

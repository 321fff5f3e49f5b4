//===- CudaDevice.h - the CUDA device's class and its steps -----*- C++ -*-===//
//
// Shared by CudaDevice.cpp (memory, graphs, runs, collectives) and
// CudaLibrarySteps.cpp (cuBLASLt GEMMs and cuDNN convolutions).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_CUDA_CUDADEVICE_H
#define GPUC_RUNTIME_CUDA_CUDADEVICE_H

#include "CudnnAttention.h"
#include "NcclRanks.h"

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
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace gpuc {
namespace cuda_device {

inline std::string describeResult(CUresult result) {
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

inline int64_t alignUp(int64_t bytes) {
  return (std::max<int64_t>(bytes, 1) + kAlignment - 1) / kAlignment *
         kAlignment;
}

inline std::string readFile(const std::string &path) {
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
  /// Threads a block.
  unsigned block = 256;
  /// The kernel's entry points that compute the same bits in other ways
  /// (plan.json's "alternatives"), itself first, with their names, blocks
  /// and dynamic shared memory: chooseLibraryAlgorithms times them as it
  /// times a GEMM's algorithms.
  std::vector<CUfunction> kernelCandidates;
  std::vector<std::string> kernelCandidateNames;
  std::vector<unsigned> kernelCandidateBlocks;
  std::vector<unsigned> kernelCandidateShared;
  /// How many of the arguments the kernel only reads (the first ones; -1:
  /// unknown).
  int kernelInputs = -1;
  /// Each candidate's us per run where the load timed them (--profile
  /// reports them for a step it cannot run again at exit).
  std::vector<double> loadMicros;
  unsigned grid = 1;
  /// A fused attention's launches that cuDNN's fused attention runs
  /// instead (gpuc compile --attention-library auto|cudnn): the first
  /// launch runs `cudnn`, the others nothing. `pendingCudnn` is built and
  /// waits for the load's check against the kernels (and, where the plan
  /// asks for the faster, for their timing).
  std::shared_ptr<CudnnAttention> cudnn, pendingCudnn;
  CudnnAttentionShape cudnnShape;
  bool skipped = false;
  /// Dynamic shared memory a block takes (a row kernel's staged rows).
  unsigned sharedBytes = 0;
  std::vector<int> argIds;
  std::vector<CUdeviceptr> argValues;
  std::vector<void *> argPointers;
  // GEMM: its data type ("F32", "F16", "BF16"), cuBLASLt descriptors and
  // the algorithm chosen at load. `calls`
  // > 1 when a broadcast operand (batch stride 0) is issued per batch.
  std::string dtype = "F32";
  cublasLtMatmulDesc_t gemmDesc = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr,
                         layoutC = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// The heuristic's candidate algorithms (a GEMM's; a convolution's are
  /// convCandidates), the one measured fastest, and the shape that names
  /// the choice.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  size_t chosen = 0;
  std::string shape;
  int64_t calls = 1, callStrideA = 0, callStrideB = 0, callStrideC = 0;
  bool accumulate = false; // C += op(A) op(B)
  /// The bias epilogue's vector (buffer id and address; -1 without one):
  /// cuBLASLt adds it to every row of the row-major C.
  int idBias = -1;
  CUdeviceptr pBias = 0;
  // Convolutions.
  cudnnTensorDescriptor_t xDesc = nullptr, yDesc = nullptr;
  cudnnFilterDescriptor_t wDesc = nullptr;
  cudnnConvolutionDescriptor_t convDesc = nullptr;
  int convAlgo = 0;
  /// The deterministic algorithms the heuristic ranks, in its order:
  /// checkConvAlgorithms runs the first and falls back on the next where
  /// cuDNN refuses one it proposed; chooseLibraryAlgorithms times them.
  std::vector<int> convCandidates;
  // Operands (GEMM: a, b, c; conv: x, w, y; copy: src, dst): buffer ids,
  // and their addresses once memory is allocated.
  int id0 = -1, id1 = -1, id2 = -1;
  CUdeviceptr p0 = 0, p1 = 0, p2 = 0;
  /// Bytes from a GEMM's a, b and c buffers to their first elements (a
  /// window of a wider tensor's columns; a band of a product's rows).
  int64_t offset0 = 0, offset1 = 0, offset2 = 0;
  size_t bytes = 0;
  // All-reduce: its bucket (also a collective wait's and a sharded
  // collective's) and gradients.
  int64_t bucket = -1;
  std::vector<int> reduceIds;
  std::vector<ReduceBuffer> reduce;
  // Optimizer-state sharding (reduce-scatter, all-gather, rank shard): the
  // ranks the plan cuts over, its (whole, shard) buffer ids and addresses.
  int64_t ranks = 1;
  std::vector<std::pair<int, int>> shardIds;
  std::vector<ShardBuffer> shards;
  /// train --profile: time between the events around this step.
  StepTime time;
};

class CudaDevice : public Device {
public:
  CudaDevice(const Plan &plan, const CudaOptions &options)
      : plan(plan), options(options), tf32(plan.json.value("tf32", false)),
        f32GemmsBf16(plan.json.value("f32_gemms", "") == "bf16") {}
  ~CudaDevice() override;

  bool init(const std::string &dir, std::string &error);

  std::string describe() const override { return description; }
  /// Datasheet dense peaks (no sparsity): tensor cores for BF16 and F16,
  /// for F32 bf16 tensor cores where the model was compiled
  /// --f32-gemms=bf16, TF32 ones where --tf32, else FMA.
  double densePeakFlops(const std::string &dtype) override {
    bool half =
        dtype == "BF16" || dtype == "F16" || (dtype == "F32" && f32GemmsBf16);
    auto has = [&](const char *part) {
      return gpu.find(part) != std::string::npos;
    };
    if (has("H100") && has("PCIe"))
      return half ? 756e12 : tf32 ? 378e12 : 51.2e12;
    if (has("H100") || has("H200") || has("GH200"))
      return half ? 989.4e12 : tf32 ? 494.7e12 : 66.9e12;
    if (has("A100"))
      return half ? 312e12 : tf32 ? 156e12 : 19.5e12;
    return 0;
  }
  /// train --profile's peaks: the bandwidth of a device-to-device copy of
  /// 256 MiB (read and write counted, best of 5 after a warm-up: what the
  /// GPU's memory achieves, below the datasheet's), and the datasheet's
  /// dense FLOP rate for the plan's GEMM data type.
  MachinePeaks measurePeaks() override;
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
  bool setCollective(Collective *collective, std::string &error) override;
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
  /// Gives a kernel step `bytes` of dynamic shared memory (a plan step's
  /// "shared"), or says why this GPU cannot.
  bool prepareSharedMemory(Step &step, int64_t bytes, std::string &error);
  void bindPointers();
  bool prepareGemm(Step &step, const nlohmann::json &s, std::string &error);
  /// Times each GEMM's and convolution's candidate algorithms once per
  /// shape (or takes the choice kept in the artifact); train --profile
  /// reports all of them.
  void chooseLibraryAlgorithms(const std::string &dir);
  /// A step's candidates (a GEMM's or convolution's algorithms, a
  /// kernel's entry points), and taking one.
  static size_t candidateCount(const Step &step);
  /// Whether a kernel step's candidates may be timed, running it again:
  /// at load (`atLoad`), any step, since nothing is uploaded yet and the
  /// persistent buffers are zeroed again after (init), and a kernel that
  /// addresses memory by loaded values has no alternatives; at exit
  /// (--profile's report), only a step all of whose written arguments are
  /// the step's own (transient buffers, its workspace), whose contents no
  /// later step or run reads. (Run again, a kernel that writes over one of
  /// its inputs reads what it wrote: values of no consequence there, and
  /// the kernels' time does not depend on them.)
  bool timeable(const Step &step, bool atLoad) const;
  /// A kernel step's candidates: its own entry point, then plan.json's
  /// alternatives to it.
  bool resolveKernelCandidates(Step &step, int64_t shared, std::string &error);
  static void takeCandidate(Step &step, size_t candidate);
  /// Runs `step` with its candidate once, then times `repeats` runs:
  /// false (and no time) when the library refuses or fails it.
  bool timeCandidate(Step &step, size_t candidate, double &us, int repeats);
  /// Runs `issue` once, then times up to `repeats` runs of it (fewer where
  /// one is slow): false where it fails.
  bool timeCalls(const std::function<bool()> &issue, double &us, int repeats);
  static int timingRepeats(const Step &step);
  void reportLibraryCandidates();
  CUevent timingStart = nullptr, timingStop = nullptr;
  bool prepareConv(Step &step, const nlohmann::json &s, std::string &error);
  /// Runs each convolution once with its algorithm, the next candidate
  /// where cuDNN refuses it (a heuristic's proposal can fail to run).
  bool checkConvAlgorithms(std::string &error);
  /// Builds cuDNN's fused attention for a kernel step whose plan asks for
  /// it (CudaAttentionSteps.cpp); where it cannot, says why and leaves the
  /// kernels. False only for a damaged descriptor.
  bool prepareCudnnAttention(Step &step, const nlohmann::json &s,
                             std::string &error);
  /// Runs each built cuDNN attention and the kernels it stands in for on
  /// the same operands, and keeps it where the results agree: in their
  /// place, or pending for chooseCudnnAttention where its plan asks for
  /// the faster.
  bool checkCudnnAttention(std::string &error);
  /// Times each agreeing cuDNN attention that waits for the faster against
  /// the launches it stands in for (their entry points chosen), or takes
  /// the choice kept in `choices` (library-algorithms.json's, this GPU's),
  /// and runs the faster; `changed` where it timed one.
  void chooseCudnnAttention(nlohmann::json &choices, bool &changed);
  /// Makes steps[i]'s pending cuDNN attention run in place of the
  /// launches it stands in for.
  void takeCudnnAttention(std::vector<Step> &steps, size_t i);

  /// Runs steps[i]'s pending cuDNN attention and the kernel launches it
  /// stands in for on random operands: `worst`, the largest difference of
  /// an output (`worstName`) against its largest magnitude, and `failure`
  /// where it does not agree or did not run. False for a CUDA error.
  bool compareCudnnAttention(std::vector<Step> &steps, size_t i, double &worst,
                             std::string &worstName, std::string &failure,
                             std::string &error);
  /// Issues `function`'s steps on `stream`: into a graph being captured, or
  /// launched one by one.
  bool issue(const std::string &function, int slot, CUstream stream,
             std::string &error);
  bool issueStep(const Step &step, CUstream stream, std::string &error);
  /// The convolution whose algorithm cuDNN last refused in issueStep, and
  /// what replaces a refused one by its next candidate that runs (false
  /// when none is left).
  const Step *refusedConvolution = nullptr;
  bool replaceRefusedAlgorithm(Step &step, std::string &error);
  /// Optimizer-state sharding's steps: NCCL between ranks, else copies.
  bool issueSharded(const Step &step, CUstream stream, std::string &error);
  bool staged(int id) const { return stagingOffset[id] >= 0; }
  void waitSlotCopied(int slot) {
    if (copyRecorded[slot])
      orDie(cuEventSynchronize(copyDone[slot]), "cuEventSynchronize");
  }
  /// Joins the NCCL ranks (`mpi` null: this process alone), with the
  /// stream and the per-bucket events the all-reduces run between.
  bool joinRanks(Collective *mpi, std::string &error);
  /// Waits for `event` on the compute stream; in a data-parallel run as a
  /// rank must (NcclRanks::wait), so a stopped rank ends this one with an
  /// error instead of a hang.
  void awaitCompute(CUevent event, const char *what) {
    if (!ranks) {
      orDie(cuEventSynchronize(event), what);
      return;
    }
    std::string error;
    if (!ranks->wait(event, error)) {
      fprintf(stderr, "train: rank %d: %s\n", ranks->rank(), error.c_str());
      exit(1);
    }
  }

  const Plan &plan;
  CudaOptions options;
  /// gpuc compile --tf32: F32 GEMMs and convolutions on TF32 tensor cores.
  bool tf32 = false;
  /// gpuc compile --f32-gemms=bf16: F32 GEMMs round their operands to bf16
  /// on tensor cores.
  bool f32GemmsBf16 = false;
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
  /// The persistent buffers (parameters, state, inputs), after the arena.
  CUdeviceptr persistentMemory = 0;
  int64_t persistentMemoryBytes = 0;
  std::vector<CUdeviceptr> pointers;
  CUdeviceptr workspace = 0;
  /// Whether the log has said this build has no cuDNN attention.
  bool cudnnAttentionNoted = false;
  /// cuDNN's attention graphs built, by their plan descriptor.
  std::map<std::string, std::shared_ptr<CudnnAttention>> cudnnAttentionGraphs;
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
  /// events (stepTimes()); the library candidates are printed at exit.
  bool profile = options.profile;
  std::vector<CUevent> stepEvents;

  /// Data parallel: the ranks, the stream their collectives run on, and
  /// per bucket the events its all-reduce waits for (gradients ready) and
  /// records (sums ready).
  std::unique_ptr<NcclRanks> ranks;
  CUstream communication = nullptr;
  std::map<int64_t, CUevent> gradientsReady, sumsReady;
  CUevent computeDone = nullptr;
};

} // namespace cuda_device
} // namespace gpuc

#endif // GPUC_RUNTIME_CUDA_CUDADEVICE_H

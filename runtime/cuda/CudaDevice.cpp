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
// - Data parallel (mpirun -np N): each rank takes the GPU of its local rank
//   and the ranks share one NCCL communicator (NcclRanks.h); a bucket's
//   all-reduce runs on the communication stream between events, inside the
//   captured step.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"

namespace gpuc {
namespace cuda_device {

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
            mib(arena) + " MiB, parameters/state/inputs " +
            mib(persistentBytes) + " MiB, library workspace " +
            mib(workspaceBytes) + " MiB) and the GPU has " + mib(freeBytes) +
            " MiB free of " + mib(totalBytes) +
            " MiB; compile with a smaller --batch (" + describeResult(result) +
            ")";
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
  persistentMemory = memory + arena;
  persistentMemoryBytes = persistentBytes;
  if (!check(cuMemsetD8(persistentMemory, 0, persistentMemoryBytes),
             "cuMemsetD8", error))
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

bool CudaDevice::resolveSteps(std::string &error) {
  for (auto &[name, function] : plan.json["functions"].items()) {
    std::vector<Step> &steps = programs[name];
    for (const auto &s : function["steps"]) {
      Step step;
      if (!readStepHeader(name, steps.size(), s, step, error))
        return false;
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
        if (!resolveKernelCandidates(step, s.value("shared", (int64_t)0),
                                     error))
          return false;
        if (s.contains("cudnn_attention") &&
            !prepareCudnnAttention(step, s, error))
          return false;
      } else if (step.kind == StepKind::Gemm) {
        if (!prepareGemm(step, s, error))
          return false;
      } else if (step.kind == StepKind::Copy) {
        step.id0 = s["src"];
        step.id1 = s["dst"];
        step.bytes = s["bytes"].get<size_t>();
      } else if (step.kind == StepKind::AllReduce) {
        // Alone, the sum over one rank is the value itself; with ranks
        // (setCollective) NCCL sums the bucket.
        step.bucket = s["bucket"];
        step.reduceIds = s["buffers"].get<std::vector<int>>();
      } else if (step.kind == StepKind::CollectiveWait) {
        step.bucket = s.value("bucket", (int64_t)-1);
      } else if (isCollective(step.kind)) {
        // Optimizer-state sharding: reduce-scatter, all-gather, rank shard.
        step.bucket = s.value("bucket", (int64_t)-1);
        step.ranks = s["ranks"];
        for (const auto &pair : s["pairs"])
          step.shardIds.push_back(
              {pair["whole"].get<int>(), pair["shard"].get<int>()});
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
      step.p0 = at(step.id0) + step.offset0;
      step.p1 = at(step.id1) + step.offset1;
      step.shards.clear();
      for (auto [whole, shard] : step.shardIds)
        step.shards.push_back({reinterpret_cast<void *>(pointers[whole]),
                               reinterpret_cast<void *>(pointers[shard]),
                               plan.buffers[whole].numElements(),
                               plan.buffers[whole].dtype});
      step.reduce.clear();
      for (int id : step.reduceIds)
        step.reduce.push_back({reinterpret_cast<void *>(pointers[id]),
                               plan.buffers[id].numElements(),
                               plan.buffers[id].dtype});
      step.p2 = at(step.id2) + step.offset2;
      if (step.idBias >= 0) {
        step.pBias = at(step.idBias);
        cublasLtMatmulDescSetAttribute(step.gemmDesc,
                                       CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                       &step.pBias, sizeof(step.pBias));
      }
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
  // One GPU per rank: a data-parallel rank takes its local rank's GPU.
  if (!check(cuDeviceGet(&device, launchedLocalRank() % count), "cuDeviceGet",
             error) ||
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
  if (!checkConvAlgorithms(error) || !checkCudnnAttention(error))
    return false;
  chooseLibraryAlgorithms(dir);
  // Choosing ran steps on operands nothing had written, some of them
  // writing state (an optimizer's moments, a gradient accumulator) whose
  // first value is the zeros allocate() left: they are zeros again before
  // anything is uploaded.
  if (!check(cuMemsetD8(persistentMemory, 0, persistentMemoryBytes),
             "cuMemsetD8", error) ||
      !check(cuCtxSynchronize(), "cuCtxSynchronize", error))
    return false;
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
  if (f32GemmsBf16)
    description += ", F32 GEMMs on bf16 tensor cores";
  if (tf32)
    description += f32GemmsBf16
                       ? ", F32 convolutions on TF32 tensor cores"
                       : ", F32 GEMMs and convolutions on TF32 tensor cores";
  description += options.graphs ? ", one CUDA Graph launch per step"
                 : profile      ? ", kernel-by-kernel launches timed one by "
                                  "one (--profile)"
                                : ", kernel-by-kernel launches (--no-graph)";
  // GPUC_NCCL_ALONE=1: a single process runs its all-reduces through a
  // one-rank NCCL communicator, to measure what they cost in the step.
  if (const char *alone = getenv("GPUC_NCCL_ALONE");
      alone && std::string(alone) == "1" && launchedRanks() <= 1 &&
      !joinRanks(nullptr, error))
    return false;
  return true;
}

CudaDevice::~CudaDevice() {
  if (compute)
    cuStreamSynchronize(compute);
  if (communication)
    cuStreamSynchronize(communication);
  if (copies)
    cuStreamSynchronize(copies);
  if (profile && !stepEvents.empty())
    reportLibraryCandidates();
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
      step.cudnn.reset();
      step.pendingCudnn.reset();
    }
  // cuDNN's attention graphs go before the handle they were built on.
  cudnnAttentionGraphs.clear();
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
  for (auto *events : {&gradientsReady, &sumsReady})
    for (auto &[bucket, event] : *events)
      cuEventDestroy(event);
  if (computeDone)
    cuEventDestroy(computeDone);
  ranks.reset();
  if (communication)
    cuStreamDestroy(communication);
  if (context)
    cuDevicePrimaryCtxRelease(device);
}

MachinePeaks CudaDevice::measurePeaks() {
  MachinePeaks peaks;
  // The GEMMs' data type: a mixed-precision step's are 16-bit.
  std::string dtype = "F32";
  for (const auto &[name, steps] : programs)
    for (const Step &step : steps)
      if (step.kind == StepKind::Gemm && step.dtype != "F32")
        dtype = step.dtype;
  peaks.flopsPerSecond = densePeakFlops(dtype);
  std::string flops = peaks.flopsPerSecond > 0
                          ? dtype +
                                (dtype != "F32" ? ""
                                 : f32GemmsBf16 ? " (BF16 math)"
                                 : tf32         ? " (TF32)"
                                                : "") +
                                " datasheet dense peak"
                          : "no datasheet FLOP peak for this GPU";
  const size_t bytes = 256 << 20;
  CUdeviceptr from = 0, to = 0;
  if (cuMemAlloc(&from, bytes) != CUDA_SUCCESS ||
      cuMemAlloc(&to, bytes) != CUDA_SUCCESS) {
    if (from)
      cuMemFree(from);
    peaks.how =
        "bandwidth not measured (no 512 MiB free beside the plan), " + flops;
    return peaks;
  }
  synchronize();
  float best = 0;
  for (int r = 0; r < 6; ++r) {
    float ms = 0;
    if (cuEventRecord(timingStart, compute) != CUDA_SUCCESS ||
        cuMemcpyDtoDAsync(to, from, bytes, compute) != CUDA_SUCCESS ||
        cuEventRecord(timingStop, compute) != CUDA_SUCCESS ||
        cuEventSynchronize(timingStop) != CUDA_SUCCESS ||
        cuEventElapsedTime(&ms, timingStart, timingStop) != CUDA_SUCCESS)
      break;
    if (r > 0 && (best == 0 || ms < best))
      best = ms;
  }
  cuMemFree(from);
  cuMemFree(to);
  if (best > 0)
    peaks.bytesPerSecond = 2.0 * bytes / (best / 1e3);
  peaks.how = "copy of 256 MiB on the device, " + flops;
  return peaks;
}

void CudaDevice::synchronize() {
  orDie(cuStreamSynchronize(copies), "cuStreamSynchronize");
  if (!ranks) {
    orDie(cuStreamSynchronize(compute), "cuStreamSynchronize");
    return;
  }
  orDie(cuEventRecord(computeDone, compute), "cuEventRecord");
  awaitCompute(computeDone, "cuEventSynchronize");
}

bool CudaDevice::setCollective(Collective *collective, std::string &error) {
  return joinRanks(collective, error);
}

bool CudaDevice::joinRanks(Collective *mpi, std::string &error) {
  if (!graphs[0].empty() || !graphs[1].empty()) {
    error = "the CUDA device joins the ranks before its first step";
    return false;
  }
  ranks = NcclRanks::join(mpi, context, options.collectiveTimeout, error);
  if (!ranks)
    return false;
  if (!check(cuStreamCreate(&communication, CU_STREAM_NON_BLOCKING),
             "cuStreamCreate", error) ||
      !check(cuEventCreate(&computeDone, CU_EVENT_DISABLE_TIMING),
             "cuEventCreate", error))
    return false;
  for (auto &[name, steps] : programs)
    for (const Step &step : steps)
      if ((step.kind == StepKind::AllReduce ||
           step.kind == StepKind::ReduceScatter ||
           step.kind == StepKind::AllGather) &&
          !gradientsReady.count(step.bucket)) {
        CUevent ready = nullptr, sums = nullptr;
        if (!check(cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING),
                   "cuEventCreate", error) ||
            !check(cuEventCreate(&sums, CU_EVENT_DISABLE_TIMING),
                   "cuEventCreate", error))
          return false;
        gradientsReady[step.bucket] = ready;
        sumsReady[step.bucket] = sums;
      }
  description += "; " + ranks->describe() +
                 ", gradient all-reduces inside the step on a stream of "
                 "their own";
  return true;
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
  awaitCompute(readEvents[slot], "cuEventSynchronize");
  memcpy(dst, readHost + slot * kReadSlotBytes,
         std::min(bytes, kReadSlotBytes));
}

bool CudaDevice::issueStep(const Step &step, CUstream stream,
                           std::string &error) {
  static const float one = 1.0f, zero = 0.0f;
  if (step.skipped)
    return true;
  if (step.cudnn)
    return step.cudnn->run(dnn, step.argValues, workspace, error);
  switch (step.kind) {
  case StepKind::Kernel:
    return check(cuLaunchKernel(step.function, step.grid, 1, 1, step.block, 1,
                                1, step.sharedBytes, stream,
                                const_cast<void **>(step.argPointers.data()),
                                nullptr),
                 "cuLaunchKernel", error);
  case StepKind::Copy:
    return check(cuMemcpyDtoDAsync(step.p1, step.p0, step.bytes, stream),
                 "cuMemcpyDtoDAsync", error);
  case StepKind::AllReduce:
    if (!ranks)
      return true;
    // Forked from the compute stream once the bucket's gradients are
    // written; later backward steps run beside it.
    return check(cuEventRecord(gradientsReady.at(step.bucket), stream),
                 "cuEventRecord", error) &&
           check(cuStreamWaitEvent(communication,
                                   gradientsReady.at(step.bucket), 0),
                 "cuStreamWaitEvent", error) &&
           ranks->allReduce(step.reduce, communication, error) &&
           check(cuEventRecord(sumsReady.at(step.bucket), communication),
                 "cuEventRecord", error);
  case StepKind::CollectiveWait:
    if (!ranks || !sumsReady.count(step.bucket))
      return true;
    return check(cuStreamWaitEvent(stream, sumsReady.at(step.bucket), 0),
                 "cuStreamWaitEvent", error);
  case StepKind::ReduceScatter:
  case StepKind::AllGather:
  case StepKind::RankShard:
    return issueSharded(step, stream, error);
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
      refusedConvolution = &step;
      error = "cuDNN " + step.label + " " + step.shape + " (algorithm " +
              std::to_string(step.convAlgo) +
              ") failed: " + cudnnGetErrorString(st);
      return false;
    }
    return true;
  }
  }
  return true;
}

bool CudaDevice::issueSharded(const Step &step, CUstream stream,
                              std::string &error) {
  int runRanks = ranks ? ranks->size() : 1;
  if (step.ranks != runRanks) {
    error = "the plan's optimizer state is sharded over " +
            std::to_string(step.ranks) +
            " ranks (gpuc compile --shard-optimizer --ranks " +
            std::to_string(step.ranks) + "), but this run has " +
            std::to_string(runRanks) + ": start it with mpirun -np " +
            std::to_string(step.ranks);
    return false;
  }
  if (ranks && step.kind != StepKind::RankShard) {
    // Like an all-reduce: forked after what it reads, joined at its wait.
    CUevent ready = gradientsReady.at(step.bucket),
            done = sumsReady.at(step.bucket);
    return check(cuEventRecord(ready, stream), "cuEventRecord", error) &&
           check(cuStreamWaitEvent(communication, ready, 0),
                 "cuStreamWaitEvent", error) &&
           (step.kind == StepKind::ReduceScatter
                ? ranks->reduceScatter(step.shards, communication, error)
                : ranks->allGather(step.shards, communication, error)) &&
           check(cuEventRecord(done, communication), "cuEventRecord", error);
  }
  // This rank's shard of each whole tensor (alone: the whole tensor), the
  // shard's padding zero; or, gathering alone, the shard back in place.
  int rank = ranks ? ranks->rank() : 0;
  for (const ShardBuffer &b : step.shards) {
    int64_t elementBytes = dtypeBytes(b.dtype);
    int64_t shard = shardElements(b.count, step.ranks);
    int64_t filled = shardFilled(b.count, step.ranks, rank);
    CUdeviceptr whole = reinterpret_cast<CUdeviceptr>(b.whole) +
                        std::min(rank * shard, b.count) * elementBytes;
    CUdeviceptr mine = reinterpret_cast<CUdeviceptr>(b.shard);
    if (filled > 0 &&
        !check(
            step.kind == StepKind::AllGather
                ? cuMemcpyDtoDAsync(whole, mine, filled * elementBytes, stream)
                : cuMemcpyDtoDAsync(mine, whole, filled * elementBytes, stream),
            "cuMemcpyDtoDAsync (shard)", error))
      return false;
    if (step.kind != StepKind::AllGather && filled < shard &&
        !check(cuMemsetD8Async(mine + filled * elementBytes, 0,
                               (shard - filled) * elementBytes, stream),
               "cuMemsetD8Async (shard)", error))
      return false;
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
  // Buckets whose all-reduce was issued and not yet waited for: joined
  // before the end (a capture must end on the stream it began on).
  std::set<int64_t> open;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (timed &&
        !check(cuEventRecord(stepEvents[i], stream), "cuEventRecord", error))
      return false;
    if (!issueStep(steps[i], stream, error))
      return false;
    if (ranks && (steps[i].kind == StepKind::AllReduce ||
                  steps[i].kind == StepKind::ReduceScatter ||
                  steps[i].kind == StepKind::AllGather))
      open.insert(steps[i].bucket);
    else if (steps[i].kind == StepKind::CollectiveWait)
      open.erase(steps[i].bucket);
  }
  if (ranks)
    for (int64_t bucket : open)
      if (!check(cuStreamWaitEvent(stream, sumsReady.at(bucket), 0),
                 "cuStreamWaitEvent", error))
        return false;
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
      CUgraph graph = nullptr;
      CUresult ended = CUDA_SUCCESS;
      for (;;) {
        if (!check(cuStreamBeginCapture(compute,
                                        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   "cuStreamBeginCapture", error))
          return false;
        std::string issueError;
        refusedConvolution = nullptr;
        bool issued = issue(function, slot, compute, issueError);
        ended = cuStreamEndCapture(compute, &graph);
        if (issued)
          break;
        if (graph)
          cuGraphDestroy(graph);
        graph = nullptr;
        // cuDNN can refuse to capture an algorithm it ran before the
        // capture: the next candidate takes its place and the capture
        // starts again (the same choice on every run of this GPU).
        if (!refusedConvolution) {
          error = "capturing " + function + " into a CUDA Graph: " + issueError;
          return false;
        }
        Step &refused = const_cast<Step &>(*refusedConvolution);
        int algorithm = refused.convAlgo;
        if (!replaceRefusedAlgorithm(refused, error)) {
          error = "capturing " + function +
                  " into a CUDA Graph: " + issueError + "; " + error;
          return false;
        }
        fprintf(stderr,
                "cuda: cuDNN refused to capture %s %s with algorithm %d (%s); "
                "it runs algorithm %d\n",
                refused.label.c_str(), refused.shape.c_str(), algorithm,
                issueError.c_str(), refused.convAlgo);
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

} // namespace cuda_device
} // namespace gpuc

extern "C" gpuc::Device *
gpuc_create_cuda_device(const gpuc::Plan &plan, const std::string &artifactDir,
                        const gpuc::CudaOptions &options, std::string &error) {
  auto device = std::make_unique<gpuc::cuda_device::CudaDevice>(plan, options);
  if (!device->init(artifactDir, error))
    return nullptr;
  return device.release();
}

//===- CpuExecutor.cpp - the step program on the CPU ----------------------===//
//
// Generated kernels come from the table linked into the trainer; GEMMs go to
// oneDNN's sgemm; convolutions and their two gradients are oneDNN
// convolution primitives, created once at load time. Channels-last (NHWC)
// ones read and write the plan's activation buffers as they are; NCHW ones
// take the layout oneDNN prefers (blocked over channels), with reorders
// from and to the plan's buffers around each call; filters take oneDNN's
// layout in both, reordered likewise. A depthwise filter gradient oneDNN has
// no direct kernel for (it would take an im2col and a GEMM per channel) is
// DepthwiseFilterGradient.cpp's.
//
// GEMMs and convolutions of f16/bf16 tensors (mixed precision) are computed
// converted: the operands are widened to f32 scratch (exact), the f32 path
// runs (oneDNN's f16 and bf16 GEMMs need AVX-512 or AMX, which the CPUs
// this runs on may lack), and the result is rounded once to its type, as a
// GPU's f32-accumulating tensor-core GEMM does.
//
// Why oneDNN (bench/gemm_libraries.sh): its GEMMs run on the OpenMP threads
// that run the generated kernels, where OpenBLAS's pthread build keeps a
// second pool whose idle threads spin in sched_yield while the kernels run
// (27 % of the CNN step's cycles in the scheduler, perf record); and it picks
// its code by the CPU's instruction set, where OpenBLAS picks by model number
// and falls back to generic kernels on CPUs it does not know.
//
//===----------------------------------------------------------------------===//
#include "DepthwiseFilterGradient.h"

#include "gpuc/runtime/Collective.h"
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/Numbers.h"
#include "gpuc/runtime/PlanSteps.h"
#include "gpuc/runtime/StepProfile.h"
#include "gpuc/runtime/device/CpuKernelTable.h"
#include "gpuc/runtime/device/Float16.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <unordered_map>

namespace gpuc {
namespace {

/// Row-major C = op(A) op(B) + beta C through oneDNN. Its only failures are
/// invalid arguments, which the plan's validation rules out.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc) {
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    fprintf(stderr,
            "gpuc: internal error: oneDNN sgemm(%c%c, m=%lld, n=%lld, "
            "k=%lld) failed with status %d\n",
            transA ? 'T' : 'N', transB ? 'T' : 'N', (long long)m, (long long)n,
            (long long)k, (int)status);
    abort();
  }
}

/// The CPU's model name as /proc/cpuinfo gives it ("unknown CPU" where it
/// gives none).
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon == std::string::npos)
        break;
      size_t first = line.find_first_not_of(" \t", colon + 1);
      return first == std::string::npos ? "unknown CPU" : line.substr(first);
    }
  return "unknown CPU";
}

/// The instruction set oneDNN dispatches its kernels on here.
std::string dnnlIsaName() {
  switch (dnnl_get_effective_cpu_isa()) {
  case dnnl_cpu_isa_sse41:
    return "sse41";
  case dnnl_cpu_isa_avx:
    return "avx";
  case dnnl_cpu_isa_avx2:
    return "avx2";
  case dnnl_cpu_isa_avx2_vnni:
    return "avx2_vnni";
  case dnnl_cpu_isa_avx512_mic:
  case dnnl_cpu_isa_avx512_mic_4ops:
    return "avx512_mic";
  case dnnl_cpu_isa_avx512_core:
    return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx:
    return "avx512_core_amx";
  default:
    return "isa " + std::to_string((int)dnnl_get_effective_cpu_isa());
  }
}

/// The most bytes a convolution's chunk of the batch takes in oneDNN's
/// layouts (input and output; the scratchpad comes on top): 32 MiB, or
/// GPUC_CONV_CHUNK_BYTES (what the tests use to make small batches run in
/// several chunks).
int64_t convChunkBytes() {
  // Read once: a bad value is said once, not at every convolution.
  static const int64_t bytes = [] {
    const int64_t fallback = int64_t(32) << 20;
    const char *text = getenv("GPUC_CONV_CHUNK_BYTES");
    int64_t parsed = 0;
    if (!text)
      return fallback;
    if (!parseInteger(text, 1, int64_t(1) << 40, parsed)) {
      fprintf(stderr,
              "gpuc: warning: GPUC_CONV_CHUNK_BYTES='%s' is not a byte count "
              "from 1 to 2^40; using 32 MiB\n",
              text);
      return fallback;
    }
    return parsed;
  }();
  return bytes;
}

/// The storage type of a library call's tensors.
enum class LibraryType { F32, F16, BF16 };

bool libraryTypeOf(const nlohmann::json &s, const char *field,
                   LibraryType &type, std::string &error) {
  std::string dtype = s.value(field, s.value("dtype", "F32"));
  if (dtype == "F32")
    type = LibraryType::F32;
  else if (dtype == "F16")
    type = LibraryType::F16;
  else if (dtype == "BF16")
    type = LibraryType::BF16;
  else {
    error = "plan.json: a " + s["op"].get<std::string>() + " step of dtype " +
            dtype + " (the CPU computes F32, F16 and BF16 ones); recompile";
    return false;
  }
  return true;
}

void widen(LibraryType type, const void *src, float *dst, int64_t n) {
  const uint16_t *bits = static_cast<const uint16_t *>(src);
  if (type == LibraryType::F16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfBitsToFloat(bits[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bfloat16BitsToFloat(bits[i]);
  }
}
void narrow(LibraryType type, const float *src, void *dst, int64_t n) {
  uint16_t *bits = static_cast<uint16_t *>(dst);
  if (type == LibraryType::F16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      bits[i] = floatToHalfBits(src[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      bits[i] = floatToBFloat16Bits(src[i]);
  }
}

/// A plan step with its buffers and library arguments resolved once, so a
/// training step does no name lookups or JSON access.
struct Step {
  StepKind kind;
  void (*launch)(void *const *) = nullptr;
  std::vector<void *> args;
  /// An all-reduce's tensors, and its bucket (what its wait names).
  std::vector<ReduceBuffer> reduce;
  int64_t bucket = -1;
  /// A sharded collective's or rank_shard's tensors, cut over `ranks`.
  std::vector<ShardBuffer> shards;
  int64_t ranks = 1;
  /// Row-major GEMMs C = op(A) op(B), batched and strided.
  GemmStep gemm{};
  ConvGeometry conv{};
  /// A convolution's oneDNN primitive and the reorders around it.
  struct Convolution {
    dnnl::primitive primitive;
    /// One per tensor (x, w, y): the plan's plain layout, the primitive's
    /// layout (the same memory when they agree) and the reorder between
    /// them, in the direction the tensor flows.
    struct Tensor {
      int arg;
      bool input;
      dnnl::memory plain, inner;
      dnnl::reorder reorder;
      int64_t offset = 0; // of `inner` in the convolution scratch
    } tensors[3];
    /// oneDNN's own working memory, also in the convolution scratch.
    dnnl::memory scratchpad;
    int64_t scratchpadOffset = 0;
    /// The convolution scratch it needs: its reordered tensors and its
    /// scratchpad.
    int64_t scratchBytes = 0;
    /// oneDNN's name for the implementation it chose ("jit_dw:avx512_core").
    std::string implementation;
  };
  /// Convolutions run over chunks of the batch (convolutionChunk samples),
  /// so their scratch stays small at any batch: the primitive for a full
  /// chunk and, when the batch is not a multiple of it, for the last one.
  std::shared_ptr<Convolution> convolution, lastChunk;
  int64_t convolutionChunk = 0;
  /// A depthwise filter gradient computed by depthwiseFilterGradient, not
  /// oneDNN.
  bool depthwiseFilter = false;
  float *x = nullptr, *w = nullptr, *y = nullptr;
  /// A GEMM's bias epilogue: `biasElements` (n) values of the result's
  /// type added to every row of C; null without one.
  float *bias = nullptr;
  int64_t biasElements = 0;
  /// f16/bf16 library calls: the operands' elements (x, w, y: a, b, c for
  /// a GEMM) and which of them is the result, computed in f32 scratch. A
  /// GEMM of 16-bit operands may store an f32 result (`resultType`).
  LibraryType type = LibraryType::F32, resultType = LibraryType::F32;
  int64_t elements[3] = {0, 0, 0};
  int output = 2;
  void *src = nullptr, *dst = nullptr;
  size_t bytes = 0;
  std::string label;
  /// train --profile: time spent in this step.
  mutable StepTime time;
};

class CpuDevice : public Device {
  /// The measured sgemm rate, once measured (densePeakFlops).
  double sgemmPeak = 0;

public:
  CpuDevice(const Plan &plan, bool profile) : plan(plan), profile(profile) {}

  bool init(const CpuKernel *table, std::string &error) {
    for (const CpuKernel *k = table; k && k->name; ++k)
      kernels[k->name] = k->launch;
    // What the plan needs, checked before any step: an allocation that
    // fails is an error naming the bytes, not a crash later.
    auto outOfMemory = [&](const std::string &what, int64_t bytes) {
      int64_t total = plan.arenaBytes;
      for (const PlanBuffer &b : plan.buffers)
        if (b.persistent())
          total += b.bytes;
      error = "cannot allocate " + std::to_string(bytes) + " bytes for " +
              what + " (the plan needs " + std::to_string(total) +
              " bytes in all: arena + persistent buffers); compile with a "
              "smaller --batch, or see what fits with gpuc compile "
              "--max-batch-for";
      return false;
    };
    if (!(arena = alloc(plan.arenaBytes)))
      return outOfMemory("the arena", plan.arenaBytes);
    for (const PlanBuffer &b : plan.buffers) {
      if (b.persistent()) {
        void *p = alloc(b.bytes);
        if (!p)
          return outOfMemory("buffer " + b.name, b.bytes);
        memset(p, 0, b.bytes);
        owned.push_back(p);
        pointers.push_back(p);
      } else {
        pointers.push_back(static_cast<char *>(arena) + b.offset);
      }
    }
    // Resolve every step once: a plan naming a kernel the binary lacks is
    // an error before the first step, not in the middle of one.
    for (auto &[name, function] : plan.json["functions"].items()) {
      for (const auto &s : function["steps"]) {
        if (s["op"] == "kernel" && !kernels.count(s["kernel"])) {
          error = "plan.json step of " + name + " needs kernel " +
                  s["kernel"].get<std::string>() +
                  ", which this trainer was not built with; recompile";
          return false;
        }
      }
    }
    int64_t wideFloats = 0;
    for (auto &[name, function] : plan.json["functions"].items()) {
      std::vector<Step> &steps = programs[name];
      for (const auto &s : function["steps"]) {
        Step step;
        if (!readStepHeader(name, steps.size(), s, step, error))
          return false;
        if (step.kind == StepKind::Kernel) {
          step.launch = kernels[s["kernel"].get<std::string>()];
          for (int id : s["args"])
            step.args.push_back(pointers[id]);
        } else if (step.kind == StepKind::Gemm) {
          step.gemm = gemmStepOf(s);
          step.x = f(s, "a", step.gemm.offsetA);
          step.w = f(s, "b", step.gemm.offsetB);
          step.y = f(s, "c", step.gemm.offsetC);
          for (int i = 0; i < 3; ++i)
            step.elements[i] = (int64_t)step.gemm.extent(i);
          if (s.contains("bias")) {
            step.bias = f(s, "bias");
            step.biasElements = step.gemm.n;
          }
        } else if (step.kind == StepKind::Copy) {
          step.src = pointers[s["src"].get<int>()];
          step.dst = pointers[s["dst"].get<int>()];
          step.bytes = s["bytes"].get<size_t>();
        } else if (step.kind == StepKind::CollectiveWait) {
          step.bucket = s["bucket"];
        } else if (step.kind == StepKind::ReduceScatter ||
                   step.kind == StepKind::AllGather ||
                   step.kind == StepKind::RankShard) {
          step.bucket = s.value("bucket", (int64_t)-1);
          step.ranks = s["ranks"];
          for (const auto &pair : s["pairs"]) {
            const PlanBuffer &whole = plan.buffers[pair["whole"].get<int>()];
            step.shards.push_back({pointers[whole.id],
                                   pointers[pair["shard"].get<int>()],
                                   whole.numElements(), whole.dtype});
          }
        } else if (step.kind == StepKind::AllReduce) {
          step.bucket = s["bucket"];
          for (int id : s["buffers"]) {
            const PlanBuffer &b = plan.buffers[id];
            step.reduce.push_back({pointers[id], b.numElements(), b.dtype});
          }
        } else {
          step.conv = convGeometryOf(s);
          step.x = f(s, "x");
          step.w = f(s, "w");
          step.y = f(s, "y");
          const ConvGeometry &g = step.conv;
          step.elements[0] = g.n * g.c * g.h * g.w;
          step.elements[1] = g.k * g.cg * g.kh * g.kw;
          step.elements[2] = g.n * g.k * g.oh * g.ow;
          step.output = step.kind == StepKind::ConvBackwardInput    ? 0
                        : step.kind == StepKind::ConvBackwardFilter ? 1
                                                                    : 2;
          if (!createConvolution(step, error))
            return false;
        }
        if (step.kind != StepKind::Kernel && step.kind != StepKind::Copy &&
            !isCollective(step.kind)) {
          if (!libraryTypeOf(s, "dtype", step.type, error) ||
              !libraryTypeOf(s, "c_dtype", step.resultType, error))
            return false;
          if (step.kind != StepKind::Gemm)
            step.resultType = step.type;
          if (step.resultType != step.type &&
              step.resultType != LibraryType::F32) {
            error = "plan.json: a gemm step stores " +
                    s["c_dtype"].get<std::string>() + " products of " +
                    s["dtype"].get<std::string>() +
                    " operands (the CPU stores their own type or F32); "
                    "recompile";
            return false;
          }
          if (step.type != LibraryType::F32)
            wideFloats =
                std::max(wideFloats, step.elements[0] + step.elements[1] +
                                         step.elements[2] + step.biasElements);
        }
        steps.push_back(std::move(step));
      }
    }
    if (convScratchBytes > 0 &&
        !(convScratch = static_cast<char *>(alloc(convScratchBytes))))
      return outOfMemory("convolution scratch (oneDNN's layouts)",
                         convScratchBytes);
    if (filterGradientFloats > 0 &&
        !(filterGradient = static_cast<float *>(
              alloc(filterGradientFloats * (int64_t)sizeof(float)))))
      return outOfMemory("a convolution chunk's filter gradient",
                         filterGradientFloats * (int64_t)sizeof(float));
    if (wideFloats > 0 &&
        !(wide = static_cast<float *>(alloc(wideFloats * sizeof(float)))))
      return outOfMemory("f32 copies of f16/bf16 GEMM and convolution operands",
                         wideFloats * (int64_t)sizeof(float));
    return true;
  }

  ~CpuDevice() override {
    free(arena);
    free(wide);
    free(convScratch);
    free(filterGradient);
    for (void *p : owned)
      free(p);
  }

  std::string describe() const override {
    return "cpu (generated kernels and oneDNN GEMMs on OpenMP threads)";
  }

  Numerics numerics() const override {
    return {"cpu", cpuModel() + " (" + dnnlIsaName() + ")",
            (int64_t)omp_get_max_threads()};
  }

  void upload(int id, const void *src, size_t bytes) override {
    memcpy(pointers[id], src, bytes);
  }
  void download(int id, void *dst, size_t bytes) override {
    memcpy(dst, pointers[id], bytes);
  }

  // Steps have finished when run() returns: a read is at once a value.
  uint64_t readLater(int id, size_t bytes) override {
    std::vector<char> &value = reads[nextTicket];
    value.resize(bytes);
    memcpy(value.data(), pointers[id], bytes);
    return nextTicket++;
  }
  bool ready(uint64_t) override { return true; }
  void collect(uint64_t ticket, void *dst, size_t bytes) override {
    auto it = reads.find(ticket);
    if (it == reads.end())
      return;
    memcpy(dst, it->second.data(), std::min(bytes, it->second.size()));
    reads.erase(it);
  }
  size_t readCapacity() const override { return SIZE_MAX; }

  bool run(const std::string &function, std::string &error) override {
    auto it = programs.find(function);
    if (it == programs.end()) {
      error = "the plan has no function " + function;
      return false;
    }
    for (const Step &step : it->second) {
      double start = profile ? profileClock() : 0;
      switch (step.kind) {
      case StepKind::Kernel:
        step.launch(step.args.data());
        break;
      case StepKind::Copy:
        memcpy(step.dst, step.src, step.bytes);
        break;
      case StepKind::AllReduce:
        // Started here, finished where the first step reads the sums: the
        // backward steps between them overlap the communication.
        if (collective &&
            !collective->start(step.reduce, inFlight[step.bucket], error))
          return false;
        break;
      case StepKind::ReduceScatter:
      case StepKind::AllGather:
      case StepKind::RankShard:
        if (!runSharded(step, error))
          return false;
        break;
      case StepKind::CollectiveWait:
        if (collective && !finishBucket(step.bucket, error))
          return false;
        break;
      default:
        library(step);
        break;
      }
      if (profile)
        step.time.add(profileClock() - start, start);
      if (!inFlight.empty())
        collective->progress();
    }
    // (A plan waits for every bucket it starts; an older one may not.)
    while (!inFlight.empty())
      if (!finishBucket(inFlight.begin()->first, error))
        return false;
    return true;
  }

  /// The steps of optimizer-state sharding: collectives started over the
  /// ranks (finished at their wait), and this rank's shard copied out of
  /// a whole tensor. Alone, a plan sharded over one rank copies.
  bool runSharded(const Step &step, std::string &error) {
    int ranks = collective ? collective->size() : 1;
    if (step.ranks != ranks) {
      error = "the plan's optimizer state is sharded over " +
              std::to_string(step.ranks) +
              " ranks (gpuc compile "
              "--shard-optimizer --ranks " +
              std::to_string(step.ranks) + "), but this run has " +
              std::to_string(ranks) + ": start it with mpirun -np " +
              std::to_string(step.ranks);
      return false;
    }
    if (collective && step.kind == StepKind::ReduceScatter)
      return collective->startReduceScatter(step.shards, inFlight[step.bucket],
                                            error);
    if (collective && step.kind == StepKind::AllGather)
      return collective->startAllGather(step.shards, inFlight[step.bucket],
                                        error);
    int rank = collective ? collective->rank() : 0;
    for (const ShardBuffer &b : step.shards) {
      int64_t elementBytes = dtypeBytes(b.dtype);
      int64_t shard = shardElements(b.count, ranks);
      int64_t filled = shardFilled(b.count, ranks, rank);
      // (A rank whose shard lies past a small tensor's end holds only
      // padding: its place is the tensor's end.)
      char *whole = static_cast<char *>(b.whole) +
                    std::min(rank * shard, b.count) * elementBytes;
      char *mine = static_cast<char *>(b.shard);
      if (step.kind == StepKind::AllGather) {
        memcpy(whole, mine, filled * elementBytes);
        continue;
      }
      memcpy(mine, whole, filled * elementBytes);
      memset(mine + filled * elementBytes, 0, (shard - filled) * elementBytes);
    }
    return true;
  }

  bool finishBucket(int64_t bucket, std::string &error) {
    auto it = inFlight.find(bucket);
    if (it == inFlight.end())
      return true;
    int ticket = it->second;
    inFlight.erase(it);
    return collective->finish(ticket, error);
  }

  bool setCollective(Collective *ranks, std::string &) override {
    collective = ranks;
    return true;
  }

  std::vector<StepTime> stepTimes() const override {
    return profile ? collectStepTimes(programs) : std::vector<StepTime>();
  }

  /// Bandwidth: a triad over three 64 MiB arrays on the OpenMP threads,
  /// the best of 5; FLOP rate: a 1024^3 oneDNN sgemm, the best of 5.
  double densePeakFlops(const std::string &) override {
    if (sgemmPeak == 0)
      sgemmPeak = measurePeaks().flopsPerSecond;
    return sgemmPeak;
  }
  MachinePeaks measurePeaks() override {
    MachinePeaks peaks;
    const int64_t n = 16 << 20, m = 1024;
    std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      double start = profileClock();
      float *pa = a.data(), *pb = b.data(), *pc = c.data();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        pc[i] = pa[i] + 1.5f * pb[i];
      best = std::min(best, profileClock() - start);
    }
    peaks.bytesPerSecond = 3.0 * n * sizeof(float) / best;
    std::vector<float> x(m * m, 1.0f), y(m * m, 0.5f), z(m * m);
    best = 1e30;
    for (int r = 0; r < 5; ++r) {
      double start = profileClock();
      sgemm(false, false, m, m, m, x.data(), m, y.data(), m, 0.0f, z.data(), m);
      best = std::min(best, profileClock() - start);
    }
    peaks.flopsPerSecond = 2.0 * m * m * m / best;
    peaks.how = "triad over 3 x 64 MiB, 1024^3 sgemm, OpenMP threads";
    return peaks;
  }

private:
  void *alloc(int64_t bytes) {
    size_t size = ((size_t)std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
    allocated += size;
    return aligned_alloc(64, size);
  }
  /// A step's operand: its buffer, or the element `offset` elements of the
  /// buffer's type in (a window's first).
  float *f(const nlohmann::json &s, const char *key, int64_t offset = 0) {
    int id = s[key].get<int>();
    return reinterpret_cast<float *>(static_cast<char *>(pointers[id]) +
                                     offset *
                                         dtypeBytes(plan.buffers[id].dtype));
  }

  /// A GEMM or convolution; f16/bf16 ones through f32 copies.
  void library(const Step &step) {
    if (step.type == LibraryType::F32)
      return libraryF32(step);
    Step converted = step;
    float *next = wide;
    float **operands[3] = {&converted.x, &converted.w, &converted.y};
    bool narrowResult = step.resultType != LibraryType::F32;
    // An accumulating GEMM reads its result's values first.
    bool readsResult = step.kind == StepKind::Gemm && step.gemm.accumulate;
    for (int i = 0; i < 3; ++i) {
      if (i == step.output && !narrowResult)
        continue;
      float *narrowData = *operands[i];
      *operands[i] = next;
      if (i != step.output || readsResult)
        widen(step.type, narrowData, next, step.elements[i]);
      next += step.elements[i];
    }
    // The bias has the result's type: widened where the result is narrow.
    if (step.bias && narrowResult) {
      widen(step.type, step.bias, next, step.biasElements);
      converted.bias = next;
    }
    libraryF32(converted);
    if (narrowResult)
      narrow(step.type, *operands[step.output],
             step.output == 0   ? (void *)step.x
             : step.output == 1 ? (void *)step.w
                                : (void *)step.y,
             step.elements[step.output]);
  }
  void libraryF32(const Step &step) {
    switch (step.kind) {
    case StepKind::Gemm:
      return gemm(step);
    case StepKind::Conv:
    case StepKind::ConvBackwardInput:
    case StepKind::ConvBackwardFilter:
      return convolve(step);
    default:
      return;
    }
  }

  void gemm(const Step &step) {
    const GemmStep &g = step.gemm;
    // A batch of products (attention's heads and their bands) runs whole
    // products on each thread, at least 4 a thread so that none waits long
    // for the last: oneDNN, called inside the parallel region, runs each on
    // one. Split across the threads, one product of 128 rows by 64 terms
    // ran at 60-100 GFLOP/s on 2 cores, 130 so (GPT-2 at 1,024 tokens);
    // whole heads of 1,024 rows run as fast either way (about 170). The
    // sums are the same either way.
    int64_t entries = g.calls * g.batch;
    if (entries >= 4 * (int64_t)omp_get_max_threads() && !step.bias) {
#pragma omp parallel for schedule(dynamic)
      for (int64_t e = 0; e < entries; ++e) {
        int64_t call = e / g.batch, p = e % g.batch;
        sgemm(g.transA, g.transB, g.m, g.n, g.k,
              step.x + call * g.callStrideA + p * g.strideA, g.lda,
              step.w + call * g.callStrideB + p * g.strideB, g.ldb,
              g.accumulate ? 1.0f : 0.0f,
              step.y + call * g.callStrideC + p * g.strideC, g.ldc);
      }
      return;
    }
    for (int64_t call = 0; call < g.calls; ++call) {
      const float *a = step.x + call * g.callStrideA,
                  *b = step.w + call * g.callStrideB;
      float *c = step.y + call * g.callStrideC;
      for (int64_t p = 0; p < g.batch; ++p) {
        sgemm(g.transA, g.transB, g.m, g.n, g.k, a + p * g.strideA, g.lda,
              b + p * g.strideB, g.ldb, g.accumulate ? 1.0f : 0.0f,
              c + p * g.strideC, g.ldc);
        if (step.bias)
          addBias(c + p * g.strideC, g.m, g.n, g.ldc, step.bias);
      }
    }
  }
  /// The bias epilogue: `bias` added to each of the m rows of C (f32,
  /// before a 16-bit result is rounded, as cuBLASLt adds it).
  static void addBias(float *c, int64_t m, int64_t n, int64_t ldc,
                      const float *bias) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      float *row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j)
        row[j] += bias[j];
    }
  }

  /// Creates `step`'s oneDNN convolution: the primitive for its direction
  /// with the layouts oneDNN chooses (format_tag::any), and a reorder for
  /// each tensor whose chosen layout is not the plan's plain one.
  bool createConvolution(Step &step, std::string &error) {
    const ConvGeometry &g = step.conv;
    // Samples per chunk: those whose input and output, in layouts blocked
    // by 8 channels, fit convChunkBytes().
    auto blocked = [](int64_t channels) { return (channels + 7) / 8 * 8; };
    int64_t perSample = (int64_t)sizeof(float) *
                        (blocked(g.c) * g.h * g.w + blocked(g.k) * g.oh * g.ow);
    step.convolutionChunk = std::clamp<int64_t>(
        convChunkBytes() / std::max<int64_t>(perSample, 1), 1, g.n);
    ConvGeometry chunk = g;
    chunk.n = step.convolutionChunk;
    if (!(step.convolution = createConvolution(step, chunk, error)))
      return false;
    // oneDNN has direct depthwise filter gradients for some filters (3x3 in
    // 2.x); for the others it chose an im2col and a GEMM per channel, which
    // depthwiseFilterGradient outruns 5-15 times (EfficientNet's 5x5).
    if (step.kind == StepKind::ConvBackwardFilter && isDepthwise(g) &&
        step.convolution->implementation.rfind("jit_dw", 0) != 0) {
      step.convolution.reset();
      step.depthwiseFilter = true;
      return true;
    }
    convScratchBytes =
        std::max(convScratchBytes, step.convolution->scratchBytes);
    if (g.n % chunk.n) {
      chunk.n = g.n % chunk.n;
      if (!(step.lastChunk = createConvolution(step, chunk, error)))
        return false;
      convScratchBytes =
          std::max(convScratchBytes, step.lastChunk->scratchBytes);
    }
    // Filter gradients of chunks after the first are summed from here.
    if (step.kind == StepKind::ConvBackwardFilter &&
        g.n > step.convolutionChunk)
      filterGradientFloats =
          std::max(filterGradientFloats, g.k * g.cg * g.kh * g.kw);
    return true;
  }
  /// oneDNN's direct kernels (jit, brgemm, depthwise) read and write NHWC
  /// tensors as they are, so a channels-last convolution binds its
  /// activations and their gradients in the plan's buffers: no reorder of
  /// an activation, where NCHW ones are reordered into a blocked layout and
  /// back around every call. Where oneDNN has only its reference kernel for
  /// NHWC, the convolution takes the layouts oneDNN chooses, as NCHW ones
  /// do. Filters, small, always take the chosen layout.
  std::shared_ptr<Step::Convolution> createConvolution(const Step &step,
                                                       const ConvGeometry &g,
                                                       std::string &error) {
    if (g.channelsLast) {
      std::string unused;
      std::shared_ptr<Step::Convolution> conv =
          createConvolution(step, g, /*storedActivations=*/true, unused);
      if (conv && conv->implementation.rfind("ref", 0) != 0)
        return conv;
    }
    return createConvolution(step, g, /*storedActivations=*/false, error);
  }
  std::shared_ptr<Step::Convolution> createConvolution(const Step &step,
                                                       const ConvGeometry &g,
                                                       bool storedActivations,
                                                       std::string &error) {
    using namespace dnnl;
    using tag = memory::format_tag;
    memory::dims x = {g.n, g.c, g.h, g.w}, y = {g.n, g.k, g.oh, g.ow};
    memory::dims w = g.groups == 1 ? memory::dims{g.k, g.cg, g.kh, g.kw}
                                   : memory::dims{g.groups, g.k / g.groups,
                                                  g.cg, g.kh, g.kw};
    tag wTag = g.channelsLast ? (g.groups == 1 ? tag::ohwi : tag::gohwi)
                              : (g.groups == 1 ? tag::oihw : tag::goihw);
    tag dataTag = g.channelsLast ? tag::nhwc : tag::nchw;
    // oneDNN counts dilation from 0; the right and bottom padding are what
    // makes the output size come out as the plan's.
    memory::dims strides = {g.sy, g.sx}, dilates = {g.dy - 1, g.dx - 1};
    memory::dims padL = {g.py, g.px};
    memory::dims padR = {(g.oh - 1) * g.sy + (g.kh - 1) * g.dy + 1 - g.h - g.py,
                         (g.ow - 1) * g.sx + (g.kw - 1) * g.dx + 1 - g.w -
                             g.px};
    auto plain = [](const memory::dims &d, tag t) {
      return memory::desc(d, memory::data_type::f32, t);
    };
    auto any = [](const memory::dims &d) {
      return memory::desc(d, memory::data_type::f32, tag::any);
    };
    // The activations' (x, y) layouts the primitive is asked for.
    auto data = [&](const memory::dims &d) {
      return storedActivations ? plain(d, dataTag) : any(d);
    };
    // The scratchpad is ours (convScratch), so the device knows every byte
    // it uses.
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    try {
      auto forward = convolution_forward::primitive_desc(
          convolution_forward::desc(
              prop_kind::forward_training, algorithm::convolution_direct,
              data(x), any(w), data(y), strides, dilates, padL, padR),
          attr, engine);
      memory::desc scratchpad = forward.scratchpad_desc();
      auto conv = std::make_shared<Step::Convolution>();
      // (argument, plain layout, chosen layout, flows in) for x, w, y.
      struct Binding {
        int arg;
        memory::desc plainDesc, chosen;
        bool input;
      } bindings[3];
      if (step.kind == StepKind::Conv) {
        conv->primitive = convolution_forward(forward);
        conv->implementation = forward.impl_info_str();
        bindings[0] = {DNNL_ARG_SRC, plain(x, dataTag), forward.src_desc(),
                       true};
        bindings[1] = {DNNL_ARG_WEIGHTS, plain(w, wTag), forward.weights_desc(),
                       true};
        bindings[2] = {DNNL_ARG_DST, plain(y, dataTag), forward.dst_desc(),
                       false};
      } else if (step.kind == StepKind::ConvBackwardInput) {
        auto pd = convolution_backward_data::primitive_desc(
            convolution_backward_data::desc(algorithm::convolution_direct,
                                            data(x), any(w), data(y), strides,
                                            dilates, padL, padR),
            attr, engine, forward);
        conv->primitive = convolution_backward_data(pd);
        conv->implementation = pd.impl_info_str();
        scratchpad = pd.scratchpad_desc();
        bindings[0] = {DNNL_ARG_DIFF_SRC, plain(x, dataTag), pd.diff_src_desc(),
                       false};
        bindings[1] = {DNNL_ARG_WEIGHTS, plain(w, wTag), pd.weights_desc(),
                       true};
        bindings[2] = {DNNL_ARG_DIFF_DST, plain(y, dataTag), pd.diff_dst_desc(),
                       true};
      } else {
        auto pd = convolution_backward_weights::primitive_desc(
            convolution_backward_weights::desc(algorithm::convolution_direct,
                                               data(x), any(w), data(y),
                                               strides, dilates, padL, padR),
            attr, engine, forward);
        conv->primitive = convolution_backward_weights(pd);
        conv->implementation = pd.impl_info_str();
        scratchpad = pd.scratchpad_desc();
        bindings[0] = {DNNL_ARG_SRC, plain(x, dataTag), pd.src_desc(), true};
        bindings[1] = {DNNL_ARG_DIFF_WEIGHTS, plain(w, wTag),
                       pd.diff_weights_desc(), false};
        bindings[2] = {DNNL_ARG_DIFF_DST, plain(y, dataTag), pd.diff_dst_desc(),
                       true};
      }
      // This step's part of the scratch: the reordered tensors, then the
      // scratchpad, each 64-byte aligned. Steps run one at a time, so they
      // all share one scratch of the largest step's size.
      int64_t used = 0;
      auto place = [&](const memory::desc &d) {
        int64_t at = used;
        used += ((int64_t)d.get_size() + 63) / 64 * 64;
        return at;
      };
      for (int i = 0; i < 3; ++i) {
        Step::Convolution::Tensor &t = conv->tensors[i];
        const Binding &b = bindings[i];
        t.arg = b.arg;
        t.input = b.input;
        t.plain = memory(b.plainDesc, engine, DNNL_MEMORY_NONE);
        if (b.chosen == b.plainDesc) {
          t.inner = t.plain;
          continue;
        }
        t.inner = memory(b.chosen, engine, DNNL_MEMORY_NONE);
        t.offset = place(b.chosen);
        t.reorder =
            b.input ? reorder(t.plain, t.inner) : reorder(t.inner, t.plain);
      }
      if (scratchpad.get_size() > 0) {
        conv->scratchpad = memory(scratchpad, engine, DNNL_MEMORY_NONE);
        conv->scratchpadOffset = place(scratchpad);
      }
      conv->scratchBytes = used;
      return conv;
    } catch (const dnnl::error &e) {
      error = "oneDNN cannot create the convolution of plan step " +
              step.label + " (input " + std::to_string(g.n) + "x" +
              std::to_string(g.c) + "x" + std::to_string(g.h) + "x" +
              std::to_string(g.w) + ", filter " + std::to_string(g.k) + "x" +
              std::to_string(g.cg) + "x" + std::to_string(g.kh) + "x" +
              std::to_string(g.kw) + "): " + e.what();
      return nullptr;
    }
  }

  /// Runs a convolution step on `s.x`, `s.w`, `s.y` (f32; the converted
  /// copies for f16/bf16), chunk by chunk over the batch. The filter
  /// gradient is the sum over chunks: the first writes it, later ones are
  /// computed into filterGradient and added.
  void convolve(const Step &s) {
    const ConvGeometry &g = s.conv;
    if (s.depthwiseFilter)
      return depthwiseFilterGradient(g, s.x, s.y, s.w);
    int64_t filter = g.k * g.cg * g.kh * g.kw;
    for (int64_t first = 0; first < g.n; first += s.convolutionChunk) {
      bool last = first + s.convolutionChunk > g.n;
      bool sum = s.kind == StepKind::ConvBackwardFilter && first > 0;
      float *data[3] = {s.x + first * g.c * g.h * g.w,
                        sum ? filterGradient : s.w,
                        s.y + first * g.k * g.oh * g.ow};
      runConvolution(last ? *s.lastChunk : *s.convolution, data);
      if (sum) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < filter; ++i)
          s.w[i] += filterGradient[i];
      }
    }
  }
  void runConvolution(Step::Convolution &conv, float *const data[3]) {
    std::unordered_map<int, dnnl::memory> args;
    for (int i = 0; i < 3; ++i) {
      Step::Convolution::Tensor &t = conv.tensors[i];
      t.plain.set_data_handle(data[i]);
      if (t.reorder)
        t.inner.set_data_handle(convScratch + t.offset);
      if (t.input && t.reorder)
        t.reorder.execute(stream, t.plain, t.inner);
      args[t.arg] = t.inner;
    }
    if (conv.scratchpad) {
      conv.scratchpad.set_data_handle(convScratch + conv.scratchpadOffset);
      args[DNNL_ARG_SCRATCHPAD] = conv.scratchpad;
    }
    conv.primitive.execute(stream, args);
    for (Step::Convolution::Tensor &t : conv.tensors)
      if (!t.input && t.reorder)
        t.reorder.execute(stream, t.inner, t.plain);
    stream.wait();
  }

  int64_t allocatedBytes() const override { return allocated; }

  const Plan &plan;
  std::map<std::string, void (*)(void *const *)> kernels;
  void *arena = nullptr;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  /// Where convolutions keep their tensors in oneDNN's layouts and
  /// oneDNN's working memory: one region, the largest step's need.
  char *convScratch = nullptr;
  int64_t convScratchBytes = 0;
  /// A chunk's filter gradient, before it is added to the step's.
  float *filterGradient = nullptr;
  int64_t filterGradientFloats = 0;
  dnnl::stream stream{engine};
  /// The f32 copies of a f16/bf16 library call's operands.
  float *wide = nullptr;
  int64_t allocated = 0;
  std::vector<void *> owned, pointers;
  std::map<std::string, std::vector<Step>> programs;
  /// The ranks the all-reduces sum over; null: this process alone.
  Collective *collective = nullptr;
  /// The collective tickets of the buckets started and not yet waited for.
  std::map<int64_t, int> inFlight;
  std::map<uint64_t, std::vector<char>> reads;
  uint64_t nextTicket = 0;
  bool profile;
};
} // namespace

std::unique_ptr<Device> createCpuDevice(const Plan &plan,
                                        const CpuKernel *table, bool profile,
                                        std::string &error) {
  auto device = std::make_unique<CpuDevice>(plan, profile);
  if (!device->init(table, error))
    return nullptr;
  return device;
}

} // namespace gpuc

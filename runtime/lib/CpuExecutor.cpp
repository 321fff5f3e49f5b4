//===- CpuExecutor.cpp - the step program on the CPU ----------------------===//
//
// Generated kernels come from the table linked into the trainer; GEMMs go to
// oneDNN's sgemm; convolutions are im2col over a chunk of the batch followed by
// one GEMM per group (the col matrix is [C*kh*kw, n*OH*OW], so the GEMM is
// large even for small images), and their gradients are the transposed products
// plus col2im. The chunk is as many samples as fit kConvScratchBytes, so
// the memory beside the plan stays small whatever the batch.
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
#include "gpuc/runtime/Executor.h"
#include "gpuc/runtime/PlanSteps.h"
#include "gpuc/runtime/StepProfile.h"
#include "gpuc/runtime/device/CpuKernelTable.h"
#include "gpuc/runtime/device/Float16.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

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

/// The most bytes of im2col scratch a convolution takes at once.
constexpr int64_t kConvScratchBytes = 32 << 20;

/// col[(c*kh + ky)*kw + kx][(b*oh + oy)*ow + ox] = x[b][c][iy][ix] (0 outside).
void im2col(const ConvGeometry &g, const float *x, float *col) {
  int64_t plane = g.oh * g.ow;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t kk = 0; kk < g.kh * g.kw; ++kk) {
      int64_t ky = kk / g.kw, kx = kk % g.kw;
      float *row = col + ((c * g.kh * g.kw) + kk) * g.cols();
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t iy = oy * g.sy - g.py + ky * g.dy;
          float *out = row + b * plane + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            memset(out, 0, g.ow * sizeof(float));
            continue;
          }
          const float *in = x + ((b * g.c + c) * g.h + iy) * g.w;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t ix = ox * g.sx - g.px + kx * g.dx;
            out[ox] = ix >= 0 && ix < g.w ? in[ix] : 0.0f;
          }
        }
    }
}

/// The adjoint of im2col: dx[b][c][iy][ix] += col[...], dx zeroed first.
/// Each channel is one task, so no two threads write the same element.
void col2im(const ConvGeometry &g, const float *col, float *dx) {
  int64_t plane = g.oh * g.ow;
  memset(dx, 0, g.n * g.c * g.h * g.w * sizeof(float));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t kk = 0; kk < g.kh * g.kw; ++kk) {
      int64_t ky = kk / g.kw, kx = kk % g.kw;
      const float *row = col + ((c * g.kh * g.kw) + kk) * g.cols();
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t iy = oy * g.sy - g.py + ky * g.dy;
          if (iy < 0 || iy >= g.h)
            continue;
          const float *in = row + b * plane + oy * g.ow;
          float *out = dx + ((b * g.c + c) * g.h + iy) * g.w;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t ix = ox * g.sx - g.px + kx * g.dx;
            if (ix >= 0 && ix < g.w)
              out[ix] += in[ox];
          }
        }
    }
}

/// [K, N*P] (GEMM layout) <-> [N, K, P] (NCHW).
void kpToNkp(const float *src, float *dst, int64_t n, int64_t k, int64_t p) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < k; ++c)
      memcpy(dst + (b * k + c) * p, src + c * n * p + b * p, p * sizeof(float));
}
void nkpToKp(const float *src, float *dst, int64_t n, int64_t k, int64_t p) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < k; ++c)
      memcpy(dst + c * n * p + b * p, src + (b * k + c) * p, p * sizeof(float));
}

/// The storage type of a library call's tensors.
enum class LibraryType { F32, F16, BF16 };

bool libraryTypeOf(const nlohmann::json &s, LibraryType &type,
                   std::string &error) {
  std::string dtype = s.value("dtype", "F32");
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
  /// A batch of row-major GEMMs C = op(A) op(B).
  struct Gemm {
    int64_t batch, m, n, k, strideA, strideB;
    bool transA, transB;
  } gemm{};
  ConvGeometry conv{};
  float *x = nullptr, *w = nullptr, *y = nullptr;
  /// f16/bf16 library calls: the operands' elements (x, w, y: a, b, c for
  /// a GEMM) and which of them is the result, computed in f32 scratch.
  LibraryType type = LibraryType::F32;
  int64_t elements[3] = {0, 0, 0};
  int output = 2;
  void *src = nullptr, *dst = nullptr;
  size_t bytes = 0;
  std::string label;
  /// train --profile: time spent in this step.
  mutable StepTime time;
};

class CpuDevice : public Device {
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
        StepKind kind;
        if (stepKindOf(s["op"], kind, error) && isConvolution(kind)) {
          ConvGeometry g = convGeometryOf(s);
          g.n = chunkSamples(g);
          scratchFloats =
              std::max(scratchFloats, g.rows() * g.cols() + g.k * g.cols());
        }
      }
    }
    scratch = static_cast<float *>(alloc(scratchFloats * sizeof(float)));
    if (!scratch)
      return outOfMemory("convolution scratch",
                         scratchFloats * (int64_t)sizeof(float));
    int64_t wideFloats = 0;
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
          step.launch = kernels[s["kernel"].get<std::string>()];
          for (int id : s["args"])
            step.args.push_back(pointers[id]);
        } else if (step.kind == StepKind::Gemm) {
          step.gemm = {s["batch"],   s["m"],        s["n"],
                       s["k"],       s["stride_a"], s["stride_b"],
                       s["trans_a"], s["trans_b"]};
          step.x = f(s, "a");
          step.w = f(s, "b");
          step.y = f(s, "c");
          const Step::Gemm &g = step.gemm;
          step.elements[0] = g.strideA ? g.batch * g.strideA : g.m * g.k;
          step.elements[1] = g.strideB ? g.batch * g.strideB : g.k * g.n;
          step.elements[2] = g.batch * g.m * g.n;
        } else if (step.kind == StepKind::Copy) {
          step.src = pointers[s["src"].get<int>()];
          step.dst = pointers[s["dst"].get<int>()];
          step.bytes = s["bytes"].get<size_t>();
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
        }
        if (step.kind != StepKind::Kernel && step.kind != StepKind::Copy) {
          if (!libraryTypeOf(s, step.type, error))
            return false;
          if (step.type != LibraryType::F32)
            wideFloats =
                std::max(wideFloats, step.elements[0] + step.elements[1] +
                                         step.elements[2]);
        }
        steps.push_back(std::move(step));
      }
    }
    if (wideFloats > 0 &&
        !(wide = static_cast<float *>(alloc(wideFloats * sizeof(float)))))
      return outOfMemory("f32 copies of f16/bf16 GEMM and convolution operands",
                         wideFloats * (int64_t)sizeof(float));
    return true;
  }

  ~CpuDevice() override {
    free(arena);
    free(scratch);
    free(wide);
    for (void *p : owned)
      free(p);
  }

  std::string describe() const override {
    return "cpu (generated kernels and oneDNN GEMMs on OpenMP threads)";
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
      default:
        library(step);
        break;
      }
      if (profile)
        step.time.add(profileClock() - start, start);
    }
    return true;
  }

  std::vector<StepTime> stepTimes() const override {
    std::vector<StepTime> times;
    if (profile)
      for (auto &[name, steps] : programs)
        for (const Step &step : steps)
          times.push_back(step.time);
    return times;
  }

  /// Bandwidth: a triad over three 64 MiB arrays on the OpenMP threads,
  /// the best of 5; FLOP rate: a 1024^3 oneDNN sgemm, the best of 5.
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
  float *f(const nlohmann::json &s, const char *key) {
    return static_cast<float *>(pointers[s[key].get<int>()]);
  }

  /// A GEMM or convolution; f16/bf16 ones through f32 copies.
  void library(const Step &step) {
    if (step.type == LibraryType::F32)
      return libraryF32(step);
    Step converted = step;
    float *next = wide;
    float **operands[3] = {&converted.x, &converted.w, &converted.y};
    for (int i = 0; i < 3; ++i) {
      float *narrowData = *operands[i];
      *operands[i] = next;
      if (i != step.output)
        widen(step.type, narrowData, next, step.elements[i]);
      next += step.elements[i];
    }
    libraryF32(converted);
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
      return conv(step);
    case StepKind::ConvBackwardInput:
      return convBackwardInput(step);
    case StepKind::ConvBackwardFilter:
      return convBackwardFilter(step);
    default:
      return;
    }
  }

  void gemm(const Step &step) {
    auto [batch, m, n, k, strideA, strideB, ta, tb] = step.gemm;
    const float *a = step.x, *b = step.w;
    float *c = step.y;
    for (int64_t p = 0; p < batch; ++p)
      sgemm(ta, tb, m, n, k, a + p * strideA, ta ? m : k, b + p * strideB,
            tb ? k : n, 0.0f, c + p * m * n, n);
  }

  /// Samples per im2col chunk of `g`: as many as fit kConvScratchBytes,
  /// at least one.
  static int64_t chunkSamples(const ConvGeometry &g) {
    int64_t perSample = (g.rows() + g.k) * g.oh * g.ow * (int64_t)sizeof(float);
    return std::clamp<int64_t>(
        kConvScratchBytes / std::max<int64_t>(perSample, 1), 1, g.n);
  }
  /// Runs `body(chunk, first)` over the batch of `g` in chunks: `chunk` is
  /// the geometry of samples [first, first + chunk.n).
  template <typename Body>
  static void forChunks(const ConvGeometry &g, Body body) {
    int64_t step = chunkSamples(g);
    for (int64_t first = 0; first < g.n; first += step) {
      ConvGeometry chunk = g;
      chunk.n = std::min(step, g.n - first);
      body(chunk, first);
    }
  }

  void conv(const Step &s) {
    forChunks(s.conv, [&](const ConvGeometry &g, int64_t first) {
      float *col = scratch, *out = scratch + g.rows() * g.cols();
      im2col(g, s.x + first * g.c * g.h * g.w, col);
      int64_t kg = g.k / g.groups, rows = g.cg * g.kh * g.kw;
      for (int64_t grp = 0; grp < g.groups; ++grp)
        sgemm(false, false, kg, g.cols(), rows, s.w + grp * kg * rows, rows,
              col + grp * rows * g.cols(), g.cols(), 0.0f,
              out + grp * kg * g.cols(), g.cols());
      kpToNkp(out, s.y + first * g.k * g.oh * g.ow, g.n, g.k, g.oh * g.ow);
    });
  }

  void convBackwardInput(const Step &s) {
    // dcol = W^T dY, then col2im.
    forChunks(s.conv, [&](const ConvGeometry &g, int64_t first) {
      float *col = scratch, *dy = scratch + g.rows() * g.cols();
      nkpToKp(s.y + first * g.k * g.oh * g.ow, dy, g.n, g.k, g.oh * g.ow);
      int64_t kg = g.k / g.groups, rows = g.cg * g.kh * g.kw;
      for (int64_t grp = 0; grp < g.groups; ++grp)
        sgemm(true, false, rows, g.cols(), kg, s.w + grp * kg * rows, rows,
              dy + grp * kg * g.cols(), g.cols(), 0.0f,
              col + grp * rows * g.cols(), g.cols());
      col2im(g, col, s.x + first * g.c * g.h * g.w);
    });
  }

  void convBackwardFilter(const Step &s) {
    // dW = sum over chunks of dY col^T.
    forChunks(s.conv, [&](const ConvGeometry &g, int64_t first) {
      float *col = scratch, *dy = scratch + g.rows() * g.cols();
      im2col(g, s.x + first * g.c * g.h * g.w, col);
      nkpToKp(s.y + first * g.k * g.oh * g.ow, dy, g.n, g.k, g.oh * g.ow);
      int64_t kg = g.k / g.groups, rows = g.cg * g.kh * g.kw;
      for (int64_t grp = 0; grp < g.groups; ++grp)
        sgemm(false, true, kg, rows, g.cols(), dy + grp * kg * g.cols(),
              g.cols(), col + grp * rows * g.cols(), g.cols(),
              first == 0 ? 0.0f : 1.0f, s.w + grp * kg * rows, rows);
    });
  }

  int64_t allocatedBytes() const override { return allocated; }

  const Plan &plan;
  std::map<std::string, void (*)(void *const *)> kernels;
  void *arena = nullptr;
  float *scratch = nullptr;
  int64_t scratchFloats = 1;
  /// The f32 copies of a f16/bf16 library call's operands.
  float *wide = nullptr;
  int64_t allocated = 0;
  std::vector<void *> owned, pointers;
  std::map<std::string, std::vector<Step>> programs;
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

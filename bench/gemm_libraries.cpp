//===- gemm_libraries.cpp - which CPU GEMM library to link ----------------===//
//
// Times single-precision GEMMs through one library, chosen when this file is
// compiled: -DGEMM_OPENBLAS (cblas_sgemm, OpenBLAS), -DGEMM_BLIS (cblas_sgemm,
// BLIS's CBLAS layer), -DGEMM_DNNL (dnnl_sgemm, oneDNN). The shapes are the
// examples' training-step GEMMs (read off their plan.json at batch 128,
// transformer 32) and the im2col products of the CNN's convolutions, plus a
// 2048^3 product for the machine's peak. bench/gemm_libraries.sh builds one
// binary per library and runs them interleaved; see it for the command.
//
// Prints one line per shape: name, best and median milliseconds, GFLOP/s of
// the best.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#if defined(GEMM_DNNL)
#include <oneapi/dnnl/dnnl.h>
static const char *kLibrary = "onednn";
#elif defined(GEMM_BLIS)
#include <blis.h>
static const char *kLibrary = "blis";
#else
#include <cblas.h>
static const char *kLibrary = "openblas";
#endif

namespace {

struct Shape {
  const char *name;
  int64_t batch, m, n, k;
  bool transA, transB;
};

// Row-major C[m,n] = op(A) op(B), as the trainer calls it.
const Shape kShapes[] = {
    {"peak 2048^3", 1, 2048, 2048, 2048, false, false},
    {"mlp fc1 fwd", 1, 128, 256, 784, false, true},
    {"mlp fc1 dW", 1, 256, 784, 128, true, false},
    {"mlp fc2 fwd", 1, 128, 128, 256, false, true},
    {"mlp fc2 dX", 1, 128, 256, 128, false, false},
    {"cnn fc1 fwd", 1, 128, 128, 3136, false, true},
    {"cnn fc1 dW", 1, 128, 3136, 128, true, false},
    // im2col convolutions, per 32 MiB chunk of the batch as CpuExecutor runs
    // them: conv1 forward [32,9]x[9,100352]; its filter gradient reduces
    // over the 100352 columns; conv2 [64,288]x[288,25088].
    {"cnn conv1 fwd", 1, 32, 100352, 9, false, false},
    {"cnn conv1 dW", 1, 32, 9, 100352, false, true},
    {"cnn conv2 fwd", 1, 64, 25088, 288, false, false},
    {"cnn conv2 dW", 1, 64, 288, 25088, false, true},
    {"cnn conv2 dX", 1, 288, 25088, 64, true, false},
    {"block qkv fwd", 1, 512, 96, 32, false, false},
    {"block ffn dW", 1, 32, 64, 512, true, false},
    {"block attn 128x", 128, 16, 16, 8, false, false},
};

void gemm(const Shape &s, const float *a, const float *b, float *c) {
  int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  for (int64_t p = 0; p < s.batch; ++p) {
    const float *ap = a + p * s.m * s.k, *bp = b + p * s.k * s.n;
    float *cp = c + p * s.m * s.n;
#if defined(GEMM_DNNL)
    dnnl_sgemm(s.transA ? 'T' : 'N', s.transB ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
               ap, lda, bp, ldb, 0.0f, cp, s.n);
#else
    cblas_sgemm(CblasRowMajor, s.transA ? CblasTrans : CblasNoTrans,
                s.transB ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, ap,
                lda, bp, ldb, 0.0f, cp, s.n);
#endif
  }
}

} // namespace

int main(int argc, char **argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const Shape &s : kShapes) {
    std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n),
        c(s.batch * s.m * s.n);
    for (float &x : a)
      x = uniform(rng);
    for (float &x : b)
      x = uniform(rng);
    double flops = 2.0 * s.batch * s.m * s.n * s.k;
    // Big products run fewer times; every shape gets at least 3 runs.
    int runs = std::max(3, (int)std::min<double>(repeats, 2e10 / flops));
    gemm(s, a.data(), b.data(), c.data()); // warm-up: threads, packing
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      gemm(s, a.data(), b.data(), c.data());
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s\t%s\t%.4f\t%.4f\t%.1f\n", kLibrary, s.name, ms[0],
                ms[ms.size() / 2], flops / ms[0] / 1e6);
  }
  return 0;
}

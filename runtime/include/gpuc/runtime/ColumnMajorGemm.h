//===- ColumnMajorGemm.h - a gemm step as cuBLASLt is asked it --*- C++ -*-===//
//
// A plan's gemm step is row-major; cuBLASLt is column-major. This header is
// the one translation between the two, with no CUDA in it, so that the CPU
// tests check it (ColumnMajorGemmTest runs it the way cuBLASLt's documents
// say a call runs) and the CUDA device plugin only hands its numbers on.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_COLUMNMAJORGEMM_H
#define GPUC_RUNTIME_COLUMNMAJORGEMM_H

#include "gpuc/runtime/PlanSteps.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace gpuc {

/// One matrix as a column-major library reads or writes it: element (i, j)
/// of batch entry b in call c lies `offset + c * callStride + b *
/// batchStride + i + j * ld` elements into its buffer.
struct ColumnMajorMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batchStride = 0, callStride = 0, offset = 0;
};

/// `calls` library calls, each a strided batch of `batch` products
/// D = op(first) op(second) (+ D when the step accumulates, + a bias over D's
/// rows), D `rows` x `cols` and the products `depth` deep.
struct ColumnMajorGemm {
  bool transFirst = false, transSecond = false;
  int64_t rows = 0, cols = 0, depth = 0;
  int64_t batch = 1, calls = 1;
  /// first: the row-major B's memory; second: A's; result: C's.
  ColumnMajorMatrix first, second, result;
};

/// The column-major problem that computes the row-major step `g`: row-major
/// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the library's
/// first operand is B's memory and its second A's. A weight shared by every
/// batch entry folds the batch into the rows of one product where A's and
/// C's rows are one matrix; a batch with another broadcast operand becomes
/// one call per entry (cuBLASLt's strided batches take no zero stride).
/// False, with `error`, for a step no call sequence computes.
inline bool columnMajorGemmOf(const GemmStep &g, ColumnMajorGemm &out,
                              std::string &error) {
  int64_t m = g.m, batch = g.batch;
  if (batch > 1 && g.strideB == 0 && !g.transA && g.calls == 1 &&
      g.lda == g.k && g.strideA == g.m * g.k && g.ldc == g.n &&
      g.strideC == g.m * g.n) {
    m *= batch;
    batch = 1;
  }
  int64_t calls = g.calls;
  int64_t callStride[] = {g.callStrideA, g.callStrideB, g.callStrideC};
  int64_t batchStride[] = {g.strideA, g.strideB, g.strideC};
  if (batch > 1 && (g.strideA == 0 || g.strideB == 0)) {
    if (g.calls > 1) {
      error = "plan.json: a gemm step with both calls and a broadcast "
              "operand; recompile";
      return false;
    }
    calls = batch;
    for (int i = 0; i < 3; ++i) {
      callStride[i] = batchStride[i];
      batchStride[i] = 0;
    }
    batch = 1;
  }
  out = {};
  out.transFirst = g.transB;
  out.transSecond = g.transA;
  out.rows = g.n;
  out.cols = m;
  out.depth = g.k;
  out.batch = batch;
  out.calls = calls;
  // B [k,n] row-major is n x k column-major; transposed, [n,k] is k x n.
  out.first = {g.transB ? g.k : g.n, g.transB ? g.n : g.k, g.ldb,
               batchStride[1],       callStride[1],        g.offsetB};
  out.second = {g.transA ? m : g.k, g.transA ? g.k : m, g.lda,
                batchStride[0],     callStride[0],      g.offsetA};
  out.result = {g.n, m, g.ldc, batchStride[2], callStride[2], g.offsetC};
  return true;
}

/// The largest power of two, at most `most`, dividing every byte address in
/// `addresses`: what cuBLASLt may assume of a matrix whose calls start at
/// those addresses (its heuristic assumes 256 bytes unless told less).
inline uint32_t commonAlignment(std::initializer_list<int64_t> addresses,
                                uint32_t most = 256) {
  uint32_t align = most;
  for (int64_t address : addresses)
    while (align > 1 && address % align != 0)
      align /= 2;
  return align;
}

} // namespace gpuc

#endif // GPUC_RUNTIME_COLUMNMAJORGEMM_H

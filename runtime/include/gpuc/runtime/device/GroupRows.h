//===- GroupRows.h - the counting sort behind an embedding's gradient -----===//
//
// gpuc.row_groups: the positions of `n` indices grouped by the row of an
// axis of `rows` each names, in CSR form. offsets[k] .. offsets[k + 1] - 1
// index `order`, which lists row k's positions in increasing order (a
// stable sort, so the sums over a group that follow add in a fixed order).
// One block does all of it; included by Kernel.h.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_GROUPROWS_H
#define GPUC_RUNTIME_DEVICE_GROUPROWS_H

namespace gpuc {

#ifdef GPUC_CPU
/// One thread: count, prefix-sum, place.
template <typename Index>
__device__ void groupRows(const Index *indices, int32_t n, int32_t rows,
                          int32_t *offsets, int32_t *order) {
  if (blockIdx.x != 0)
    return;
  for (int32_t k = 0; k <= rows; ++k)
    offsets[k] = 0;
  for (int32_t j = 0; j < n; ++j)
    ++offsets[wrapIndex((int64_t)indices[j], rows) + 1];
  for (int32_t k = 0; k < rows; ++k)
    offsets[k + 1] += offsets[k];
  // offsets[k] serves as row k's next free slot, and ends as row k + 1's
  // start: shifted back by one afterwards.
  for (int32_t j = 0; j < n; ++j)
    order[offsets[wrapIndex((int64_t)indices[j], rows)]++] = j;
  for (int32_t k = rows; k > 0; --k)
    offsets[k] = offsets[k - 1];
  offsets[0] = 0;
}
#else
/// A block of threads: counts by integer atomics (exact, so the same on
/// every run), a prefix sum over per-thread chunks, then the positions
/// placed a tile of blockDim.x at a time, each after the earlier positions
/// of its row (within the tile, found by comparing with every earlier
/// thread's row), which keeps the sort stable without a second pass.
template <typename Index>
__device__ void groupRows(const Index *indices, int32_t n, int32_t rows,
                          int32_t *offsets, int32_t *order) {
  __shared__ int32_t partial[kBlockThreads];
  __shared__ int32_t tileRows[kBlockThreads];
  if (blockIdx.x != 0)
    return;
  const int32_t threads = blockDim.x, t = threadIdx.x;
  for (int32_t k = t; k <= rows; k += threads)
    offsets[k] = 0;
  __syncthreads();
  for (int32_t j = t; j < n; j += threads)
    atomicAdd(&offsets[wrapIndex((int64_t)indices[j], rows) + 1], 1);
  __syncthreads();
  // Inclusive prefix sum of offsets[0..rows]: each thread a contiguous chunk.
  const int32_t chunk = (rows + 1 + threads - 1) / threads;
  const int32_t begin = t * chunk < rows + 1 ? t * chunk : rows + 1;
  const int32_t end = begin + chunk < rows + 1 ? begin + chunk : rows + 1;
  int32_t sum = 0;
  for (int32_t k = begin; k < end; ++k)
    sum += offsets[k];
  partial[t] = sum;
  __syncthreads();
  if (t == 0) {
    int32_t running = 0;
    for (int32_t s = 0; s < threads; ++s) {
      int32_t chunkSum = partial[s];
      partial[s] = running;
      running += chunkSum;
    }
  }
  __syncthreads();
  sum = partial[t];
  for (int32_t k = begin; k < end; ++k) {
    sum += offsets[k];
    offsets[k] = sum;
  }
  __syncthreads();
  // Placement: offsets[k] is row k's next free slot.
  for (int32_t base = 0; base < n; base += threads) {
    const int32_t j = base + t;
    const int32_t row =
        j < n ? (int32_t)wrapIndex((int64_t)indices[j], rows) : -1;
    tileRows[t] = row;
    __syncthreads();
    const int32_t count = n - base < threads ? n - base : threads;
    int32_t before = 0, same = 0;
    for (int32_t s = 0; s < count; ++s) {
      const bool match = tileRows[s] == row;
      before += match && s < t;
      same += match;
    }
    const int32_t slot = j < n ? offsets[row] + before : 0;
    __syncthreads(); // every slot read before any row's cursor moves
    if (j < n) {
      order[slot] = j;
      if (before == same - 1)
        offsets[row] += same;
    }
    __syncthreads();
  }
  // offsets[k] now ends row k: shift back by one, chunk by chunk, each
  // thread taking its predecessor's last value before anything moves.
  const int32_t previous = begin > 0 && begin < end ? offsets[begin - 1] : 0;
  __syncthreads();
  for (int32_t k = end - 1; k > begin; --k)
    offsets[k] = offsets[k - 1];
  if (begin < end)
    offsets[begin] = previous;
}
#endif

} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_GROUPROWS_H

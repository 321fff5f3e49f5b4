//===- EmulatedGpu.h - the GPU's kernel text, run on the CPU for tests ----===//
//
// Under GPUC_EMULATE_GPU (set with GPUC_CXXFLAGS=-DGPUC_EMULATE_GPU when a
// trainer is compiled), generated kernels compile to their CUDA text, not
// the CPU's line walks, and run on the host with the GPU's launch shape:
// the GPU's grid, 256 threads a block. Each block's threads are fibers of
// one host thread, switched where they wait: __syncthreads waits for every
// thread of the block that has not returned, a shuffle for every lane of
// its warp. So the GPU's indexing, barriers, shared memory and warp
// reductions run, and can be tested, where there is no GPU. Odd blocks run
// their threads in the reverse order, so a missing barrier shows as a stale
// read in one order or the other.
//
// It is for tests: every GPU thread is a fiber, so a step runs tens of
// times slower than the CPU target's (24 times on chargpt). Waiting at a
// barrier that some threads of the block never reach (or in a warp whose
// other lanes wait at another one), or shuffling with a lane that has
// returned, is undefined on a GPU; here it stops the trainer with a message
// naming the kernel's block and thread.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_EMULATEDGPU_H
#define GPUC_RUNTIME_DEVICE_EMULATEDGPU_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include "gpuc/runtime/device/CpuKernelTable.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs on a host thread at a time: its shared memory is that
// thread's.
#define __shared__ static thread_local
#define GPUC_INDEPENDENT_ITERATIONS

#if defined(__x86_64__)
// A fiber switch: saves the callee-saved registers on the current stack and
// its pointer in *save, then continues on `load`'s stack. swapcontext would
// also save and restore the signal mask, a system call at every switch,
// which was most of an emulated step's time. (Weak: every unit of a
// trainer's kernels defines it.)
extern "C" void gpuc_emulated_switch(void **save, void *load);
asm(R"(
  .text
  .weak gpuc_emulated_switch
  .type gpuc_emulated_switch, @function
gpuc_emulated_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gpuc_emulated_switch, .-gpuc_emulated_switch
)");
#endif

namespace gpuc::emulated {

constexpr int kThreads = 256, kWarp = 32;
constexpr size_t kStackBytes = 256 << 10;

struct Dim3 {
  int64_t x, y, z;
};

enum class State { Running, AtBarrier, AtShuffle, Returned };

/// An asynchronous copy (AsyncCopy.h) a thread has started and not yet
/// waited for, in the group its next commit closes.
struct PendingCopy {
  void *to;
  const void *from;
  int bytes, sourceBytes;
  unsigned group;
};
constexpr int kMaxPendingCopies = 64;

/// Where a fiber (the host's loop, or a GPU thread) continues.
#if defined(__x86_64__)
struct Context {
  void *stack = nullptr;
};
inline void switchTo(Context &save, Context &load) {
  gpuc_emulated_switch(&save.stack, load.stack);
}
/// A context that starts `entry` at the top of `stack`: the switch's six
/// registers, then `entry` as the address it returns to, at the alignment
/// of a called function's entry.
inline void makeContext(Context &context, char *stack, size_t bytes,
                        void (*entry)()) {
  uintptr_t top = ((uintptr_t)(stack + bytes)) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = nullptr; // entry's own return address: it never returns
  *--sp = (void *)entry;
  for (int r = 0; r < 6; ++r)
    *--sp = nullptr;
  context.stack = sp;
}
#else
struct Context {
  ucontext_t context;
};
inline void switchTo(Context &save, Context &load) {
  swapcontext(&save.context, &load.context);
}
inline void makeContext(Context &context, char *stack, size_t bytes,
                        void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}
#endif

/// One host thread's emulation of the block it runs.
struct Block {
  Context host;
  Context threads[kThreads];
  State state[kThreads];
  /// A shuffle's values, one per thread.
  unsigned long long exchange[kThreads];
  /// An mma's A and B fragments, one set per thread.
  unsigned fragments[kThreads][6];
  /// Each thread's copies in flight, and the groups it has committed.
  PendingCopy copies[kThreads][kMaxPendingCopies];
  int pendingCopies[kThreads];
  unsigned committedGroups[kThreads];
  char *stacks = nullptr;
  int current = 0;
  void (*run)(void *) = nullptr;
  void *closure = nullptr;
  const char *kernel = "";
};

inline thread_local Block *block = nullptr;
inline thread_local Dim3 blockIdx = {0, 0, 0};
inline thread_local Dim3 gridDim = {1, 1, 1};
inline thread_local Dim3 threadIdx = {0, 0, 0};
inline thread_local Dim3 blockDim = {kThreads, 1, 1};

[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr,
               "gpuc: emulated GPU: kernel %s, block %lld, thread %d: %s\n",
               block->kernel, (long long)blockIdx.x, block->current, what);
  std::abort();
}

/// Back to the block's scheduler until it resumes this thread.
inline void wait(State why) {
  Block &b = *block;
  int self = b.current;
  b.state[self] = why;
  switchTo(b.threads[self], b.host);
}

inline void threadEntry() {
  Block &b = *block;
  b.run(b.closure);
  if (b.pendingCopies[b.current] != 0)
    fail("the thread returns with asynchronous copies it never waited for");
  b.state[b.current] = State::Returned;
  switchTo(b.threads[b.current], b.host);
}

/// Runs block `index` of a grid of `grid` blocks of `threads` (at most
/// 256; generated kernels run 256): every thread until it waits, then
/// releases each warp whose lanes all wait at a shuffle and the block when
/// all its threads wait at the barrier, until every thread returns.
inline void runBlock(int64_t index, int64_t grid, int threads,
                     const char *kernel, void (*run)(void *), void *closure) {
  static thread_local Block storage;
  Block &b = storage;
  block = &b;
  if (!b.stacks)
    b.stacks = (char *)std::malloc(kStackBytes * kThreads);
  if (!b.stacks) {
    std::fprintf(stderr,
                 "gpuc: emulated GPU: no memory for a block's %d "
                 "thread stacks\n",
                 kThreads);
    std::abort();
  }
  b.run = run;
  b.closure = closure;
  b.kernel = kernel;
  blockIdx = {index, 0, 0};
  gridDim = {grid, 1, 1};
  blockDim = {threads, 1, 1};
  // Threads past the block's are the returned lanes of its last warp.
  for (int t = 0; t < kThreads; ++t) {
    b.state[t] = t < threads ? State::Running : State::Returned;
    b.pendingCopies[t] = 0;
    b.committedGroups[t] = 0;
    if (t < threads)
      makeContext(b.threads[t], b.stacks + kStackBytes * t, kStackBytes,
                  threadEntry);
  }
  // Even blocks run their threads first to last between waits, odd blocks
  // last to first: a thread that reads shared memory another thread of
  // its block writes, with no barrier between, then reads the stale value
  // in one of the two orders, as it may on a GPU.
  const bool reversed = index % 2 == 1;
  for (;;) {
    for (int i = 0; i < kThreads; ++i) {
      int t = reversed ? kThreads - 1 - i : i;
      if (b.state[t] != State::Running)
        continue;
      b.current = t;
      threadIdx = {t, 0, 0};
      switchTo(b.host, b.threads[t]);
    }
    // Every thread now waits or has returned.
    int returned = 0, atBarrier = 0;
    bool released = false;
    for (int w = 0; w < kThreads / kWarp; ++w) {
      int lanesReturned = 0, lanesAtShuffle = 0;
      for (int t = w * kWarp; t < (w + 1) * kWarp; ++t) {
        lanesReturned += b.state[t] == State::Returned;
        lanesAtShuffle += b.state[t] == State::AtShuffle;
        atBarrier += b.state[t] == State::AtBarrier;
      }
      returned += lanesReturned;
      if (lanesAtShuffle > 0 && lanesAtShuffle + lanesReturned == kWarp) {
        for (int t = w * kWarp; t < (w + 1) * kWarp; ++t)
          if (b.state[t] == State::AtShuffle)
            b.state[t] = State::Running;
        released = true;
      }
    }
    if (returned == kThreads)
      return;
    if (!released && atBarrier + returned == kThreads) {
      for (int t = 0; t < kThreads; ++t)
        if (b.state[t] == State::AtBarrier)
          b.state[t] = State::Running;
      released = true;
    }
    if (!released) {
      for (int t = 0; t < kThreads; ++t)
        if (b.state[t] != State::Returned) {
          b.current = t;
          break;
        }
      fail("threads wait at different barriers or shuffles (a barrier in "
           "divergent code): the kernel would hang or misbehave on a GPU");
    }
  }
}

/// Lane `lane ^ mask` of the caller's warp's `v`, once every lane still
/// running has given its own.
template <typename T> inline T shuffleXor(T v, int mask) {
  static_assert(sizeof(T) <= sizeof(unsigned long long), "a register");
  Block &b = *block;
  int self = b.current, warp = self / kWarp * kWarp;
  int from = warp + ((self - warp) ^ mask);
  std::memcpy(&b.exchange[self], &v, sizeof(T));
  wait(State::AtShuffle);
  if (from >= kThreads || b.state[from] == State::Returned)
    fail("a shuffle reads a lane that has returned");
  T r;
  std::memcpy(&r, &b.exchange[from], sizeof(T));
  // Every lane has read before any lane's next shuffle writes.
  wait(State::AtShuffle);
  return r;
}

/// mma.sync.m16n8k16 (Mma.h's fragments) for the caller's warp, once
/// every lane has given its fragments: acc += A B, each product exact in
/// f32 and summed in k order. `widen` reads an operand's 16-bit bits.
inline void mma16816(float acc[4], const unsigned a[4], const unsigned b[2],
                     float (*widen)(unsigned short)) {
  Block &bl = *block;
  int self = bl.current, warp = self / kWarp * kWarp, lane = self - warp;
  for (int r = 0; r < 4; ++r)
    bl.fragments[self][r] = a[r];
  bl.fragments[self][4] = b[0];
  bl.fragments[self][5] = b[1];
  wait(State::AtShuffle);
  for (int t = warp; t < warp + kWarp; ++t)
    if (bl.state[t] == State::Returned)
      fail("an mma in a warp with a lane that has returned");
  auto half = [&](int holder, int word, int high) {
    unsigned w = bl.fragments[warp + holder][word];
    return widen((unsigned short)(high ? w >> 16 : w & 0xffffu));
  };
  int g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) {
    int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
    float sum = acc[i];
    for (int k = 0; k < 16; ++k) {
      float x = half((row % 8) * 4 + (k % 8) / 2,
                     (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0), k & 1);
      float y = half(col * 4 + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0), k & 1);
      sum = std::fma(x, y, sum);
    }
    acc[i] = sum;
  }
  // Every lane has read before any lane's next mma writes.
  wait(State::AtShuffle);
}

/// ldmatrix.sync.aligned.m8n8.x4 (.trans when `trans`) for the caller's
/// warp, once every lane has given its row's address: lane l gives row
/// l % 8 of matrix l / 8 (8 adjacent 16-bit elements) and receives, in
/// r[j], matrix j's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1)
/// (the low half first), or with `trans` (2 (l % 4), l / 4) and
/// (2 (l % 4) + 1, l / 4).
inline void ldmatrix(unsigned r[4], const unsigned short *row, bool trans) {
  Block &bl = *block;
  int self = bl.current, warp = self / kWarp * kWarp, lane = self - warp;
  bl.exchange[self] = (unsigned long long)(uintptr_t)row;
  wait(State::AtShuffle);
  for (int t = warp; t < warp + kWarp; ++t)
    if (bl.state[t] == State::Returned)
      fail("an ldmatrix in a warp with a lane that has returned");
  auto element = [&](int matrix, int i, int j) {
    return ((const unsigned short *)(uintptr_t)
                bl.exchange[warp + 8 * matrix + i])[j];
  };
  int g = lane >> 2, t = lane & 3;
  for (int m = 0; m < 4; ++m) {
    unsigned lo = trans ? element(m, 2 * t, g) : element(m, g, 2 * t);
    unsigned hi = trans ? element(m, 2 * t + 1, g) : element(m, g, 2 * t + 1);
    r[m] = lo | hi << 16;
  }
  // Every lane has read the addresses before any lane's next exchange.
  wait(State::AtShuffle);
}

/// cp.async: `bytes` to `to`, the first `sourceBytes` of them from
/// `from` and the rest zeros, landing at the caller's wait for its group.
inline void copyAsync(void *to, const void *from, int bytes, int sourceBytes) {
  Block &b = *block;
  int self = b.current;
  if (b.pendingCopies[self] == kMaxPendingCopies)
    fail("more asynchronous copies in flight than the emulator holds");
  b.copies[self][b.pendingCopies[self]++] = {to, from, bytes, sourceBytes,
                                             b.committedGroups[self]};
}
inline void commitCopies() { ++block->committedGroups[block->current]; }
/// Lands the caller's copies of every committed group but its `pending`
/// newest ones.
inline void waitCopies(int pending) {
  Block &b = *block;
  int self = b.current, kept = 0;
  unsigned committed = b.committedGroups[self];
  for (int c = 0; c < b.pendingCopies[self]; ++c) {
    PendingCopy copy = b.copies[self][c];
    if (copy.group < committed && committed - copy.group > (unsigned)pending) {
      std::memcpy(copy.to, copy.from, copy.sourceBytes);
      std::memset((char *)copy.to + copy.sourceBytes, 0,
                  copy.bytes - copy.sourceBytes);
    } else {
      b.copies[self][kept++] = copy;
    }
  }
  b.pendingCopies[self] = kept;
}

template <typename Closure> void callClosure(void *closure) {
  (*(const Closure *)closure)();
}

/// Runs `closure` as every thread of a grid of `grid` blocks of `threads`,
/// the blocks shared among the host's threads.
template <typename Closure>
void launch(int64_t grid, int threads, const char *kernel,
            const Closure &closure) {
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < grid; ++b)
    runBlock(b, grid, threads, kernel, callClosure<Closure>,
             const_cast<Closure *>(&closure));
}

} // namespace gpuc::emulated

#define blockIdx (::gpuc::emulated::blockIdx)
#define gridDim (::gpuc::emulated::gridDim)
#define threadIdx (::gpuc::emulated::threadIdx)
#define blockDim (::gpuc::emulated::blockDim)

inline void __syncthreads() {
  gpuc::emulated::wait(gpuc::emulated::State::AtBarrier);
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) {
  return gpuc::emulated::shuffleXor(v, mask);
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline int atomicAdd(int *address, int value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

namespace gpuc {
/// A generated kernel's launch: the GPU's grid and block.
template <typename Closure>
void cpuLaunch(int64_t /*cpuGrid*/, int64_t gpuGrid, const char *kernel,
               Closure closure) {
  emulated::launch(gpuGrid, emulated::kThreads, kernel, closure);
}
/// A kernel's alternative entry point, with its own block size.
template <typename Closure>
void emulatedLaunch(int64_t grid, int threads, const char *kernel,
                    Closure closure) {
  emulated::launch(grid, threads, kernel, closure);
}
} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_EMULATEDGPU_H

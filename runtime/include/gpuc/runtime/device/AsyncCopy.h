//===- AsyncCopy.h - copies from global to shared memory, in flight -------===//
//
// cp.async (sm_80 and later): a thread starts a copy of 4 or 16 bytes from
// global to shared memory that needs no register and does not stall it, so
// a kernel can stage its next tile while it computes on the current one.
// A thread commits the copies it has started as a group, and waits until
// at most N of its newest groups are still in flight; a barrier after the
// wait makes every thread's landed copies visible to the block.
//
// Under the emulator (EmulatedGpu.h) a copy lands when its thread waits
// for it, the latest a GPU may complete it: a read of the destination
// before the wait sees what was there before, as it may on a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_DEVICE_ASYNCCOPY_H
#define GPUC_RUNTIME_DEVICE_ASYNCCOPY_H

namespace gpuc {

/// Starts copying the `Bytes` (4 or 16) at `from` (global, aligned to
/// them) to `to` (shared, aligned); with `valid` false it writes zeros and
/// reads nothing.
template <int Bytes>
__device__ __forceinline__ void copyAsync(void *to, const void *from,
                                          bool valid) {
  static_assert(Bytes == 4 || Bytes == 16, "cp.async copies 4 or 16 bytes");
#ifdef GPUC_EMULATE_GPU
  emulated::copyAsync(to, from, Bytes, valid ? Bytes : 0);
#else
  unsigned address = (unsigned)__cvta_generic_to_shared(to);
  // .cg (L2 only) takes 16 bytes; .ca the smaller sizes.
  if (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address),
                 "l"(from), "r"(valid ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(address),
                 "l"(from), "r"(valid ? 4 : 0)
                 : "memory");
#endif
}

/// Closes the copies the caller has started since its last commit into a
/// group.
__device__ __forceinline__ void commitAsyncCopies() {
#ifdef GPUC_EMULATE_GPU
  emulated::commitCopies();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// Waits until at most `Pending` of the caller's newest committed groups
/// are still in flight: every older one has landed.
template <int Pending> __device__ __forceinline__ void waitAsyncCopies() {
#ifdef GPUC_EMULATE_GPU
  emulated::waitCopies(Pending);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

} // namespace gpuc

#endif // GPUC_RUNTIME_DEVICE_ASYNCCOPY_H

//===- HostDriver.cpp - the CUDA driver API CudaDevice calls, on the host -===//
//
// Memory, streams, events, graphs, modules and launches (HostCuda.h). One
// lock serializes every call: work runs on the calling thread when a wait
// needs it.
//
//===----------------------------------------------------------------------===//
#include "HostCuda.h"

#include "gpuc/runtime/device/CpuKernelTable.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using Work = std::function<CUresult()>;
using Clock = std::chrono::steady_clock;

struct CUctx_st {};
struct CUgraph_st {
  std::vector<Work> work;
};
struct CUgraphExec_st {
  std::vector<Work> work;
};
struct CUstream_st {
  /// Work queued and not yet run, and how many items were ever queued and
  /// run: an event recorded here is done once `ran` reaches its ticket.
  std::deque<Work> pending;
  uint64_t queued = 0, ran = 0;
  /// The graph its work goes into while it is captured.
  CUgraph_st *capture = nullptr;
  /// The first error of its work not yet reported.
  CUresult error = CUDA_SUCCESS;
};
struct CUevent_st {
  bool timing = true;
  /// The stream and ticket of its last record (none yet: done).
  CUstream_st *stream = nullptr;
  uint64_t ticket = 0;
  /// Recorded into a graph under capture: only that capture may wait on it.
  CUgraph_st *captured = nullptr;
  Clock::time_point at;
  bool stamped = false;
};
struct CUmod_st {
  const gpuc::CpuKernel *table = nullptr;
};
struct CUfunc_st {
  const gpuc::CpuKernel *kernel = nullptr;
  int maxDynamicShared = 48 << 10;
  /// Whether its launches count a second more (GPUC_HOST_CUDA_SLOW).
  bool slow = false;
};

namespace gpuc::host_cuda {
namespace {

std::recursive_mutex lock;
CUctx_st theContext;
CUstream_st legacyStream;
bool initialized = false;
std::map<uintptr_t, size_t> allocations;
size_t allocatedBytes = 0;
std::vector<std::unique_ptr<CUfunc_st>> functions;
/// Time the events see beyond the host's: what slowed launches added.
Clock::duration slowness{};

/// Whether `name` is a kernel's alternative entry point: the table has an
/// entry point whose name, and "_", begin it.
bool isAlternative(const gpuc::CpuKernel *table, const char *name) {
  for (const gpuc::CpuKernel *k = table; k->name; ++k) {
    size_t length = strlen(k->name);
    if (strncmp(name, k->name, length) == 0 && name[length] == '_')
      return true;
  }
  return false;
}

/// GPUC_HOST_CUDA_SLOW=own (or alternatives): the launches of kernels' own
/// entry points (or of their alternatives) take a second more as the
/// events see them, so that the device's timing chooses the others, and a
/// test can compare the steps of either choice. `but:SUFFIX` slows every
/// entry point but the alternatives whose names end in SUFFIX, so that the
/// device takes those wherever a kernel has one. `kernels` slows every
/// launch, so that the device takes cuDNN's attention where it may choose
/// (HostDnnAttention.cpp).
bool slowed(const gpuc::CpuKernel *table, const char *name) {
  const char *slow = getenv("GPUC_HOST_CUDA_SLOW");
  if (!slow)
    return false;
  if (strcmp(slow, "kernels") == 0)
    return true;
  bool alternative = isAlternative(table, name);
  if (strncmp(slow, "but:", 4) == 0) {
    size_t length = strlen(name), suffix = strlen(slow + 4);
    return !(alternative && length >= suffix &&
             strcmp(name + length - suffix, slow + 4) == 0);
  }
  return strcmp(slow, alternative ? "alternatives" : "own") == 0;
}

/// The device memory it claims: GPUC_HOST_CUDA_MEMORY bytes (a suffix
/// K, M or G multiplies), an H100's 80 GiB by default.
/// 0 where the variable's text says no such size.
size_t capacity() {
  size_t bytes = size_t(80) << 30;
  if (const char *text = getenv("GPUC_HOST_CUDA_MEMORY")) {
    char *end = nullptr;
    double value = strtod(text, &end);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (!(value >= 1) || end == text || end[shift ? 1 : 0] != '\0')
      return 0;
    bytes = (size_t)(value * (double)(size_t(1) << shift));
  }
  return bytes;
}

/// Whether the host CUDA's settings say what they can; a message on stderr
/// names the one that does not.
bool settingsAreValid() {
  auto bad = [](const char *name, const char *text, const char *want) {
    fprintf(stderr, "host CUDA: %s='%s' is not %s\n", name, text, want);
    return false;
  };
  if (const char *text = getenv("GPUC_HOST_CUDA_MEMORY"); text && !capacity())
    return bad("GPUC_HOST_CUDA_MEMORY", text,
               "a size in bytes (a suffix K, M or G multiplies)");
  if (const char *text = getenv("GPUC_HOST_CUDA_SLOW");
      text && strcmp(text, "own") != 0 && strcmp(text, "alternatives") != 0 &&
      strcmp(text, "kernels") != 0 &&
      !(strncmp(text, "but:_", 5) == 0 && text[5]))
    return bad("GPUC_HOST_CUDA_SLOW", text,
               "own, alternatives, kernels or but:_SUFFIX");
  if (const char *text = getenv("GPUC_HOST_CUDA_REFUSE_ALGO");
      text && (!*text || strspn(text, "0123456789") != strlen(text)))
    return bad("GPUC_HOST_CUDA_REFUSE_ALGO", text, "an algorithm's number");
  return true;
}

CUstream_st *streamOf(CUstream stream) {
  return stream ? stream : &legacyStream;
}

/// Runs `stream`'s work until `ticket` items have run.
void runUntil(CUstream_st *stream, uint64_t ticket) {
  while (stream->ran < ticket && !stream->pending.empty()) {
    Work work = std::move(stream->pending.front());
    stream->pending.pop_front();
    CUresult result = work();
    ++stream->ran;
    if (result != CUDA_SUCCESS && stream->error == CUDA_SUCCESS)
      stream->error = result;
  }
}

std::vector<CUstream_st *> &allStreams() {
  static std::vector<CUstream_st *> streams = {&legacyStream};
  return streams;
}

/// Before the host waits for `stream`, the other streams' work runs, as far
/// as it goes: the work a GPU may run first whenever the program did not
/// order it after `stream`'s (a wait on one of `stream`'s events runs
/// `stream` up to it). So a kernel that forgot to wait for a copy on
/// another stream runs before the copy.
void runOthersFirst(CUstream_st *stream) {
  for (CUstream_st *other : allStreams())
    if (other != stream && other != &legacyStream && !other->capture)
      runUntil(other, other->queued);
}

CUresult finish(CUstream_st *stream) {
  if (stream->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (stream != &legacyStream)
    runOthersFirst(stream);
  runUntil(stream, stream->queued);
  CUresult error = stream->error;
  stream->error = CUDA_SUCCESS;
  return error;
}

CUresult finishAll() {
  CUresult first = CUDA_SUCCESS;
  for (CUstream_st *stream : allStreams()) {
    CUresult result = finish(stream);
    if (first == CUDA_SUCCESS)
      first = result;
  }
  return first;
}

/// The allocation holding [address, address + bytes), if any.
bool inAllocation(uintptr_t address, size_t bytes) {
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin())
    return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second;
}

} // namespace

CUresult enqueue(CUstream handle, Work work) {
  std::lock_guard<std::recursive_mutex> guard(lock);
  CUstream_st *stream = streamOf(handle);
  if (stream->capture) {
    stream->capture->work.push_back(std::move(work));
    return CUDA_SUCCESS;
  }
  stream->pending.push_back(std::move(work));
  ++stream->queued;
  return CUDA_SUCCESS;
}

void countSecondMore() {
  std::lock_guard<std::recursive_mutex> guard(lock);
  slowness += std::chrono::seconds(1);
}

bool isDeviceRange(const void *address, size_t bytes) {
  std::lock_guard<std::recursive_mutex> guard(lock);
  return inAllocation((uintptr_t)address, bytes);
}

} // namespace gpuc::host_cuda

using namespace gpuc::host_cuda;

#define LOCKED                                                                 \
  std::lock_guard<std::recursive_mutex> guard(gpuc::host_cuda::lock)

extern "C" {

CUresult cuInit(unsigned int) {
  LOCKED;
  if (!settingsAreValid())
    return CUDA_ERROR_INVALID_VALUE;
  initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  *count = initialized ? 1 : 0;
  return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice) {
  snprintf(name, length, "host CUDA (the CPU standing in for an H100)");
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *id, int length, CUdevice) {
  snprintf(id, length, "0000:00:00.0");
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                              CUdevice) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = 227 << 10;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  *context = &theContext;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }

CUresult cuCtxSetCurrent(CUcontext context) {
  return context == &theContext || !context ? CUDA_SUCCESS
                                            : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxSynchronize(void) {
  LOCKED;
  return finishAll();
}

CUresult cuGetErrorName(CUresult error, const char **text) {
  switch (error) {
#define NAME(e)                                                                \
  case e:                                                                      \
    *text = #e;                                                                \
    return CUDA_SUCCESS;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_IMAGE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_NOT_READY)
    NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    NAME(CUDA_ERROR_LAUNCH_FAILED)
    NAME(CUDA_ERROR_NOT_SUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    NAME(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
#undef NAME
  default:
    *text = "CUDA_ERROR_UNKNOWN";
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  switch (error) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *text = "an illegal memory access was encountered (host CUDA: an address "
            "outside every allocation)";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "out of memory";
    return CUDA_SUCCESS;
  default:
    return cuGetErrorName(error, text);
  }
}

// Memory.

CUresult cuMemGetInfo(size_t *freeBytes, size_t *totalBytes) {
  LOCKED;
  *totalBytes = capacity();
  *freeBytes = *totalBytes - std::min(*totalBytes, allocatedBytes);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *address, size_t bytes) {
  LOCKED;
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (allocatedBytes + bytes > capacity())
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *memory = aligned_alloc(256, (bytes + 255) & ~size_t(255));
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  // A GPU's fresh memory holds anything: here NaNs, so that a value read
  // before it is written shows.
  memset(memory, 0xff, bytes);
  allocations[(uintptr_t)memory] = bytes;
  allocatedBytes += bytes;
  *address = (CUdeviceptr)memory;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr address) {
  LOCKED;
  // Work still queued may use it.
  finishAll();
  auto it = allocations.find((uintptr_t)address);
  if (it == allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  allocatedBytes -= it->second;
  allocations.erase(it);
  free((void *)address);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **address, size_t bytes) {
  *address = malloc(bytes ? bytes : 1);
  return *address ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *address) {
  free(address);
  return CUDA_SUCCESS;
}

static CUresult copyWork(CUstream stream, void *to, const void *from,
                         size_t bytes, bool toDevice, bool fromDevice) {
  LOCKED;
  if ((toDevice && !inAllocation((uintptr_t)to, bytes)) ||
      (fromDevice && !inAllocation((uintptr_t)from, bytes)))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, [=] {
    memmove(to, from, bytes);
    return CUDA_SUCCESS;
  });
}

// The synchronous copies run on the legacy stream, which does not wait for
// the non-blocking streams CudaDevice creates: its own synchronization
// has to.
static CUresult synchronousCopy(void *to, const void *from, size_t bytes,
                                bool toDevice, bool fromDevice) {
  LOCKED;
  CUresult result = copyWork(nullptr, to, from, bytes, toDevice, fromDevice);
  return result != CUDA_SUCCESS ? result : finish(&legacyStream);
}

CUresult cuMemcpyHtoD(CUdeviceptr to, const void *from, size_t bytes) {
  return synchronousCopy((void *)to, from, bytes, true, false);
}

CUresult cuMemcpyDtoH(void *to, CUdeviceptr from, size_t bytes) {
  return synchronousCopy(to, (const void *)from, bytes, false, true);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr to, const void *from, size_t bytes,
                           CUstream stream) {
  return copyWork(stream, (void *)to, from, bytes, true, false);
}

CUresult cuMemcpyDtoHAsync(void *to, CUdeviceptr from, size_t bytes,
                           CUstream stream) {
  return copyWork(stream, to, (const void *)from, bytes, false, true);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes,
                           CUstream stream) {
  return copyWork(stream, (void *)to, (const void *)from, bytes, true, true);
}

CUresult cuMemsetD8Async(CUdeviceptr to, unsigned char value, size_t bytes,
                         CUstream stream) {
  LOCKED;
  if (!inAllocation(to, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(stream, [=] {
    memset((void *)to, value, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemsetD8(CUdeviceptr to, unsigned char value, size_t bytes) {
  LOCKED;
  CUresult result = cuMemsetD8Async(to, value, bytes, nullptr);
  return result != CUDA_SUCCESS ? result : finish(&legacyStream);
}

// Streams and events.

CUresult cuStreamCreate(CUstream *stream, unsigned int) {
  LOCKED;
  *stream = new CUstream_st;
  allStreams().push_back(*stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  LOCKED;
  if (!stream)
    return CUDA_ERROR_INVALID_HANDLE;
  // Its queued work still runs, as on a GPU.
  runUntil(stream, stream->queued);
  auto &streams = allStreams();
  streams.erase(std::find(streams.begin(), streams.end(), stream));
  delete stream->capture;
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  LOCKED;
  return finish(streamOf(stream));
}

CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  *event = new CUevent_st;
  (*event)->timing = !(flags & CU_EVENT_DISABLE_TIMING);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent event) {
  delete event;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream handle) {
  LOCKED;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st *stream = streamOf(handle);
  if (stream->capture) {
    event->captured = stream->capture;
    event->stream = nullptr;
    return CUDA_SUCCESS;
  }
  event->captured = nullptr;
  event->stream = stream;
  event->stamped = false;
  uint64_t ticket = event->ticket = stream->queued + 1;
  return enqueue(handle, [event, ticket] {
    if (event->ticket == ticket) {
      event->at = Clock::now() + slowness;
      event->stamped = true;
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamWaitEvent(CUstream handle, CUevent event, unsigned int) {
  LOCKED;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st *stream = streamOf(handle);
  if (event->captured) {
    // Within one capture the graph keeps its streams' order; outside it a
    // captured event means nothing.
    return event->captured == stream->capture
               ? CUDA_SUCCESS
               : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (!event->stream)
    return CUDA_SUCCESS;
  CUstream_st *source = event->stream;
  uint64_t ticket = event->ticket;
  if (stream->capture) {
    // A graph waits on nothing outside its capture.
    return source->ran >= ticket ? CUDA_SUCCESS
                                 : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  return enqueue(handle, [source, ticket] {
    runUntil(source, ticket);
    return CUDA_SUCCESS;
  });
}

CUresult cuEventSynchronize(CUevent event) {
  LOCKED;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  if (event->captured)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (event->stream) {
    if (event->stream != &legacyStream)
      runOthersFirst(event->stream);
    runUntil(event->stream, event->ticket);
    CUresult error = event->stream->error;
    event->stream->error = CUDA_SUCCESS;
    return error;
  }
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  LOCKED;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  if (event->stream && event->stream->ran < event->ticket) {
    // Not yet: the caller polls again. Its work runs now, so that the next
    // query finds it done.
    runUntil(event->stream, event->ticket);
    return CUDA_ERROR_NOT_READY;
  }
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent stop) {
  LOCKED;
  if (!start || !stop || !start->timing || !stop->timing)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!start->stamped || !stop->stamped)
    return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
  return CUDA_SUCCESS;
}

// Graphs.

CUresult cuStreamBeginCapture(CUstream handle, CUstreamCaptureMode) {
  LOCKED;
  CUstream_st *stream = streamOf(handle);
  if (!handle || stream->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  stream->capture = new CUgraph_st;
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream handle, CUgraph *graph) {
  LOCKED;
  CUstream_st *stream = streamOf(handle);
  if (!stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  *graph = stream->capture;
  stream->capture = nullptr;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                     unsigned long long) {
  if (!graph)
    return CUDA_ERROR_INVALID_HANDLE;
  *exec = new CUgraphExec_st{graph->work};
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  delete graph;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  delete exec;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (!exec)
    return CUDA_ERROR_INVALID_HANDLE;
  return enqueue(stream, [exec] {
    for (Work &work : exec->work)
      if (CUresult result = work(); result != CUDA_SUCCESS)
        return result;
    return CUDA_SUCCESS;
  });
}

// Modules and kernels.

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                            unsigned int count, CUjit_option *options,
                            void **values) {
  auto log = [&](const char *text) {
    for (unsigned i = 0; i < count; ++i)
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
        for (unsigned j = 0; j < count; ++j)
          if (options[j] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            snprintf((char *)values[i], (size_t)values[j], "%s", text);
  };
  // A cubin is an ELF file; PTX is text that names its version.
  const char *bytes = (const char *)image;
  if (memcmp(bytes,
             "\x7f"
             "ELF",
             4) != 0 &&
      !strstr(bytes, ".version")) {
    log("host CUDA: the image is neither a cubin nor PTX");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  // The kernels that run are the trainer's own, host-compiled.
  auto *table =
      (const gpuc::CpuKernel *)dlsym(RTLD_DEFAULT, "gpuc_cpu_kernels");
  if (!table || !table[0].name) {
    log("host CUDA runs the trainer's host-compiled kernels: compile the "
        "model with --target all and GPUC_CXXFLAGS='-DGPUC_HOST_CUDA "
        "-rdynamic' (the trainer exports gpuc_cpu_kernels)");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *module = new CUmod_st{table};
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  delete module;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                             const char *name) {
  LOCKED;
  if (!module)
    return CUDA_ERROR_INVALID_HANDLE;
  for (const gpuc::CpuKernel *k = module->table; k->name; ++k)
    if (strcmp(k->name, name) == 0) {
      functions.push_back(std::make_unique<CUfunc_st>());
      functions.back()->kernel = k;
      functions.back()->slow = slowed(module->table, name);
      *function = functions.back().get();
      return CUDA_SUCCESS;
    }
  // Alternative entry points exist in the GPU's text only.
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attribute,
                            CUfunction function) {
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  switch (attribute) {
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    // Static shared memory is the kernel's own business here.
    *value = 0;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    *value = function->maxDynamicShared;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute,
                            int value) {
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (value < 0 || value > (227 << 10))
    return CUDA_ERROR_INVALID_VALUE;
  function->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gridX,
                        unsigned int gridY, unsigned int gridZ,
                        unsigned int blockX, unsigned int blockY,
                        unsigned int blockZ, unsigned int sharedBytes,
                        CUstream stream, void **params, void **extra) {
  LOCKED;
  if (!function)
    return CUDA_ERROR_INVALID_HANDLE;
  // A GPU refuses these at the launch.
  if (gridX == 0 || gridY == 0 || gridZ == 0 || blockX == 0 || blockY == 0 ||
      blockZ == 0 || (uint64_t)blockX * blockY * blockZ > 1024 || extra ||
      (int)sharedBytes > function->maxDynamicShared)
    return CUDA_ERROR_INVALID_VALUE;
  const gpuc::CpuKernel *kernel = function->kernel;
  std::vector<void *> args(kernel->arguments);
  for (int i = 0; i < kernel->arguments; ++i) {
    args[i] = *(void **)params[i];
    // Every argument is a buffer: its first byte is in an allocation (or,
    // for an empty one, its end is).
    uintptr_t at = (uintptr_t)args[i];
    if (!inAllocation(at, 1) && !inAllocation(at - 1, 1))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  bool slow = function->slow;
  return enqueue(stream, [kernel, args, slow] {
    kernel->launch(args.data());
    if (slow)
      slowness += std::chrono::seconds(1);
    return CUDA_SUCCESS;
  });
}

} // extern "C"

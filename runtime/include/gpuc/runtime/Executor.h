//===- Executor.h - load a plan and run its step program --------*- C++ -*-===//
//
// The runtime side of the step program: plan.json names every buffer (its
// kind, shape, and for transients its arena offset) and each function's
// steps. A Device owns the memory and runs the steps; the CPU device calls
// the generated kernels through the table linked into the trainer, oneDNN
// for GEMMs and im2col + GEMM for convolutions. The CUDA device (a plugin
// the trainer loads at run time, runtime/cuda/) replays each function as one
// CUDA Graph and never makes the host wait for a step it just submitted.
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_EXECUTOR_H
#define GPUC_RUNTIME_EXECUTOR_H

#include "gpuc/runtime/StepProfile.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpuc {

struct CpuKernel;

struct PlanBuffer {
  int id = 0;
  std::string name, kind, dtype;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  int64_t offset = -1;
  bool hasDefault = false;
  double defaultValue = 0.0;
  /// Optimizer state sharded over the ranks: the shape of the whole
  /// tensor this buffer holds this rank's shard of (else empty).
  std::vector<int64_t> shardOf;
  /// Other names the model gives a parameter (a tied weight listed under
  /// each module that holds it).
  std::vector<std::string> aliases;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  bool persistent() const { return kind != "transient"; }
};

struct Plan {
  nlohmann::json json;
  std::vector<PlanBuffer> buffers;
  int64_t arenaBytes = 0;

  /// Reads and checks plan.json; errors name the file and the problem.
  bool load(const std::string &path, std::string &error);
  bool loadChecked(const std::string &path, std::string &error);
  /// The buffer called `name`, or null.
  const PlanBuffer *find(const std::string &name) const;
  /// Buffer id of input/output `name` of `function`, or -1.
  int functionBuffer(const std::string &function, const char *role,
                     const std::string &name) const;
};

/// What a step's floating-point results depend on beyond the artifact and
/// its inputs: the determinism contract (README, "Determinism"). Runs under
/// equal conditions are bit-identical; under different ones they agree
/// within the step-parity tolerance only.
struct Numerics {
  /// "cpu" or "cuda".
  std::string device;
  /// The CPU's model and the instruction set oneDNN runs on it (its
  /// kernels, and so their rounding, differ by instruction set), or the
  /// GPU's name and compute capability.
  std::string processor;
  /// The threads that split the step's library reductions (oneDNN
  /// partitions a GEMM's and a convolution's sums by thread count); 0 where
  /// results do not depend on a thread count.
  int64_t threads = 0;

  bool operator==(const Numerics &other) const {
    return device == other.device && processor == other.processor &&
           threads == other.threads;
  }
  /// "cpu on AMD EPYC (avx2), 2 threads".
  std::string describe() const {
    std::string text = device + " on " + processor;
    if (threads)
      text += ", " + std::to_string(threads) +
              (threads == 1 ? " thread" : " threads");
    return text;
  }
};

class Collective;

class Device {
public:
  virtual ~Device() = default;
  /// What runs the steps, for the trainer's first line ("cpu", "cuda: ...").
  virtual std::string describe() const = 0;
  /// The conditions this device's results depend on (see Numerics).
  virtual Numerics numerics() const = 0;
  /// Host copies in and out of buffer `id`. An upload is seen by every
  /// later run(); a download waits for the runs submitted before it.
  virtual void upload(int id, const void *src, size_t bytes) = 0;
  virtual void download(int id, void *dst, size_t bytes) = 0;
  /// Submits every step of `function` in order. The CPU device runs them
  /// before returning; the CUDA device queues them and returns at once.
  virtual bool run(const std::string &function, std::string &error) = 0;

  /// Reads of a small buffer (the loss) that do not stall the queue:
  /// readLater() takes the value `id` will have once the runs submitted so
  /// far have finished and returns a ticket; ready() says whether that
  /// value is there, collect() waits for it. At most readCapacity()
  /// tickets may be outstanding.
  virtual uint64_t readLater(int id, size_t bytes) = 0;
  virtual bool ready(uint64_t ticket) = 0;
  virtual void collect(uint64_t ticket, void *dst, size_t bytes) = 0;
  virtual size_t readCapacity() const = 0;
  /// Joins the ranks of a data-parallel run: from now on the steps'
  /// all-reduces sum over `collective`'s ranks. Without one, an all-reduce
  /// sums over this process alone and leaves its values as they are.
  virtual bool setCollective(Collective *collective, std::string &error) {
    error = describe() + " cannot sum gradients over several ranks yet";
    return false;
  }
  /// Waits until everything submitted has finished.
  virtual void synchronize() {}
  /// Launch counts, for the trainer's summary: graph launches (CUDA Graph
  /// replays) and individual kernel/library launches issued by the host.
  /// Per function.
  struct Counters {
    std::map<std::string, int64_t> graphLaunches, hostLaunches;
  };
  virtual Counters counters() const { return {}; }
  /// Bytes of memory the device allocated: the plan's arena and persistent
  /// buffers, plus what its libraries work in (im2col chunks, cuBLASLt and
  /// cuDNN workspace, staging).
  virtual int64_t allocatedBytes() const { return 0; }
  /// Every plan step's timings, when the device was created to profile
  /// (train --profile); empty otherwise.
  virtual std::vector<StepTime> stepTimes() const { return {}; }
  /// This machine's peak bandwidth and FLOP rate, measured now (a few tens
  /// of milliseconds); zeros where the device does not measure them.
  virtual MachinePeaks measurePeaks() { return {}; }
  /// The device's dense peak FLOP/s for GEMMs of `dtype` ("F32", "BF16",
  /// "F16"), what a run's FLOP rate is a share of: measured on the CPU (the
  /// sgemm of measurePeaks, whatever the dtype: its 16-bit GEMMs run in
  /// f32), the datasheet's for a GPU it knows; 0 when unknown.
  virtual double densePeakFlops(const std::string &dtype) { return 0; }
  /// The PCI bus id of the GPU the steps run on ("0000:65:00.0"), what
  /// NVML finds it by (GpuMonitor); empty for the CPU.
  virtual std::string pciBusId() const { return ""; }
};

/// A device that runs on this machine's CPU with the kernels of `table`;
/// `profile` times every step (stepTimes()).
std::unique_ptr<Device> createCpuDevice(const Plan &plan,
                                        const CpuKernel *table, bool profile,
                                        std::string &error);

/// How the CUDA device runs a function.
struct CudaOptions {
  /// Capture each function once into a CUDA Graph and replay it (default);
  /// false launches kernel by kernel (to compare results and timings).
  bool graphs = true;
  /// Time every step between events (train --profile); implies no graphs.
  bool profile = false;
  /// Data parallel: how long a rank waits for the others in a step's
  /// collectives before it gives up (train --collective-timeout).
  double collectiveTimeout = 300;
};

/// The CUDA device from the plugin libgpuc_cuda.so beside the trainer (or
/// $GPUC_CUDA_PLUGIN): the kernels of `artifactDir`'s cubin/PTX for the
/// present GPU, cuBLASLt GEMMs and cuDNN convolutions. Null with `error`
/// saying why (no plugin, no driver, no GPU, no binary for this GPU, out of
/// memory). The trainer itself has no CUDA dependency.
std::unique_ptr<Device> loadCudaDevice(const Plan &plan,
                                       const std::string &artifactDir,
                                       const CudaOptions &options,
                                       std::string &error);

/// The plugin's entry point (extern "C", looked up by loadCudaDevice).
using CreateCudaDeviceFn = Device *(*)(const Plan &plan,
                                       const std::string &artifactDir,
                                       const CudaOptions &options,
                                       std::string &error);
constexpr const char *kCreateCudaDeviceSymbol = "gpuc_create_cuda_device";

} // namespace gpuc

#endif // GPUC_RUNTIME_EXECUTOR_H

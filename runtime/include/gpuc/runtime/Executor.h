//===- Executor.h - load a plan and run its step program --------*- C++ -*-===//
//
// The runtime side of the step program: plan.json names every buffer (its
// kind, shape, and for transients its arena offset) and each function's
// steps. A Device owns the memory and runs the steps; the CPU device calls
// the generated kernels through the table linked into the trainer, OpenBLAS
// for GEMMs and im2col + GEMM for convolutions. A CUDA device plugs in
// behind the same interface (and replays the steps as one CUDA Graph).
//
//===----------------------------------------------------------------------===//
#ifndef GPUC_RUNTIME_EXECUTOR_H
#define GPUC_RUNTIME_EXECUTOR_H

#include <nlohmann/json.hpp>

#include <cstdint>
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
  /// The buffer called `name`, or null.
  const PlanBuffer *find(const std::string &name) const;
  /// Buffer id of input/output `name` of `function`, or -1.
  int functionBuffer(const std::string &function, const char *role,
                     const std::string &name) const;
};

class Device {
public:
  virtual ~Device() = default;
  /// Host copies in and out of buffer `id`.
  virtual void upload(int id, const void *src, size_t bytes) = 0;
  virtual void download(int id, void *dst, size_t bytes) = 0;
  /// Runs every step of `function` in order.
  virtual bool run(const std::string &function, std::string &error) = 0;
};

/// A device that runs on this machine's CPU with the kernels of `table`.
std::unique_ptr<Device>
createCpuDevice(const Plan &plan, const CpuKernel *table, std::string &error);

} // namespace gpuc

#endif // GPUC_RUNTIME_EXECUTOR_H

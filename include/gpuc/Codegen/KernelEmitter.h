//===- KernelEmitter.h - a gpuc.fusion as one CUDA C++ kernel ---*- C++ -*-===//
#ifndef GPUC_CODEGEN_KERNELEMITTER_H
#define GPUC_CODEGEN_KERNELEMITTER_H

#include "gpuc/Dialect/Gpuc/GpucOps.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace mlir::gpuc {

/// Another entry point for a kernel, which computes the same bits in
/// another way: under other __launch_bounds__, or with blocks of other
/// threads (then with a body of its own). The CUDA device times a
/// kernel's entry points on the step's operands at load and launches the
/// fastest.
struct KernelAlternative {
  /// What the entry point's name adds to the launch's.
  std::string suffix;
  /// __launch_bounds__'s second argument (0: none).
  int64_t minBlocksPerSm = 0;
  int64_t blockThreads = 256;
  /// The entry point's body, where it is not the kernel's (a kernel of
  /// one launch only).
  std::string body;
  /// Dynamic shared memory a block of the entry point takes, where not the
  /// kernel's (-1): a row kernel's entry point that stages none of its row
  /// takes none.
  int64_t sharedBytes = -1;
  /// A macro the GPU's text defines where the entry point exists
  /// (GPUC_HAVE_MMA: an architecture with tensor cores), beyond NVRTC's;
  /// the CUDA device takes an alternative its binary lacks for none.
  std::string requires;

  /// The same text under other bounds.
  static KernelAlternative bounded(int64_t minBlocksPerSm) {
    KernelAlternative alternative;
    alternative.suffix = "_b" + std::to_string(minBlocksPerSm);
    alternative.minBlocksPerSm = minBlocksPerSm;
    return alternative;
  }
};

/// A fused attention kernel that cuDNN's fused attention may stand in for
/// (gpuc compile --attention-library auto|cudnn): its shapes, its score rules
/// and where each operand lies among the kernel's arguments (inputs, then
/// outputs): the argument, an offset in elements and the batch, head and
/// row strides (a row's elements are adjacent). The forward's operands
/// are q, k, v, out and lse (f32, [B, H, queries]); the backward's q, k, v,
/// out, lse, d_out, dq, dk and dv, and its `launches` launches are one
/// cuDNN call.
struct CudnnAttentionCall {
  struct Operand {
    std::string name;
    int64_t arg = 0, offset = 0;
    std::array<int64_t, 3> strides{};
  };
  bool backward = false;
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, width = 0,
          valueWidth = 0;
  /// The key and value heads (fewer than `heads` under grouped-query
  /// attention, each read by heads / keyHeads query heads).
  int64_t keyHeads = 0;
  double scale = 1;
  /// Whether a query sees only the keys up to its own (from the first).
  bool causal = false;
  /// "BF16" or "F16".
  std::string dtype;
  /// Whether the device also times it against the kernels and keeps the
  /// faster (--attention-library auto), rather than taking it wherever it
  /// agrees with them (cudnn).
  bool timed = false;
  std::vector<Operand> operands;
};

/// One generated kernel: `extern "C" __global__ void <name>(inputs...,
/// outputs...)`, launched with `grid` blocks of `blockThreads` threads. A
/// row kernel whose rows are split across blocks (rowKernelSplits) is
/// `launches` kernels <name>_p0, <name>_p1, ... run in that order (one per
/// reduction, one writing per-element values, one writing per-row values),
/// each taking a last argument: a workspace of `workspaceBytes` for the
/// partial reductions.
struct EmittedKernel {
  std::string name;
  std::string source;
  int64_t grid = 1;
  int64_t launches = 1;
  int64_t workspaceBytes = 0;
  /// Blocks an SM is to hold at once (__launch_bounds__'s second
  /// argument: ptxas caps the registers to fit them); 0: no bound.
  int64_t minBlocksPerSm = 0;
  /// Other entry points of the kernel, in the GPU's text only (each
  /// launch's name plus the alternative's suffix).
  std::vector<KernelAlternative> alternatives;
  /// Bytes of dynamic shared memory a block takes on the GPU (a row
  /// kernel's staged rows); 0: none.
  int64_t sharedBytes = 0;
  /// Host-side launcher text for the CPU target (casts the argument array
  /// and runs the blocks through gpuc::cpuLaunch).
  std::string cpuLauncher;
  /// Its entry points' parameters: inputs, outputs, then a split kernel's
  /// workspace.
  int arguments = 0;
  /// What the kernel does, without its name: equal keys, identical kernels.
  std::string key;
  /// Where cuDNN's fused attention may run instead (a fused attention).
  std::optional<CudnnAttentionCall> cudnnAttention;

  std::string launchName(int64_t launch) const {
    return launches == 1 ? name : name + "_p" + std::to_string(launch);
  }
};

/// Emits the body of `fusion` as one kernel. The kernel's shape follows what
/// the region computes: elementwise over its results' shape (each block owns
/// a tile of `kPointwiseTile` elements), or, with one reduction, one block per
/// element of the reduction's result (pointwise producers are computed while
/// reading, pointwise consumers after the block reduction). Fails, with a
/// diagnostic on the fusion, for a region it has no schedule for.
FailureOr<EmittedKernel> emitKernel(FusionOp fusion, StringRef name);

/// `text` where a trainer built for the CUDA device on a host CUDA
/// (-DGPUC_HOST_CUDA, runtime/cuda/host) has a kernel's alternative entry
/// point that also needs `macro` ("" for none): its launcher and its entry
/// in the launch table.
std::string hostCudaOnly(StringRef macro, StringRef text);

/// Elements a block of a pointwise kernel owns.
constexpr int64_t kPointwiseTile = 2048;
constexpr int64_t kBlockThreads = 256;
/// Bytes of input a GPU thread of an elementwise kernel aims to have in
/// flight: 32 per thread, 32 KiB per SM at half occupancy, more than the
/// 18 KiB or so that an H100's bandwidth times its memory latency asks for
/// (Little's law). The thread then loads up to kPointwiseTile /
/// kBlockThreads of its elements before storing any.
constexpr int64_t kGpuBytesInFlight = 32;
/// The most elements of a warp's row (a row kernel's, rows of up to
/// kWarpRowMax) a GPU lane keeps in registers, over the inputs its passes
/// read again: loaded before the first pass, all in flight at once, and
/// read there by every pass, unrolled.
constexpr int64_t kGpuWarpRowRegisters = 64;

/// The most bytes of a row a GPU block of a row kernel (a block per long
/// row, making several passes over it) keeps in shared memory for its
/// later passes: two such blocks fit an H100's SM (228 KiB), one an A100's
/// (164 KiB). gpuc compile --gpu-row-stage-bytes changes it (0: none).
constexpr int64_t kGpuRowStageBytes = 112 * 1024;
/// Threads an SM of the GPUs gpuc targets holds at once (sm_80 to sm_90).
constexpr int64_t kGpuThreadsPerSm = 2048;
/// A row kernel with fewer rows than kRowKernelBlocks splits each row into
/// chunks of at least kRowChunkMin elements until it has about that many
/// blocks (enough to fill a GPU: 132 SMs x 8 blocks of 256 threads).
constexpr int64_t kRowKernelBlocks = 1024;
/// A row kernel whose rows have at most kWarpRowMax elements runs a warp
/// per row on the GPU, kWarpRowsPerBlock rows per block of 256 threads
/// (Kernel.h's warpRow()).
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kWarpRowsPerBlock = 8;
constexpr int64_t kRowChunkMin = 4096;
/// A row kernel whose rows are adjacent elements runs in columns on the
/// GPU: `lanes` adjacent rows per block of 256 threads (Kernel.h's column
/// lanes), each thread one row and a slice of its elements. The lanes are
/// the most of 256, 128, 64 and 32 (and at most `most`: gpuc compile
/// --gpu-column-lanes) that divide the rows' axis of `width` (a block's
/// loads at an element are then one run of memory, and a chunk of a
/// channels-last batch norm with at most 256 channels is one stretch of
/// it), else kGpuColumnLanes, or kGpuNarrowColumnLanes when the rows it
/// reads hold 16-bit elements: whole 32-byte sectors either way.
constexpr int64_t kGpuColumnLanes = 8;
constexpr int64_t kGpuNarrowColumnLanes = 16;
constexpr int64_t gpuColumnLanes(int64_t width, bool sixteenBitRows,
                                 int64_t most = kBlockThreads) {
  for (int64_t lanes = kBlockThreads; lanes >= 32; lanes /= 2)
    if (lanes <= most && width % lanes == 0)
      return lanes;
  return sixteenBitRows && most >= kGpuNarrowColumnLanes &&
                 width % kGpuNarrowColumnLanes == 0
             ? kGpuNarrowColumnLanes
             : kGpuColumnLanes;
}
/// Blocks per row of a row kernel with `rows` rows of `rowLength` elements,
/// each chunk at least `minChunk` elements.
/// A split kernel writes its per-row results in a launch after the one that
/// writes per-element results (which every block of a row reads per-row
/// operands for), so a per-row result may still overwrite such an operand.
int64_t rowKernelSplits(int64_t rows, int64_t rowLength,
                        int64_t minChunk = kRowChunkMin);
/// The shortest chunk of a column kernel with `lanes` columns a block: its
/// kBlockThreads / lanes threads per column share the chunk's rows, so a
/// chunk of kRowChunkMin / kBlockThreads rows per thread keeps each
/// thread's share what a row kernel's is. Chunks of kRowChunkMin rows left
/// the layer norms' weight gradients of GPT-2 (768 columns of bf16, 48
/// groups) 192 blocks, and they ran at a sixteenth of an H200's bandwidth.
constexpr int64_t columnChunkMin(int64_t lanes) {
  return kRowChunkMin / kBlockThreads * (kBlockThreads / lanes);
}

/// The C type a tensor element is stored as (gpuc::f16 and gpuc::bf16 for
/// the 16-bit floats, from the runtime's Float16.h), or "" when codegen
/// cannot store it.
StringRef storageCType(Type elementType);
/// The C type a kernel computes an element in: float for every float type
/// (16-bit values are rounded to their type after each op), else the
/// storage type.
StringRef registerCType(Type elementType);

} // namespace mlir::gpuc

#endif // GPUC_CODEGEN_KERNELEMITTER_H

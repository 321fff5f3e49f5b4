#!/usr/bin/env bash
# Every GPU check of a gpu-bundle (scripts/gpu-bundle.sh), on a machine with
# an NVIDIA GPU, the CUDA 13 libraries and PyTorch:
#
#   ./run.sh [checks|train|amp|bench|scale|stalls|profile|all] [gpu_check.py options]  (default: all)
#
# profile: where each bench artifact's GPU time goes (train --profile).
# checks: one step of each parity model against the CPU device's results;
#         20 steps from the CUDA Graph against 20 launched kernel by kernel
#         (bit-identical losses); one graph launch per training step; the
#         log lines' GPU utilization, memory and power (NVML);
#         checkpoint + resume on the GPU (byte-identical); --export-onnx;
#         data parallel as one NCCL rank: all-reduces inside the graph,
#         the same losses, at most 2 % slower.
# train:  MLP 15 epochs (>= 0.89) and CNN 6 epochs (>= 0.92) on Fashion-MNIST.
# bench:  step time against PyTorch eager, torch.compile and
#         torch.compile(mode="reduce-overhead"), one interleaved run.
# scale:  GPT-2 124M (T 1024, batch 16) and ResNet-50 (batch 256), fp32 and
#         bf16 (GPT-2 bf16 also with --attention gemm, with
#         --attention-blocks-per-sm 2, at the largest batch that fits,
#         240, and with --gpu-bytes-in-flight 0,
#         its kernels' loads in the order before batching; ResNet-50 bf16
#         also with --conv-layout nchw; GPT-2 bf16 also with
#         --attention-rows-per-warp 32, --attention-score-gradients
#         stored, and that with --attention-blocks-per-sm 2, and with
#         --attention-library generated (no cuDNN attention: by default
#         the load times it against the kernels); both in bf16
#         with --gpu-bytes-in-flight 64 and 128 and with
#         --gpu-column-lanes 16; GPT-2 bf16 also under --memory-budget
#         3.2GiB, recomputing in backward), weights made here by
#         PyTorch (--init): one step against PyTorch's, each artifact's
#         profile with PyTorch's SDPA timed at GPT-2's attention shape beside
#         it (each backend: FlashAttention, cuDNN's, memory-efficient), then
#         tokens/s and images/s against eager and torch.compile, and MFU.
# stalls: Nsight Compute (ncu, when the machine has it) on GPT-2 bf16's
#         attention and head cross-entropy kernels: why they take the time
#         the profile shows (instruction rate, stall reasons, occupancy).
# Results: summary-<phase>.json and logs in $OUT (when set) or ./results.
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
results=${OUT:-$bundle/results}
mkdir -p "$results"
python=${PYTHON:-python3}

# cuBLASLt, cuDNN and NCCL: the toolkit's folders, else the NVIDIA wheels
# beside PyTorch. The bundle's own lib/ holds protobuf and zlib for the trainer.
libdirs=$bundle/lib
for want in libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  found=""
  site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 \
             /usr/local/cuda-13*/lib /usr/lib/x86_64-linux-gnu \
             "$site"/nvidia/cublas/lib "$site"/nvidia/cudnn/lib "$site"/nvidia/*/lib; do
    if [[ -e $dir/$want ]]; then found=$dir; break; fi
  done
  if [[ -z $found ]]; then
    found=$(find / -name "$want" -not -path '/proc/*' 2>/dev/null | head -1 | xargs -r dirname)
  fi
  if [[ -n $found ]]; then
    libdirs+=":$found"
    echo "run.sh: $want in $found"
  else
    echo "run.sh: $want not found on this machine" >&2
  fi
done
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GPUC_CUDA_PLUGIN=$bundle/bin/libgpuc_cuda.so

nvidia-smi -L || echo "run.sh: nvidia-smi found no GPU" >&2
phase=${1:-all}
shift || true
PYTHONUNBUFFERED=1 exec "$python" "$bundle/gpu_check.py" --bundle "$bundle" \
  --results "$results" --phase "$phase" "$@"

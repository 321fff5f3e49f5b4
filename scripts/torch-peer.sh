#!/usr/bin/env bash
# PyTorch 2.x and onnxruntime-training as the CPU peers of
# bench/step_vs_pytorch.py on a machine without a GPU. Only PyPI is reachable here, and PyPI's Linux wheel is the
# CUDA build: it is installed without its dependencies, with the few NVIDIA
# libraries its binaries link that the CUDA toolkit in /usr/local/cuda lacks
# (cuSPARSELt, NVSHMEM, a newer NCCL); nothing CUDA runs. Debian's own
# python3-torch is 1.13, the handicapped peer.
#
#   scripts/torch-peer.sh [VENV]               (default /opt/torchpeer)
#   scripts/torch-peer.sh --exporters [VENV]   (default /opt/gpuc-exporters)
#
# With --exporters it installs, instead of onnxruntime-training (which
# reads ONNX only up to IR 10), what PyTorch's current ONNX exporters need
# (onnxscript, for the dynamo exporter) and Hugging Face's transformers:
# test/Frontend/onnx/pytorch-exporters.test uses it.
#
# It prints the command that runs the benchmark with it.
set -euo pipefail
exporters=0
if [[ ${1:-} == --exporters ]]; then
  exporters=1
  shift
fi
venv=${1:-$([[ $exporters == 1 ]] && echo /opt/gpuc-exporters || echo /opt/torchpeer)}
torch_version=2.15.0
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --no-deps "torch==$torch_version" \
  nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 \
  nvidia-nccl-cu13==2.30.7 nvidia-cufile
# torchvision's models for bench/torchvision_step_vs_pytorch.py: the newest
# on PyPI (its models are Python; the benchmarks use none of its C++ ops).
"$venv/bin/pip" install -q --no-deps torchvision==0.29.2 pillow
if [[ $exporters == 1 ]]; then
  "$venv/bin/pip" install -q sympy networkx jinja2 filelock fsspec \
    typing_extensions numpy onnxscript==0.7.2 transformers==5.24.0
else
  # onnxruntime-training 1.19 reads ONNX IR up to 10: onnx 1.16.
  "$venv/bin/pip" install -q sympy networkx jinja2 filelock fsspec \
    typing_extensions numpy onnx==1.16.2 onnxruntime-training==1.19.2
fi
libs=$(find "$venv"/lib/python3*/site-packages/nvidia -name 'lib*.so*' \
  -printf '%h\n' | sort -u | tr '\n' ':')/usr/local/cuda/lib64
LD_LIBRARY_PATH=$libs "$venv/bin/python" -c \
  'import torch; torch.ones(2) @ torch.ones(2); print("torch", torch.__version__)'
if [[ $exporters == 1 ]]; then
  echo "python: LD_LIBRARY_PATH=$libs $venv/bin/python"
else
  echo "run: LD_LIBRARY_PATH=$libs $venv/bin/python bench/step_vs_pytorch.py --torch-modes eager,compile,ort"
fi

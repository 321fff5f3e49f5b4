#!/usr/bin/env bash
# One bf16 AdamW step of a GPT at GPT-2's widths through the CUDA device
# with no GPU: the host CUDA (runtime/cuda/host) runs the GPU's kernel text
# on the emulator, against the same artifact's CPU device. The parity models
# have vocabularies of at most 3,001 classes and widths of 64; this one has
# GPT-2's 50,257 (the tied head padded to 50,304, its rows of 100 KB staged
# in shared memory), width 768 in 12 heads, and T (default 128, up to 1024)
# for the attention's tiles: what only a real-scale artifact reaches, before
# a GPU runs it.
#
#   scripts/host-cuda-wide-check.sh [WORK_DIR] [T]
#
# It needs the build (scripts/build.sh, with the CUDA toolkit), and PyTorch
# and ONNX in /usr/bin/python3 for the model. 3 to 5 minutes at T 128 on
# 2 cores; at T 1024 it is half an hour, most of it the host CUDA's
# stand-in for cuDNN's attention (a forward call 83 s, a backward 275 s),
# checked and timed at load.
# Exits non-zero when a tensor is outside the bf16 step tolerance of
# test/Codegen/stepcompare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${1:-$(mktemp -d /tmp/gpuc-wide.XXXX)}
seq=${2:-128}
gpuc=${GPUC:-$root/build/bin/gpuc}
plugin=$root/build/runtime/libgpuc_cuda_host.so
python=/usr/bin/python3
for need in "$gpuc" "$plugin"; do
  [[ -e $need ]] || { echo "host-cuda-wide-check: $need is missing: run scripts/build.sh (with the CUDA toolkit) first" >&2; exit 1; }
done
$python -c 'import torch, onnx' 2>/dev/null ||
  { echo "host-cuda-wide-check: /usr/bin/python3 cannot import torch and onnx (scripts/install-deps.sh installs them)" >&2; exit 1; }
mkdir -p "$work/in"

$python - "$root/examples" "$work" "$seq" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import gpt
work, seq = sys.argv[2], int(sys.argv[3])
gpt.PRESETS["gpt2-one-layer"] = dict(vocab=50257, layers=1, heads=12, width=768)
gpt.export(gpt.build("gpt2-one-layer", seq, 0), seq, work + "/model.onnx")
tokens = np.random.default_rng(1).integers(0, 50257, (2, seq + 1))
np.save(work + "/in/tokens.npy", tokens[:, :seq])
np.save(work + "/in/label.npy", tokens[:, 1:])
EOF

GPUC_CXXFLAGS="-DGPUC_HOST_CUDA -rdynamic -O1" "$gpuc" compile "$work/model.onnx" \
  --class-axis -1 --batch 2 --optimizer adamw --lr 0.001 --precision bf16 \
  --target all --cuda-arch sm_90 -o "$work/out" >/dev/null
"$work/out/train" --device cpu --run-step "$work/in" --output-dir "$work/cpu" \
  --seed 7 --step 1 >/dev/null
GPUC_CUDA_PLUGIN=$plugin "$work/out/train" --device cuda --run-step "$work/in" \
  --output-dir "$work/cuda" --seed 7 --step 1

$python - "$root/test/Codegen" "$work" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from stepcompare import TOLERANCE, compare_dirs
work = sys.argv[2]
compared, worst, name, _, failures = compare_dirs(
    work + "/cpu", work + "/cuda", **TOLERANCE["bf16"])
print("host-cuda-wide-check: %d tensors, worst %.3f of the bf16 tolerance (%s)"
      % (compared, worst, name))
for f in failures:
    print("  " + f)
sys.exit(1 if failures or compared < 50 else 0)
EOF

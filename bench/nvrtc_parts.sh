#!/usr/bin/env bash
# NVRTC's share of a cold CUDA compile, with kernels.cu as one program and
# cut into programs (lib/Codegen/NvrtcParts.cpp) on one thread and on
# --jobs threads, rounds interleaved; and whether the cut's PTX is the one
# program's, text for text (else whether the cubins carry the same code).
#
#   bench/nvrtc_parts.sh [--rounds R] [--jobs N] [--work DIR] [MODEL...]
#
# MODEL: attention16 (a small model with two attention layers, bf16, flash;
# written by test/Codegen/step_parity.py), transformer (examples/, bf16),
# gpt2 and resnet50 (the GPU bundle's real-scale exports in
# ~/.cache/gpuc/scale-models, made by scripts/gpu-bundle.sh; bf16 for
# sm_90, batch 16 and 256). Default: attention16 transformer, and gpt2 and
# resnet50 where their exports are there. Each compile has an empty cache
# of its own. Prints the load average first: this machine is shared and
# its speed drifts, so compare figures from one run only. Columns: NVRTC's
# wall seconds (from --time), the whole compile's wall seconds, and how
# many programs the cut made.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gpuc="${GPUC:-$root/build/bin/gpuc}"
work="${TMPDIR:-/tmp}/gpuc-nvrtc-parts"
rounds=2
jobs=$(nproc)
models=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    -*) echo "nvrtc_parts.sh: unknown option '$1'" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
scale="${XDG_CACHE_HOME:-$HOME/.cache}/gpuc/scale-models"
if [[ ${#models[@]} -eq 0 ]]; then
  models=(attention16 transformer)
  [[ -f $scale/gpt2-1024.onnx ]] && models+=(gpt2)
  [[ -f $scale/resnet50.onnx ]] && models+=(resnet50)
fi
mkdir -p "$work"

arguments() {
  case "$1" in
    attention16)
      [[ -f $work/attention16.onnx ]] ||
        "$python" -c "import sys; sys.path.insert(0, '$root/test/Codegen'); import step_parity; step_parity.write_attention16('$work/attention16.onnx')"
      echo "$work/attention16.onnx --batch 4 --precision bf16 --attention flash --cuda-arch sm_90" ;;
    transformer)
      echo "$root/examples/transformer.onnx --batch 4 --class-axis -1 --precision bf16 --cuda-arch sm_90" ;;
    gpt2)
      echo "$scale/gpt2-1024.onnx --class-axis -1 --batch 16 --optimizer adamw --precision bf16 --no-weights --cuda-arch sm_90" ;;
    resnet50)
      echo "$scale/resnet50.onnx --batch 256 --optimizer adamw --precision bf16 --no-weights --cuda-arch sm_90" ;;
    *) echo "nvrtc_parts.sh: unknown model '$1'" >&2; exit 2 ;;
  esac
}

# One cold compile: "<NVRTC seconds> <wall seconds>", the output in $work/$2.
compile() {
  local model="$1" out="$work/$2"; shift 2
  rm -rf "$out" "$out.cache"
  local start end
  start=$(date +%s.%N)
  # shellcheck disable=SC2046
  "$gpuc" compile $(arguments "$model") --target cuda --time \
    --cache-dir "$out.cache" -o "$out" "$@" >"$out.log" 2>&1 ||
    { cat "$out.log" >&2; exit 1; }
  end=$(date +%s.%N)
  local nvrtc
  nvrtc=$(grep -E 'NVRTC compute_[0-9]+ \(PTX' "$out.log" | awk '{print $4}')
  echo "$nvrtc $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) hardware threads; --jobs $jobs"
printf '%-12s %-26s %10s %10s %s\n' model compile "NVRTC s" "wall s" programs
for model in "${models[@]}"; do
  for ((round = 1; round <= rounds; ++round)); do
    read -r one_nvrtc one_wall < <(compile "$model" "$model-one" --jobs "$jobs" --nvrtc-one-program)
    read -r seq_nvrtc seq_wall < <(compile "$model" "$model-parts1" --jobs 1)
    read -r par_nvrtc par_wall < <(compile "$model" "$model-parts" --jobs "$jobs")
    programs=$(grep -oE 'PTX, [0-9]+ parts' "$work/$model-parts.log" | grep -oE '[0-9]+' || echo 1)
    printf '%-12s %-26s %10s %10s %s\n' "$model" "one program, --jobs $jobs" "$one_nvrtc" "$one_wall" 1
    printf '%-12s %-26s %10s %10s %s\n' "$model" "cut, --jobs 1" "$seq_nvrtc" "$seq_wall" "$programs"
    printf '%-12s %-26s %10s %10s %s\n' "$model" "cut, --jobs $jobs" "$par_nvrtc" "$par_wall" "$programs"
  done
  ptx="$work/$model-one/kernels.sm_90.ptx"
  if cmp -s "$ptx" "$work/$model-parts/kernels.sm_90.ptx"; then
    echo "$model: the cut's PTX is the one program's, text for text"
  else
    echo "$model: the cut's PTX differs from the one program's; the cubins: $("$python" "$root/test/Codegen/cubin_sections.py" "$work/$model-one/kernels.sm_90.cubin" "$work/$model-parts/kernels.sm_90.cubin" 2>&1 | tail -1 || true)"
  fi
done

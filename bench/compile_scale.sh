#!/usr/bin/env bash
# Compile and planning time at GPT-2 124M's size (a 548 MB ONNX, 124M
# weights), where the weights, not the kernels, set the pace:
#   bf16    gpuc compile --precision bf16 --target cuda --no-weights --batch 16
#   fp32    gpuc compile --target cpu --batch 4 (the weights written out)
#   plans   gpuc compile --max-batch-for 100MiB (two plans of the step, as
#           every batch --max-batch-for tries; nothing fits)
# each kernels-warm (--no-artifact-cache: import, passes, step program and
# the files run; kernel objects and cubins come from the cache), in
# interleaved rounds, with GPUC_BASELINE=path/to/another/gpuc timed beside
# build/bin/gpuc. Prints the load average: this machine is shared and its
# speed drifts, so compare figures from one run only.
#
#   bench/compile_scale.sh [--rounds N] [--model FILE.onnx]
#
# The model is examples/gpt.py's export (`examples/gpt.py --preset gpt2
# --seq 1024 -o FILE`; scripts/gpu-bundle.sh keeps one under
# ~/.cache/gpuc/scale-models).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3
model=${XDG_CACHE_HOME:-$HOME/.cache}/gpuc/scale-models/gpt2-1024.onnx
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    *) echo "compile_scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -f $model ]] || {
  echo "compile_scale.sh: no $model: export it with examples/gpt.py --preset gpt2 --seq 1024 -o $model" >&2
  exit 1
}
declare -A binaries=([current]="${GPUC:-$root/build/bin/gpuc}")
[[ -n ${GPUC_BASELINE:-} ]] && binaries[baseline]=$GPUC_BASELINE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; gpuc $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf "%-6s %-9s %-6s %8s %8s %8s\n" round gpuc case wall_s user_s sys_s
for round in $(seq "$rounds"); do
  for name in "${!binaries[@]}"; do
    gpuc=${binaries[$name]}
    for case_ in bf16 fp32 plans; do
      case $case_ in
        bf16) args=(--precision bf16 --target cuda --no-weights --batch 16) ;;
        fp32) args=(--target cpu --batch 4) ;;
        plans) args=(--precision bf16 --target cuda --no-weights --max-batch-for 100MiB) ;;
      esac
      rm -rf "$work/out"
      /usr/bin/time -f "%e %U %S" -o "$work/time" "$gpuc" compile "$model" \
        --class-axis -1 --optimizer adamw --no-artifact-cache "${args[@]}" \
        -o "$work/out" > "$work/log" 2>&1 ||
        { echo "compile_scale.sh: $name $case_ failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
      read -r wall user sys < "$work/time"
      printf "%-6s %-9s %-6s %8s %8s %8s\n" "$round" "$name" "$case_" "$wall" "$user" "$sys"
    done
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Step time, arena peak and recomputed FLOPs of gpuc-remat at budgets of
# 100/75/50/30% of the arena peak without it: each budget compiled
# (--memory-budget), its CPU trainer timed (--bench-steps, synthetic
# inputs), the budgets of one model interleaved over two rounds (best kept),
# load average printed. Usage: bench/remat_budgets.sh [build/bin/gpuc]
set -euo pipefail
cd "$(dirname "$0")/.."
gpuc=${1:-build/bin/gpuc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
for spec in "mlp 1024 20" "cnn 128 5" "transformer 32 20 --class-axis -1"; do
  set -- $spec
  model=$1 batch=$2 steps=$3
  shift 3
  base=$("$gpuc" compile "examples/$model.onnx" --batch "$batch" "$@" \
    --optimizer adam --target cpu -o "$out/$model-100" --report |
    sed -n 's/.*arena peak \([0-9.]*\) MiB.*/\1/p' | head -1)
  echo "== $model, batch $batch, Adam: arena peak without remat $base MiB"
  built="100"
  for percent in 75 50 30; do
    budget=$(python3 -c "print(int($base * 1048576 * $percent / 100))")
    if "$gpuc" compile "examples/$model.onnx" --batch "$batch" "$@" \
      --optimizer adam --target cpu --memory-budget "$budget" \
      -o "$out/$model-$percent" --report >"$out/$model-$percent.log" 2>&1; then
      built+=" $percent"
    else
      echo "  $percent%: $(grep -m1 'error' "$out/$model-$percent.log" | sed 's/.*error: //' | cut -c1-160)"
    fi
  done
  declare -A best=()
  for round in 1 2; do
    for percent in $built; do
      ms=$("$out/$model-$percent/train" --bench-steps "$steps" 2>/dev/null |
        python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["ms_per_step"])')
      if [[ -z ${best[$percent]:-} ]] || python3 -c "import sys; sys.exit(not $ms < ${best[$percent]})"; then
        best[$percent]=$ms
      fi
    done
  done
  for percent in $built; do
    line=$(grep -h "remat recomputes" "$out/$model-$percent.log" 2>/dev/null || true)
    peak=$(python3 -c "import json; print('%.2f' % (json.load(open('$out/$model-$percent/report.json'))['memory']['arena_peak'] / 1048576))")
    mflop=$(python3 -c "import json; m=json.load(open('$out/$model-$percent/report.json'))['memory']; print('%.1f' % (m.get('remat', {}).get('extra_flops', 0) / 1e6))")
    echo "  $percent%: arena peak $peak MiB, recomputed $mflop MFLOP/step, step ${best[$percent]} ms"
  done
  unset best
done

#!/usr/bin/env bash
# The memory plan of the three examples: arena peak against the liveness
# lower bound, bytes kept for backward, end-of-step copies, and what
# rematerialization reaches at 100/90/75/50/30% of the peak (compile only;
# nothing runs). Usage: bench/memory_plan.sh [build/bin/gpuc]
set -euo pipefail
cd "$(dirname "$0")/.."
gpuc=${1:-build/bin/gpuc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for spec in "mlp 128" "cnn 128" "transformer 32 --class-axis -1" "mlp 1024"; do
  set -- $spec
  model=$1 batch=$2
  shift 2
  echo "== $model, batch $batch, Adam"
  "$gpuc" compile "examples/$model.onnx" --batch "$batch" "$@" --optimizer adam \
    --target cpu -o "$out/$model" --report --remat-sweep |
    grep -E "^memory:|^remat sweep|^ +[0-9]+%|budget|copies\)"
done

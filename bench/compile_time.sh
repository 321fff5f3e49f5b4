#!/usr/bin/env bash
# Compile time of `gpuc compile --target all`, cold (an empty cache), warm
# (the same model again: the artifact cache copies what the first compile
# wrote) and kernels-warm (again with --no-artifact-cache: import, passes and
# the step program run, the kernel objects, cubins and trainer come from the
# cache, as after changing only --lr), for three models of growing size:
# torchvision's ResNet-18 and DenseNet-121 (64x64 RGB, 10 classes, batch 4)
# and the example transformer block (batch 4).
#
#   bench/compile_time.sh [--work DIR] [--models "resnet18 densenet121 transformer"]
#                         [--time]   (also print each cold compile's --time tree)
#
# Needs python3 with torch and torchvision (Debian's python3-torch and
# python3-torchvision) to export the torchvision models; the transformer
# comes from examples/. Prints the load average first: this machine is shared
# and its speed drifts, so compare figures from one run only.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gpuc="${GPUC:-$root/build/bin/gpuc}"
work="${TMPDIR:-/tmp}/gpuc-compile-time"
models="resnet18 densenet121 transformer"
show_time=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --time) show_time=1; shift ;;
    *) echo "compile_time.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
mkdir -p "$work"

export_model() {
  local name="$1" path="$work/$1.onnx"
  [[ -f "$path" ]] && return 0
  case "$name" in
    transformer) cp "$root/examples/transformer.onnx" "$path" ;;
    *)
      "$python" - "$name" "$path" 2> "$work/$name.export.log" <<'EOF' || {
import sys
import torch
import torchvision
name, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
kwargs = {} if name == "resnet18" else {"drop_rate": 0.0} if name.startswith("densenet") else {"dropout": 0.0}
model = getattr(torchvision.models, name)(num_classes=10, **kwargs).train()
torch.onnx.export(model, (torch.zeros(2, 3, 64, 64),), path,
                  input_names=["image"], output_names=["logits"],
                  dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False)
EOF
        echo "compile_time.sh: cannot export $name (needs python3 with torch and torchvision; see $work/$name.export.log)" >&2
        return 1
      } ;;
  esac
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; gpuc $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
printf "%-12s %8s %11s %8s %15s  %s\n" model kernels cold_s warm_s kernels_warm_s "(gpuc compile --target all --batch 4)"
for name in $models; do
  export_model "$name" || continue
  cache="$work/cache-$name"
  rm -rf "$cache" "$work/out-$name"
  args=("$work/$name.onnx" --batch 4 --target all --cache-dir "$cache")
  start=$(date +%s%N)
  "$gpuc" compile "${args[@]}" -o "$work/out-$name" ${show_time:+--time} \
    > "$work/$name.cold.log" 2>&1 || { echo "$name: compile failed, see $work/$name.cold.log" >&2; continue; }
  cold=$(( ($(date +%s%N) - start) / 1000000 ))
  rm -rf "$work/out-$name"
  start=$(date +%s%N)
  "$gpuc" compile "${args[@]}" -o "$work/out-$name" > "$work/$name.warm.log" 2>&1
  warm=$(( ($(date +%s%N) - start) / 1000000 ))
  grep -q "all from the artifact cache" "$work/$name.warm.log" ||
    echo "$name: the warm compile did not come from the artifact cache (see $work/$name.warm.log)" >&2
  rm -rf "$work/out-$name"
  start=$(date +%s%N)
  "$gpuc" compile "${args[@]}" --no-artifact-cache -o "$work/out-$name" > "$work/$name.kwarm.log" 2>&1
  kwarm=$(( ($(date +%s%N) - start) / 1000000 ))
  kernels=$(grep -o '([0-9]* kernels' "$work/$name.warm.log" | tr -dc 0-9)
  printf "%-12s %8s %8d.%02d %5d.%02d %12d.%02d\n" "$name" "$kernels" $((cold / 1000)) $((cold % 1000 / 10)) $((warm / 1000)) $((warm % 1000 / 10)) $((kwarm / 1000)) $((kwarm % 1000 / 10))
  [[ -n "$show_time" ]] && cat "$work/$name.cold.log"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

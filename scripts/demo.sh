#!/usr/bin/env bash
# The main job on a fresh machine: installs what is needed, builds gpuc,
# compiles the example MLP into a trainer and trains it on Fashion-MNIST
# (CPU target; about 6 s per epoch on 2 cores). EPOCHS and MODEL override.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
model="${MODEL:-mlp}"
epochs="${EPOCHS:-15}"
build/bin/gpuc compile "examples/$model.onnx" --batch 128 \
  --optimizer adam --lr 0.001 --target cpu -o "build/$model-trainer"
"build/$model-trainer/train" --data /usr/share/datasets/fashion-mnist \
  --epochs "$epochs" --seed 0 --metrics "build/$model-trainer/metrics.jsonl" \
  --checkpoint-dir "build/$model-trainer/checkpoints" \
  --export-onnx "build/$model-trained.onnx"

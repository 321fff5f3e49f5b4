#!/usr/bin/env bash
# Installs, builds, and runs the main job that exists today: imports the example
# MLP into the gpuc dialect (training arrives with the codegen issue).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/bin/gpuc import examples/mlp.onnx --batch 128 -o build/mlp.mlir
echo "wrote build/mlp.mlir:"
grep -v '0x' build/mlp.mlir | sed -n '/func.func/,/return/p'

#!/usr/bin/env bash
# Installs every Debian package gpuc needs to build and test. Idempotent and quiet
# when everything is already there.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libgtest-dev
  libdnnl-dev nlohmann-json3-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev
  coinor-libcbc-dev
  dataset-fashion-mnist fortunes
  python3-numpy python3-onnx python3-pil
  clang libclang-rt-dev
  openmpi-bin libopenmpi-dev
)
# Optional: PyTorch, for exporting the examples and the parity tests, and
# torchvision for the model zoo test. Large, so GPUC_SKIP_TORCH=1 leaves them
# out (the tests that need them then skip).
if [[ "${GPUC_SKIP_TORCH:-0}" != 1 ]]; then
  packages+=(python3-torch python3-torchvision)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null

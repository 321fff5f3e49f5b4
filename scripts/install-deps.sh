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
  python3-numpy python3-onnx python3-pil python3-venv python3-pip
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
sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# Optional: cuDNN's frontend (header-only, MIT; from its PyPI wheel, whose
# include/ holds the headers), for the CUDA plugin's use of cuDNN's fused
# attention (gpuc compile --attention-library auto|cudnn). Without it (no
# network) the plugin is built without, and says so when asked.
cudnn_frontend=/opt/gpuc-cudnn-frontend
cudnn_frontend_version=1.32.0
if [[ "${GPUC_SKIP_CUDNN_FRONTEND:-0}" != 1 ]] &&
  [[ ! -e $cudnn_frontend/include/cudnn_frontend.h ||
    $(cat "$cudnn_frontend/VERSION" 2>/dev/null) != "$cudnn_frontend_version" ]]; then
  echo "install-deps: fetching cuDNN's frontend $cudnn_frontend_version headers into $cudnn_frontend"
  wheels=$(mktemp -d)
  if /usr/bin/python3 -m pip download -q --no-deps --dest "$wheels" \
      "nvidia-cudnn-frontend==$cudnn_frontend_version" 2>/dev/null &&
    $sudo rm -rf "$cudnn_frontend" && $sudo mkdir -p "$cudnn_frontend" &&
    $sudo /usr/bin/python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/") or "licenses/" in n])' \
      "$wheels"/nvidia_cudnn_frontend-*.whl "$cudnn_frontend"; then
    echo "$cudnn_frontend_version" | $sudo tee "$cudnn_frontend/VERSION" >/dev/null
  else
    echo "install-deps: cuDNN's frontend could not be fetched; the CUDA" \
      "plugin is built without cuDNN's fused attention"
  fi
  rm -rf "$wheels"
fi

# Optional: PyTorch's current ONNX exporters (PyTorch 2.15 with onnxscript)
# and Hugging Face's transformers, for the test of models as they export
# them (test/Frontend/onnx/pytorch-exporters.test). From PyPI, in a virtual
# environment of their own; without a network the test skips.
exporters_venv=/opt/gpuc-exporters
if [[ "${GPUC_SKIP_EXPORTERS:-0}" != 1 ]] &&
  ! "$exporters_venv/bin/python" -c 'import onnxscript, transformers, torchvision' 2>/dev/null; then
  echo "install-deps: installing PyTorch's ONNX exporters and transformers from PyPI into $exporters_venv"
  if ! $sudo bash "$(dirname "$0")/torch-peer.sh" --exporters "$exporters_venv" >/dev/null; then
    echo "install-deps: PyTorch's exporters could not be installed; the" \
      "test of their models will be skipped"
  fi
fi

# Optional: TensorBoard's reader, for the test of the trainer's
# --tensorboard event files. Debian has no package; PyPI's goes into a
# virtual environment of its own. Without a network the test skips.
tensorboard_venv=/opt/gpuc-tensorboard
if [[ "${GPUC_SKIP_TENSORBOARD:-0}" != 1 ]] &&
  ! "$tensorboard_venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
  echo "install-deps: installing tensorboard from PyPI into $tensorboard_venv"
  if ! { $sudo /usr/bin/python3 -m venv "$tensorboard_venv" &&
    $sudo "$tensorboard_venv/bin/pip" install -q tensorboard; }; then
    echo "install-deps: tensorboard could not be installed; the" \
      "--tensorboard test will be skipped"
  fi
fi

#!/usr/bin/env bash
# Builds OUT_DIR: everything the GPU checks need on a machine that has an
# NVIDIA GPU, the CUDA 13 libraries and PyTorch, but no MLIR, no gpuc build,
# no Debian packages and no network. OUT_DIR/run.sh then does every GPU check
# in one command and writes summary.json.
#
#   scripts/gpu-bundle.sh OUT_DIR
#
# What travels (and why it can):
#   artifacts.tar.xz  artifacts/, blobs/ and parity/, packed (gpu_check.py
#               unpacks):
#   artifacts/  the example models compiled here with --target cuda: plan,
#               sm_90 cubin (H100/H200; the sm_80 cubin and the PTX stay
#               behind to fit), initial values. Identical files are stored
#               once under blobs/ and linked.
#   bin/        the trainer and its CUDA device plugin. A --target cuda
#               trainer has no CPU device or model code, so one serves every
#               artifact (--artifact DIR) and needs neither OpenMP nor
#               oneDNN; the plugin finds cuBLASLt and cuDNN on that machine
#               (run.sh points LD_LIBRARY_PATH at them).
#   lib/        the few shared libraries the trainer links that such a machine
#               may lack (protobuf and ONNX's protos for --export-onnx, zlib,
#               libjpeg and libpng for image folders).
#   parity/     per parity model: the inputs of one step and the CPU device's
#               results for it (the same model compiled --target cpu here);
#               Adam's second moment is left out (the first moment already
#               carries the gradient), again to fit; packed too (its
#               float arrays pack to two thirds: 5 MiB).
#   data/       Fashion-MNIST (IDX, xz: 4 MiB less than gzip), for the
#               training runs.
#   run.sh, gpu_check.py, scale_check.py, stall_check.py, stepcompare.py;
#   export_models.py,
#               gpt.py, llama.py and torchvision_model.py: the PyTorch
#               definitions (bench peers, and the scale models' weights).
#
# Environment: GPUC (default build/bin/gpuc, built first when missing),
# GPUC_BUNDLE_QUICK=1 leaves out the large-batch bench artifacts and the
# real-scale ones (tests).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:?usage: scripts/gpu-bundle.sh OUT_DIR}
gpuc=${GPUC:-$root/build/bin/gpuc}
if [[ ! -x $gpuc ]]; then
  scripts/build.sh >/dev/null
fi
data=/usr/share/datasets/fashion-mnist
python=/usr/bin/python3
for need in "$data/train-images-idx3-ubyte.gz" "$python"; do
  [[ -e $need ]] || { echo "gpu-bundle: $need is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out"/{artifacts,parity,lib,data,bin,blobs}
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model_args() { # model -> compile flags
  case $1 in
    transformer) echo "$root/examples/transformer.onnx --class-axis -1" ;;
    gpt2) echo "$scale_models/gpt2-1024.onnx --class-axis -1" ;;
    smollm) echo "$scale_models/smollm-1024.onnx --class-axis -1" ;;
    resnet50) echo "$scale_models/resnet50.onnx" ;;
    *) echo "$root/examples/$1.onnx" ;;
  esac
}

# A GPU artifact, without what only the CPU or the compiler uses; its
# model.onnx (the graph, for --export-onnx) is small: the weights it points
# to are in init.safetensors.
gpu_artifact() { # name model batch optimizer [precision [compile flags...]]
  local dir=$out/artifacts/$1
  # shellcheck disable=SC2046
  "$gpuc" compile $(model_args "$2") --batch "$3" --optimizer "$4" --lr 0.001 \
    --precision "${5:-fp32}" --target cuda -o "$dir" "${@:6}" >/dev/null
  if [[ ! -e $out/bin/train ]]; then
    mv "$dir/train" "$dir/libgpuc_cuda.so" "$out/bin/"
  fi
  rm -f "$dir/train" "$dir/libgpuc_cuda.so" "$dir/build.log" \
    "$dir"/kernels.sm_80.* "$dir/kernels.sm_90.ptx" "$dir/kernels.cu"
  # One copy of identical initial values (the same model at several batches
  # and optimizers).
  local sum
  sum=$(sha256sum "$dir/init.safetensors" | cut -c1-16)
  [[ -e $out/blobs/$sum.safetensors ]] || mv "$dir/init.safetensors" "$out/blobs/$sum.safetensors"
  rm -f "$dir/init.safetensors"
  ln -s "../../blobs/$sum.safetensors" "$dir/init.safetensors"
}

# Parity: one step at batch 16 of each example with SGD and AdamW, and a
# mixed-precision AdamW step of the CNN (cuDNN's f16 convolutions,
# cuBLASLt's f16 GEMMs, loss scaling) and of the transformer in bf16 (its
# head's bf16 logits, the weight gradient's bf16 GEMMs summing into f32);
# the CPU device's results, compiled with the same head, are the reference.
mixed=(cnn:fp16 transformer:bf16)
for model in mlp cnn transformer; do
  specs="sgd:fp32 adamw:fp32"
  for m in "${mixed[@]}"; do [[ ${m%%:*} == "$model" ]] && specs+=" adamw:${m##*:}"; done
  for spec in $specs; do
    opt=${spec%%:*} precision=${spec##*:}
    name=$model-$opt
    [[ $precision == fp32 ]] || name+=-$precision
    gpu_artifact "parity-$name" "$model" 16 "$opt" "$precision"
    # shellcheck disable=SC2046
    head=()
    [[ $precision == fp32 ]] || head=(--head-logits low)
    "$gpuc" compile $(model_args "$model") --batch 16 --optimizer "$opt" \
      --lr 0.001 --precision "$precision" --target cpu "${head[@]}" \
      -o "$work/$name" >/dev/null
    mkdir -p "$out/parity/$name/in"
    "$python" - "$model" "$out/parity/$name/in" <<'EOF'
import sys
import numpy as np
model, folder = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(1)
if model == "transformer":
    np.save(folder + "/tokens.npy", rng.integers(0, 64, (16, 16)).astype(np.int64))
    np.save(folder + "/label.npy", rng.integers(0, 64, (16, 16)).astype(np.int64))
else:
    np.save(folder + "/image.npy", rng.standard_normal((16, 1, 28, 28)).astype(np.float32))
    np.save(folder + "/label.npy", rng.integers(0, 10, 16).astype(np.int64))
EOF
    "$work/$name/train" --run-step "$out/parity/$name/in" \
      --output-dir "$out/parity/$name/ref" --seed 7 --step 3 --device cpu \
      2>/dev/null
    rm -f "$out/parity/$name/ref"/*.exp_avg_sq.npy
    # Mixed precision: the weights' 16-bit copies (rounded parameters) stay
    # behind to fit. The first moment travels: it is what tells a gradient
    # at the noise level (a step of random sign under Adam) from a real one.
    [[ $precision == fp32 ]] || rm -f \
      "$out/parity/$name/ref"/*.f16.npy "$out/parity/$name/ref"/*.bf16.npy
  done
done

# Bench (AdamW) at batches 128 and 1024 (transformer 32 and 256); the batch-128 MLP and CNN also train.
benches="mlp:128 cnn:128 transformer:32"
if [[ ${GPUC_BUNDLE_QUICK:-0} != 1 ]]; then
  benches+=" mlp:1024 cnn:1024 transformer:256"
fi
for entry in $benches; do
  gpu_artifact "bench-${entry%%:*}-${entry##*:}" "${entry%%:*}" "${entry##*:}" adamw
done
# Data parallel on one GPU (run.sh checks): the batch-128 MLP with its
# gradient all-reduces, run as one NCCL rank (GPUC_NCCL_ALONE=1) against
# bench-mlp-128.
gpu_artifact dp-mlp-128 mlp 128 adamw fp32 --data-parallel
# Mixed precision (run.sh amp): the CNN (cuDNN's f16/bf16 convolutions,
# cuBLASLt's GEMMs) trained to the fp32 target at batch 128; step time at
# the large batches against fp32 and PyTorch autocast. The MLP's 16-bit
# weight copies would not fit.
amp="cnn:128"
if [[ ${GPUC_BUNDLE_QUICK:-0} != 1 ]]; then
  amp+=" cnn:1024 transformer:256"
fi
for entry in $amp; do
  for precision in fp16 bf16; do
    gpu_artifact "amp-${entry%%:*}-${entry##*:}-$precision" "${entry%%:*}" \
      "${entry##*:}" adamw "$precision"
  done
done
# Gradient accumulation: 4 steps of 32 per update against 1 of 128 (a model
# without dropout, so the two see the same arithmetic).
for spec in "4x32 32 4" "1x128 128 1"; do
  set -- $spec
  dir=$out/artifacts/accumulate-$1
  "$gpuc" compile "$root/test/Trainer/Inputs/mlp-no-dropout.gdsl" --batch "$2" \
    --accumulate "$3" --optimizer sgd --lr 0.05 --target cuda -o "$dir" >/dev/null
  rm -f "$dir/train" "$dir/libgpuc_cuda.so" "$dir/build.log" \
    "$dir"/kernels.sm_80.* "$dir/kernels.sm_90.ptx" "$dir/kernels.cu"
done
# Real scale (run.sh scale): GPT-2 124M (nanoGPT-style, T 1024, tied head)
# at batch 16 and torchvision's ResNet-50 at batch 256, fp32 and bf16,
# for the H100 only and without their weights (--no-weights: 1 to 2 MB
# each, where the weights are 500 and 100 MB); PyTorch makes the weights
# there from the carried definitions, and the trainer takes them with
# --init. The ONNX exports are made once per machine (GPT-2's is 500 MB).
if [[ ${GPUC_BUNDLE_QUICK:-0} != 1 ]]; then
  scale_models=${XDG_CACHE_HOME:-$HOME/.cache}/gpuc/scale-models
  mkdir -p "$scale_models"
  stamp=$(cat "$root/examples/gpt.py" "$root/examples/torchvision_model.py" \
    "$root/examples/export_models.py" "$root/examples/llama.py" |
    sha256sum | cut -c1-16)
  if [[ ! -e $scale_models/$stamp ]]; then
    if ! "$python" -c "import torch, torchvision, onnx" 2>/dev/null; then
      echo "gpu-bundle: the real-scale artifacts are exported by PyTorch: $python needs torch, torchvision and onnx (scripts/install-deps.sh); GPUC_BUNDLE_QUICK=1 leaves them out" >&2
      exit 1
    fi
    rm -f "$scale_models"/*
    for export in "gpt.py --preset gpt2 --seq 1024 -o $scale_models/gpt2-1024.onnx" \
                  "torchvision_model.py --model resnet50 -o $scale_models/resnet50.onnx"; do
      # shellcheck disable=SC2086
      "$python" "$root"/examples/$export >"$work/export.log" 2>&1 ||
        { cat "$work/export.log" >&2; echo "gpu-bundle: exporting ${export%% *} failed" >&2; exit 1; }
    done
    touch "$scale_models/$stamp"
  fi
  # SmolLM-135M (Hugging Face's Llama layout: grouped-query attention,
  # rotary positions, RMSNorm, SwiGLU; T 1024, tied head), exported by
  # PyTorch 2.x's dynamo exporter, which the Python of `scripts/torch-peer.sh
  # --exporters` has (install-deps.sh makes it); without it the bundle
  # leaves SmolLM out. Its scale checks run where GPUC_SCALE_MODELS names
  # smollm.
  exporters=${GPUC_EXPORTERS_PYTHON:-/opt/gpuc-exporters/bin/python}
  exporters_libs=$(find "$(dirname "$(dirname "$exporters")")"/lib/python3*/site-packages/nvidia \
    -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')/usr/local/cuda/lib64
  if [[ ! -e $scale_models/smollm-1024.onnx ]]; then
    if LD_LIBRARY_PATH=$exporters_libs "$exporters" -c "import torch, onnxscript, transformers" 2>/dev/null; then
      LD_LIBRARY_PATH=$exporters_libs "$exporters" "$root/examples/llama.py" --preset smollm-135m \
        --seq 1024 -o "$scale_models/smollm-1024.onnx" >"$work/export.log" 2>&1 ||
        { cat "$work/export.log" >&2; echo "gpu-bundle: exporting llama.py failed" >&2; exit 1; }
    else
      echo "gpu-bundle: $exporters cannot import torch, onnxscript and transformers: SmolLM is left out (scripts/torch-peer.sh --exporters installs them)" >&2
    fi
  fi
  for spec in gpt2:16 resnet50:256; do
    for precision in fp32 bf16; do
      gpu_artifact "scale-${spec%%:*}-$precision" "${spec%%:*}" "${spec##*:}" \
        adamw "$precision" --no-weights --cuda-arch sm_90
    done
  done
  if [[ -e $scale_models/smollm-1024.onnx ]]; then
    gpu_artifact scale-smollm-bf16 smollm 16 adamw bf16 --no-weights \
      --cuda-arch sm_90
  fi
  # GPT-2's attention the other way (its default here is the fused
  # kernel on tensor cores): batched GEMMs around a softmax kernel, to
  # time both on one GPU.
  gpu_artifact scale-gpt2-bf16-gemm-attention gpt2 16 adamw bf16 --no-weights \
    --cuda-arch sm_90 --attention gemm
  # GPT-2's fused attention forward at two blocks an SM (16 warps, its
  # registers capped at 128, a few spilled) against the default one block
  # of 8 warps at 166 registers: which hides more latency is for the GPU
  # to say.
  gpu_artifact scale-gpt2-bf16-attention-2-blocks gpt2 16 adamw bf16 \
    --no-weights --cuda-arch sm_90 --attention-blocks-per-sm 2
  # GPT-2's fused attention forward with 32 rows a warp (two m-tiles that
  # share each fragment of keys a warp loads, one pass over a block's 256
  # rows) against the default 16.
  gpu_artifact scale-gpt2-bf16-attention-32-rows gpt2 16 adamw bf16 \
    --no-weights --cuda-arch sm_90 --attention-rows-per-warp 32
  # GPT-2's fused attention backward in three launches: the keys' launch
  # stores the scores' gradients (402 MB of bf16 a layer, the causal half
  # written) and the queries' gradients are one product a tile from them,
  # where the default's queries' launch computes the scores and their
  # gradients again (three products a tile).
  gpu_artifact scale-gpt2-bf16-stored-score-gradients gpt2 16 adamw bf16 \
    --no-weights --cuda-arch sm_90 --attention-score-gradients stored
  # GPT-2's attention by the generated kernels alone (--attention-library
  # generated). The default artifact's device checks cuDNN's fused
  # attention against them at load, times both and runs the faster (the
  # log says which, or why cuDNN did not take it): this one is the step
  # without cuDNN's attention, whatever the load chose.
  gpu_artifact scale-gpt2-bf16-generated-attention gpt2 16 adamw bf16 \
    --no-weights --cuda-arch sm_90 --attention-library generated
  # Both attention options at once (the forward at two blocks an SM, the
  # backward from stored score gradients): the step to make the default
  # should each pay on its own.
  gpu_artifact scale-gpt2-bf16-2-blocks-stored gpt2 16 adamw bf16 \
    --no-weights --cuda-arch sm_90 --attention-blocks-per-sm 2 \
    --attention-score-gradients stored
  # GPT-2 bf16 at the largest batch that fits an 80 GB H100 with room for
  # the CUDA context, the libraries and PyTorch's peers (72 GiB): the fused
  # attention keeps no scores, so no remat is needed. `gpuc compile
  # --max-batch-for 72GiB --attention flash` gives 240 (bf16 head logits);
  # --memory-limit refuses the build if the plan has outgrown it.
  gpu_artifact scale-gpt2-bf16-largest gpt2 240 adamw bf16 --no-weights \
    --cuda-arch sm_90 --attention flash --memory-limit 72GiB
  # GPT-2 bf16 with its kernels' loads in the order before batching (one
  # element at a time, each result's loads where first used), to time the
  # batches against on the same GPU.
  gpu_artifact scale-gpt2-bf16-in-order gpt2 16 adamw bf16 --no-weights \
    --cuda-arch sm_90 --gpu-bytes-in-flight 0
  # Both models in bf16 with their memory-bound kernels' threads loading
  # 64 and 128 bytes before computing (the default is 32): on an H200
  # their column kernels reached a third of the memory's bandwidth or
  # less, and whether more loads in flight pay for the registers they
  # take is for the GPU to say.
  for spec in gpt2:16 resnet50:256; do
    for bytes in 64 128; do
      gpu_artifact "scale-${spec%%:*}-bf16-in-flight-$bytes" "${spec%%:*}" \
        "${spec##*:}" adamw bf16 --no-weights --cuda-arch sm_90 \
        --gpu-bytes-in-flight "$bytes"
    done
  done
  # Both models in bf16 with column kernels (bias and weight-gradient
  # sums, channels-last batch norms) of 16 columns a block, each reading
  # 32 bytes of a row, as they did before blocks took whole rows of up to
  # 256 columns: the two layouts timed on one GPU.
  for spec in gpt2:16 resnet50:256; do
    gpu_artifact "scale-${spec%%:*}-bf16-column-lanes-16" "${spec%%:*}" \
      "${spec##*:}" adamw bf16 --no-weights --cuda-arch sm_90 \
      --gpu-column-lanes 16
  done
  # GPT-2 bf16 with its head's logits in f32 (the head's GEMMs f32 on
  # tensor cores, --f32-gemms=bf16): the other head to time, and the
  # step to fall back on should cuBLASLt refuse the default head's bf16 x
  # bf16 -> f32 GEMM.
  gpu_artifact scale-gpt2-bf16-head-f32 gpt2 16 adamw bf16 --no-weights \
    --cuda-arch sm_90 --head-logits f32
  # GPT-2 bf16 with its linear layers' bias adds in the next kernels
  # (--no-gemm-epilogues): the step to fall back on should cuBLASLt refuse
  # a biased GEMM, which every other GPT-2 artifact here asks for, and the
  # epilogue's worth to time.
  gpu_artifact scale-gpt2-bf16-no-epilogues gpt2 16 adamw bf16 --no-weights \
    --cuda-arch sm_90 --no-gemm-epilogues
  # GPT-2 bf16 recomputing forward values in backward under a 3.2 GiB
  # arena budget (5.0 GiB without; 35 recomputations, 0.5 TFLOP a step):
  # remat's step on the GPU against PyTorch's at the same batch, and its
  # cost against the plain step's.
  gpu_artifact scale-gpt2-bf16-remat gpt2 16 adamw bf16 --no-weights \
    --cuda-arch sm_90 --memory-budget 3.2GiB
  # GPT-2 fp32 with its attention's GEMMs whole, where the default cuts
  # each into 8 bands of 128 rows that skip the causal mask's triangle
  # (44 % fewer of their products, in 8 library calls each): both timed
  # on one GPU.
  gpu_artifact scale-gpt2-fp32-whole-gemms gpt2 16 adamw fp32 --no-weights \
    --cuda-arch sm_90 --attention-band-rows 0
  # ResNet-50's convolutions the other way (bf16 on tensor cores is
  # channels last by default): NCHW tensors, which cuDNN reorders.
  gpu_artifact scale-resnet50-bf16-nchw resnet50 256 adamw bf16 --no-weights \
    --cuda-arch sm_90 --conv-layout nchw
fi

# Shared libraries the GPU-only trainer needs beyond glibc and libstdc++.
ldd "$out/bin/train" | awk '/=> \//{print $3}' |
  grep -E 'libonnx_proto|libprotobuf|libjpeg|libpng|libz\.so' |
  xargs -I{} cp -L {} "$out/lib/"
# xz holds Fashion-MNIST in 4 MiB less than gzip (gpu_check.py unpacks it);
# packing takes 20 s on two cores, so it is done once per machine.
xz_cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpuc/fashion-mnist-xz
for f in "$data"/*.gz; do
  base=$(basename "$f" .gz)
  if [[ ! -e $xz_cache/$base.xz || $f -nt $xz_cache/$base.xz ]]; then
    mkdir -p "$xz_cache"
    gzip -dc "$f" | xz -6 -T2 >"$xz_cache/$base.xz.tmp"
    mv "$xz_cache/$base.xz.tmp" "$xz_cache/$base.xz"
  fi
  cp "$xz_cache/$base.xz" "$out/data/"
done
cp "$root/scripts/gpu/run.sh" "$root/scripts/gpu/run-phases.sh" "$root/scripts/gpu/gpu_check.py" \
  "$root/scripts/gpu/scale_check.py" "$root/scripts/gpu/stall_check.py" \
  "$root/test/Codegen/stepcompare.py" \
  "$root/examples/export_models.py" "$root/examples/gpt.py" \
  "$root/examples/llama.py" "$root/examples/torchvision_model.py" "$out/"
cp "$root/test/Trainer/accumulate.test.py" "$out/accumulate_compare.py"
cp "$root/test/Trainer/safetensors_read.py" "$out/"
chmod +x "$out/run.sh" "$out/run-phases.sh"
# Plans and cubins are text and code that xz packs 10 to 30 times
# (gpu_check.py unpacks them before the first phase).
tar -C "$out" -cf - artifacts blobs parity | xz -6 -T2 >"$out/artifacts.tar.xz"
rm -rf "$out/artifacts" "$out/blobs" "$out/parity"
git -C "$root" rev-parse HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"

size=$(du -sb "$out" | cut -f1)
echo "gpu-bundle: wrote $out ($((size / 1048576)) MiB, $(xz -dc "$out/artifacts.tar.xz" | tar -t | grep -c '^artifacts/[^/]*/plan.json$') artifacts)"
# What a device command carries: 64 MiB with the repository's own files
# (tracked ones; 1 MiB kept free for files not yet committed).
repo=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -cb) | tail -1 | cut -f1)
limit=$((64 * 1048576 - ${repo:-0} - 1048576))
if ((size > limit)); then
  echo "gpu-bundle: $out ($((size / 1048576)) MiB) and the repository ($((repo / 1048576)) MiB) would not travel together (64 MiB)" >&2
  exit 1
fi

#!/usr/bin/env bash
# Fuzzes the runtime's readers of files a user or a damaged disk hands the
# trainer (plan.json, safetensors checkpoints, .npy data, IDX datasets raw
# and gzipped, JPEG and PNG images), the ONNX importer (binary and text models) and the model
# DSL's parser with libFuzzer under AddressSanitizer and UBSan:
#
#   scripts/fuzz.sh [SECONDS per target, default 60] [TARGET...]
#
# Built with clang (libFuzzer ships with Debian's clang) into build-fuzz/;
# the DSL and ONNX targets instrument the parser or the importer and link
# the rest of gpuc and MLIR from build/ (scripts/build.sh first). Seed
# corpora are made here (an MLP artifact's plan and weights, small .npy
# files, IDX headers). Each target runs SECONDS, as many at once as there
# are processors; a crash, leak, sanitizer report or timeout leaves its
# input in build-fuzz/findings/ and makes the script fail. The corpora grow
# in build-fuzz/corpus/ across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
started=()
if ((${#targets[@]} == 0)); then
  targets=(plan safetensors npy idx image dsl onnx)
fi
cxx=""
for c in clang++ clang++-19 clang++-16 clang++-15 clang++-14; do
  if command -v "$c" >/dev/null; then cxx=$c; break; fi
done
if [[ -z $cxx ]]; then
  echo "fuzz.sh: no clang++ (libFuzzer needs clang: apt-get install clang)" >&2
  exit 1
fi
out=build-fuzz
mkdir -p "$out/findings"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iruntime/include -DGPUC_FUZZ)
sources=(runtime/lib/Plan.cpp runtime/lib/Safetensors.cpp runtime/lib/Npy.cpp
         runtime/lib/AtomicFile.cpp runtime/data/Dataset.cpp)
declare -A main=([plan]=PlanFuzzer [safetensors]=SafetensorsFuzzer
                 [npy]=NpyFuzzer [idx]=IdxFuzzer [image]=ImageFuzzer
                 [dsl]=DslFuzzer [onnx]=OnnxFuzzer)
# What a target needs beyond `sources`: the image decoder and its libraries.
declare -A extra=([image]="runtime/data/ImageDecode.cpp -ljpeg -lpng")
for t in "${targets[@]}"; do
  [[ -n ${main[$t]:-} ]] || { echo "fuzz.sh: no target '$t' (plan, safetensors, npy, idx, image, dsl, onnx)" >&2; exit 1; }
done

# Builds target $1 when its sources are newer than it (run in a subshell of
# its own: `exit` there fails that build alone).
build_target() {
  local t=$1
  if [[ $t == onnx ]]; then
    if [[ ! -x build/bin/gpuc ]]; then
      echo "fuzz.sh: build/ has no gpuc (run scripts/build.sh): the onnx target needs its libraries" >&2
      exit 1
    fi
    stale=0
    for f in lib/Frontend/Onnx/* fuzz/OnnxFuzzer.cpp build/lib/libGpucDialect.a; do
      [[ $out/onnx -nt $f ]] || stale=1
    done
    if ((stale)); then
      echo "fuzz.sh: building onnx with $cxx"
      # The importer and its loader instrumented (compiled as CMake does);
      # everything else as gpuc links it.
      onnxflags=("${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}"
                 -DONNX_ML=1 -DONNX_NAMESPACE=onnx
                 -I/usr/lib/llvm-22/include -Iinclude -Ibuild/include
                 -Wno-deprecated-declarations)
      # Its files compile side by side: once the other targets are built,
      # they are all that is left to do.
      importer=()
      compiles=()
      for f in lib/Frontend/Onnx/*.cpp; do
        name=$(basename "$f" .cpp)
        exceptions=-fno-exceptions
        [[ $name == OnnxModelLoader || $name == NewerOnnx ]] && exceptions=-fexceptions
        "$cxx" "${onnxflags[@]}" $exceptions -c "$f" -o "$out/onnx-$name.o" &
        compiles+=($!)
        importer+=("$out/onnx-$name.o")
      done
      "$cxx" "${onnxflags[@]}" -fno-exceptions -c fuzz/OnnxFuzzer.cpp -o "$out/OnnxFuzzer.o" &
      compiles+=($!)
      for pid in "${compiles[@]}"; do
        wait "$pid"
      done
      mapfile -t libs < <(ninja -C build -t commands bin/gpuc | tail -1 |
        tr ' ' '\n' | grep -E '\.a$|\.so$|^-l' | sed 's|^lib/|build/lib/|;s|^runtime/|build/runtime/|')
      "$cxx" -fsanitize=fuzzer,address,undefined "$out/OnnxFuzzer.o" \
        "${importer[@]}" "${libs[@]}" \
        /usr/lib/llvm-22/lib/libLLVMSupport.a /usr/lib/llvm-22/lib/libLLVMDemangle.a \
        -lz -ltinfo -o "$out/onnx"
    fi
    return
  fi
  if [[ $t == dsl ]]; then
    if [[ ! -x build/bin/gpuc-opt ]]; then
      echo "fuzz.sh: build/ has no gpuc-opt (run scripts/build.sh): the dsl target needs its libraries" >&2
      exit 1
    fi
    stale=0
    for f in lib/Frontend/Dsl* fuzz/DslFuzzer.cpp build/lib/libGpucDialect.a; do
      [[ $out/dsl -nt $f ]] || stale=1
    done
    if ((stale)); then
      echo "fuzz.sh: building dsl with $cxx"
      # The parser instrumented; the dialect and MLIR as gpuc-opt links them
      # (built without RTTI, as LLVM is).
      dslflags=("${flags[@]}" -fno-rtti -fno-exceptions
                -I/usr/lib/llvm-22/include -Iinclude -Ibuild/include)
      dslflags=("${dslflags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}")
      parser=()
      for src in lib/Frontend/Dsl*.cpp; do
        parser+=("$out/$(basename "$src" .cpp).o")
        "$cxx" "${dslflags[@]}" -Wno-deprecated-declarations -c "$src" -o "${parser[-1]}"
      done
      "$cxx" "${dslflags[@]}" -c fuzz/DslFuzzer.cpp -o "$out/DslFuzzer.o"
      mapfile -t libs < <(ninja -C build -t commands bin/gpuc-opt | tail -1 |
        tr ' ' '\n' | grep -E '\.a$|^-l' |
        grep -v 'GpucInitAll\|OptLib\|GpucTransforms\|GpucCodegen\|GpucInterpreter\|gpuc_runtime' |
        sed 's|^lib/|build/lib/|')
      "$cxx" -fsanitize=fuzzer,address,undefined "$out/DslFuzzer.o" "${parser[@]}" \
        "${libs[@]}" /usr/lib/llvm-22/lib/libLLVMSupport.a \
        /usr/lib/llvm-22/lib/libLLVMDemangle.a -lz -ltinfo -o "$out/dsl"
    fi
    return
  fi
  if [[ ! $out/$t -nt fuzz/${main[$t]}.cpp ]] ||
     [[ -n $(find runtime/lib runtime/data runtime/include fuzz -newer "$out/$t" -name '*.[ch]*' | head -1) ]]; then
    echo "fuzz.sh: building $t with $cxx"
    # (extra is a list of words: sources, then libraries.)
    # shellcheck disable=SC2206
    more=(${extra[$t]:-})
    "$cxx" "${flags[@]}" "fuzz/${main[$t]}.cpp" "${sources[@]}" "${more[@]}" \
      -lz -o "$out/$t"
  fi
}

# The builds take most of a short run (about 8 minutes of compiling on one
# core, where 7 targets fuzz for 30 s each): as many at once as the
# machine has processors, the two that compile the importer and the parser
# with MLIR's headers first.
jobs=$(nproc)
pids=()
build_failed=0
for t in onnx dsl "${targets[@]}"; do
  [[ " ${targets[*]} " == *" $t "* ]] || continue
  [[ " ${started[*]:-} " != *" $t "* ]] || continue
  started+=("$t")
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || build_failed=1
    pids=("${pids[@]:1}")
  fi
  build_target "$t" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || build_failed=1
done
if ((build_failed)); then
  echo "fuzz.sh: a target failed to build (its compiler's errors are above)" >&2
  exit 1
fi

# Seed corpora.
seeds=$out/seeds
if [[ ! -d $seeds ]]; then
  mkdir -p "$seeds"/{plan,safetensors,npy,idx,image,dsl}
  cp test/Frontend/dsl/*.gdsl test/Trainer/Inputs/*.gdsl "$seeds/dsl/"
  if [[ -x build/bin/gpuc ]]; then
    build/bin/gpuc compile examples/mlp.onnx --batch 2 --target cpu \
      -o "$out/seed-artifact" >/dev/null
    cp "$out/seed-artifact/plan.json" "$seeds/plan/mlp.json"
    cp "$out/seed-artifact/init.safetensors" "$seeds/safetensors/mlp"
  fi
  python3 - "$seeds/npy" <<'PY'
import struct, sys
def npy(path, descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    header += " " * (-(len(header) + 11) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" +
                           struct.pack("<H", len(header)) + header.encode() +
                           payload)
npy(sys.argv[1] + "/f4", "<f4", (2, 3), struct.pack("<6f", *range(6)))
npy(sys.argv[1] + "/i8", "<i8", (4,), struct.pack("<4q", 1, 2, 3, 4))
npy(sys.argv[1] + "/u1", "|u1", (2, 2, 2), bytes(range(8)))
PY
  printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x02\x03\x04\x05\x06\x07' \
    > "$seeds/idx/raw"
  printf '\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x02\x03' |
    gzip -c > "$seeds/idx/gz"
  # An odd first byte makes IdxFuzzer name the input .gz (gzip starts 0x1f).
fi
if [[ ! -d $seeds/image ]] || [[ -z $(ls "$seeds/image") ]]; then
  # Small JPEG (gray, RGB, progressive) and PNG (gray, RGB, palette, alpha,
  # 16-bit) files, each after the byte that picks the input shape.
  mkdir -p "$seeds/image"
  /usr/bin/python3 - "$seeds/image" <<'PY' || echo "fuzz.sh: no PIL for the image seeds; starting from nothing"
import io, sys
from PIL import Image
def save(name, image, shape, **options):
    buffer = io.BytesIO()
    image.save(buffer, **options)
    open(sys.argv[1] + "/" + name, "wb").write(bytes([shape]) + buffer.getvalue())
gray = Image.linear_gradient("L").resize((28, 28))
rgb = Image.merge("RGB", (gray, gray.rotate(90), gray.rotate(180))).resize((40, 30))
save("gray.jpg", gray, 1, format="JPEG", quality=90)
save("rgb.jpg", rgb, 0, format="JPEG", quality=75)
save("progressive.jpg", rgb, 0, format="JPEG", progressive=True)
save("gray.png", gray, 2, format="PNG")
save("rgb.png", rgb, 0, format="PNG")
save("palette.png", rgb.convert("P"), 0, format="PNG")
save("alpha.png", rgb.convert("RGBA"), 1, format="PNG")
save("sixteen.png", gray.convert("I;16"), 2, format="PNG")
PY
fi

if [[ ! -d $seeds/onnx ]]; then
  # ONNX: the importer tests' text models and ONNX's small node-test models.
  mkdir -p "$seeds/onnx"
  cp test/Frontend/onnx/*.onnxtxt test/Codegen/Inputs/*.onnxtxt "$seeds/onnx/"
  if [[ -d /usr/share/libonnx-testdata/data/node ]]; then
    for d in /usr/share/libonnx-testdata/data/node/test_{conv,maxpool,lstm,gru,rnn,resize,einsum,gemm,matmul,slice,reshape,softmax,layer_norm,batchnorm,pad,split,clip,gather,instancenorm}*; do
      if [[ -f $d/model.onnx ]]; then
        cp "$d/model.onnx" "$seeds/onnx/$(basename "$d").onnx"
      fi
    done
  fi
fi

# The targets fuzz side by side, as many at once as the machine has
# processors (each is one process on one core), and report in order.
fuzz_target() {
  local t=$1 code=0
  mkdir -p "$out/corpus/$t"
  "$out/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$out/findings/$t-" "$out/corpus/$t" "$seeds/$t" \
    >"$out/$t.log" 2>&1 || code=$?
  echo "$code" >"$out/$t.status"
}
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz.sh: $t for ${seconds}s"
  rm -f "$out/$t.status"
  fuzz_target "$t" &
  running=$((running + 1))
done
wait
status=0
for t in "${targets[@]}"; do
  log=$out/$t.log
  if [[ $(cat "$out/$t.status" 2>/dev/null) != 0 ]]; then
    echo "fuzz.sh: $t FAILED; input and report: $out/findings/$t-*, $log" >&2
    grep -E "ERROR|SUMMARY|runtime error" "$log" | head -5 >&2 || true
    status=1
  fi
  stats=$(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" |
    tr -s ' \n' ' ') || true
  echo "fuzz.sh: $t: ${stats}corpus $(ls "$out/corpus/$t" | wc -l) inputs"
done
exit $status

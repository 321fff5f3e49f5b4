#!/usr/bin/env bash
# Which CPU GEMM library gpuc links: OpenBLAS, BLIS and oneDNN on the
# examples' GEMM shapes, one binary per library, run interleaved
# (A B C A B C ...), the best of all rounds per shape reported.
#
#   bench/gemm_libraries.sh [ROUNDS=3] [THREADS=$(nproc)]
#
# Needs libopenblas-dev, libblis-dev and libdnnl-dev (Debian); not part of CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
threads=${2:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$here/gemm_libraries.cpp
g++ -O2 -DGEMM_OPENBLAS "$src" -o "$work/openblas" -lopenblas
g++ -O2 -DGEMM_BLIS -I/usr/include/x86_64-linux-gnu/blis-openmp "$src" \
  -o "$work/blis" -L/usr/lib/x86_64-linux-gnu/blis-openmp \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/blis-openmp -lblis -fopenmp
g++ -O2 -DGEMM_DNNL "$src" -o "$work/onednn" -ldnnl
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
  BLIS_NUM_THREADS=$threads
echo "threads $threads, rounds $rounds, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for lib in openblas blis onednn; do "$work/$lib"; done
done > "$work/all.tsv"
echo "after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/all.tsv" <<'PY'
import sys, collections
best = collections.defaultdict(dict)
order = []
for line in open(sys.argv[1]):
    lib, shape, ms, _median, _gflops = line.rstrip("\n").split("\t")
    if shape not in order:
        order.append(shape)
    best[shape][lib] = min(float(ms), best[shape].get(lib, float("inf")))
libs = ["openblas", "blis", "onednn"]
print(f"{'shape':18} " + " ".join(f"{l + ' ms':>12}" for l in libs) + "   fastest")
for shape in order:
    row = best[shape]
    print(f"{shape:18} " + " ".join(f"{row[l]:12.4f}" for l in libs)
          + "   " + min(libs, key=lambda l: row[l]))
PY

#!/usr/bin/env bash
# Installs what gpuc needs, builds it and runs the whole test suite (lit +
# gtest), then fuzzes the runtime's file readers for GPUC_FUZZ_SECONDS (30)
# each (scripts/fuzz.sh; 0 skips it).
#
#   scripts/test.sh --sanitize   builds build-asan/ with
#                                -DGPUC_SANITIZE=address,undefined and runs
#                                the whole suite there instead: gpuc, its
#                                runtime and every trainer the tests compile
#                                are instrumented; any report fails the test
#                                that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ ${1:-} == --sanitize ]]; then
  if [[ ! -f build-asan/build.ninja ]]; then
    cmake -G Ninja -S . -B build-asan -DCMAKE_BUILD_TYPE=Release \
      -DGPUC_SANITIZE=address,undefined \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
  fi
  ninja -C build-asan
  # Leaks are reported too; a sanitizer error ends the process with its
  # report (halt_on_error), which fails the test. LLVM's and libstdc++'s
  # headers poison memory by hand when compiled with ASan, which the
  # uninstrumented libLLVM and libMLIR do not: those checks stay off
  # (allow_user_poisoning, detect_container_overflow), or MLIR's own
  # SmallVector moves report use-after-poison.
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:allow_user_poisoning=0:detect_container_overflow=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ninja -C build-asan check-gpuc
  exit 0
fi
scripts/build.sh
ninja -C build check-gpuc
if [[ ${GPUC_FUZZ_SECONDS:-30} != 0 ]]; then
  scripts/fuzz.sh "${GPUC_FUZZ_SECONDS:-30}"
fi

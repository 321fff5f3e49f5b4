#!/usr/bin/env bash
# Installs what gpuc needs, builds it and runs the whole test suite (lit +
# gtest), then fuzzes the runtime's file readers for GPUC_FUZZ_SECONDS (30)
# each (scripts/fuzz.sh; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ninja -C build check-gpuc
if [[ ${GPUC_FUZZ_SECONDS:-30} != 0 ]]; then
  scripts/fuzz.sh "${GPUC_FUZZ_SECONDS:-30}"
fi

#!/usr/bin/env bash
# Installs what gpuc needs, builds it and runs the whole test suite (lit + gtest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ninja -C build check-gpuc

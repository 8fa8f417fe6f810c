#!/usr/bin/env bash
# The test command: install what is missing, build, run every test through CTest.
# GPU tests report "skipped" (not "passed") on machines without a CUDA driver.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
configure_and_build
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" "$@"

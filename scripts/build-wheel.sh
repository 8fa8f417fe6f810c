#!/usr/bin/env bash
# Builds dist/flashbob-<version>-py3-none-manylinux_2_NN_<arch>.whl: installs what is missing,
# configures build/ (or FLASHBOB_BUILD_DIR) as scripts/test.sh does, then lets pip build the
# wheel (setup.py builds and packages libflashbob.so only). The wheel installs anywhere with
# `pip install --no-index dist/flashbob-*.whl` (README, "Install").
# PYTHON: the interpreter whose pip, setuptools and wheel build it (default Debian's, which
# PACKAGES provides with them).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
configure
rm -f "$ROOT"/dist/flashbob-*.whl   # one wheel there: `pip install dist/flashbob-*.whl` stays unambiguous
# --no-build-isolation: pip would otherwise download setuptools and wheel into a fresh
# environment, and there is no package index here or on the GPU machine.
FLASHBOB_BUILD_DIR="$BUILD" "${PYTHON:-/usr/bin/python3}" -m pip wheel --no-build-isolation \
  --no-deps --no-index --no-cache-dir --disable-pip-version-check -w "$ROOT/dist" "$ROOT"
ls -l "$ROOT"/dist/flashbob-*.whl

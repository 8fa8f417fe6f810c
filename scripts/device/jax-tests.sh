#!/usr/bin/env bash
# GPU machine: flashbob.jax from the wheel, as a user gets it. Installs
# dist/flashbob-*.whl with pip, without network, into an empty directory, then, with no FLASHBOB_*
# or LD_LIBRARY_PATH set and only that directory on PYTHONPATH: imports flashbob.jax (jax, jaxlib,
# the device, which library), runs test/python/test_jax_attention.py (the library's XLA FFI
# handlers, the shim where jaxlib's FFI API is another; one test builds the shim on purpose) and
# the HVP benchmark bench/jax_hvp.py. Needs no LLVM and no .device: only
# the wheel (scripts/build-wheel.sh here) and a Python with jax and jaxlib with CUDA.
# On the GPU machine, with dist/ copied along (about 10 minutes):
#   bash scripts/device/jax-tests.sh
# PYTHON: the interpreter with jax (default: the first of /opt/torch/.venv/bin/python3 and
# python3 that imports it). BENCH: bench/jax_hvp.py's arguments (default: d 64 and 128, N 1K to
# 64K, causal and not; BENCH=skip skips it). Pytest arguments pass through.
set -euo pipefail

if [ -z "${PYTHON:-}" ]; then
  for candidate in /opt/torch/.venv/bin/python3 python3; do
    if "$candidate" -c 'import jax' >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
[ -n "${PYTHON:-}" ] || { echo "no Python here imports jax (set PYTHON)"; exit 2; }
PY=$PYTHON

SITE=/tmp/flashbob-jax-wheel
source "$(dirname "${BASH_SOURCE[0]}")/install-wheel.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
"$PY" -c 'import jax, jaxlib.version, flashbob, flashbob.jax
print("jax", jax.__version__, "| jaxlib", jaxlib.version.__version__, "|", jax.devices())
print("flashbob", flashbob.version(), "from", flashbob.library_path())'
"$PY" -m pytest -q -s test/python/test_jax_attention.py "$@"
if [ "${BENCH:-}" != skip ]; then
  # shellcheck disable=SC2086
  "$PY" bench/jax_hvp.py ${BENCH:-}
fi

#!/usr/bin/env bash
# GPU machine: the wheel as a user gets it. Installs dist/flashbob-*.whl with pip,
# without network, into an empty directory, then, with no FLASHBOB_* or LD_LIBRARY_PATH set and
# only that directory on PYTHONPATH: imports it (which library, which version), runs the
# README's grad-of-grad example and the pytest suite (test/python/run-pytest.sh). Needs no LLVM
# and no .device: only the wheel (scripts/build-wheel.sh here).
# On the GPU machine, with dist/ copied along (about 10 minutes):
#   bash scripts/device/wheel-tests.sh
# PYTHON: the interpreter with torch (default /opt/torch/.venv/bin/python3); its pip installs the
# wheel, or python3's where it has none. Pytest arguments pass through.
set -euo pipefail
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
source "$(dirname "${BASH_SOURCE[0]}")/install-wheel.sh"
export PYTHON=$PY
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
"$PY" -c 'import flashbob, torch; print("flashbob", flashbob.version(), "from", flashbob.library_path(), "| torch", torch.__version__)'
# The C API's GPU run against the wheel's library, when pack.sh's capi_smoke was carried too.
if [ -x .device/bin/capi_smoke ]; then
  LD_LIBRARY_PATH=$SITE/flashbob .device/bin/capi_smoke | tail -1
fi
echo "README example:"
sed -n '/^```python$/,/^```$/p' README.md | sed '1d;$d' > /tmp/flashbob-readme-example.py
"$PY" /tmp/flashbob-readme-example.py && echo "README example: ran"
bash test/python/run-pytest.sh "$@"

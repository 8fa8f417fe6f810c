#!/usr/bin/env bash
# CTest entry for test_bench.py (flashbob.bench's pure parts: a CPU test; its real run skips,
# saying why, where torch >= 2.4 sees no GPU). Runs it with the first interpreter that has
# pytest: $PYTHON, Debian's /usr/bin/python3 (python3-pytest, scripts/common.sh), then python3;
# skipped (exit 77, with the reason) where none has it. The package comes from PYTHONPATH (CTest
# sets it to python/).
for py in ${PYTHON:+"$PYTHON"} /usr/bin/python3 python3; do
  if "$py" -c 'import pytest' >/dev/null 2>&1; then
    exec "$py" -m pytest -q -p no:cacheprovider "$(dirname "$0")/test_bench.py" "$@"
  fi
done
echo "SKIPPED: no python here has pytest (Debian: apt-get install python3-pytest)"
exit 77

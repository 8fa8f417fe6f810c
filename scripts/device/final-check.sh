#!/usr/bin/env bash
# GPU machine: every GPU test of the build (as CTest would run them) plus the launch overhead.
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
  .device/bin/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/$t.log
done
python3 -m pytest -q test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest.log
for op in fwd bob; do
  .device/bin/flashbob run --op $op --seq-q 16 --head-dim 64 --launch-overhead 2>&1 | grep overhead
done

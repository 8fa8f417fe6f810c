#!/usr/bin/env bash
# GPU machine, one call: every GPU test at this commit (plain, and with FLASHBOB_PRODUCER=1:
# warp specialization on every two-stage sm_90a kernel without column groups), the C API run
# and the PyTorch tests, logs in $OUT/logs.tgz; then the performance table (perf-table.sh, with
# the tile table's producer kernels for fwd and bwd_q) in the time left.
#   FLASHBOB_GIT_REV=<commit> bash scripts/device/run-gpu.sh bash scripts/device/final-check-producer.sh
set -uo pipefail
START=$(date +%s)
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
  timeout 200 .device/bin/$t > $L/$t.log 2>&1; echo "$t rc=$?"; tail -2 $L/$t.log
done
FLASHBOB_PRODUCER=1 timeout 200 .device/bin/gpu_attention_test > $L/gpu_attention_producer.log 2>&1
echo "gpu_attention_test FLASHBOB_PRODUCER=1 rc=$?"; tail -2 $L/gpu_attention_producer.log
timeout 120 python3 -m pytest -q test/python > $L/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $L/pytest.log
(cd $L && tar czf $OUT/logs.tgz *.log)
# The table gets what is left of the call's 10 minutes, less a margin.
export PERF_BUDGET_S=$((560 - ($(date +%s) - START)))
echo "perf table budget ${PERF_BUDGET_S} s"
bash scripts/device/perf-table.sh

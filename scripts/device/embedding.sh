#!/usr/bin/env bash
# GPU machine: the GPU API test (all head dims), the C API program, the PyTorch tests and the
# meta-learning example at N = 65,536 (with PyTorch's own math attention for comparison).
# Logs under $OUT. Run through scripts/device/run-gpu.sh.
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
.device/bin/gpu_attention_test > $OUT/attention-api-test.log 2>&1; echo "gpu_attention_test rc=$?"
grep -E "^(bf16|fp16)|passed|failed" $OUT/attention-api-test.log | tail -6
.device/bin/capi_smoke > $OUT/capi.log 2>&1; echo "capi_smoke rc=$?"; cat $OUT/capi.log
python3 -m pytest -q -s test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -25 $OUT/pytest.log
python3 python/examples/meta_learning.py --seq 65536 --heads 8 --head-dim 64 --torch > $OUT/meta-learning-64k.log 2>&1
echo "meta_learning rc=$?"; cat $OUT/meta-learning-64k.log

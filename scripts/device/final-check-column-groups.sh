#!/usr/bin/env bash
# GPU machine: the session's final check at HEAD. Every GPU test and the 12 pytest tests; head
# dims that two column groups cannot split (80, 112: generic tiles) through `flashbob run
# --check` for every op; the 16 heads x 16K BoB benchmarks at d = 64 and 128.
#   bash scripts/device/run-gpu.sh bash scripts/device/final-check-column-groups.sh
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
  timeout 200 .device/bin/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/$t.log
done
python3 -m pytest -q test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest.log
for d in 80 112; do
  for op in fwd bwd bob; do
    $F run --op $op --batch 1 --heads 2 --seq-q 1000 --seq-k 1200 --head-dim $d --causal --check \
      > $OUT/run-$op-d$d.log 2>&1
    echo "run $op d$d rc=$?: $(grep -ciE 'pass' $OUT/run-$op-d$d.log) PASS lines, $(grep -ciE 'fail' $OUT/run-$op-d$d.log) FAIL lines"
  done
done
for d in 128 64; do
  $F bench --op bob --batch 1 --heads 16 --seq 16384 --head-dim $d --warmup 2 --iters 10 \
    --check --check-rows 64 > $OUT/bench-bob-16k-d$d.log 2>&1
  echo "bench bob d$d rc=$?"; grep -E "median|check:" $OUT/bench-bob-16k-d$d.log | head -2
done
cd $OUT && tar czf logs.tgz *.log

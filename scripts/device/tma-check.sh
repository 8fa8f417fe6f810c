#!/usr/bin/env bash
# GPU machine: the TMA loads (bob-use-tma) end to end. Every GPU test (the API picks sm_90a on
# the H200, so all of them run TMA + mbarrier loads), including tensors in (batch, seq, heads, d)
# layout; the launch overhead (tensor maps are encoded once per distinct tensor, then looked up);
# then the timings of earlier results (bench/NOTES.md) and of the perf table's 16K rows.
#   bash scripts/device/run-gpu.sh bash scripts/device/tma-check.sh
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
  .device/bin/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -2 $OUT/$t.log
done
python3 -m pytest -q test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest.log
for op in fwd bob; do
  $F run --op $op --seq-q 16 --head-dim 64 --launch-overhead 2>&1 | grep overhead
done
for d in 64 128; do
  $F run --op bob --seq-q 262144 --head-dim $d --check --check-rows 32 --repeat 1 > $OUT/bob-256k-d$d.log 2>&1
  echo "bob 256k d$d rc=$?"; grep -E "median|TFLOP|error|FAIL|pass" $OUT/bob-256k-d$d.log | head -6
done
for op in fwd bwd bob; do
  $F run --op $op --batch 1 --heads 16 --seq-q 8192 --head-dim 64 --causal --repeat 3 > $OUT/$op-8k.log 2>&1
  echo "$op 16x8k d64 causal rc=$?"; grep -E "median|TFLOP" $OUT/$op-8k.log | head -3
done
for op in fwd bwd bob; do
  for d in 64 128; do
    $F bench --op $op --batch 1 --heads 16 --seq 16384 --head-dim $d --dtype bf16 --warmup 2 \
      --iters 10 --check --check-rows 64 > $OUT/bench-$op-16k-d$d.log 2>&1
    echo "bench $op 16x16k d$d rc=$?"; grep -iE "median|TFLOP|check|error" $OUT/bench-$op-16k-d$d.log | head -4
  done
done

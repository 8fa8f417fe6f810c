#!/usr/bin/env bash
# GPU machine: bob_q at d = 128 on two column groups (8 warps, warp_cols = 2: X1..X4 in
# registers). Every GPU test (the tile table's d = 128 BoB now uses the split), the autotuner's
# times for every bob_q / bob_kv candidate at 16 heads x 16K (FLASHBOB_PRINT_AUTOTUNING), the
# benchmark with its float64 check at 16K and 256K, d = 64 for comparison, and the SASS of the
# split kernel (spills, HGMMA) via cuobjdump. Also the first GPU run of runtime::EventTimer
# (flashbob run, bench and tune time through it).
#   bash scripts/device/run-gpu.sh bash scripts/device/column-groups.sh
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for t in gpu_attention_test gpu_forward_test capi_smoke; do
  timeout 200 .device/bin/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -2 $OUT/$t.log
done
for d in 128 64; do
  $F bench --op bob --batch 1 --heads 16 --seq 16384 --head-dim $d --warmup 2 --iters 10 \
    --check --check-rows 64 > $OUT/bench-bob-16k-d$d.log 2>&1
  echo "bench bob 16x16k d$d rc=$?"; grep -iE "median|TFLOP|check|error|bob_" $OUT/bench-bob-16k-d$d.log | head -8
done
$F bench --op bob --batch 1 --heads 16 --seq 16384 --head-dim 128 --causal --warmup 2 --iters 10 \
  --check --check-rows 64 > $OUT/bench-bob-16k-d128-causal.log 2>&1
echo "bench bob 16x16k d128 causal rc=$?"; grep -iE "median|TFLOP|check|error" $OUT/bench-bob-16k-d128-causal.log | head -6
$F run --op bob --seq-q 262144 --head-dim 128 --check --check-rows 32 --repeat 1 > $OUT/bob-256k-d128.log 2>&1
echo "bob 256k d128 rc=$?"; grep -E "median|TFLOP|error|FAIL|pass" $OUT/bob-256k-d128.log | head -6
FLASHBOB_PRINT_AUTOTUNING=1 timeout 200 $F tune --op bob --batch 1 --heads 16 --seq-q 16384 \
  --head-dim 128 --repeat 3 > $OUT/tune-bob-d128.log 2>&1
echo "tune bob d128 rc=$?"; grep -E "ms|winner|chose" $OUT/tune-bob-d128.log | head -30
python3 -m pytest -q test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest.log
for dir in /tmp/flashbob-cache/*/*/; do
  if grep -q "bob_q_d128_m64_n32_w8c2" "$dir"/* 2>/dev/null; then
    cuobjdump -sass "$dir/kernel.cubin" > $OUT/bob_q_d128_w8c2.sass 2>&1 && break
  fi
done
echo "sass lines $(wc -l < $OUT/bob_q_d128_w8c2.sass 2>/dev/null) HGMMA $(grep -c HGMMA $OUT/bob_q_d128_w8c2.sass 2>/dev/null) STL $(grep -c STL $OUT/bob_q_d128_w8c2.sass 2>/dev/null) LDL $(grep -c LDL $OUT/bob_q_d128_w8c2.sass 2>/dev/null) BAR $(grep -c 'BAR.SYNC' $OUT/bob_q_d128_w8c2.sass 2>/dev/null)"
cd $OUT && tar czf logs.tgz *.log *.sass 2>/dev/null; ls $OUT | head

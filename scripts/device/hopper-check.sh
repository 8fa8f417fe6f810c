#!/usr/bin/env bash
# GPU machine: the sm_90a (wgmma) path end to end. Every GPU test (the API picks sm_90a on the
# H200, so they all run the Hopper lowering), then timings at the sizes of earlier results.
#   bash scripts/device/run-gpu.sh bash scripts/device/hopper-check.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for t in gpu_forward_test gpu_attention_test; do
  .device/bin/$t > $OUT/$t.log 2>&1; echo "$t rc=$?"; tail -2 $OUT/$t.log
done
for d in 64 128; do
  $F run --op bob --seq-q 262144 --head-dim $d --check --check-rows 32 --repeat 1 > $OUT/bob-256k-d$d.log 2>&1
  echo "bob 256k d$d rc=$?"; grep -E "median|TFLOP|error|FAIL|pass" $OUT/bob-256k-d$d.log | head -8
done
for op in fwd bwd bob; do
  $F run --op $op --batch 1 --heads 16 --seq-q 8192 --head-dim 64 --causal --repeat 3 > $OUT/$op-8k.log 2>&1
  echo "$op 16x8k d64 causal rc=$?"; grep -E "median|TFLOP" $OUT/$op-8k.log | head -3
done

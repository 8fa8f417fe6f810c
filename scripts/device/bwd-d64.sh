#!/usr/bin/env bash
# GPU machine: the backward at d = 64 with the tile table's bwd_kv tuned at 64K (32x64x4), at the
# perf table's shapes from 16K (16 heads, batch 1, bf16), checked; compare with the perf table.
#   bash scripts/device/run-gpu.sh bash scripts/device/bwd-d64.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
for causal in "" "--causal"; do
  for n in 16384 32768 65536 131072; do
    $F bench --op bwd --batch 1 --heads 16 --seq $n --head-dim 64 --dtype bf16 $causal \
      --warmup 1 --iters 5 --time-budget 1.5 --check --check-rows 16 > $OUT/bwd-d64-n$n${causal:+-causal}.log 2>&1
    echo "bwd d64 N$n $causal rc=$?"; grep -E "median|rel L2|FAIL" $OUT/bwd-d64-n$n${causal:+-causal}.log | grep -v '^ceiling' | head -3
  done
done

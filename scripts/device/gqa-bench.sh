#!/usr/bin/env bash
# GPU machine: grouped-query attention against equal heads, in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/gqa-bench.sh
# 1. --check against the float64 oracle through the CLI with key/value heads 2 (GQA 4:1) and 1
#    (MQA) at N != M (the whole of head 0's group: its key-side gradients summed over query heads
#    0..g-1); the GPU tests cover every variant, this the CLI's path.
# 2. Speed: batch 1, 16 query heads, d = 128, N = M = 16384, bf16: key/value heads 16, 2 (8:1)
#    and 1 (MQA), causal and not, fwd, bwd, bob; median of 20 runs (3 warm-up), the three
#    alternating twice. Per query head the work is the same, so equal medians are the target.
set -uo pipefail
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-cache}
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== check (heads 8, N = 700, M = 1000, d = 128 and 64, bf16; rel L2 against float64)"
for c in "bob 64" "bob 128" "fwd 128" "bwd 128"; do
  set -- $c
  op=$1 d=$2
    for kv in 2 1; do
      for causal in "" --causal; do
        out=$($F run --op $op --heads 8 --heads-kv $kv --seq-q 700 --seq-k 1000 --head-dim $d \
              $causal --check --iters 1 --warmup 0 2>&1)
        echo "$op d=$d kv=$kv ${causal:-full}: $(echo "$out" | grep -E '^  [a-zA-Z]' | tr -s ' ' | tr '\n' ' ')$(echo "$out" | grep -E '^check:')"
      done
    done
done
echo "== speed (batch 1, 16 query heads, N = M = 16384, d = 128, bf16): median ms"
for op in bob fwd bwd; do
  for causal in "" --causal; do
    for round in 1 2; do
      for kv in 16 2 1; do
        line=$($F run --op $op --heads 16 --heads-kv $kv --seq-q 16384 --head-dim 128 $causal \
               --iters 20 --warmup 3 | grep median)
        echo "round $round kv=$kv: $line"
      done
    done
  done
done

#!/usr/bin/env bash
# GPU machine: a variable-length batch against its sequences run one by one, in one
# call.
#   bash scripts/device/run-gpu.sh bash scripts/device/varlen-bench.sh
# 8 sequences of mixed lengths summing to 64K (16K down to 3K), 16 heads, bf16, causal (packed
# training batches are), d = 64 and 128: the packed run (--seqlens-q) against the sum of the
# medians of the eight separate runs (--seq-q L, batch 1) of the same op. Target: packed <= 1.1 x
# the sum. Median of 10 runs each, after 2 warm ones.
set -uo pipefail
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-cache}
F=.device/bin/flashbob
LENGTHS=(16384 12288 9216 8192 7168 5120 4096 3072)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
median() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'; }
for d in 128 64; do
  for op in fwd bwd bob; do
    packed=$($F run --op $op --heads 16 --head-dim $d --causal \
             --seqlens-q "$(IFS=,; echo "${LENGTHS[*]}")" --iters 10 --warmup 2 | grep median)
    sum=0
    for n in "${LENGTHS[@]}"; do
      ms=$($F run --op $op --heads 16 --head-dim $d --causal --seq-q "$n" --iters 10 --warmup 2 |
           grep median | median)
      sum=$(awk -v a="$sum" -v b="$ms" 'BEGIN { printf "%.3f", a + b }')
    done
    ms=$(echo "$packed" | median)
    echo "d=$d $op packed: $packed"
    echo "d=$d $op separate runs: sum $sum ms; packed / sum = $(awk -v a="$ms" -v b="$sum" 'BEGIN { printf "%.3f", a / b }')"
  done
done

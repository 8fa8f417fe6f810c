#!/usr/bin/env bash
# GPU machine: sliding windows, in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/window-bench.sh
# 1. --check against the float64 oracle through the CLI: windows on one side and both, with and
#    without causal, N != M (the GPU tests cover every kernel and layout; this, the CLI's path).
# 2. Speed: batch 1, 16 heads, d = 64 and 128, bf16. A 4K window at N = 128K, causal with 4095
#    keys to the left (each query sees 4096 keys, itself included; Mistral's sliding window) and
#    two-sided (2048, 2048), against the dense N = M = 16K run of the same op. TFLOP/s count the
#    (query, key) pairs the mask lets through, so equal TFLOP/s means the windowed run costs
#    exactly its N x window work; the target is dense / windowed <= 1.3.
set -uo pipefail
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-cache}
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== check (heads 4, bf16; rel L2 against float64)"
for c in "bob 64 700 1000 100 30" "bob 128 1000 700 64 -1 --causal" "bwd 128 700 700 -1 40" \
         "fwd 64 900 900 300 0" "bob 64 513 513 1 1"; do
  set -- $c
  op=$1 d=$2 n=$3 m=$4 left=$5 right=$6 causal=${7:-}
  out=$($F run --op "$op" --heads 4 --seq-q "$n" --seq-k "$m" --head-dim "$d" \
        --window-left="$left" --window-right="$right" $causal --check --iters 1 --warmup 0 2>&1)
  echo "$op d=$d N=$n M=$m window ($left, $right)${causal:+ causal}: $(echo "$out" | grep -E '^  [a-zA-Z]' | tr -s ' ' | tr '\n' ' ')$(echo "$out" | grep -E '^check:|error')"
done
echo "== speed (batch 1, 16 heads, bf16): median of 10 runs, TFLOP/s over the visible pairs"
for d in 128 64; do
  for op in fwd bwd bob; do
    dense=$($F run --op $op --heads 16 --seq-q 16384 --head-dim $d --iters 10 --warmup 2 | grep median)
    echo "d=$d dense 16K: $dense"
    for w in "4095 -1 --causal" "2048 2048"; do
      set -- $w
      line=$($F run --op $op --heads 16 --seq-q 131072 --head-dim $d --window-left="$1" \
             --window-right="$2" ${3:-} --iters 10 --warmup 2 | grep median)
      echo "d=$d 128K window ($1, $2)${3:+ causal}: $line"
    done
  done
done

#!/usr/bin/env bash
# GPU machine: the autotuner over every kind's candidate space at the benchmark shape (16 heads,
# N = 16K), d 64/128, causal or not, printing each candidate's time and the winner, so the tile
# table's defaults can follow the measurements. Also reruns the GPU attention test first.
#   bash scripts/device/run-gpu.sh bash scripts/device/tune-table.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache FLASHBOB_PRINT_AUTOTUNING=1
F=.device/bin/flashbob
.device/bin/gpu_attention_test > $OUT/gpu_attention_test.log 2>&1; echo "gpu_attention_test rc=$?"; tail -2 $OUT/gpu_attention_test.log
for op in bob fwd bwd; do
  for d in 64 128; do
    for causal in "" "--causal"; do
      log=$OUT/tune-$op-d$d${causal:+-causal}.log
      timeout 120 $F tune --op $op --batch 1 --heads 16 --seq-q 16384 --head-dim $d $causal --repeat 3 > $log 2>&1
      echo "== $op d$d $causal rc=$?"; grep -iE "winner|chose|best|median" $log | head -6
    done
  done
done

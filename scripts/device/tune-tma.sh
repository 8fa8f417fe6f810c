#!/usr/bin/env bash
# GPU machine: the autotuner where the TMA perf table misses or regressed (bwd d = 64 at 64K,
# causal or not; BoB d = 64 at 16K; fwd d = 64 causal at 32K), each candidate's time printed.
#   bash scripts/device/run-gpu.sh bash scripts/device/tune-tma.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache FLASHBOB_PRINT_AUTOTUNING=1
F=.device/bin/flashbob
while read -r op d n causal; do
  log=$OUT/tune-$op-d$d-n$n${causal:+-causal}.log
  timeout 150 $F tune --op $op --batch 1 --heads 16 --seq-q $n --head-dim $d $causal --repeat 3 > $log 2>&1
  echo "== $op d$d N$n $causal rc=$?"; grep -iE "winner|chose|best|ms" $log | head -14
done <<'LIST'
bwd 64 65536
bwd 64 65536 --causal
bob 64 16384
fwd 64 32768 --causal
LIST

#!/usr/bin/env bash
# GPU machine: long sweeps' accuracy and the flush's cost, in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/flush-bench.sh [accuracy] [cost] [cost1m]
# One binary, .device/bin/flashbob: FLASHBOB_LONG_SWEEP=0 runs the kernels without the flush
# ("plain"), =1 the ones that flush periodically ("flush", kernels/common/KernelBuilder.h), whatever the sweep's length.
# 1. accuracy: N = M = 2^20 through the CLI (the last 64 query rows checked against float64),
#    plain and flush, d = 64 and 128 (the CPU's float64 check of 64 rows x 2^20 keys takes
#    about three minutes a run: FLUSH_DIMS="64" for one, FLUSH_MODES="flush" for one).
# 2. cost: batch 1, 16 heads, N = 16K, bf16, bwd and BoB (the kernels that flush), causal and
#    not; the two alternate, FLUSH_ROUNDS rounds (default 2), median of 10 runs each.
# 3. cost1m: 1 head, N = M = 2^20, BoB, d = 64 and 128 (FLUSH_DIMS), median of FLUSH_ITERS runs
#    (default 3) each, plain and flush alternating, FLUSH_ROUNDS rounds (default 1).
set -uo pipefail
B=.device/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
[ -x "$B/flashbob" ] || { echo "flush-bench.sh: $B/flashbob is missing" >&2; exit 1; }
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache-flush
run() { # plain|flush, then flashbob run's arguments
  local mode=$1; shift
  FLASHBOB_LONG_SWEEP=$([ "$mode" = flush ] && echo 1 || echo 0) "$B/flashbob" run "$@"
}
parts=${*:-accuracy cost cost1m}
if [[ " $parts " == *" accuracy "* ]]; then
  echo "== accuracy: N = M = 1048576, 1 head, bf16, last 64 rows (rel L2 against float64)"
  for d in ${FLUSH_DIMS:-64 128}; do
    for mode in ${FLUSH_MODES:-plain flush}; do
      out=$(run $mode --op bob --seq-q 1048576 --head-dim $d --check --check-rows 64 --iters 1 \
            --warmup 0 2>&1)
      echo "$mode d=$d: $(echo "$out" | grep -E '^  [a-zA-Z]|median' | tr -s ' ' | tr '\n' ' ')$(echo "$out" | grep -E '^check:|error')"
    done
  done
fi
if [[ " $parts " == *" cost "* ]]; then
  echo "== cost: batch 1, 16 heads, N = 16384, bf16, median of 10 runs"
  for round in $(seq 1 "${FLUSH_ROUNDS:-2}"); do
    for d in 64 128; do
      for op in bwd bob; do
        for causal in "" --causal; do
          for mode in plain flush; do
            line=$(run $mode --op $op --heads 16 --seq-q 16384 --head-dim $d $causal --iters 10 \
                   --warmup 2 | grep median)
            echo "round $round d=$d $op${causal:+ causal} $mode: $line"
          done
        done
      done
    done
  done
fi
if [[ " $parts " == *" cost1m "* ]]; then
  iters=${FLUSH_ITERS:-3}
  echo "== cost at 2^20: 1 head, N = M = 1048576, bf16, BoB, median of $iters runs"
  for round in $(seq 1 "${FLUSH_ROUNDS:-1}"); do
    for d in ${FLUSH_DIMS:-64 128}; do
      for mode in plain flush; do
        line=$(run $mode --op bob --seq-q 1048576 --head-dim $d --iters "$iters" --warmup 1 |
               grep median)
        echo "round $round 1M d=$d $mode: $line"
      done
    done
  done
fi

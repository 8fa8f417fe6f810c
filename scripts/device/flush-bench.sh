#!/usr/bin/env bash
# GPU machine: long sweeps' accuracy and the flush's cost (issue 21, item 11), in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/flush-bench.sh [accuracy] [cost]
# Needs .device/bin/flashbob (the kernels that flush) and .device/bin/flashbob-before (the same
# source with the kernels' flushes taken out, built by hand: docs/numerics.md says how).
# 1. Accuracy at N = M = 2^20 through the CLI (the last 64 query rows checked against float64),
#    before and after, d = 64 and 128 (the CPU's float64 check of 64 rows x 2^20 keys takes
#    about three minutes a run).
# 2. Cost: batch 1, 16 heads, N = 16K, bf16, bwd and BoB (the kernels that flush), causal and
#    not; the two binaries alternate, three rounds, median of 10 runs each.
set -uo pipefail
B=.device/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for f in flashbob flashbob-before; do
  [ -x "$B/$f" ] || { echo "flush-bench.sh: $B/$f is missing" >&2; exit 1; }
done
run() { # binary, then flashbob run's arguments; each binary its own cache (different kernels)
  local bin=$1; shift
  FLASHBOB_CACHE_DIR=/tmp/flashbob-cache-$bin "$B/$bin" run "$@"
}
parts=${*:-accuracy cost}
if [[ " $parts " == *" accuracy "* ]]; then
echo "== accuracy: N = M = 1048576, 1 head, bf16, last 64 rows (rel L2 against float64)"
for d in 64 128; do
  for bin in flashbob-before flashbob; do
    out=$(run $bin --op bob --seq-q 1048576 --head-dim $d --check --check-rows 64 --iters 1 \
          --warmup 0 2>&1)
    echo "$bin d=$d: $(echo "$out" | grep -E '^  [a-zA-Z]|median' | tr -s ' ' | tr '\n' ' ')$(echo "$out" | grep -E '^check:|error')"
  done
done
fi
[[ " $parts " == *" cost "* ]] || exit 0
echo "== cost: batch 1, 16 heads, N = 16384, bf16, median of 10 runs"
for round in ${FLUSH_ROUNDS:-1 2 3}; do
  for d in 64 128; do
    for op in bwd bob; do
      for causal in "" --causal; do
        for bin in flashbob-before flashbob; do
          line=$(run $bin --op $op --heads 16 --seq-q 16384 --head-dim $d $causal --iters 10 \
                 --warmup 2 | grep median)
          echo "round $round d=$d $op${causal:+ causal} $bin: $line"
        done
      done
    done
  done
done
echo "== cost at 2^20: 1 head, N = M = 1048576, d = 64, bf16, BoB, median of 3 runs"
for bin in flashbob-before flashbob; do
  line=$(run $bin --op bob --seq-q 1048576 --head-dim 64 --iters 3 --warmup 1 | grep median)
  echo "1M $bin: $line"
done

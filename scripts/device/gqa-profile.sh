#!/usr/bin/env bash
# GPU machine: where grouped-query attention's key-side kernels lose time, in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/gqa-profile.sh
# Batch 1, 16 query heads, N = M = 16384, d = 128, bf16. With 2 key/value heads (8:1) each
# key block's sweep visits 8 x 16384 = 2^17 query rows, which is where the launcher switches to
# the long-sweep kernels (kernels::kLongSweepRows): part of the gap may be the flush, not the
# grouping.
# 1. Speed, median of 20 runs, alternating twice: equal heads; 8:1 as launched; 8:1 with
#    FLASHBOB_LONG_SWEEP=0 (grouped, no flush); bwd and bob.
# 2. Nsight Compute (clocks left alone) on one launch of the key-side kernel, equal heads against
#    8:1 without the flush: speed of light, occupancy, warp states, memory.
# 3. (`tune`, only when named) the autotuner's candidates for bwd and bob at 8:1 in a cache of
#    its own: which tiles the grouped kernels would rather have.
# Sections to run as arguments (default: speed ncu), e.g. `gqa-profile.sh speed tune`.
set -uo pipefail
sections=${*:-speed ncu}
wants() { [[ " $sections " == *" $1 "* ]]; }
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-cache}
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
shape="--heads 16 --seq-q 16384 --head-dim 128"
wants speed && echo "== speed: median ms of 20 runs"
wants speed && for op in bwd bob; do
  for round in 1 2; do
    for form in "16 auto" "2 auto" "2 0"; do
      set -- $form
      kv=$1 flush=$2
      line=$(if [ "$flush" = auto ]; then $F run --op $op $shape --heads-kv $kv --iters 20 --warmup 3
             else FLASHBOB_LONG_SWEEP=$flush $F run --op $op $shape --heads-kv $kv --iters 20 --warmup 3; fi |
             grep median)
      echo "round $round $op kv=$kv long-sweep=$flush: $line"
    done
  done
done
if wants tune; then
  for op in bwd bob; do
    echo "== tune $op, kv=2"
    FLASHBOB_CACHE_DIR=/tmp/flashbob-gqa-tune $F tune --op $op $shape --heads-kv 2 --iters 10 --warmup 2 \
      --progress none 2>&1 | grep -v "^flashbob: compiling"
  done
fi
wants ncu || exit 0
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "gqa-profile.sh: ncu not found" >&2; exit 1; }
for op in bob bwd; do
  kernel=$([ $op = bob ] && echo bob_kv || echo bwd_kv)
  for kv in 16 2; do
    echo "== ncu $kernel, kv=$kv (FLASHBOB_LONG_SWEEP=0)"
    FLASHBOB_LONG_SWEEP=0 "$NCU" --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats \
      $F run --op $op $shape --heads-kv $kv --iters 1 --warmup 1 2>&1 |
      grep -vE '^==PROF==|^flashbob: compiling' | grep -E '^\s+[A-Z].*\s{2,}' | sed 's/  */ /g'
  done
done

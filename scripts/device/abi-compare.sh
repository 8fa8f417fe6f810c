#!/usr/bin/env bash
# GPU machine: the kernel ABI change (tensor maps by value, the softmax scale as a
# kernel argument) against the build before it, in one call: .device/bin/flashbob-base is
# a02226b's CLI (strip -o .device/bin/flashbob-base <that build>/bin/flashbob before packing).
#   bash scripts/device/run-gpu.sh bash scripts/device/abi-compare.sh
# 1. The same outputs: --check's relative errors of both builds, at the default scale and 0.3.
# 2. The same speed: median of 20 timed runs (3 warm-up) per case, base and new alternating twice;
#    at the default scale (new: the kernels with its values compiled in) and at --scale 0.1 (new:
#    the kernels that read any scale from their arguments; base compiled 0.1 in).
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/abi-compare-cache
new=.device/bin/flashbob base=.device/bin/flashbob-base
echo "== outputs (bob, 1 x 1 x 2048, d = 64; errors against float64)"
for scale in "" "--scale 0.3"; do
  for cli in $base $new; do
    echo "$(basename $cli) $scale: $($cli run --op bob --seq-q 2048 --head-dim 64 $scale --check 2>&1 | tail -n +4 | tr '\n' ' ')"
  done
done
echo "== speed (16 heads, N = 16384, bf16): median ms"
cases=("bob 128" "bob 64" "bob 128 --causal" "fwd 128" "bwd 128" "fwd 64" "bwd 64"
       "bob 128 --scale 0.1" "bob 64 --scale 0.1")
for c in "${cases[@]}"; do
  set -- $c
  extra="${*:3}"
  for round in 1 2; do
    for cli in $base $new; do
      line=$($cli run --op "$1" --heads 16 --seq-q 16384 --head-dim "$2" $extra --iters 20 --warmup 3 | grep median)
      echo "$1 $2 $extra round $round $(basename $cli): $line"
    done
  done
done

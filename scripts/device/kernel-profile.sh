#!/usr/bin/env bash
# GPU machine: where each kernel of fwd, bwd and BoB spends its time, in one call.
#   bash scripts/device/run-gpu.sh bash scripts/device/kernel-profile.sh [D ...]   # default 128 64
#   CLI="python3 -m flashbob" bash scripts/device/kernel-profile.sh     # the wheel's CLI instead
# (perf-table.sh runs it so, with the wheel installed). CLI: the command that runs `flashbob`
# (default .device/bin/flashbob, from pack.sh).
# Batch 1, 16 heads, N = M = 16384, bf16, not causal, the default tiles (FLASHBOB_CACHE_DIR if
# set, else a cache of its own).
# Nsight Compute, clocks left alone, one launch of each kernel (after one warm-up run): time,
# registers (LaunchStats), occupancy, issue slots, and the pipe utilisation
# ComputeWorkloadAnalysis reports (the tensor pipe's share of elapsed and of active cycles),
# then the warp states (what an issue slot waited for). `--print-details all` prints the
# pipe breakdown; the lines kept are those of sections with a value. Spills are ptxas' to
# report (`flashbob compile ... --emit cubin --dump-dir D`, D/*.ptxas.log).
set -uo pipefail
ds=${*:-128 64}
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-profile-cache}
F=${CLI:-.device/bin/flashbob}  # word-split below: CLI may be an interpreter and its arguments
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "kernel-profile.sh: ncu not found" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for d in $ds; do
  for op in fwd bwd bob; do
    launches=$([ $op = fwd ] && echo 1 || echo 2)
    echo "== ncu $op d=$d (kernels of the op: $launches)"
    "$NCU" --clock-control none --kernel-name "regex:^${op}_" --launch-skip "$launches" \
      --launch-count "$launches" --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section ComputeWorkloadAnalysis --section WarpStateStats --print-details all \
      $F run --op $op --batch 1 --heads 16 --seq-q 16384 --head-dim $d --iters 1 --warmup 1 2>&1 |
      grep -vE '^==PROF==|^flashbob: compiling|^\s*-+\s*$' |
      grep -E '^\s+[a-z_0-9]+_d[0-9]+|Duration|Registers Per|Local Memory|Achieved Occupancy|Issue Slots Busy|SM Busy|Executed Ipc A|Compute \(SM\) Throughput|Memory Throughput|Stall|Pipe|Tensor|Warp Cycles Per Issued|^\s+[A-Z][A-Za-z ]+\s{2,}[a-z%/]*\s+[0-9.,]+$' |
      sed 's/  */ /g'
  done
done

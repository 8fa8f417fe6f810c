#!/usr/bin/env bash
# GPU machine: causal query-major kernels (fwd, bwd_q, bob_q) taking their query blocks last
# first (kernels/common/KernelBuilder.cpp blockStart), so the blocks with the most keys start
# first. Every GPU test at this commit, then 16 heads x 16K causal benchmarks of bob, fwd and
# bwd at d = 128 and 64, each with the binary before the change (.device/bin/flashbob-before,
# copied there by hand after pack.sh) and after it, alternating, checked against float64.
#   bash scripts/device/run-gpu.sh bash scripts/device/causal-order.sh
set -uo pipefail
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_forward_test gpu_attention_test capi_smoke; do
  FLASHBOB_CACHE_DIR=/tmp/flashbob-cache timeout 200 .device/bin/$t > $L/$t.log 2>&1
  echo "$t rc=$?"; tail -2 $L/$t.log
done
while read -r op d; do
  for which in before after; do
    F=.device/bin/flashbob; [ $which = before ] && F=.device/bin/flashbob-before
    log=$L/bench-$op-d$d-causal-$which.log
    FLASHBOB_CACHE_DIR=/tmp/flashbob-cache-$which $F bench --op $op --batch 1 --heads 16 \
      --seq 16384 --head-dim $d --causal --warmup 2 --iters 10 --check --check-rows 64 > $log 2>&1
    echo "$op d$d causal $which rc=$? $(grep -E 'median' $log | sed 's/.*: median/median/') $(grep -o 'check: [A-Z]*' $log)"
  done
done <<'LIST'
bob 128
fwd 128
bwd 128
bob 64
fwd 64
bwd 64
LIST
cd $L && tar czf $OUT/logs.tgz *.log

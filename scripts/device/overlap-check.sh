#!/usr/bin/env bash
# GPU machine: the overlap changes after column groups, one call per version (bench/NOTES.md):
# staged operands stored in one run per block (bob-stage-operands: one scratch tile per value,
# one barrier pair per run), then independent wgmma products kept in flight together. Every
# GPU test, then the 16 heads x 16K benchmarks of BoB (d = 64, 128, causal and not), of the
# backward and the forward at d = 128 (and, since the scale-d change, d = 64), each checked
# against float64. With TUNE=1, then the autotuner's time for every BoB candidate at d = 64
# and 128 (16 heads x 16K).
#   bash scripts/device/run-gpu.sh bash scripts/device/overlap-check.sh
#   bash scripts/device/run-gpu.sh env TUNE=1 bash scripts/device/overlap-check.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
# Logs are kept in /tmp/logs and come back as one archive (the device returns few files).
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_attention_test gpu_forward_test; do
  timeout 200 .device/bin/$t > $L/$t.log 2>&1; echo "$t rc=$?"; tail -2 $L/$t.log
done
while read -r op d causal; do
  log=$L/bench-$op-16k-d$d${causal:+-causal}.log
  $F bench --op $op --batch 1 --heads 16 --seq 16384 --head-dim $d $causal --warmup 2 --iters 10 \
    --check --check-rows 64 > $log 2>&1
  echo "bench $op d$d $causal rc=$?"; grep -E "median|check:" $log | head -3
done <<'LIST'
bob 128
bob 128 --causal
bob 64
bob 64 --causal
bwd 128
fwd 128
bwd 64
fwd 64
LIST
if [ "${TUNE:-0}" = 1 ]; then
  for d in 128 64; do
    log=$L/tune-bob-d$d.log
    FLASHBOB_PRINT_AUTOTUNING=1 timeout 150 $F tune --op bob --batch 1 --heads 16 --seq-q 16384 \
      --head-dim $d --repeat 3 > $log 2>&1
    echo "== tune bob d$d rc=$?"; grep -E "\] m|chose" $log | head -40
  done
fi
cd $L && tar czf $OUT/logs.tgz *.log

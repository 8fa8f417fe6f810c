#!/usr/bin/env bash
# GPU machine: warp specialization (a producer warpgroup issues the loop's TMA loads; spec flag
# `producer`, bench/NOTES.md). Every GPU test at this commit (plain, then with
# FLASHBOB_PRODUCER=1: every two-stage sm_90a kernel with a producer), then the 16 heads x 16K
# benchmarks (BENCH: "op d [--causal]" lines, default below; BENCH= for none) without and with the producer
# (FLASHBOB_PRODUCER=0 / 1), each checked against float64. TUNE="op:d ...": then the
# autotuner's time for every candidate (producer twins included) of those. PLAIN=0 skips the
# plain GPU tests.
#   bash scripts/device/run-gpu.sh bash scripts/device/warp-specialization.sh
#   bash scripts/device/run-gpu.sh env PLAIN=0 TUNE="bob:64 fwd:64" bash scripts/device/warp-specialization.sh
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
# Logs are kept in /tmp/logs and come back as one archive (the device returns few files).
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${PLAIN:-1}" = 1 ]; then
  for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
    timeout 200 .device/bin/$t > $L/$t.log 2>&1; echo "$t rc=$?"; tail -2 $L/$t.log
  done
fi
FLASHBOB_PRODUCER=1 timeout 200 .device/bin/gpu_attention_test > $L/gpu_attention_producer.log 2>&1
echo "gpu_attention_test FLASHBOB_PRODUCER=1 rc=$?"; tail -2 $L/gpu_attention_producer.log
while read -r op d causal; do
  [ -n "$op" ] || continue
  for p in 0 1; do
    log=$L/bench-$op-16k-d$d${causal:+-causal}-p$p.log
    FLASHBOB_PRODUCER=$p $F bench --op $op --batch 1 --heads 16 --seq 16384 --head-dim $d $causal \
      --warmup 2 --iters 10 --check --check-rows 64 > $log 2>&1
    echo "bench $op d$d $causal producer=$p rc=$?"; grep -E "median|check:|_w[0-9]" $log | head -4
  done
done <<<"${BENCH-bob 128
bob 64
bob 64 --causal
bwd 128
bwd 64
fwd 128
fwd 64}"
for pair in ${TUNE:-}; do
  op=${pair%:*} d=${pair#*:} log=$L/tune-${pair/:/-d}.log
  FLASHBOB_PRINT_AUTOTUNING=1 timeout 150 $F tune --op $op --batch 1 --heads 16 --seq-q 16384 \
    --head-dim $d --repeat 3 > $log 2>&1
  echo "== tune $op d$d rc=$?"; grep -E "\] m|chose" $log | head -60
done
# Which producer kernels were built (their names end in ...p_s2_...).
grep -rhoa "[a-z_]*_d[0-9]*_m[0-9]*_n[0-9]*_w[0-9c]*p_s2_[a-z0-9_]*sm_90a" /tmp/flashbob-cache 2>/dev/null \
  | sort -u > $L/producer-kernels.log; echo "producer kernels built: $(wc -l < $L/producer-kernels.log)"
cd $L && tar czf $OUT/logs.tgz *.log

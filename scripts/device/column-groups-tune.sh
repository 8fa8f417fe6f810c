#!/usr/bin/env bash
# GPU machine, after column-groups.sh: (1) the generic target on this GPU (FLASHBOB_ARCH=sm_90:
# mma.sync + cp.async, the path of sm_80..sm_89 GPUs) with column groups in the tile table's
# d = 128 BoB kernels, through every GPU test; (2) the autotuner's times with the column-group
# candidates for the kernels not tuned yet with them: BoB d = 64, backward d = 64 and 128
# (16 heads x 16K; FLASHBOB_PRINT_AUTOTUNING prints every candidate).
#   bash scripts/device/run-gpu.sh bash scripts/device/column-groups-tune.sh
set -uo pipefail
F=.device/bin/flashbob
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_attention_test capi_smoke; do
  FLASHBOB_ARCH=sm_90 FLASHBOB_CACHE_DIR=/tmp/flashbob-cache-sm90 timeout 240 .device/bin/$t > $OUT/sm90-$t.log 2>&1
  echo "sm_90 $t rc=$?"; tail -2 $OUT/sm90-$t.log
done
FLASHBOB_ARCH=sm_80 .device/bin/flashbob run --op fwd --seq-q 64 > $OUT/sm80-refused.log 2>&1
echo "FLASHBOB_ARCH=sm_80 rc=$? $(head -1 $OUT/sm80-refused.log)"
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache FLASHBOB_PRINT_AUTOTUNING=1
while read -r op d; do
  log=$OUT/tune-$op-d$d.log
  timeout 150 $F tune --op $op --batch 1 --heads 16 --seq-q 16384 --head-dim $d --repeat 3 > $log 2>&1
  echo "== tune $op d$d rc=$?"; grep -E "\] m|chose|median" $log | grep -v "fwd d=" | head -30
done <<'LIST'
bob 64
bwd 128
bwd 64
LIST
cd $OUT && tar czf logs.tgz *.log

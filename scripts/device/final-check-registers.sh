#!/usr/bin/env bash
# GPU machine: the session's final check after the wgmma register fixes (scale-d = 0 for
# products into zeros, descriptors formed next to their product). Every GPU test and the 12
# pytest tests at HEAD; the autotuner's time for every forward and backward candidate at d = 64
# (16 heads x 16K, FLASHBOB_PRINT_AUTOTUNING); Nsight Compute on one BoB call at d = 128 and
# the SASS facts of its cubins (HGMMA, local-memory spills, barriers). One archive comes back.
#   bash scripts/device/run-gpu.sh bash scripts/device/final-check-registers.sh
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke; do
  timeout 200 .device/bin/$t > $L/$t.log 2>&1; echo "$t rc=$?"; tail -1 $L/$t.log
done
timeout 200 python3 -m pytest -q test/python > $L/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $L/pytest.log
for op in bwd fwd; do
  FLASHBOB_PRINT_AUTOTUNING=1 timeout 150 $F tune --op $op --batch 1 --heads 16 --seq-q 16384 \
    --head-dim 64 --repeat 3 > $L/tune-$op-d64.log 2>&1
  echo "== tune $op d64 rc=$?"; grep -E "\] m|chose" $L/tune-$op-d64.log | sed 's/ compiler=[0-9a-f]*//' | head -30
done
FLASHBOB_CACHE_DIR=/tmp/flashbob-cache-ncu ncu --clock-control none --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $F run --op bob --seq-q 16384 --head-dim 128 --repeat 1 > $L/ncu-bob-d128.txt 2>&1
echo "ncu rc=$?"; grep -E "^  [a-z_0-9]+_sm_90a|Registers Per|Issue Slots Busy|Local Memory Spilling Requests  |Duration" $L/ncu-bob-d128.txt | head -20
for cubin in $(find /tmp/flashbob-cache-ncu -name kernel.cubin); do
  name=$(grep -m1 -o '\.entry [a-z0-9_]*' $(dirname $cubin)/kernel.ptx | cut -d' ' -f2)
  cuobjdump -sass $cubin > $L/$name.sass 2>&1
  echo "$name HGMMA=$(grep -c HGMMA $L/$name.sass) LDL=$(grep -c LDL $L/$name.sass) STL=$(grep -c STL $L/$name.sass) BAR=$(grep -c 'BAR.SYNC' $L/$name.sass) WARPGROUP.DEPBAR=$(grep -c 'WARPGROUP.DEPBAR' $L/$name.sass)"
done
cd $L && tar czf $OUT/logs.tgz *

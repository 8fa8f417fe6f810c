#!/usr/bin/env bash
# GPU machine: where BoB's time goes. Nsight Compute on one BoB call per head dim (both passes),
# then SASS facts of the cached cubins (HGMMA count, local-memory spills, barriers).
#   bash scripts/device/run-gpu.sh bash scripts/device/profile-bob.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
for d in 64 128; do
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      $F run --op bob --seq-q 16384 --head-dim $d --repeat 1 > $OUT/ncu-bob-d$d.txt 2>&1
  echo "ncu d$d rc=$?"
done
for cubin in $(find $FLASHBOB_CACHE_DIR -name kernel.cubin); do
  name=$(grep -m1 -o '\.entry [a-z0-9_]*' $(dirname $cubin)/kernel.ptx | cut -d' ' -f2)
  cuobjdump -sass $cubin > $OUT/$name.sass 2>&1
  echo "$name HGMMA=$(grep -c HGMMA $OUT/$name.sass) HMMA=$(grep -c HMMA $OUT/$name.sass) LDL=$(grep -c LDL $OUT/$name.sass) STL=$(grep -c STL $OUT/$name.sass) BAR=$(grep -c 'BAR.SYNC' $OUT/$name.sass) LDGSTS=$(grep -c LDGSTS $OUT/$name.sass)"
done

#!/usr/bin/env bash
# GPU machine: the demo, compute-sanitizer (memcheck, racecheck) on a small BoB run, and BoB at
# N = 262,144 with peak memory. Logs under $OUT. Run through scripts/device/run-gpu.sh.
set -uo pipefail
F=.device/bin/flashbob
$F demo --gpu-seq 4096 > $OUT/demo.log 2>&1; echo "demo rc=$?"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $F run --op bob --batch 1 --heads 2 \
    --seq-q 200 --seq-k 300 --head-dim 64 --causal --check --repeat 1 > $OUT/sanitizer-$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$?"; tail -2 $OUT/sanitizer-$tool.log
done
for d in 64 128; do
  $F run --op bob --seq-q 262144 --head-dim $d --check --check-rows 32 --repeat 1 > $OUT/bob-256k-d$d.log 2>&1
  echo "bob N=262144 d=$d rc=$?"; cat $OUT/bob-256k-d$d.log
done

#!/usr/bin/env bash
# GPU machine: PyTorch tests, the on-disk kernel cache across processes, autotuning and reuse of
# the winner by another process, and the host overhead of a warm launch. Logs under $OUT.
# Run through scripts/device/run-gpu.sh.
set -uo pipefail
export FLASHBOB_LIBRARY=$PWD/.device/lib/libflashbob.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
python3 -m pytest -q -s test/python > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -3 $OUT/pytest.log
$F cache clear
P="--op bob --batch 1 --heads 4 --seq-q 4096 --head-dim 64 --causal --repeat 3"
$F run $P > $OUT/cache-cold.log 2>&1; echo "cold rc=$?"; grep -E "first call|median" $OUT/cache-cold.log
$F run $P > $OUT/cache-warm.log 2>&1; echo "warm rc=$?"; grep -E "first call|median" $OUT/cache-warm.log
$F cache list > $OUT/cache-list.log 2>&1; cat $OUT/cache-list.log
T="--op bob --batch 1 --heads 16 --seq-q 8192 --head-dim 64 --causal --repeat 5"
$F run $T > $OUT/untuned.log 2>&1; echo "untuned rc=$?"; grep median $OUT/untuned.log
$F tune $T > $OUT/tune.log 2>&1; echo "tune rc=$?"; grep -E "chose|median" $OUT/tune.log
FLASHBOB_PRINT_AUTOTUNING=1 $F run --tune $T > $OUT/tune-reuse.log 2>&1; echo "reuse rc=$?"; grep -E "reusing|median" $OUT/tune-reuse.log
$F run --op fwd --batch 1 --heads 1 --seq-q 16 --head-dim 64 --launch-overhead > $OUT/launch.log 2>&1; echo "launch rc=$?"; grep overhead $OUT/launch.log
$F run --op bob --batch 1 --heads 1 --seq-q 16 --head-dim 64 --launch-overhead > $OUT/launch-bob.log 2>&1; grep overhead $OUT/launch-bob.log

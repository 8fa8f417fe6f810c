#!/usr/bin/env bash
# GPU machine: why BoB at d = 128 runs 2-3% slower per flop at N = 128K than at 16K-32K (perf
# table, same kernels and tiles). Two suspects: the SM clock under a sustained load (one BoB at
# 16 heads x 128K runs 3.3 s, at 16K 50 ms), and the L2 (a head's K, V, uK, uV are 4 x 32 MB at
# 128K: their sweep no longer fits the 50 MB L2).
# 1. nvidia-smi samples the SM clock, power, temperature and throttle reasons every 100 ms while
#    `flashbob bench` runs BoB d = 128 at 16 heads x 16K (10 runs) and 16 heads x 128K (3 runs);
#    the summary is over the samples taken under load (power above 300 W).
# 2. Nsight Compute (clocks not locked) on bob_q and bob_kv for the same number of blocks:
#    16 heads x 16K and 2 heads x 128K: duration, SM frequency, throughputs, L2 hit rate.
#   bash scripts/device/run-gpu.sh bash scripts/device/profile-long-sequences.sh
set -uo pipefail
export FLASHBOB_CACHE_DIR=/tmp/flashbob-cache
F=.device/bin/flashbob
L=/tmp/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
for n in 16384 131072; do
  iters=10; [ $n = 131072 ] && iters=3
  # Compile and load first, so the sampled window is the timed runs.
  $F bench --op bob --batch 1 --heads 1 --seq 1024 --head-dim 128 --iters 2 > /dev/null 2>&1
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 100 > $L/smi-$n.csv &
  smi=$!
  $F bench --op bob --batch 1 --heads 16 --seq $n --head-dim 128 --warmup 1 --iters $iters \
    > $L/bench-$n.log 2>&1
  echo "bench 16 heads N=$n rc=$?"; grep median $L/bench-$n.log | head -1
  kill $smi; wait $smi 2>/dev/null
  awk -F', *' '$4 > 300 { n++; clk += $2; pw += $4; if ($5 > t) t = $5; r[$6]++ }
    END { printf "  under load: %d samples, mean SM clock %.0f MHz, mean power %.0f W, max temp %d C, throttle reasons:", n, clk / n, pw / n, t;
          for (k in r) printf " %s x%d", k, r[k]; printf "\n" }' $L/smi-$n.csv
done
for cfg in "16 16384" "2 131072"; do
  set -- $cfg
  ncu --clock-control none -k regex:bob_ --section SpeedOfLight --section MemoryWorkloadAnalysis \
    $F run --op bob --heads $1 --seq-q $2 --head-dim 128 --repeat 1 > $L/ncu-$1x$2.txt 2>&1
  echo "ncu $1 heads x $2 rc=$?"
  grep -E "^  [a-z_0-9]+_sm_90a|Duration|SM Frequency|Compute \(SM\) Throughput|DRAM Throughput|L2 Hit Rate  |Memory Throughput" $L/ncu-$1x$2.txt | head -24
done
cd $L && tar czf $OUT/logs.tgz *

#!/usr/bin/env bash
# GPU machine: an A/B of builds of `flashbob` in one call. After scripts/device/pack.sh here,
# strip the baseline build into .device/bin/flashbob-before (`strip -o .device/bin/flashbob-before
# OTHER_BUILD/bin/flashbob`); .device/bin/flashbob is the change, or AB_AFTER names several
# (`AB_AFTER="flashbob-x flashbob-y"`, binaries in .device/bin). Each case runs the baseline and
# each change, alternating, AB_ROUNDS times, each binary with its own kernel cache, and prints the
# medians and each change against the baseline:
#   bash scripts/device/run-gpu.sh bash scripts/device/ab-bench.sh bwd:64 bob:128
# Cases are OP:D (op fwd, bwd or bob; head dim D), run without and with the causal mask.
# Environment: AB_ROUNDS (2), AB_SEQ (16384; batch 1, 16 heads), AB_CAUSAL ("no yes"),
# AB_BUDGET_S (500: no new case starts after that many seconds), AB_CHECK (1: the first round
# checks against the float64 oracle, 64 rows). Exit status 1 if a run failed or a check did not pass.
set -uo pipefail
(($# > 0)) || { echo "usage: ab-bench.sh OP:D [OP:D ...]" >&2; exit 2; }
BEFORE=.device/bin/flashbob-before
read -r -a AFTERS <<< "${AB_AFTER:-flashbob}"
for f in "$BEFORE" "${AFTERS[@]/#/.device/bin/}"; do
  [ -x "$f" ] || { echo "ab-bench.sh: no $f" >&2; exit 2; }
done
ROUNDS=${AB_ROUNDS:-2} SEQ=${AB_SEQ:-16384} BUDGET=${AB_BUDGET_S:-500}
START=$SECONDS
failed=0
# The median of one bench run in ms, or the reason it has none.
median() { # BINARY CACHE ARGS...
  local bin=$1 cache=$2; shift 2
  local out
  out=$(env FLASHBOB_CACHE_DIR="$cache" "$bin" bench --batch 1 --heads 16 --seq "$SEQ" --warmup 2 \
    --iters 10 --ceiling-tflops 790 "$@" 2>&1)
  if grep -q "^check: FAIL" <<< "$out"; then echo "check-failed"; return 1; fi
  local ms
  ms=$(sed -n 's/^timing: median \([0-9.]*\) ms.*/\1/p' <<< "$out")
  [ -n "$ms" ] || { echo "failed: $(grep -v '^\s*$' <<< "$out" | tail -1)"; return 1; }
  echo "$ms"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "before: $BEFORE; after: ${AFTERS[*]}; batch 1, 16 heads, N = M = $SEQ, median of 10 runs (ms)"
for spec in "$@"; do
  op=${spec%%:*} d=${spec##*:}
  for causal in ${AB_CAUSAL:-no yes}; do
    mask=(); [ "$causal" = yes ] && mask=(--causal)
    for ((r = 1; r <= ROUNDS; r++)); do
      if ((SECONDS - START > BUDGET)); then echo "$op d=$d causal=$causal: skipped (budget)"; continue; fi
      check=(); ((r == 1)) && [ "${AB_CHECK:-1}" = 1 ] && check=(--check --check-rows 64)
      a=$(median "$BEFORE" /tmp/ab-cache-before --op "$op" --head-dim "$d" "${mask[@]}" "${check[@]}") || failed=1
      line="$op d=$d causal=$causal round $r: before $a"
      for after in "${AFTERS[@]}"; do
        b=$(median ".device/bin/$after" "/tmp/ab-cache-$after" --op "$op" --head-dim "$d" "${mask[@]}" \
          "${check[@]}") || failed=1
        change=$(python3 -c 'import sys
try: print("%+.1f%%" % (100 * (float(sys.argv[2]) / float(sys.argv[1]) - 1)))
except ValueError: print("-")' "$a" "$b")
        line+=", $after $b ($change)"
      done
      echo "$line"
    done
  done
done
exit $failed

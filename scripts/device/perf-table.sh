#!/usr/bin/env bash
# GPU machine: the README's performance table, from the wheel as a user installs it
# (install-wheel.sh): `python -m flashbob.bench` over its default grid (python/flashbob/bench:
# FlashBoB against SDPA's backends and eager attention; forward, forward + backward, forward +
# JVP, BoB, the HVP step; 16 heads, d = 64 and 128, causal and not, N = 1K..32K), then, where ncu
# is installed, Nsight Compute on each kernel at 16 heads x 16K (kernel-profile.sh, with the
# wheel's CLI) and its table (bench/profile_table.py).
# Here: scripts/build-wheel.sh; then, with dist/ copied to the GPU machine, there (under 10 minutes):
#   bash scripts/device/perf-table.sh [python -m flashbob.bench options, e.g. --quick]
# Comes back under $OUT: perf-table.md (the table, with the machine and the command), perf-table.csv
# (every cell), perf-table.png (when the interpreter has matplotlib), perf-table.log (progress),
# profile.log and profile.md (Nsight Compute's details and their table).
# PYTHON: the interpreter with torch (default /opt/torch/.venv/bin/python3). PERF_TIME_LIMIT
# (default 450): the benchmark's --time-limit, so that the call ends within its 10 minutes;
# PERF_PROFILE_S (default 60; 0 leaves the profile out).
set -uo pipefail
: "${OUT:?OUT must name the output directory (its files are written there)}"
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
source "$(dirname "${BASH_SOURCE[0]}")/install-wheel.sh" || exit 2
export PYTHONUNBUFFERED=1
LOG=$OUT/perf-table.log
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu,power.draw \
  --format=csv 2>&1 | tee "$LOG"
# The table is in perf-table.md; the progress (a line per cell) goes to the log, whose last
# lines (the ceiling, the check, the summary) are printed after.
"$PY" -m flashbob.bench --time-limit "${PERF_TIME_LIMIT:-450}" --markdown "$OUT/perf-table.md" \
  --csv "$OUT/perf-table.csv" --plot "$OUT/perf-table.png" "$@" > /dev/null 2>> "$LOG"
rc=$?
grep -E '^(check|ceiling|plot|markdown|csv|done)|flashbob.bench' "$LOG"
echo "python -m flashbob.bench: exit $rc"

PROFILE_S=${PERF_PROFILE_S:-60}
if ((PROFILE_S > 0)); then
  if command -v ncu > /dev/null || ls /opt/nvidia/nsight-compute/*/ncu > /dev/null 2>&1; then
    CLI="$PY -m flashbob" timeout "$PROFILE_S" bash "$(dirname "${BASH_SOURCE[0]}")/kernel-profile.sh" \
      > "$OUT/profile.log" 2>&1
    "$PY" bench/profile_table.py "$OUT/profile.log" > "$OUT/profile.md" && echo "profile: profile.md"
  else
    echo "profile: no ncu on this machine"
  fi
fi
exit $rc

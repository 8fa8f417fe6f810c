#!/bin/sh
# Runs one fuzz target for a bounded time as a CTest test (test/fuzz/CMakeLists.txt).
#   run-fuzzer.sh FUZZER SEED_CORPUS WORK_DIR SECONDS [LIBFUZZER_FLAG...]
# Passes only when the fuzzer ran to its time limit without a finding, after reading a non-empty
# seed corpus (the regression inputs of earlier findings among them) and executing inputs: a run
# that read no seeds or executed nothing fails instead of passing silently. New inputs the run
# finds go to WORK_DIR/corpus (never into the source tree), a failing input to WORK_DIR/artifacts.
set -u
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts" || exit 1
# The targets write their cache entries and records under TMPDIR: on tmpfs they run 6-8 times
# faster than on ext4 (directory creation and removal per input dominate there).
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  TMPDIR=$(mktemp -d /dev/shm/flashbob-fuzz.XXXXXX) || exit 1
  export TMPDIR
  trap 'rm -rf "$TMPDIR"' EXIT
fi
# -timeout: one input running over 10 s counts as a hang (a finding); -rss_limit_mb: as does
# memory growth past 4 GiB. -max_len: metadata and records are small files, 64 KiB is plenty.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds" \
  >"$work/log" 2>&1
rc=$?
tail -n 30 "$work/log"
# libFuzzer exits 77 on a finding (its -error_exitcode), CTest's "skipped" code: any non-zero
# status becomes 1 here, so a finding can only ever read as a failure.
if [ "$rc" -ne 0 ]; then
  # The harness's message and the sanitizer's summary, which a long stack trace pushes out of
  # the tail above.
  grep -E "^fuzz_[a-z_]+: |ERROR: |^SUMMARY: " "$work/log" | head -n 5
  echo "FAILED: $fuzzer exited with $rc (log: $work/log; failing input under $work/artifacts/;" \
       "reproduce: $fuzzer <input>)"
  exit 1
fi
if ! grep -Eq "INFO: seed corpus: files: [1-9]" "$work/log"; then
  echo "FAILED: the seed corpus $seeds was not read (missing or empty)"
  exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
if [ -z "$runs" ] || [ "$runs" -eq 0 ]; then
  echo "FAILED: no inputs were executed"
  exit 1
fi
echo "PASSED: $runs inputs in ${seconds} s, nothing found"

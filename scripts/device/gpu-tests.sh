#!/usr/bin/env bash
# GPU machine: every GPU test of the build, as CTest would run it there (the GPU machine has no
# CTest). The list is .device/gpu-tests.txt, written by CMake (test/CMakeLists.txt,
# flashbob_add_gpu_test) and packed by scripts/device/pack.sh: "<name> <program> [VAR=value ...]".
# Each test's output goes to $OUT/<name>.log (default /tmp/flashbob-gpu-tests); one line per test here. Exit status 1 if any failed.
#   bash scripts/device/run-gpu.sh bash scripts/device/gpu-tests.sh             # every test
#   bash scripts/device/run-gpu.sh bash scripts/device/gpu-tests.sh gpu_forward_test python_torch
# Environment passes through (e.g. `env FLASHBOB_ARCH=sm_90 bash scripts/device/gpu-tests.sh`).
set -uo pipefail
LIST=.device/gpu-tests.txt
[ -f "$LIST" ] || { echo "no $LIST: run scripts/device/pack.sh here and carry .device"; exit 2; }
LOGS=${OUT:-/tmp/flashbob-gpu-tests}; mkdir -p "$LOGS"
# The C API library: the wheel's, installed by scripts/device/wheel-tests.sh (pack.sh carries
# none), for capi_gpu and python_torch when they are named here.
export FLASHBOB_LIBRARY=${FLASHBOB_LIBRARY:-/tmp/flashbob-wheel/flashbob/libflashbob.so}
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
export FLASHBOB_CACHE_DIR=${FLASHBOB_CACHE_DIR:-/tmp/flashbob-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
failed=0
while read -r name program vars; do
  [ -n "$name" ] || continue
  if (($# > 0)) && [[ " $* " != *" $name "* ]]; then continue; fi
  exe=$program; [[ "$program" == bin/* ]] && exe=.device/$program
  # shellcheck disable=SC2086  # vars holds VAR=value words
  timeout "${GPU_TEST_TIMEOUT_S:-540}" env $vars "$exe" < /dev/null > "$LOGS/$name.log" 2>&1
  rc=$?
  case $rc in
    0) verdict=passed ;;
    77) verdict=SKIPPED ;;
    *) verdict="FAILED (rc=$rc)"; failed=1 ;;
  esac
  echo "$name: $verdict: $(grep -v '^[[:space:]]*$' "$LOGS/$name.log" | tail -1)"
done < "$LIST"
exit $failed

#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device/pack.sh was run on
# the build machine and `.device` copied along. Unpacks the LLVM/MLIR libraries into /tmp/l (never into
# /), then runs the given command with them on the library path. Logs go to $OUT.
#   bash scripts/device/run-gpu.sh .device/bin/gpu_forward_test
set -uo pipefail
mkdir -p /tmp/l
# Once per machine, under a lock: several run-gpu.sh started together (a GPU test beside a CLI
# run) must not unpack over libraries another one has loaded (that killed both with SIGBUS).
(
  flock 9
  if [ ! -e /tmp/l/.unpacked ]; then
    for deb in .device/debs/*.deb; do dpkg -x "$deb" /tmp/l; done
    touch /tmp/l/.unpacked
  fi
) 9>/tmp/l.lock
export LD_LIBRARY_PATH=$PWD/.device/lib:/tmp/l/usr/lib/llvm-22/lib:/tmp/l/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
"$@"

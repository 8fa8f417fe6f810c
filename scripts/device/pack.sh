#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for a run on the GPU machine, which has the CUDA driver and
# toolkit but no LLVM/MLIR: our binaries plus the Debian packages of the shared libraries they
# load (unpacked there by run-gpu.sh). Name `.device` in the device tool's `carry`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${FLASHBOB_BUILD_DIR:-$ROOT/build}"
OUT="$ROOT/.device"
mkdir -p "$OUT/bin" "$OUT/debs" "$OUT/lib"
rm -f "$OUT/bin/"* "$OUT/lib/"*
for exe in flashbob gpu_driver_test gpu_forward_test gpu_attention_test capi_smoke "$@"; do
  [ -x "$BUILD/bin/$exe" ] && strip -o "$OUT/bin/$exe" "$BUILD/bin/$exe"
done
# The C API library for the Python package (FLASHBOB_LIBRARY=.device/lib/libflashbob.so).
[ -f "$BUILD/lib/libflashbob.so" ] && strip -o "$OUT/lib/libflashbob.so" "$BUILD/lib/libflashbob.so"
# libLLVM/libMLIR and the two libraries they need that Ubuntu's image lacks (toolchain.md).
if ! ls "$OUT/debs/"libllvm22_*.deb >/dev/null 2>&1; then
  (cd "$OUT/debs" && apt-get download libllvm22 libmlir-22 libz3-4 libedit2 >/dev/null)
fi
du -sh "$OUT"

#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for a run on the GPU machine, which has the CUDA driver and
# toolkit but no LLVM/MLIR: our binaries plus the Debian packages of the shared libraries they
# load (unpacked there by run-gpu.sh). Copy `.device` along with the repository.
# The binaries: flashbob, capi_smoke and those of the GPU test list CMake writes
# (build/gpu-tests.txt, test/CMakeLists.txt), which goes along for scripts/device/gpu-tests.sh.
#   scripts/device/pack.sh            # packs build/; FLASHBOB_BUILD_DIR=... for another tree
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${FLASHBOB_BUILD_DIR:-$ROOT/build}"
OUT="$ROOT/.device"
LIST="$BUILD/gpu-tests.txt"
[ -f "$LIST" ] || { echo "pack.sh: no $LIST: configure the build first" >&2; exit 1; }
mkdir -p "$OUT/bin" "$OUT/debs" "$OUT/lib"
rm -f "$OUT/bin/"* "$OUT/lib/"*
cp "$LIST" "$OUT/gpu-tests.txt"
exes=(flashbob capi_smoke)
while read -r _ program _; do
  [[ "$program" == bin/* ]] && exes+=("${program#bin/}")
done < "$LIST"
for exe in $(printf '%s\n' "${exes[@]}" | sort -u); do
  if [ -x "$BUILD/bin/$exe" ]; then
    strip -o "$OUT/bin/$exe" "$BUILD/bin/$exe"
  else
    echo "pack.sh: $BUILD/bin/$exe is not built" >&2
  fi
done
# Not libflashbob.so: self-contained, it is 51 MB stripped, more than the LLVM packages
# below together. The C API and Python tests run from the
# wheel instead, in a run of their own (scripts/device/wheel-tests.sh, with dist/ and
# .device/bin/capi_smoke copied along).
rm -f "$OUT/lib/libflashbob.so"
# libLLVM/libMLIR and the two libraries they need that Ubuntu's image lacks (docs/toolchain.md).
if ! ls "$OUT/debs/"libllvm22_*.deb >/dev/null 2>&1; then
  (cd "$OUT/debs" && apt-get download libllvm22 libmlir-22 libz3-4 libedit2 >/dev/null)
fi
du -sh "$OUT"

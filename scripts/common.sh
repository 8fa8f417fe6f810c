# Shared by scripts/demo.sh and scripts/test.sh: install what is missing, configure once, build.
# Sourced, not run. Idempotent: a second run only rebuilds what changed.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLASHBOB_BUILD_DIR:-$ROOT/build}"

# The Debian packages the build needs (docs/toolchain.md). Everything else (g++, cmake, the CUDA
# toolkit in /usr/local/cuda) is part of the machine image.
# clang-22 and libclang-rt-22-dev (libFuzzer, ASan; about 22 MB to download) only build the fuzz
# targets (test/fuzz/, FLASHBOB_FUZZ): without them the build is the same and the fuzz tests
# report skipped. zlib1g-dev and libzstd-dev give libz.a and libzstd.a, which libflashbob.so links
# (cmake/LlvmLibs.cmake); python3-pip, -setuptools and -wheel build and install the wheel
# (scripts/build-wheel.sh, test/packaging/); python3-torch (CPU, about 180 MB installed) runs the
# context-parallel rings over gloo processes (test/python/ring_gloo_simulation.py); python3-pytest
# runs the benchmark module's CPU tests (test/python/test_bench.py).
PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22 catch2 ninja-build
          clang-22 libclang-rt-22-dev zlib1g-dev libzstd-dev python3-pip python3-setuptools
          python3-wheel python3-torch python3-pytest)

ensure_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "flashbob: installing missing packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

configure() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
  fi
}

configure_and_build() {
  configure
  cmake --build "$BUILD" -j"$(nproc)"
}

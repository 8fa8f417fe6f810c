#!/bin/sh
# Compiler and linker launcher of the fuzz targets (test/fuzz/CMakeLists.txt). The project is
# configured with g++, and CMake has one C++ compiler per project; libFuzzer needs clang's
# SanitizerCoverage, so for these targets only this swaps the compiler CMake runs for clang and
# adds the fuzzer and AddressSanitizer flags. Every other flag (include paths, LLVM's definitions,
# -fno-rtti, -O3, lld) is the one the rest of the build uses, so the clang objects link against
# the g++-built libraries and libLLVM/libMLIR (same libstdc++ ABI).
#
# Usage: clang-launcher.sh CLANG SANITIZERS compile|link CCACHE|- <the compiler CMake chose> ARGS...
# SANITIZERS: the -fsanitize= list (FLASHBOB_FUZZ_SANITIZERS), fuzzer and address by default.
set -e
clang=$1 sanitizers=$2 mode=$3 ccache=$4
shift 5
case $mode in
  # -g and frame pointers: readable stack traces in crash reports. GCC-only warning flags in the
  # shared flags would each warn under clang: silenced. A sanitizer finding must end the run
  # (libFuzzer only sees crashes), hence no recovery.
  compile) extra="-fsanitize=$sanitizers -fno-sanitize-recover=all -g -fno-omit-frame-pointer -Wno-unknown-warning-option" ;;
  link) extra="-fsanitize=$sanitizers" ccache=- ;;
  *) echo "clang-launcher.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
if [ "$ccache" = - ]; then
  exec "$clang" $extra "$@"
fi
exec "$ccache" "$clang" $extra "$@"

#!/bin/sh
# Compiler and linker launcher of the fuzz targets (test/fuzz/CMakeLists.txt). The project is
# configured with g++, and CMake has one C++ compiler per project; libFuzzer needs clang's
# SanitizerCoverage, so for these targets only this swaps the compiler CMake runs for clang and
# adds the fuzzer and AddressSanitizer flags. Every other flag (include paths, LLVM's definitions,
# -fno-rtti, -O3, lld) is the one the rest of the build uses, so the clang objects link against
# the g++-built libraries and libLLVM/libMLIR (same libstdc++ ABI).
#
# Usage: clang-launcher.sh CLANG compile|link CCACHE|- <the compiler CMake chose> ARGS...
set -e
clang=$1 mode=$2 ccache=$3
shift 4
case $mode in
  # -g and frame pointers: readable stack traces in crash reports. GCC-only warning flags in the
  # shared flags would each warn under clang: silenced.
  compile) extra="-fsanitize=fuzzer,address -g -fno-omit-frame-pointer -Wno-unknown-warning-option" ;;
  link) extra="-fsanitize=fuzzer,address" ccache=- ;;
  *) echo "clang-launcher.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
if [ "$ccache" = - ]; then
  exec "$clang" $extra "$@"
fi
exec "$ccache" "$clang" $extra "$@"

#!/usr/bin/env bash
# libflashbob.so is self-contained (docs/toolchain.md): it exports the C API and nothing else,
# needs only the C runtime's libraries, and every symbol it imports is glibc's (or weak).
#   check-library.sh path/to/libflashbob.so
set -uo pipefail
lib=$1
status=0
fail() { echo "FAIL: $*"; status=1; }

# Defined dynamic symbols: flashbob_* only. Anything else (LLVM, MLIR type ids, libstdc++) could
# bind to another copy of itself in the same process (torch, triton).
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
[ -n "$exports" ] || fail "nm -D --defined-only lists nothing for $lib"
others=$(grep -v '^flashbob_' <<<"$exports")
[ -z "$others" ] || fail "exports other than flashbob_*: $(head -5 <<<"$others" | tr '\n' ' ')($(wc -l <<<"$others") in all)"
grep -qx flashbob_version <<<"$exports" || fail "flashbob_version is not exported"

# DT_NEEDED: the C runtime only (no libMLIR, libLLVM, libstdc++, libz, libzstd, libz3, ...).
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for n in $needed; do
  case $n in
    libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|ld-linux-x86-64.so.2) ;;
    *) fail "needs $n" ;;
  esac
done

# Undefined dynamic symbols: glibc's, versioned, or weak (resolved to null when absent).
strays=$(nm -D --undefined-only "$lib" | awk '$1 != "w" && $2 !~ /@GLIBC_/ {print $2}')
[ -z "$strays" ] || fail "imports outside glibc: $(head -5 <<<"$strays" | tr '\n' ' ')"

if ((status == 0)); then
  echo "ok: $lib exports $(wc -l <<<"$exports") flashbob_* symbols and needs only: $(echo $needed)"
fi
exit $status

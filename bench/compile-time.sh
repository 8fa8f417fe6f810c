#!/usr/bin/env bash
# Cold compile time of one kernel variant (spec -> cubin: IR build, bob passes, upstream lowering,
# LLVM O3, NVPTX, ptxas), one fresh `flashbob compile` process per variant, 3 runs each; prints
# the in-process time reported by --time and the whole process wall time (median of 3).
#   bench/compile-time.sh [build-dir]
set -euo pipefail
BUILD="${1:-$(dirname "$0")/../build}"
FLASHBOB="$BUILD/bin/flashbob"
printf "%-58s %10s %10s\n" "variant" "compile ms" "process ms"
for d in 64 128; do
  for causal in "" "--causal"; do
    for arch in sm_80 sm_90a; do
      args=(--kernel fwd --head-dim "$d" --dtype bf16 $causal --arch "$arch" --emit cubin -o /dev/null --time)
      inproc=(); wall=()
      for _ in 1 2 3; do
        start=$(date +%s%N)
        line=$("$FLASHBOB" compile "${args[@]}" 2>&1)
        end=$(date +%s%N)
        inproc+=("$(sed -E 's/.* in ([0-9.]+) ms.*/\1/' <<<"$line")")
        wall+=("$(( (end - start) / 1000000 ))")
        name=$(sed -E 's/flashbob compile: ([^ ]+) in.*/\1/' <<<"$line")
      done
      med() { printf "%s\n" "$@" | sort -n | sed -n 2p; }
      printf "%-58s %10s %10s\n" "$name" "$(med "${inproc[@]}")" "$(med "${wall[@]}")"
    done
  done
done

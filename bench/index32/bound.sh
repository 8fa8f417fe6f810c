#!/bin/bash
# Registers and spill bytes of the tile table's kernels (bf16, not causal), from ptxas, three ways:
#   base   `flashbob compile` as the JIT compiles them (index lowered at 64 bits);
#   route  the same lowered IR through flashbob-opt, mlir-translate, opt -O3, llc, ptxas with
#          index-bitwidth 64: equals base where the JIT lowers index at 64 bits (every kernel
#          before 32-bit index arithmetic; now bob_q and d = 256, narrowIndexFor), which checks
#          the route;
#   i32    the same route with index-bitwidth 32 everywhere: an upper bound of what 32-bit index
#          arithmetic can save. NOT an exact kernel: memref sizes, strides and offsets of the
#          global tensors are truncated to 32 bits and the kernel ABI is ignored (join_i64.py
#          joins the 32-bit values to convert-nvgpu-to-nvvm's 64-bit ones).
# Usage: bench/index32/bound.sh BUILD_DIR OUT_DIR  (CPU only; about 2 minutes on 2 cores).
# The tiles are kernels/TileTable.cpp's defaults when this was written (2026-12-07).
set -u
BUILD=$(realpath "$1"); OUT=$2; HERE=$(dirname "$(realpath "$0")"); mkdir -p "$OUT"; cd "$OUT"
B=/usr/lib/llvm-22/bin; PTXAS=${FLASHBOB_PTXAS:-/usr/local/cuda/bin/ptxas}
export FLASHBOB_CACHE_DIR=$PWD/cache
report() { grep -o 'Used [0-9]* registers\|[0-9]* bytes spill stores' | grep -o '^[0-9]*\|[0-9]*' | tr '\n' ' '; }
route() { # lowered.mlir index-bits arch tag
  "$BUILD/bin/flashbob-opt" "$1" --pass-pipeline="builtin.module(convert-nvgpu-to-nvvm,convert-vector-to-scf,convert-scf-to-cf,convert-nvvm-to-llvm,expand-strided-metadata,lower-affine,convert-arith-to-llvm{index-bitwidth=$2},convert-index-to-llvm{index-bitwidth=$2},canonicalize,cse,gpu.module(convert-gpu-to-nvvm{index-bitwidth=$2},bob-tensor-map-params,canonicalize,cse,reconcile-unrealized-casts))" -o $4.a.mlir 2>/dev/null
  python3 "$HERE/join_i64.py" $4.a.mlir $4.b.mlir
  "$BUILD/bin/flashbob-opt" $4.b.mlir --reconcile-unrealized-casts -o $4.c.mlir
  python3 - $4.c.mlir $4.mod.mlir <<'PY'
import re,sys  # the gpu.module as a module, without the bob attributes mlir-translate cannot parse
t=open(sys.argv[1]).read()
t=re.sub(r'bob\.tensor_maps = \[[^\]]*\],?\s*','',t)
t=re.sub(r'bob\.spec = #bob\.spec<[^>]*>,?\s*','',t); t=re.sub(r'bob\.[a-z_]+ = [^,}]+,?\s*','',t)
t=t.replace('module attributes {gpu.container_module} {','',1)
t=re.sub(r'gpu\.module @flashbob_kernels( \[[^\]]*\])? \{','module {',t,1); t=t.rstrip().rstrip('}')
open(sys.argv[2],'w').write(t)
PY
  $B/mlir-translate --mlir-to-llvmir $4.mod.mlir -o $4.ll &&
  $B/opt -O3 -mtriple=nvptx64-nvidia-cuda -mcpu=$3 -mattr=+ptx80 $4.ll -o $4.bc &&
  $B/llc -O3 -mtriple=nvptx64-nvidia-cuda -mcpu=$3 -mattr=+ptx80 $4.bc -o $4.ptx &&
  $PTXAS -arch=$3 -O3 -v $4.ptx -o /dev/null 2>&1 | report
}
printf "%-42s %-10s %-10s %-10s\n" kernel "base" "route" "i32"; echo "(each: spill-store bytes, registers)"
while read kind d hopper generic; do
  for arch in sm_90a sm_80; do
    t=$generic; [ $arch = sm_90a ] && t=$hopper
    IFS=, read bm bn w s wc p <<< "$t"
    flags="--kernel $kind --head-dim $d --arch $arch --block-m $bm --block-n $bn --warps $w --stages $s --warp-cols ${wc:-1}"
    [ "${p:-}" = P ] && flags="$flags --producer"
    tag=$kind-$d-$arch; rm -rf $tag; mkdir -p $tag
    "$BUILD/bin/flashbob" compile $flags --emit cubin -o $tag/k.cubin --dump-dir $tag >/dev/null 2>&1
    base=$(cat $tag/*.ptxas.log | report)
    "$BUILD/bin/flashbob" compile $flags --emit lowered -o $tag/lowered.mlir
    printf "%-42s %-10s %-10s %-10s\n" "$(basename $tag/*.ptxas.log .ptxas.log)" "$base" \
      "$(route $tag/lowered.mlir 64 $arch $tag/i64)" "$(route $tag/lowered.mlir 32 $arch $tag/i32)"
  done
done <<'TABLE'
fwd 64 64,128,4,2,1,P 64,64,4,2
fwd 128 128,128,8,2,1,P 64,64,4,2
fwd 256 64,32,4,2 64,32,4,2
bwd-q 64 64,128,4,2,1,P 64,64,4,2
bwd-q 128 128,128,8,2,1,P 64,64,4,2
bwd-q 256 64,32,4,2 64,32,4,2
bwd-kv 64 64,64,4,2,1,P 32,64,4,2
bwd-kv 128 64,64,4,2 64,64,4,2
bwd-kv 256 32,64,4,2 32,64,4,2
bob-q 64 64,32,4,2 64,32,4,2
bob-q 128 64,64,8,2,2 64,32,4,2
bob-q 256 64,32,4,1 64,16,4,1
bob-kv 64 64,64,4,2 32,64,4,2
bob-kv 128 64,64,8,2,2 32,64,4,2
bob-kv 256 32,64,4,1 16,64,4,1
fwd-jvp 64 64,64,4,2 64,32,4,2
fwd-jvp 128 64,64,4,2 64,32,4,2
fwd-jvp 256 64,32,4,1 64,16,4,1
TABLE

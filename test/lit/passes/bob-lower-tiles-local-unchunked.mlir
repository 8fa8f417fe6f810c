// bob-lower-tiles, local memory (LocalPatterns.cpp): a flush still due `every` N steps of its
// loop means bob-chunk-sweeps did not run; the lowering refuses it.
// RUN: not flashbob-opt %s --pass-pipeline='builtin.module(bob-lower-kernel,gpu.module(bob-lower-tiles))' --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=EVERY
// EVERY: failed to legalize operation 'bob.flush'
bob.kernel @unchunked(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = memref.dim %x, %c0 : memref<?xf32>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %last = scf.for %i = %c0 to %steps step %c1 iter_args(%a = %zero) -> (!bob.rtile<64x64xf32>) {
    %f = bob.flush %a into %r every 8 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %f : !bob.rtile<64x64xf32>
  }
  bob.return
}

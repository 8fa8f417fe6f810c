// load_tile / store_tile must reject global tensors whose element type the lowering cannot
// convert from/to f32 (it emits arith.extf / arith.truncf pairs, valid only for bf16/f16, and a
// plain load/store for f32).
//
// RUN: flashbob-opt %s -split-input-file -verify-diagnostics

bob.kernel @k(%x: memref<?x?x?x64xi32>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_tile' op}}
  %t = bob.load_tile %x[%c0, %c0, %c0] bound %c0 : memref<?x?x?x64xi32> -> !bob.rtile<64x64xf32>
  bob.return
}

// -----

bob.kernel @k(%x: memref<?x?x?x64xf64>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_tile' op}}
  %t = bob.load_tile %x[%c0, %c0, %c0] bound %c0 : memref<?x?x?x64xf64> -> !bob.rtile<64x64xf32>
  bob.return
}

// -----

bob.kernel @k(%o: memref<?x?x?x64xi8>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.store_tile' op}}
  bob.store_tile %t, %o[%c0, %c0, %c0] bound %c0 : !bob.rtile<64x64xf32>, memref<?x?x?x64xi8>
  bob.return
}

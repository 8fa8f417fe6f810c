// Every verifier error of the bob dialect, with its message: bad specs, tile types, kernels and
// each tile op (BobDialect.cpp); the score modifications' ops: score-mod-invalid.mlir.
// RUN: flashbob-opt %s -split-input-file -verify-diagnostics

// head_dim 0
// expected-error @+1 {{head_dim 0 is unsupported: it must be a multiple of 16 in [16, 256] (the tiles' width; other head dims run zero-padded to the next multiple)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 0, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// head_dim not a multiple of 16
// expected-error @+1 {{head_dim 100 is unsupported: it must be a multiple of 16 in [16, 256] (the tiles' width; other head dims run zero-padded to the next multiple)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 100, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// head_dim above 256
// expected-error @+1 {{head_dim 272 is unsupported: it must be a multiple of 16 in [16, 256] (the tiles' width; other head dims run zero-padded to the next multiple)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 272, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// head_dim negative
// expected-error @+1 {{head_dim -16 is unsupported}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = -16, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// block_m not a multiple of 16
// expected-error @+1 {{block_m 24 must be a positive multiple of 16}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 24, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// block_m 0
// expected-error @+1 {{block_m 0 must be a positive multiple of 16}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 0, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// block_n not a multiple of 16
// expected-error @+1 {{block_n 40 must be a positive multiple of 16}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 40, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// warps 3
// expected-error @+1 {{warps 3 must be 1, 2, 4, 8 or 12}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 3, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// warps 16
// expected-error @+1 {{warps 16 must be 1, 2, 4, 8 or 12}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 256, block_n = 64, warps = 16, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// query-major kinds split block_m across the warps
// expected-error @+1 {{block_m 32 must be a multiple of 16 * warps = 64 (each warp owns whole 16-row mma fragments)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 32, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// key-major kinds (bwd_kv) split block_n across the warps
// expected-error @+1 {{block_n 32 must be a multiple of 16 * warps = 64 (each warp owns whole 16-row mma fragments)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 32, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// key-major kinds (bob_kv) too
// expected-error @+1 {{block_n 64 must be a multiple of 16 * warps = 128}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_kv, head_dim = 64, block_m = 128, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// warp_cols 3
// expected-error @+1 {{warp_cols 3 must be 1, 2 or 4}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 3>} {
  bob.return
}

// -----

// warp_cols must divide the warps
// expected-error @+1 {{warp_cols 4 must divide warps 2}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 2, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 4>} {
  bob.return
}

// -----

// with column groups, the own rows split over the warps of one group
// expected-error @+1 {{block_m 32 must be a multiple of 16 * warps / warp_cols = 64 (each warp owns whole 16-row mma fragments)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 32, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  bob.return
}

// -----

// ... and the columns into whole operand fragments per group
// expected-error @+1 {{warp_cols 2 needs head_dim and block_n to be multiples of 32}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 16, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  bob.return
}

// -----

// stages 0
// expected-error @+1 {{stages 0 must be 1 (synchronous copies) or 2}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 0, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// stages 3
// expected-error @+1 {{stages 3 must be 1 (synchronous copies) or 2}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 3, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// unsupported arch: targets are an enum (compiler/dialect/Target.h)
// expected-error @+2 {{expected one of [sm_80, sm_86, sm_89, sm_90, sm_90a] for SM target, got: sm_70}}
// expected-error @+1 {{failed to parse Bob_SpecAttr parameter 'arch' which is to be a `Arch`}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_70>} {
  bob.return
}

// -----

// tensor maps are checked against TMA's limits
// expected-error @+1 {{tensor_map swizzle 48 must be 32, 64 or 128 bytes}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>, bob.tensor_maps = [#bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 64, box_cols = 24, swizzle = 48, element_bytes = 2>]} {
  bob.return
}

// -----

// expected-error @+1 {{tensor_map box_cols 32 x 2 bytes must span the swizzle of 128 bytes}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>, bob.tensor_maps = [#bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 64, box_cols = 32, swizzle = 128, element_bytes = 2>]} {
  bob.return
}

// -----

// shared tiles hold bf16/f16 (operands) or f32 (sums staged for a bulk reduction)
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{shared tiles hold bf16, f16 or f32, not 'i32'}}
  %a = bob.alloc_shared : !bob.smem<64x64xi32>
  bob.return
}

// -----

// an f32 shared tile is no product operand
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{multiplies bf16/f16 tiles, got 'f32' and 'f32'}}
  %r = bob.mma %a, %a, %acc : !bob.smem<64x64xf32>, !bob.smem<64x64xf32>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// shared tile rows must be multiples of 16
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{shared tile 24x64 must have rows and cols that are positive multiples of 16}}
  %a = bob.alloc_shared : !bob.smem<24x64xbf16>
  bob.return
}

// -----

// shared tile cols must be multiples of 16
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{shared tile 64x8 must have rows and cols that are positive multiples of 16}}
  %a = bob.alloc_shared : !bob.smem<64x8xbf16>
  bob.return
}

// -----

// a tile has two dimensions
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{a tile has two dimensions (rows x cols), got 3}}
  %a = bob.alloc_shared : !bob.smem<2x64x64xbf16>
  bob.return
}

// -----

// register tiles hold f32/bf16/f16
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{register tiles hold f32, bf16 or f16, not 'i32'}}
  %a = bob.splat 0.0 : !bob.rtile<64x64xi32>
  bob.return
}

// -----

// register tile rows must be multiples of 16
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{register tile rows 24 must be a positive multiple of 16}}
  %a = bob.splat 0.0 : !bob.rtile<24x64xf32>
  bob.return
}

// -----

// f32 register tile cols: multiples of 8 (one n fragment)
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{register tile cols 12 must be a positive multiple of 8 for 'f32'}}
  %a = bob.splat 0.0 : !bob.rtile<64x12xf32>
  bob.return
}

// -----

// bf16 register tile cols: multiples of 16 (one k slice)
bob.kernel @k(%q: memref<?x?x?x8xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{register tile cols 8 must be a positive multiple of 16 for 'bf16'}}
  %a = bob.load_tile %q[%c0, %c0, %c0] bound %c0 : memref<?x?x?x8xbf16> -> !bob.rtile<64x8xbf16>
  bob.return
}

// -----

// kernels return nothing
// expected-error @+1 {{'bob.kernel' op kernels return nothing; outputs are memref arguments}}
bob.kernel @k() -> f32 attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// kernel arguments are memrefs
// expected-error @+1 {{'bob.kernel' op argument #1 is 'index'; kernel arguments are memrefs}}
bob.kernel @k(%q: memref<?x?x?x64xbf16>, %n: index) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

// -----

// a kernel needs its spec
// expected-error @+1 {{'bob.kernel' op requires attribute 'spec'}}
bob.kernel @k() {
  bob.return
}

// -----

// bob.return only ends a kernel
func.func @f() {
  // expected-error @+1 {{'bob.return' op expects parent op 'bob.kernel'}}
  bob.return
}

// -----

// tile ops need the spec of an enclosing kernel
func.func @f() {
  // expected-error @+1 {{'bob.splat' op must be inside a bob.kernel (needs its spec)}}
  %a = bob.splat 0.0 : !bob.rtile<64x64xf32>
  return
}

// -----

// ... also vectors
func.func @f() {
  // expected-error @+1 {{'bob.splat' op must be inside a bob.kernel (needs its spec)}}
  %a = bob.splat 0.0 : !bob.rowvec<64>
  return
}

// -----

// register tile rows must split across the warps
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{'bob.splat' op register tile '!bob.rtile<32x64xf32>' cannot be split across 4 warps: rows must be a multiple of 64}}
  %a = bob.splat 0.0 : !bob.rtile<32x64xf32>
  bob.return
}

// -----

// ... with 8 warps
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{register tile '!bob.rtile<64x64xf32>' cannot be split across 8 warps: rows must be a multiple of 128}}
  %a = bob.splat 0.0 : !bob.rtile<64x64xf32>
  bob.return
}

// -----

// register tile columns must split across the column groups
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  // expected-error @+1 {{register tile '!bob.rtile<64x8xf32>' cannot be split across 2 column groups: cols must be a multiple of 16}}
  %a = bob.splat 0.0 : !bob.rtile<64x8xf32>
  bob.return
}

// -----

// row vectors split like the rows
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{'bob.splat' op row vector of 48 cannot be split across 4 warps}}
  %a = bob.splat 0.0 : !bob.rowvec<48>
  bob.return
}

// -----

// column vectors cover whole 8-column fragments
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{'bob.splat' op column vector size 12 must be a multiple of 8}}
  %a = bob.splat 0.0 : !bob.colvec<12>
  bob.return
}

// -----

// splat makes f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{'bob.splat' op splats f32 tiles only}}
  %a = bob.splat 0.0 : !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// load_shared: element types must agree
bob.kernel @k(%q: memref<?x?x?x64xf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  // expected-error @+1 {{'bob.load_shared' op source element type 'f16' differs from the shared tile's 'bf16'}}
  bob.load_shared %q[%c0, %c0, %c0] bound %c0 into %s : memref<?x?x?x64xf16>, !bob.smem<64x64xbf16>
  bob.return
}

// -----

// load_shared: the source is rank 4
bob.kernel @k(%q: memref<?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  // expected-error @+1 {{'bob.load_shared' op source must be a rank-4 memref (batch, heads, seq, head_dim), got 'memref<?x?x64xbf16>'}}
  bob.load_shared %q[%c0, %c0, %c0] bound %c0 into %s : memref<?x?x64xbf16>, !bob.smem<64x64xbf16>
  bob.return
}

// -----

// load_shared: head_dim must match the tile columns
bob.kernel @k(%q: memref<?x?x?x128xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  // expected-error @+1 {{'bob.load_shared' op source has head_dim 128 but the tile has 64 columns}}
  bob.load_shared %q[%c0, %c0, %c0] bound %c0 into %s : memref<?x?x?x128xbf16>, !bob.smem<64x64xbf16>
  bob.return
}

// -----

// load_shared: unit stride along head_dim
bob.kernel @k(%q: memref<?x?x?x64xbf16, strided<[?, ?, ?, 2]>>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  // expected-error @+1 {{'bob.load_shared' op source must have a unit stride along head_dim}}
  bob.load_shared %q[%c0, %c0, %c0] bound %c0 into %s : memref<?x?x?x64xbf16, strided<[?, ?, ?, 2]>>, !bob.smem<64x64xbf16>
  bob.return
}

// -----

// store_shared: shapes must agree
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %s = bob.alloc_shared : !bob.smem<64x32xbf16>
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.store_shared' op register tile '!bob.rtile<64x64xf32>' and shared tile '!bob.smem<64x32xbf16>' differ in shape}}
  bob.store_shared %t into %s : !bob.rtile<64x64xf32>, !bob.smem<64x32xbf16>
  bob.return
}

// -----

// store_shared: stores f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.store_shared' op stores f32 register tiles, got '!bob.rtile<64x64xbf16>'}}
  bob.store_shared %b into %s : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>
  bob.return
}

// -----

// load_tile: loads f32 tiles
bob.kernel @k(%q: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_tile' op loads into f32 register tiles, got '!bob.rtile<64x64xbf16>'}}
  %t = bob.load_tile %q[%c0, %c0, %c0] bound %c0 : memref<?x?x?x64xbf16> -> !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// load_tile: head_dim must match
bob.kernel @k(%q: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_tile' op source has head_dim 64 but the tile has 32 columns}}
  %t = bob.load_tile %q[%c0, %c0, %c0] bound %c0 : memref<?x?x?x64xbf16> -> !bob.rtile<64x32xf32>
  bob.return
}

// -----

// load_tile: rows must split across the warps
bob.kernel @k(%q: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_tile' op register tile '!bob.rtile<16x64xf32>' cannot be split across 4 warps}}
  %t = bob.load_tile %q[%c0, %c0, %c0] bound %c0 : memref<?x?x?x64xbf16> -> !bob.rtile<16x64xf32>
  bob.return
}

// -----

// store_tile: stores f32 tiles
bob.kernel @k(%o: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.store_tile' op stores f32 register tiles, got '!bob.rtile<64x64xbf16>'}}
  bob.store_tile %b, %o[%c0, %c0, %c0] bound %c0 : !bob.rtile<64x64xbf16>, memref<?x?x?x64xbf16>
  bob.return
}

// -----

// store_tile: the destination is rank 4
bob.kernel @k(%o: memref<?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.store_tile' op destination must be a rank-4 memref (batch, heads, seq, head_dim), got 'memref<?x64xbf16>'}}
  bob.store_tile %t, %o[%c0, %c0, %c0] bound %c0 : !bob.rtile<64x64xf32>, memref<?x64xbf16>
  bob.return
}

// -----

// load_vec: the source is a rank-3 f32 memref
bob.kernel @k(%l: memref<?x?x?xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_vec' op source must be a rank-3 f32 memref (batch, heads, seq), got 'memref<?x?x?xbf16>'}}
  %v = bob.load_vec %l[%c0, %c0, %c0] bound %c0 : memref<?x?x?xbf16> -> !bob.rowvec<64>
  bob.return
}

// -----

// load_vec: row vectors split across the warps
bob.kernel @k(%l: memref<?x?x?xf32>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.load_vec' op row vector of 16 cannot be split across 4 warps}}
  %v = bob.load_vec %l[%c0, %c0, %c0] bound %c0 : memref<?x?x?xf32> -> !bob.rowvec<16>
  bob.return
}

// -----

// store_vec: the destination is a rank-3 f32 memref
bob.kernel @k(%l: memref<?x?xf32>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %v = bob.splat 0.0 : !bob.rowvec<64>
  // expected-error @+1 {{'bob.store_vec' op destination must be a rank-3 f32 memref (batch, heads, seq), got 'memref<?x?xf32>'}}
  bob.store_vec %v, %l[%c0, %c0, %c0] bound %c0 : !bob.rowvec<64>, memref<?x?xf32>
  bob.return
}

// -----

// mma: shapes must compose
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xbf16>
  %b = bob.alloc_shared : !bob.smem<32x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mma' op shapes do not compose: op(a) is 64x64, op(b) is 32x64, acc is 64x64}}
  %s = bob.mma %a, %b, %z : !bob.smem<64x64xbf16>, !bob.smem<32x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: transpose_b swaps b (64x32 read as 32x64 does not fit a 64x64 result)
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xbf16>
  %b = bob.alloc_shared : !bob.smem<64x32xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mma' op shapes do not compose: op(a) is 64x64, op(b) is 32x64, acc is 64x64}}
  %s = bob.mma %a, %b, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x32xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: transpose_a swaps a
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x128xbf16>
  %b = bob.alloc_shared : !bob.smem<128x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mma' op shapes do not compose: op(a) is 128x64, op(b) is 128x64, acc is 64x64}}
  %s = bob.mma %a, %b, %z {transpose_a} : !bob.smem<64x128xbf16>, !bob.smem<128x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: accumulates in f32
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %z = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.mma' op accumulates in f32, got '!bob.rtile<64x64xbf16>'}}
  %s = bob.mma %a, %a, %z : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// mma: a register operand cannot be transposed
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %p = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.mma' op cannot transpose a register operand (store it to shared memory first)}}
  %s = bob.mma %p, %b, %t {transpose_a} : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: a register operand must be bf16/f16
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mma' op register operand a must be bf16/f16 (bob.convert it first)}}
  %s = bob.mma %t, %b, %t : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: operand element types must agree
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xf16>
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mma' op operands have different element types: 'f16' and 'bf16'}}
  %s = bob.mma %a, %b, %z : !bob.smem<64x64xf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// mma: the result rows must split across the warps (ub.poison stands for a value built elsewhere)
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<32x64xbf16>
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z = ub.poison : !bob.rtile<32x64xf32>
  // expected-error @+1 {{'bob.mma' op register tile '!bob.rtile<32x64xf32>' cannot be split across 4 warps: rows must be a multiple of 64}}
  %s = bob.mma %a, %b, %z : !bob.smem<32x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<32x64xf32>
  bob.return
}

// -----

// convert: f32 to bf16/f16 only
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.convert' op converts f32 tiles to bf16/f16, got '!bob.rtile<64x64xbf16>' -> '!bob.rtile<64x64xf32>'}}
  %f = bob.convert %b : !bob.rtile<64x64xbf16> -> !bob.rtile<64x64xf32>
  bob.return
}

// -----

// convert: f32 to f32 is not a conversion
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.convert' op converts f32 tiles to bf16/f16, got '!bob.rtile<64x64xf32>' -> '!bob.rtile<64x64xf32>'}}
  %f = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xf32>
  bob.return
}

// -----

// convert: keeps the shape
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.convert' op changes the shape: '!bob.rtile<64x64xf32>' -> '!bob.rtile<64x32xbf16>'}}
  %f = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x32xbf16>
  bob.return
}

// -----

// broadcast: a row vector must have one entry per tile row
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = bob.splat 0.0 : !bob.rowvec<128>
  // expected-error @+1 {{'bob.sub' op cannot broadcast '!bob.rowvec<128>' onto '!bob.rtile<64x64xf32>'}}
  %x = bob.sub %t, %r : !bob.rtile<64x64xf32>, !bob.rowvec<128>
  bob.return
}

// -----

// broadcast: a column vector must have one entry per tile column
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %c = bob.splat 0.0 : !bob.colvec<32>
  // expected-error @+1 {{'bob.mul' op cannot broadcast '!bob.colvec<32>' onto '!bob.rtile<64x64xf32>'}}
  %x = bob.mul %t, %c : !bob.rtile<64x64xf32>, !bob.colvec<32>
  bob.return
}

// -----

// broadcast: tiles of another shape do not broadcast
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %u = bob.splat 0.0 : !bob.rtile<64x32xf32>
  // expected-error @+1 {{'bob.add' op cannot broadcast '!bob.rtile<64x32xf32>' onto '!bob.rtile<64x64xf32>'}}
  %x = bob.add %t, %u : !bob.rtile<64x64xf32>, !bob.rtile<64x32xf32>
  bob.return
}

// -----

// broadcast: a tile does not broadcast onto a vector
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = bob.splat 0.0 : !bob.rowvec<64>
  // expected-error @+1 {{'bob.max' op cannot broadcast '!bob.rtile<64x64xf32>' onto '!bob.rowvec<64>'}}
  %x = bob.max %r, %t : !bob.rowvec<64>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// broadcast: nor a row vector onto a column vector
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %r = bob.splat 0.0 : !bob.rowvec<64>
  %c = bob.splat 0.0 : !bob.colvec<64>
  // expected-error @+1 {{'bob.div' op cannot broadcast '!bob.rowvec<64>' onto '!bob.colvec<64>'}}
  %x = bob.div %c, %r : !bob.colvec<64>, !bob.rowvec<64>
  bob.return
}

// -----

// element-wise ops work on f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.add' op works on f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %x = bob.add %b, %b : !bob.rtile<64x64xbf16>, !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// the scalar of a binary op is f32
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %h = arith.constant 1.0 : f16
  // expected-error @+1 {{'bob.mul' op operand #1 must be}}
  %x = bob.mul %t, %h : !bob.rtile<64x64xf32>, f16
  bob.return
}

// -----

// exp2 works on f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.exp2' op works on f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %x = bob.exp2 %b : !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// log2 works on f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.log2' op works on f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %x = bob.log2 %b : !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// replace works on f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.replace' op works on f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %x = bob.replace %b, 0.0 -> 1.0 : !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// multi_key_rows takes bob.mask's window rules
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = true, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.multi_key_rows' op causal already bounds the window on the right (at 0): no window_right}}
  %x = bob.multi_key_rows at %c0 within (%c0, %c0) {causal, window_right = 0} : !bob.rowvec<64>
  bob.return
}

// -----

bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.multi_key_rows' op window sizes must be >= 0 (leave a side out for no bound), got -2}}
  %x = bob.multi_key_rows at %c0 within (%c0, %c0) {window_right = -2} : !bob.rowvec<64>
  bob.return
}

// -----

// its rows split over the warps like any row vector's
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'bob.multi_key_rows' op row vector of 32 cannot be split across 4 warps}}
  %x = bob.multi_key_rows at %c0 within (%c0, %c0) : !bob.rowvec<32>
  bob.return
}

// -----

// mask works on f32 tiles
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.mask' op works on f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %x = bob.mask %b at (%c0, %c0) within (%c0, %c0) : !bob.rtile<64x64xbf16>
  bob.return
}

// -----

// a window side is -1 (unbounded) only by leaving it out
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mask' op window sizes must be >= 0 (leave a side out for no bound), got -1}}
  %x = bob.mask %t at (%c0, %c0) within (%c0, %c0) {window_left = -1} : !bob.rtile<64x64xf32>
  bob.return
}

// -----

// causal already sets the right side of the window
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.mask' op causal already bounds the window on the right (at 0): no window_right}}
  %x = bob.mask %t at (%c0, %c0) within (%c0, %c0) {causal, window_right = 4} : !bob.rtile<64x64xf32>
  bob.return
}

// -----

// exp2 on a vector that does not split across the warps
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %v = ub.poison : !bob.rowvec<32>
  // expected-error @+1 {{'bob.exp2' op row vector of 32 cannot be split across 4 warps}}
  %x = bob.exp2 %v : !bob.rowvec<32>
  bob.return
}

// -----

// reduce: one result entry per tile row
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{'bob.reduce' op result has 128 rows, the tile 64}}
  %r = bob.reduce max %t : !bob.rtile<64x64xf32> -> !bob.rowvec<128>
  bob.return
}

// -----

// reduce: f32 tiles only
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %b = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  // expected-error @+1 {{'bob.reduce' op reduces f32 tiles, got '!bob.rtile<64x64xbf16>'}}
  %r = bob.reduce sum %b : !bob.rtile<64x64xbf16> -> !bob.rowvec<64>
  bob.return
}

// -----

// reduce: only sum and max
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %t = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+2 {{custom op 'bob.reduce' expected ::flashbob::bob::ReduceKind to be one of: sum, max}}
  // expected-error @+1 {{failed to parse Bob_ReduceKindAttr parameter}}
  %r = bob.reduce min %t : !bob.rtile<64x64xf32> -> !bob.rowvec<64>
  bob.return
}

// -----

// a producer warpgroup issues TMA loads into the second stage's buffers: sm_90a, two stages
// expected-error @+1 {{producer needs arch sm_90a and stages 2 (it issues the TMA loads of the next block while the consumers compute), not sm_80 with stages 2}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_80, producer = true>} {
  bob.return
}

// -----

// expected-error @+1 {{not sm_90a with stages 1}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a, producer = true>} {
  bob.return
}

// -----

// expected-error @+1 {{producer with warp_cols 2 is unsupported (only warp_cols 1)}}
bob.kernel @k() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 2, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2, producer = true>} {
  bob.return
}

// -----

// register-A products are wgmma's: sm_90a only
// expected-error @+1 {{register_a needs arch sm_90a (wgmma), not sm_80}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_80, register_a = true>} {
  bob.return
}

// -----

// expected-error @+1 {{register_a must be true or false}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, register_a = yes>} {
  bob.return
}

// -----

// a product wait passes each tile through as it is
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %s = bob.splat 1.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{results must be its operands' types, in order}}
  %w = bob.product_wait 0 (%s) : (!bob.rtile<64x64xf32>) -> !bob.rtile<64x32xf32>
  bob.return
}

// -----

// a wait that passes nothing through is the plain nvvm one
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{passes no tiles through (an untied wait is nvvm.wgmma.wait.group.sync.aligned)}}
  bob.product_wait 0 () : () -> ()
  bob.return
}

// -----

// the spec's optional fields are named
// expected-error @+1 {{unknown spec field 'producers'}}
bob.kernel @k() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, producers = true>} {
  bob.return
}

// -----

// a reserve holds f32
bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  // expected-error @+1 {{local tiles hold f32 (reserves of accumulators), not 'bf16'}}
  %r = bob.alloc_local : !bob.ltile<64x64xbf16>
  bob.return
}

// -----

// an accumulator flushes into a reserve of its own shape
bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %r = bob.alloc_local : !bob.ltile<64x128xf32>
  %acc = bob.splat 1.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{register tile '!bob.rtile<64x64xf32>' must be f32 and of the reserve '!bob.ltile<64x128xf32>''s shape}}
  %f = bob.flush %acc into %r : !bob.rtile<64x64xf32>, !bob.ltile<64x128xf32>
  bob.return
}

// -----

// a flush due every N steps belongs to a loop's body
bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %acc = bob.splat 1.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{with `every`: must be in an scf.for body, yielded by it and used by nothing else}}
  %f = bob.flush %acc into %r every 8 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
  bob.return
}

// -----

// ... and is what the body yields, nothing else's operand
bob.kernel @k(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %c1 = arith.constant 1 : index
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    // expected-error @+1 {{with `every`: must be in an scf.for body}}
    %f = bob.flush %acc into %r every 8 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    %g = bob.add %f, %acc : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
    scf.yield %g : !bob.rtile<64x64xf32>
  }
  bob.return
}

// -----

// a flush due every 0 steps
bob.kernel @k(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %c1 = arith.constant 1 : index
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    // expected-error @+1 {{flushes every 0 steps: must be at least 1}}
    %f = bob.flush %acc into %r every 0 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %f : !bob.rtile<64x64xf32>
  }
  bob.return
}

// -----

// a reserve is read back into a tile of its shape
bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  // expected-error @+1 {{must be f32 and of the reserve}}
  %t = bob.load_local %r : !bob.ltile<64x64xf32> -> !bob.rtile<32x64xf32>
  bob.return
}

// -----

// a staging tile of another shape than the stored tile
bob.kernel @k(%o: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<32x64xbf16>
  %v = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{staging tile '!bob.smem<32x64xbf16>' and register tile '!bob.rtile<64x64xf32>' differ in shape}}
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %c0 through %s : !bob.rtile<64x64xf32>, memref<?x?x?x64xbf16>, !bob.smem<32x64xbf16>
  bob.return
}

// -----

// a staging tile of another element type than the destination
bob.kernel @k(%o: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<64x64xf16>
  %v = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{staging tile element type 'f16' differs from the destination's 'bf16'}}
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %c0 through %s : !bob.rtile<64x64xf32>, memref<?x?x?x64xbf16>, !bob.smem<64x64xf16>
  bob.return
}

// -----

// a TMA store without a staging tile
bob.kernel @k(%o: memref<?x?x?x64xbf16>, %m: !llvm.ptr) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %v = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // expected-error @+1 {{a TMA store needs a staging tile}}
  "bob.store_tile"(%v, %o, %c0, %c0, %c0, %c0, %m) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1>}> : (!bob.rtile<64x64xf32>, memref<?x?x?x64xbf16>, index, index, index, index, !llvm.ptr) -> ()
  bob.return
}

// -----

// a bulk reduction adds f32 tiles
bob.kernel @k(%dq: memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.alloc_shared : !bob.smem<64x64xbf16>
  // expected-error @+1 {{adds f32 tiles, got '!bob.smem<64x64xbf16>'}}
  bob.bulk_reduce_add %t into %dq[%c0, %c0, %c0] bound %c0 : !bob.smem<64x64xbf16>, memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>
  bob.return
}

// -----

// into an f32 tensor
bob.kernel @k(%dq: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.alloc_shared : !bob.smem<64x64xf32>
  // expected-error @+1 {{adds into an f32 tensor}}
  bob.bulk_reduce_add %t into %dq[%c0, %c0, %c0] bound %c0 : !bob.smem<64x64xf32>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
  bob.return
}

// -----

// whose rows are the tile's
bob.kernel @k(%dq: memref<?x?x?x128xf32, strided<[?, ?, ?, 1]>>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.alloc_shared : !bob.smem<64x64xf32>
  // expected-error @+1 {{destination has head_dim 128 but the tile has 64 columns}}
  bob.bulk_reduce_add %t into %dq[%c0, %c0, %c0] bound %c0 : !bob.smem<64x64xf32>, memref<?x?x?x128xf32, strided<[?, ?, ?, 1]>>
  bob.return
}

// -----

// bulk reductions are sm_90a's
bob.kernel @k(%dq: memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %t = bob.alloc_shared : !bob.smem<64x64xf32>
  // expected-error @+1 {{needs arch sm_90a (bulk reductions, the async proxy), not sm_80}}
  bob.bulk_reduce_add %t into %dq[%c0, %c0, %c0] bound %c0 : !bob.smem<64x64xf32>, memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>
  bob.return
}

// -----

bob.kernel @k() attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90>} {
  // expected-error @+1 {{'bob.bulk_wait' op needs arch sm_90a}}
  bob.bulk_wait
  bob.return
}

// -----

// semaphores are (batch, heads, index) i32
bob.kernel @k(%sem: memref<?x?xi32>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{semaphores must be a rank-3 i32 memref (batch, heads, index), got 'memref<?x?xi32>'}}
  bob.semaphore_wait %sem[%c0, %c0, %c0] equals %c0 : memref<?x?xi32>
  bob.return
}

// -----

bob.kernel @k(%sem: memref<?x?x?xf32>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{semaphores must be a rank-3 i32 memref}}
  bob.semaphore_signal %sem[%c0, %c0, %c0] : memref<?x?x?xf32>
  bob.return
}

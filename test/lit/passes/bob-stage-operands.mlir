// bob-stage-operands: on sm_90a a product whose A operand is a converted register tile reads it
// from a scratch shared tile instead (wgmma takes both operands from shared memory). The f32
// tile is stored (bob.store_shared rounds it exactly as bob.convert did) into a tile of its
// own, once however many products read it, just before the block's first staged product after
// the value's definition: values computed between two products form one run of stores (one
// barrier pair in bob-lower-tiles). The convert disappears when nothing else uses it.
// RUN: flashbob-opt %s -split-input-file --bob-stage-operands | FileCheck %s

// CHECK-LABEL: bob.kernel @staged
// CHECK:      %[[SO:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[SP:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[VS:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK:      %[[P:.+]] = bob.splat 1.000000e+00
// CHECK:      bob.store_shared %[[P]] into %[[SP]] : <64x64xf32>, <64x64xbf16>
// CHECK-NEXT: %[[O:.+]] = bob.mma %[[SP]], %[[VS]], %{{.+}} : !bob.smem<64x64xbf16>, <64x64xbf16>, <64x64xf32>
// CHECK-NEXT: bob.store_shared %[[O]] into %[[SO]]
// CHECK-NEXT: bob.mma %[[SO]], %[[VS]], %[[O]] : !bob.smem<64x64xbf16>
// CHECK-NOT:  bob.convert
// CHECK-NOT:  bob.alloc_shared
bob.kernel @staged() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %ob = bob.convert %o : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o2 = bob.mma %ob, %vs, %o : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// Two values computed before the first product: their stores form one run ahead of it, each
// product reads its own tile.
// CHECK-LABEL: bob.kernel @run
// CHECK:      %[[SB:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[SA:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK:      %[[A:.+]] = bob.splat 1.000000e+00
// CHECK-NEXT: %[[B:.+]] = bob.splat 2.000000e+00
// CHECK:      bob.store_shared %[[A]] into %[[SA]]
// CHECK-NEXT: bob.store_shared %[[B]] into %[[SB]]
// CHECK-NEXT: %[[X:.+]] = bob.mma %[[SA]]
// CHECK-NEXT: bob.mma %[[SB]], %{{.+}}, %[[X]]
bob.kernel @run() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %a = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %b = bob.splat 2.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %ab = bob.convert %a : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %bb = bob.convert %b : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %x = bob.mma %ab, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %y = bob.mma %bb, %vs, %x : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// Two rounds: B and C are computed after the first product, so they are stored together
// (one run) before the first product that follows them.
// CHECK-LABEL: bob.kernel @rounds
// CHECK:      bob.store_shared %[[A:.+]] into
// CHECK-NEXT: %[[X:.+]] = bob.mma
// CHECK-NEXT: %[[B:.+]] = bob.splat 2.000000e+00
// CHECK-NEXT: %[[C:.+]] = bob.splat 3.000000e+00
// CHECK-NEXT: bob.store_shared %[[B]] into
// CHECK-NEXT: bob.store_shared %[[C]] into
// CHECK-NEXT: %[[Y:.+]] = bob.mma %{{.+}}, %{{.+}}, %[[X]]
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %[[Y]]
bob.kernel @rounds() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %a = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %ab = bob.convert %a : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %x = bob.mma %ab, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %b = bob.splat 2.0 : !bob.rtile<64x64xf32>
  %c = bob.splat 3.0 : !bob.rtile<64x64xf32>
  %bb = bob.convert %b : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %cb = bob.convert %c : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %y = bob.mma %bb, %vs, %x : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %z = bob.mma %cb, %vs, %y : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// A converted tile used by two products is stored once; an accumulator of two fragments per
// warp (128 rows, 4 warps) is not wgmma-shaped and keeps its register A.
// CHECK-LABEL: bob.kernel @kept
// CHECK:      %[[P:.+]] = bob.splat 1.000000e+00 : !bob.rtile<64x64xf32>
// CHECK-NOT:  bob.convert
// CHECK:      bob.store_shared %[[P]]
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %{{.+}} : !bob.smem<64x64xbf16>
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %{{.+}} : !bob.smem<64x64xbf16>
// CHECK-NOT:  bob.store_shared
// CHECK:      bob.convert
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %{{.+}} : !bob.rtile<128x64xbf16>
bob.kernel @kept() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %o1 = bob.mma %pb, %vs, %o : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %p2 = bob.splat 1.0 : !bob.rtile<128x64xf32>
  %acc2 = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %p2b = bob.convert %p2 : !bob.rtile<128x64xf32> -> !bob.rtile<128x64xbf16>
  %o2 = bob.mma %p2b, %vs, %acc2 : !bob.rtile<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
  bob.return
}

// -----

// Other targets: unchanged.
// CHECK-LABEL: bob.kernel @sm80
// CHECK-NOT:  bob.store_shared
// CHECK:      bob.convert
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %{{.+}} : !bob.rtile<64x64xbf16>
bob.kernel @sm80() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// With column groups (warp_cols = 2) a register tile is split by columns, so no warp holds a
// whole A operand: the product reads A from shared memory on every target, sm_80 included.
// CHECK-LABEL: bob.kernel @column_groups_sm80
// CHECK:      %[[SCRATCH:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK:      bob.store_shared %{{.+}} into %[[SCRATCH]] : <64x64xf32>, <64x64xbf16>
// CHECK-NEXT: bob.mma %[[SCRATCH]], %{{.+}}, %{{.+}} : !bob.smem<64x64xbf16>
// CHECK-NOT:  bob.convert
bob.kernel @column_groups_sm80() attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_80, warp_cols = 2>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// register_a: a product whose register A operand is in the layout wgmma reads from registers
// (one 16-row fragment per warp over whole warpgroups, WgmmaRules.h) keeps its convert and
// its operand, so nothing is stored; a tile of two fragments per warp (128 rows, 4 warps) is
// not wgmma-shaped and keeps its register A as without register_a (mma.sync).
// CHECK-LABEL: bob.kernel @register_a
// CHECK:      bob.alloc_shared : <64x64xbf16>
// CHECK-NOT:  bob.alloc_shared
// CHECK-NOT:  bob.store_shared
// CHECK:      %[[PB:.+]] = bob.convert %{{.+}} : <64x64xf32> -> <64x64xbf16>
// CHECK-NEXT: %[[O:.+]] = bob.mma %[[PB]], %{{.+}}, %{{.+}} : !bob.rtile<64x64xbf16>
// CHECK-NEXT: bob.mma %[[PB]], %{{.+}}, %[[O]] : !bob.rtile<64x64xbf16>
// CHECK:      bob.convert
// CHECK-NEXT: bob.mma %{{.+}}, %{{.+}}, %{{.+}} : !bob.rtile<128x64xbf16>
// CHECK-NOT:  bob.store_shared
bob.kernel @register_a() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a, register_a = true>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %o1 = bob.mma %pb, %vs, %o : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %p2 = bob.splat 1.0 : !bob.rtile<128x64xf32>
  %acc2 = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %p2b = bob.convert %p2 : !bob.rtile<128x64xf32> -> !bob.rtile<128x64xbf16>
  %o2 = bob.mma %p2b, %vs, %acc2 : !bob.rtile<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
  bob.return
}

// -----

// register_a with column groups (warp_cols = 2): each warp holds half of A's columns, i.e.
// half of the inner dimension, which wgmma cannot take from registers: still staged.
// CHECK-LABEL: bob.kernel @register_a_column_groups
// CHECK:      %[[SCRATCH:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK:      bob.store_shared %{{.+}} into %[[SCRATCH]] : <64x64xf32>, <64x64xbf16>
// CHECK-NEXT: bob.mma %[[SCRATCH]], %{{.+}}, %{{.+}} : !bob.smem<64x64xbf16>
// CHECK-NOT:  bob.convert
bob.kernel @register_a_column_groups() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2, register_a = true>} {
  %vs = bob.alloc_shared : !bob.smem<64x128xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %acc = bob.splat 0.0 : !bob.rtile<64x128xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %pb, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x128xbf16>, !bob.rtile<64x128xf32>
  bob.return
}

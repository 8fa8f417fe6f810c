// bob-use-tma: on sm_90a, loads from kernel arguments bounded by a tensor's sequence length
// become TMA loads; each distinct (tensor, bound, box) gets one tensor-map argument appended to
// the kernel and described in bob.tensor_maps for the launcher.
// RUN: flashbob-opt %s -split-input-file --bob-use-tma | FileCheck %s

!T = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>

// Q's tile (64 rows) and K's tiles (32 rows, loaded twice: both loads share K's map) need
// three maps; d = 128 bf16 rows are 256 bytes: boxes of 64 columns (one 128-byte block).
// The bound of K's loads is Q's length: rows_of names the argument it comes from.
// CHECK-LABEL: bob.kernel @maps
// CHECK-SAME: (%[[Q:.+]]: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>, %[[K:.+]]: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>, %[[MQ:.+]]: !llvm.ptr, %[[MK:.+]]: !llvm.ptr, %[[MK2:.+]]: !llvm.ptr)
// CHECK-SAME: bob.tensor_maps = [
// CHECK-SAME: #bob.tensor_map<map = 2, tensor = 0, rows_of = 0, box_rows = 64, box_cols = 64, swizzle = 128, element_bytes = 2>,
// CHECK-SAME: #bob.tensor_map<map = 3, tensor = 1, rows_of = 1, box_rows = 32, box_cols = 64, swizzle = 128, element_bytes = 2>,
// CHECK-SAME: #bob.tensor_map<map = 4, tensor = 1, rows_of = 0, box_rows = 32, box_cols = 64, swizzle = 128, element_bytes = 2>]
// CHECK: bob.load_shared %[[Q]]{{.*}} tma %[[MQ]] :
// CHECK: bob.load_shared %[[K]]{{.*}} tma %[[MK]] {async} :
// CHECK: bob.load_shared %[[K]]{{.*}} tma %[[MK]] :
// CHECK: bob.load_shared %[[K]]{{.*}} tma %[[MK2]] :
bob.kernel @maps(%q: !T, %k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 128, block_m = 64, block_n = 32, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %m = memref.dim %k, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x128xbf16>
  %ks = bob.alloc_shared : !bob.smem<32x128xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x128xbf16>
  bob.load_shared %k[%c0, %c0, %c0] bound %m into %ks {async} : !T, !bob.smem<32x128xbf16>
  bob.load_shared %k[%c0, %c0, %c0] bound %m into %ks : !T, !bob.smem<32x128xbf16>
  bob.load_shared %k[%c0, %c0, %c0] bound %n into %ks : !T, !bob.smem<32x128xbf16>
  bob.return
}

// -----

!S = memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>

// A bound that is not a tensor's sequence length cannot become TMA's zero fill: that load keeps
// cp.async. A 64-column f16 tile takes a 128-byte box of 64 columns.
// CHECK-LABEL: bob.kernel @kept
// CHECK-SAME: (%[[A:.+]]: memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>, %{{.+}}: !llvm.ptr)
// CHECK-SAME: bob.tensor_maps = [#bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 16, box_cols = 64, swizzle = 128, element_bytes = 2>]
// CHECK: bob.load_shared %[[A]]{{.*}} bound %c100 into %{{[0-9]+}} :
// CHECK: bob.load_shared %[[A]]{{.*}} tma
bob.kernel @kept(%a: !S) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = f16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c100 = arith.constant 100 : index
  %n = memref.dim %a, %c2 : !S
  %t16 = bob.alloc_shared : !bob.smem<16x64xf16>
  bob.load_shared %a[%c0, %c0, %c0] bound %c100 into %t16 : !S, !bob.smem<16x64xf16>
  bob.load_shared %a[%c0, %c0, %c0] bound %n into %t16 : !S, !bob.smem<16x64xf16>
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// sm_80 has no TMA: nothing changes.
// CHECK-LABEL: bob.kernel @ampere
// CHECK-SAME: (%{{[^:]+}}: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>) attributes {spec
// CHECK-NOT: tma
// CHECK: bob.return
bob.kernel @ampere(%a: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %a, %c2 : !T
  %t = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %a[%c0, %c0, %c0] bound %n into %t : !T, !bob.smem<64x64xbf16>
  bob.return
}

// -----

!T = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>

// A store staged through a shared tile becomes a TMA store whose box is one warp's band: 8 warps
// over 128 rows give bands of 16 rows by one 64-column block. A store without a staging tile
// keeps the direct stores, and so does one whose bound is not a sequence length.
// CHECK-LABEL: bob.kernel @staged
// CHECK-SAME: (%[[Q:[^:]+]]: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>, %[[O:[^:]+]]: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>, %{{[^:]+}}: !llvm.ptr, %[[MO:[^:]+]]: !llvm.ptr)
// CHECK-SAME: #bob.tensor_map<map = 3, tensor = 1, rows_of = 0, box_rows = 16, box_cols = 64, swizzle = 128, element_bytes = 2>]
// CHECK: bob.store_tile %{{.+}}, %[[O]][{{.+}}] bound %{{.+}} through %{{.+}} tma %[[MO]] :
// CHECK: bob.store_tile %{{.+}}, %[[O]][{{.+}}] bound %{{[^ ]+}} :
// CHECK: bob.store_tile %{{.+}}, %[[O]][{{.+}}] bound %c100 through %{{[^ ]+}} :
bob.kernel @staged(%q: !T, %o: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 128, block_m = 128, block_n = 128, warps = 8, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c100 = arith.constant 100 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<128x128xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<128x128xbf16>
  %v = bob.splat 1.0 : !bob.rtile<128x128xf32>
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %n through %qs : !bob.rtile<128x128xf32>, !T, !bob.smem<128x128xbf16>
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %n : !bob.rtile<128x128xf32>, !T
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %c100 through %qs : !bob.rtile<128x128xf32>, !T, !bob.smem<128x128xbf16>
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
!W = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>

// Column groups: each warp stores its own columns, which must be whole column blocks. At d = 64
// two groups own 32 columns each, half a 64-column block: direct stores. At d = 128 each owns
// one block: a TMA store of 4 row warps' bands (16 rows of 64).
// CHECK-LABEL: bob.kernel @narrow_groups
// CHECK-NOT: tma
// CHECK: bob.return
bob.kernel @narrow_groups(%q: !T) attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %v = bob.splat 1.0 : !bob.rtile<64x64xf32>
  bob.store_tile %v, %q[%c0, %c0, %c0] bound %n through %qs : !bob.rtile<64x64xf32>, !T, !bob.smem<64x64xbf16>
  bob.return
}
// CHECK-LABEL: bob.kernel @wide_groups
// CHECK-SAME: #bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 16, box_cols = 64, swizzle = 128, element_bytes = 2>]
// CHECK: bob.store_tile {{.+}} through %{{.+}} tma
bob.kernel @wide_groups(%q: !W) attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !W
  %qs = bob.alloc_shared : !bob.smem<64x128xbf16>
  %v = bob.splat 1.0 : !bob.rtile<64x128xf32>
  bob.store_tile %v, %q[%c0, %c0, %c0] bound %n through %qs : !bob.rtile<64x128xf32>, !W, !bob.smem<64x128xbf16>
  bob.return
}

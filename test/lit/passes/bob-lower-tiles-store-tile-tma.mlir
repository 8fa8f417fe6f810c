// bob-lower-tiles on sm_90a: a store staged through a shared tile with a tensor map (bob-use-tma)
// waits until nobody reads the tile (a block barrier; row warpgroups wait for their own
// warpgroup only), writes each thread's pairs into the swizzled tile, fences them for the async
// proxy and meets its warp only; then each warp's lane 0 stores the warp's band (16 rows) one
// 64-column block at a time with TMA at (column, first row + band row, head, batch), commits
// and waits until the band was read. No direct global store is left.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared,bob-use-tma),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

// CHECK-LABEL: gpu.func @staged(
// CHECK-SAME: %[[MO:[^:]+]]: !llvm.ptr)
// CHECK-SAME: #bob.tensor_map<map = 3, tensor = 1, rows_of = 0, box_rows = 16, box_cols = 64
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: %[[WARP:.+]] = arith.divui %[[TID]], %c32
// CHECK: %[[LANE:.+]] = arith.remui %[[TID]], %c32
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-32: vector.store %{{.+}}, %{{.+}} {alignment = 4 : i64} : memref<2x64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.bar.warp.sync %c-1_i32
// CHECK: %[[BAND:.+]] = arith.muli %[[WARP]], %c16
// CHECK: %[[ROW:.+]] = arith.addi %{{.+}}, %[[BAND]] : index
// CHECK: %[[DESC:.+]] = builtin.unrealized_conversion_cast %[[MO]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x1x16x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: memref.subview %{{.+}}[%{{.+}}, %[[BAND]], 0] [1, 16, 64] [1, 1, 1]
// CHECK: nvgpu.tma.async.store %{{.+}} to %[[DESC]][%{{.+}}, %[[ROW]], %{{.+}}, %{{.+}}] : memref<1x1x16x64xbf16, strided<[4096, 4096, 64, 1], offset: ?>
// CHECK: nvgpu.tma.async.store %{{.+}} to %[[DESC]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NOT: vector.store
// CHECK: gpu.return
!T = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>
bob.kernel @staged(%q: !T, %o: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 128, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x128xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x128xbf16>
  %v = bob.splat 1.0 : !bob.rtile<64x128xf32>
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %n through %qs : !bob.rtile<64x128xf32>, !T, !bob.smem<64x128xbf16>
  bob.return
}

// -----

// Without a tensor map (a bound that is not a sequence length) the staging tile is untouched:
// every thread stores its pairs to global memory, rows past the bound skipped.
// CHECK-LABEL: gpu.func @direct(
// CHECK-NOT: nvgpu.tma.async.store
// CHECK: scf.if
// CHECK: vector.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] {alignment = 4 : i64} : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>, vector<2xbf16>
// CHECK-NOT: nvgpu.tma.async.store
// CHECK: gpu.return
!T = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>
bob.kernel @direct(%q: !T, %o: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 128, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c100 = arith.constant 100 : index
  %qs = bob.alloc_shared : !bob.smem<64x128xbf16>
  %v = bob.splat 1.0 : !bob.rtile<64x128xf32>
  bob.store_tile %v, %o[%c0, %c0, %c0] bound %c100 through %qs : !bob.rtile<64x128xf32>, !T, !bob.smem<64x128xbf16>
  bob.return
}

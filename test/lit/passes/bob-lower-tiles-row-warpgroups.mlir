// bob-lower-tiles with row warpgroups (sm_90a, 8 or 12 warps, no column groups; WarpRoles.h): each
// warpgroup stages its own rows of P behind its own barrier (id 2 + warpgroup, 128 threads)
// instead of the block's, so the two warpgroups meet only at the loads. One warpgroup (4 warps)
// keeps the block's barriers.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-stage-operands,bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// CHECK-LABEL: gpu.func @two_warpgroups(
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// P staged behind the warpgroup's own barrier (2 + thread / 32 / 4, 128 threads), before and
// after the stores; in the loop the thread index passes keepHere (an empty asm statement).
// CHECK: %[[TID0:.+]] = gpu.thread_id x
// CHECK-NEXT: %[[TID64:.+]] = arith.index_castui %[[TID0]] : index to i64
// CHECK-NEXT: %[[KEPT:.+]] = llvm.inline_asm has_side_effects "", "=l,0" %[[TID64]] : (i64) -> i64
// CHECK-NEXT: %[[TID:.+]] = arith.index_castui %[[KEPT]] : i64 to index
// CHECK-NEXT: %[[C32:.+]] = arith.constant 32 : index
// CHECK-NEXT: %[[WARP:.+]] = arith.divui %[[TID]], %[[C32]] : index
// CHECK: %[[WG:.+]] = arith.divui %[[WARP]], %{{.+}} : index
// CHECK-NEXT: %[[WGI:.+]] = arith.index_cast %[[WG]] : index to i32
// CHECK-NEXT: %[[C2:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[OWN:.+]] = arith.addi %[[C2]], %[[WGI]] : i32
// CHECK-NEXT: %[[N128:.+]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWN]] number_of_threads = %[[N128]]
// CHECK-COUNT-16: vector.store
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: %[[C4B:.+]] = arith.constant 4 : index
// CHECK-NEXT: %[[WG2:.+]] = arith.divui %[[WARP]], %[[C4B]] : index
// CHECK-NEXT: %[[WGI2:.+]] = arith.index_cast %[[WG2]] : index to i32
// CHECK-NEXT: %[[C2B:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[OWN2:.+]] = arith.addi %[[C2B]], %[[WGI2]] : i32
// CHECK-NEXT: %[[N128B:.+]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWN2]] number_of_threads = %[[N128B]]
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NOT: gpu.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: gpu.return
bob.kernel @two_warpgroups(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<128x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %o = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!bob.rtile<128x64xf32>) {
    %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
    %p = bob.convert %s : !bob.rtile<128x64xf32> -> !bob.rtile<128x64xbf16>
    %next = bob.mma %p, %ks, %acc : !bob.rtile<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
    scf.yield %next : !bob.rtile<128x64xf32>
  }
  bob.store_tile %o, %q[%c0, %c0, %c0] bound %n : !bob.rtile<128x64xf32>, !T
  bob.return
}

// CHECK-LABEL: gpu.func @one_warpgroup(
// CHECK-NOT: nvvm.barrier
// CHECK: scf.for
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: gpu.barrier
// CHECK: vector.store
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: gpu.return
bob.kernel @one_warpgroup(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %o = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    %p = bob.convert %s : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
    %next = bob.mma %p, %ks, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    scf.yield %next : !bob.rtile<64x64xf32>
  }
  bob.store_tile %o, %q[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  bob.return
}

// Three warpgroups (12 warps, 192 rows) stage behind their own barriers too: one wgmma row of
// 64 per warpgroup, ids 2 + 0..2.
// CHECK-LABEL: gpu.func @three_warpgroups(
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: %[[TID0:.+]] = gpu.thread_id x
// CHECK-NEXT: %[[TID64:.+]] = arith.index_castui %[[TID0]] : index to i64
// CHECK-NEXT: %[[KEPT:.+]] = llvm.inline_asm has_side_effects "", "=l,0" %[[TID64]] : (i64) -> i64
// CHECK-NEXT: %[[TID:.+]] = arith.index_castui %[[KEPT]] : i64 to index
// CHECK-NEXT: %[[C32:.+]] = arith.constant 32 : index
// CHECK-NEXT: %[[WARP:.+]] = arith.divui %[[TID]], %[[C32]] : index
// CHECK: %[[WG:.+]] = arith.divui %[[WARP]], %{{.+}} : index
// CHECK-NEXT: %[[WGI:.+]] = arith.index_cast %[[WG]] : index to i32
// CHECK-NEXT: %[[C2:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[OWN:.+]] = arith.addi %[[C2]], %[[WGI]] : i32
// CHECK-NEXT: %[[N128:.+]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWN]] number_of_threads = %[[N128]]
// CHECK-COUNT-16: vector.store
// CHECK: nvvm.barrier id = %{{.+}} number_of_threads = %{{.+}}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NOT: gpu.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: gpu.return
bob.kernel @three_warpgroups(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 192, block_n = 64, warps = 12, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<192x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<192x64xf32>
  %o = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (!bob.rtile<192x64xf32>) {
    %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<192x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<192x64xf32>
    %p = bob.convert %s : !bob.rtile<192x64xf32> -> !bob.rtile<192x64xbf16>
    %next = bob.mma %p, %ks, %acc : !bob.rtile<192x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<192x64xf32>
    scf.yield %next : !bob.rtile<192x64xf32>
  }
  bob.store_tile %o, %q[%c0, %c0, %c0] bound %n : !bob.rtile<192x64xf32>, !T
  bob.return
}

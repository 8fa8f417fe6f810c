// bob-lower-tiles with row warpgroups (sm_90a, 8 warps, no column groups; WarpRoles.h): each
// warpgroup stages its own rows of P behind its own barrier (id 2 + w, 128 threads) instead of
// the block's, and the two take turns issuing each sweep step's first products (ping-pong,
// PingPong.cpp): warpgroup w waits on barrier 4 + w (256 threads) before the step's score
// product and arrives on the other's (5 - w) once it is issued, before waiting for it. Before
// the loop warpgroup 1 arrives on barrier 4 (warpgroup 0 goes first); after it warpgroup 0
// takes the turn warpgroup 1 passed last. One warpgroup (4 warps) keeps block barriers and
// takes no turns.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-stage-operands,bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// CHECK-LABEL: gpu.func @two_warpgroups(
// The opening: warpgroup (thread / 32 / 4) 1 lets warpgroup 0 go first.
// CHECK: %[[FOUR:.+]] = arith.constant 4 : i32
// CHECK: %[[ONE:.+]] = arith.constant 1 : i32
// CHECK: %[[TID0:.+]] = gpu.thread_id x
// CHECK: %[[WARP0:.+]] = arith.divui %[[TID0]], %{{.+}} : index
// CHECK: %[[WG0:.+]] = arith.divui %[[WARP0]], %{{.+}} : index
// CHECK: %[[WG0I:.+]] = arith.index_cast %[[WG0]] : index to i32
// CHECK: %[[IS1:.+]] = arith.cmpi eq, %[[WG0I]], %[[ONE]] : i32
// CHECK-NEXT: scf.if %[[IS1]] {
// CHECK-NEXT: %[[N256:.+]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier.arrive id = %[[FOUR]] number_of_threads = %[[N256]]
// CHECK: scf.for
// Its turn (4 + w), then the score product, then the turn passed (5 - w) before the wait.
// CHECK: %[[WG:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK-NEXT: %[[C4:.+]] = arith.constant 4 : i32
// CHECK-NEXT: %[[TURN:.+]] = arith.addi %[[C4]], %[[WG]] : i32
// CHECK-NEXT: %[[T256:.+]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier id = %[[TURN]] number_of_threads = %[[T256]]
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: %[[C5:.+]] = arith.constant 5 : i32
// CHECK-NEXT: %[[OTHER:.+]] = arith.subi %[[C5]], %{{.+}} : i32
// CHECK-NEXT: %[[A256:.+]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier.arrive id = %[[OTHER]] number_of_threads = %[[A256]]
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// P staged behind the warpgroup's own barrier (2 + w, 128 threads), before and after.
// CHECK: %[[C2:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[OWN:.+]] = arith.addi %[[C2]], %{{.+}} : i32
// CHECK-NEXT: %[[N128:.+]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWN]] number_of_threads = %[[N128]]
// CHECK-COUNT-16: vector.store
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: %[[C2B:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[OWNB:.+]] = arith.addi %[[C2B]], %{{.+}} : i32
// CHECK-NEXT: %[[N128B:.+]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWNB]] number_of_threads = %[[N128B]]
// The second product takes no turn.
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.barrier
// CHECK: scf.yield
// The closing: warpgroup 0 takes the last turn.
// CHECK: %[[ZERO:.+]] = arith.constant 0 : i32
// CHECK: %[[IS0:.+]] = arith.cmpi eq, %{{.+}}, %[[ZERO]] : i32
// CHECK-NEXT: scf.if %[[IS0]] {
// CHECK-NEXT: %[[E256:.+]] = arith.constant 256 : i32
// CHECK-NEXT: nvvm.barrier id = %[[FOUR]] number_of_threads = %[[E256]]
// CHECK-NOT: gpu.barrier
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

// bob-lower-tiles on sm_90a with TMA loads (bob-use-tma): every TMA destination tile gets an
// mbarrier, initialised once by thread 0 with one arrival; a load is thread 0 arming the tile's
// barrier with the tile's bytes and issuing one TMA box per 128-byte column block, then every
// thread waiting on the barrier with the parity it tracks. Async loads (bob-pipeline-loads)
// are waited for at bob.wait_shared, only where one is in flight. No cp.async is left.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-pipeline-loads,bob-allocate-shared,bob-use-tma),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=nvgpu.device_async_copy

// Three barriers: Q's tile and K's two buffers, in a group of 128 (1024 bytes: the group fills
// the static reserve, SharedLayout.h barrierGroupSlots). Per-thread parity and in-flight masks
// start 0.
// CHECK-LABEL: gpu.func @tma(
// CHECK-SAME: %[[MQ:[^:]+]]: !llvm.ptr, %[[MK:[^:]+]]: !llvm.ptr)
// CHECK-SAME: bob.tensor_maps = [#bob.tensor_map<map = {{[0-9]+}}, tensor = 0, rows_of = {{[0-9]+}}, box_rows = 64, box_cols = 64{{.*}}#bob.tensor_map<map = {{[0-9]+}}, tensor = 1
// CHECK: %[[BARS:.+]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 128>
// CHECK: %[[PHASES:.+]] = memref.alloca() : memref<i32>
// CHECK: %[[PENDING:.+]] = memref.alloca() : memref<i32>
// CHECK: scf.if
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BARS]]
// CHECK: nvvm.fence.mbarrier.init
// CHECK: gpu.barrier
// Q (synchronous): barrier first (nobody reads the old tile), then thread 0 expects 64 x 128 x
// 2 bytes on barrier 0 and issues two boxes at columns 0 and 64 of (batch, head, row 0), then
// all wait on barrier 0.
// CHECK: gpu.barrier
// CHECK: %[[DQ:.+]] = builtin.unrealized_conversion_cast %[[MQ]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[B0:.+]]], %c16384
// CHECK: nvgpu.tma.async.load %[[DQ]][%{{.+}}, %[[R0:[^,]+]], %{{.+}}, %{{.+}}], %[[BARS]][%[[B0]]] to %{{.+}} : {{.*}} -> memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1]>, #gpu.address_space<workgroup>>
// CHECK: nvgpu.tma.async.load %[[DQ]][%c64{{.*}}, %[[R0]], %{{.+}}, %{{.+}}], %[[BARS]][%[[B0]]] to %{{.+}} : {{.*}} -> memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1], offset: 4096>, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[PHASES]][]
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[B0]]]
// CHECK: memref.store %{{.+}}, %[[PHASES]][]
// Prologue: K's first block into its first buffer (barrier 1), marked in flight, not waited.
// CHECK: nvgpu.tma.async.load
// CHECK: nvgpu.tma.async.load
// CHECK: memref.load %[[PENDING]][]
// CHECK: arith.ori
// CHECK: memref.store %{{.+}}, %[[PENDING]][]
// CHECK: scf.for
// wait_shared: barriers 1 and 2 (K's buffers) waited if in flight; Q's barrier never is.
// CHECK-NOT: try_wait.parity %[[BARS]][%[[B0]]]
// CHECK: memref.load %[[PENDING]][]
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c1
// CHECK: memref.load %[[PENDING]][]
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c2
// CHECK: memref.store %c0_i32{{.*}}, %[[PENDING]][]
// CHECK-NEXT: gpu.barrier
// The next block goes to the other buffer: its barrier is selected with it.
// CHECK: %[[BN:.+]] = arith.select %{{.+}}, %c2{{.*}}, %c1{{.*}} : index
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[BN]]], %c16384
// CHECK-COUNT-2: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[BN]]]
// CHECK: nvvm.wgmma.mma_async
!T = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1]>>
bob.kernel @tma(%q: !T, %k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 128, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %q, %c2 : !T
  %m = memref.dim %k, %c2 : !T
  %blocks = arith.divui %m, %c64 : index
  %qs = bob.alloc_shared : !bob.smem<64x128xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x128xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x128xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = scf.for %i = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %row = arith.muli %i, %c64 : index
    bob.load_shared %k[%c0, %c0, %row] bound %m into %ks : !T, !bob.smem<64x128xbf16>
    %s = bob.mma %qs, %ks, %acc {transpose_b} : !bob.smem<64x128xbf16>, !bob.smem<64x128xbf16>, !bob.rtile<64x64xf32>
    scf.yield %s : !bob.rtile<64x64xf32>
  }
  bob.return
}

// -----

// Loads issued together form one batch: K and V (consecutive, only pure ops between them) share
// barrier 0, armed once with both tiles' bytes (2 x 64 x 64 x 2), and are waited for once.
// CHECK-LABEL: gpu.func @batch(
// CHECK: %[[BARS2:.+]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 128>
// CHECK-COUNT-1: nvgpu.mbarrier.init
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS2]][%c0{{[_0-9]*}}], %c16384
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS2]][%c0{{[_0-9]*}}]
// CHECK-NOT: nvgpu.mbarrier.arrive.expect_tx
// CHECK-NOT: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS2]][%c0{{[_0-9]*}}]
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS2]][%c0{{[_0-9]*}}]
// CHECK-NOT: nvgpu.mbarrier.try_wait.parity
// CHECK: gpu.return
!U = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
bob.kernel @batch(%k: !U, %v: !U) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %m = memref.dim %k, %c2 : !U
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %k[%c0, %c0, %c0] bound %m into %ks : !U, !bob.smem<64x64xbf16>
  %row = arith.addi %c0, %c0 : index
  bob.load_shared %v[%c0, %c0, %row] bound %m into %vs : !U, !bob.smem<64x64xbf16>
  bob.return
}

// bob-lower-tiles with a producer warpgroup (bob.warp_specialize, sm_90a): threads from
// 32 * warps on are the producer; they give registers back (setmaxnreg) and one of them runs
// the producer region: per iteration it waits on the buffer's "empty" barrier (index + count,
// whose parity bit starts at 1 so the first wait passes), arms the "full" barrier with the
// bytes and issues the TMA box. The consumers take the registers, synchronise among themselves
// only (named barrier 1 for 128 threads, never bar.sync 0, which would wait for the producer),
// wait on the full barrier by parity, and arrive on the empty one when done with the buffer.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-pipeline-loads,bob-allocate-shared,bob-use-tma),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=nvgpu.device_async_copy

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// Two blocks of 256 threads per SM: 128 registers at entry, 24 for the producer, 232 for the
// consumers. Barriers: Q, K's two buffers (full: one arrival), then their empty partners (one
// arrival per consumer thread), in a group that fills the static reserve (128 slots).
// CHECK-LABEL: gpu.func @producer(
// CHECK-SAME: bob.consumer_registers = 232 : i32, bob.producer_registers = 24 : i32
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32
// CHECK: %[[BARS:.+]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 128>
// CHECK: %[[PHASES:.+]] = memref.alloca() : memref<i32>
// CHECK: %[[EMPTYBITS:.+]] = arith.constant 56 : i32
// CHECK-NEXT: memref.store %[[EMPTYBITS]], %[[PHASES]][]
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BARS]][%{{.+}}], %c1
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BARS]][%{{.+}}], %c128
// CHECK: gpu.barrier
// CHECK: %[[TID:.+]] = gpu.thread_id  x
// CHECK: %[[ISP:.+]] = arith.cmpi uge, %[[TID]], %c128
// CHECK: scf.if %[[ISP]] {
// CHECK-NEXT: nvvm.setmaxregister  decrease 24
// CHECK:      %[[ISSUER:.+]] = arith.cmpi eq, %[[TID]], %c128
// CHECK-NEXT: scf.if %[[ISSUER]] {
// CHECK:        scf.for
// CHECK:          %[[FULLP:.+]] = arith.select %{{.+}}, %c0{{.*}}, %c1{{.*}} : index
// CHECK:          %[[EMPTYP:.+]] = arith.addi %[[FULLP]], %c3 : index
// CHECK:          nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[EMPTYP]]]
// CHECK:          nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[FULLQ:.+]]], %c8192
// CHECK:          nvgpu.tma.async.load %{{.+}}, %[[BARS]][%[[FULLQ]]] to
// CHECK-NOT:      gpu.barrier
// CHECK:      } else {
// CHECK-NEXT:   nvvm.setmaxregister  increase 232
// CHECK-NOT:    gpu.barrier
// CHECK:        nvvm.barrier id = %{{.+}} number_of_threads = %{{.+}}
// CHECK:        scf.for
// CHECK:          %[[FULLC:.+]] = arith.select %{{.+}}, %c0{{.*}}, %c1{{.*}} : index
// CHECK:          nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[FULLC]]]
// CHECK:          nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:          %[[EMPTYC:.+]] = arith.addi %{{.+}}, %c3 : index
// CHECK-NEXT:     nvgpu.mbarrier.arrive %[[BARS]][%[[EMPTYC]]]
// CHECK-NEXT:     scf.yield
// CHECK-NOT:  gpu.barrier
// CHECK:      gpu.return
bob.kernel @producer(%q: !T, %k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, producer = true>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x64xbf16>
  %blocks = arith.divui %n, %c64 : index
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = scf.for %i = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %row = arith.muli %i, %c64 : index
    bob.load_shared %k[%c0, %c0, %row] bound %n into %ks : !T, !bob.smem<64x64xbf16>
    %s = bob.mma %qs, %ks, %acc {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    scf.yield %s : !bob.rtile<64x64xf32>
  }
  bob.store_tile %r, %q[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  bob.return
}

// bob-lower-tiles with column groups (#bob.spec warp_cols = 2, 8 warps): warp w is row warp
// w % 4 of column group w / 4, and owns that group's half of every register tile's columns.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-stage-operands,bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=unrealized_conversion_cast

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
!R = memref<?x?x?xf32>

// Row sums combine the groups through one static buffer: 2 groups x 64 rows of f32, here (no
// TMA barriers) sized to the whole 1024-byte static reserve, so that the dynamic tiles after
// it start 1024-byte aligned under any assembler (SharedLayout.h, barrierGroupSlots).
// CHECK: memref.global "private" @flashbob_row_exchange : memref<256xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}

// CHECK-LABEL: gpu.func @groups(
// The warp's row warp and column group.
// CHECK:      %[[WARP:.+]] = arith.divui %{{.+}}, %c32
// CHECK:      %[[ROWWARP:.+]] = arith.remui %[[WARP]], %c4
// CHECK-NEXT: %[[GROUP:.+]] = arith.divui %[[WARP]], %c4
// S = Q K^T per group: m64 n32 (half of the 64 key columns); B (K, K-major) starts at row
// 32 * group: 128 bytes a row.
// CHECK:      %[[FIRSTCOL:.+]] = arith.muli %[[GROUP]], %c32
// CHECK:      arith.index_cast %[[FIRSTCOL]] : index to i64
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 32, k = 16>
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// The row sum: quad shuffles inside the group, then the exchange between two barriers; every
// thread adds the two groups' partial sums in group order.
// CHECK:      gpu.shuffle  xor
// CHECK:      %[[X:.+]] = memref.get_global @flashbob_row_exchange
// CHECK:      gpu.barrier
// CHECK:      scf.if
// CHECK:      memref.store %{{.+}}, %[[X]][%{{.+}}]
// CHECK:      gpu.barrier
// CHECK-COUNT-2: memref.load %[[X]]
// CHECK-NEXT: arith.addf
// The row vector is written by thread t = 0 of group 0 only.
// CHECK:      %[[T0:.+]] = arith.cmpi eq, %{{.+}}, %c0
// CHECK:      %[[G0:.+]] = arith.cmpi eq, %{{.+}}, %c0
// CHECK-NEXT: arith.andi %[[T0]], %[[G0]]
// CHECK:      gpu.return
bob.kernel @groups(%q: !T, %l: !R) attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %sum = bob.reduce sum %s : !bob.rtile<64x64xf32> -> !bob.rowvec<64>
  bob.store_vec %sum, %l[%c0, %c0, %c0] bound %n : !bob.rowvec<64>, !R
  bob.return
}

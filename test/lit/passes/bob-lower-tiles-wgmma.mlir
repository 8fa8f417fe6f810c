// bob-lower-tiles on sm_90a: shared tiles take the wgmma swizzle, products with whole
// warpgroups of accumulator rows become nvvm.wgmma.mma_async reading both operands through
// shared-memory descriptors, and shared writes are fenced for the async proxy. (The mma.sync
// path: bob-lower-tiles.mlir. Descriptor fields: WgmmaPattern.cpp.)
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-stage-operands,bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=unrealized_conversion_cast

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// The shared symbol is aligned for 1024-byte swizzle atoms.
// CHECK: memref.global "public" @flashbob_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 1024 : i64}

// Tiles are [column blocks][rows][block columns]: 64 bf16 columns = one 128-byte block; 96
// columns = three 64-byte blocks; the scratch tile of P comes first (bob-stage-operands).
// CHECK-LABEL: gpu.func @products(
// CHECK-SAME: bob.shared_bytes = 27648 : i64
// CHECK-DAG: memref.view {{.*}}[%{{.+}}][] : {{.*}} to memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.view {{.*}}[%{{.+}}][] : {{.*}} to memref<3x16x32xbf16, #gpu.address_space<workgroup>>
// Copies land at swizzled positions (the 16-byte chunk XOR the row's phase), then a proxy fence
// before the barrier that publishes them.
// CHECK: arith.xori
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// S = Q K^T: both operands K-major (A row, B col). Descriptor constants: LBO 16 B (field 1),
// SBO 1024 B (field 64 at bit 32), 128-byte swizzle (1 at bit 62).
// The tile's address passes an empty asm statement (no instruction, opaque to LLVM) so that
// LLVM forms the descriptors next to the product instead of hoisting them out of loops.
// CHECK: %[[ADDR:.+]] = memref.extract_aligned_pointer_as_index
// CHECK-NEXT: %[[ADDR64:.+]] = arith.index_cast %[[ADDR]] : index to i64
// CHECK-NEXT: %[[KEPT:.+]] = llvm.inline_asm has_side_effects "", "=l,0" %[[ADDR64]] : (i64) -> i64
// CHECK: arith.shrui %[[KEPT]]
// CHECK: arith.constant 4611686293305360384 : i64
// A product into zeros moves no zeros into its registers: its first slice ignores them
// (D scale <zero>), the others accumulate.
// CHECK: llvm.mlir.undef
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NOT: llvm.insertvalue
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// Waited for before its first reader, the staging store of P (a write: every product).
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: gpu.thread_id
// O = P V: P stored to its scratch tile (fenced), V read MN-major (B row) with LBO = one
// column block of V (64 rows x 128 B = 8192 B, field 512 at bit 16).
// CHECK: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: arith.constant 4611686293338849280 : i64
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: gpu.return
bob.kernel @products(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %odd = bob.alloc_shared : !bob.smem<16x96xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %p = bob.convert %s : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %p, %ks, %zero : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.store_tile %o, %q[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  bob.return
}


// 8 warps over 64 accumulator rows (8 rows a warp) is not a warpgroup shape: mma.sync, with
// ldmatrix reading the swizzled tiles.
// CHECK-LABEL: gpu.func @not_warpgroup_shaped(
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvgpu.ldmatrix
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: gpu.return
bob.kernel @not_warpgroup_shaped() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %qs = bob.alloc_shared : !bob.smem<128x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
  bob.return
}

// Runs. Two independent products, each its own group, both in flight; the staging store that
// reads the first (a write) waits for both (wgmma.wait_group 0). The two staged operands are
// stored in one run: one barrier before the first store, one proxy fence and barrier after the
// last. Then P2's product reads O1, so O1's product waits before it starts.
// CHECK-LABEL: gpu.func @runs(
// CHECK:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:  nvvm.wgmma
// CHECK:      gpu.barrier
// CHECK-COUNT-16: vector.store {{.*}} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NOT:  gpu.barrier
// CHECK-COUNT-16: vector.store {{.*}} : memref<1x64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// O2 accumulates into O1: O1's values go into its registers and every slice accumulates.
// CHECK-COUNT-32: llvm.insertvalue
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, D[<f32>, <one>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// The kernel's end waits for the last one.
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: gpu.return
bob.kernel @runs() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z1 = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s1 = bob.mma %qs, %ks, %z1 {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %z2 = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s2 = bob.mma %ks, %qs, %z2 {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %p1 = bob.convert %s1 : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %p2 = bob.convert %s2 : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o1 = bob.mma %p1, %ks, %z1 : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %o2 = bob.mma %p2, %ks, %o1 : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// Waits at the first reader: the arithmetic on S1 waits for S1 only (wait_group 1: S2 stays in
// flight under it, as dP does under the softmax of S in the backward kernels); the product
// that reads S2 waits for the rest.
// CHECK-LABEL: gpu.func @first_reader(
// CHECK-COUNT-2: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK-COUNT-32: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      arith.mulf
// CHECK:      gpu.return
bob.kernel @first_reader(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s1 = bob.mma %qs, %ks, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %s2 = bob.mma %ks, %qs, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %e = bob.exp2 %s1 : !bob.rtile<64x64xf32>
  %x = bob.mul %e, %s2 : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  bob.store_tile %x, %q[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  bob.return
}

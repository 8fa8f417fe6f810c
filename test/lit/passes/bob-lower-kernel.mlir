// bob-lower-kernel: each bob.kernel becomes a gpu.func kernel in gpu.module @flashbob_kernels;
// the body moves unchanged, bob.return becomes gpu.return, and the spec, the shared memory size
// and the block size (32 * warps threads) become attributes of the gpu.func.
// RUN: flashbob-opt %s -split-input-file --bob-lower-kernel | FileCheck %s
// After bob-allocate-shared, the shared memory size is carried over.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel)' | FileCheck %s --check-prefix=ALLOC

// CHECK-LABEL: module attributes {gpu.container_module} {
// CHECK-NEXT: gpu.module @flashbob_kernels {
// CHECK-NEXT: gpu.func @fwd(%[[Q:.+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>, %[[L:.+]]: memref<?x?x?xf32>) kernel
// CHECK-SAME: attributes {bob.shared_bytes = 0 : i64,
// CHECK-SAME: bob.spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = true, arch = sm_80>,
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>}
// The body is untouched: arguments, bob ops and loops stay as they were.
// CHECK-NEXT: %[[C0:.+]] = arith.constant 0 : index
// CHECK-NEXT: %[[C2:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[N:.+]] = memref.dim %[[Q]], %[[C2]]
// CHECK-NEXT: %[[QS:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: bob.load_shared %[[Q]][%[[C0]], %[[C0]], %[[C0]]] bound %[[N]] into %[[QS]]
// CHECK-NEXT: %[[Z:.+]] = bob.splat 0.000000e+00 : !bob.rtile<64x64xf32>
// CHECK-NEXT: %[[S:.+]] = bob.mma %[[QS]], %[[QS]], %[[Z]] {transpose_b}
// CHECK-NEXT: %[[R:.+]] = bob.reduce max %[[S]]
// CHECK-NEXT: bob.store_vec %[[R]], %[[L]][%[[C0]], %[[C0]], %[[C0]]] bound %[[N]]
// CHECK-NEXT: gpu.return
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT: bob.kernel
// CHECK-NOT: bob.return
// ALLOC-LABEL: gpu.func @fwd(
// ALLOC-SAME: bob.shared_bytes = 9216 : i64
// ALLOC: bob.alloc_shared {offset = 0 : i64} : <64x64xbf16>
!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
!R = memref<?x?x?xf32>
bob.kernel @fwd(%q: !T, %lse: !R) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = true, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %qs, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %r = bob.reduce max %s : !bob.rtile<64x64xf32> -> !bob.rowvec<64>
  bob.store_vec %r, %lse[%c0, %c0, %c0] bound %n : !bob.rowvec<64>, !R
  bob.return
}

// -----

// Several kernels share one gpu.module (an existing @flashbob_kernels is reused, its contents
// kept); the block size follows each kernel's warps; other ops of the module stay in place.
// CHECK-LABEL: module attributes {gpu.container_module} {
// CHECK: func.func @host()
// CHECK: gpu.module @flashbob_kernels {
// CHECK-NEXT: gpu.func @existing() kernel {
// CHECK: gpu.func @one_warp() kernel attributes {{{.*}}known_block_size = array<i32: 32, 1, 1>}
// CHECK-NEXT: gpu.return
// CHECK: gpu.func @two_warps() kernel attributes {{{.*}}known_block_size = array<i32: 64, 1, 1>}
// CHECK: gpu.func @eight_warps() kernel attributes {{{.*}}kind = bwd_kv{{.*}}known_block_size = array<i32: 256, 1, 1>}
// CHECK-NOT: gpu.module
// CHECK-NOT: bob.kernel
func.func @host() {
  return
}
gpu.module @flashbob_kernels {
  gpu.func @existing() kernel {
    gpu.return
  }
}
bob.kernel @one_warp() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 16, block_n = 64, warps = 1, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  bob.return
}
bob.kernel @two_warps() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 32, block_n = 64, warps = 2, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  bob.return
}
bob.kernel @eight_warps() attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 128, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  bob.return
}

// -----

// A module without kernels is left alone (no gpu.container_module, no gpu.module).
// CHECK-LABEL: module {
// CHECK-NEXT: func.func @no_kernels()
// CHECK-NOT: gpu.
func.func @no_kernels() {
  return
}

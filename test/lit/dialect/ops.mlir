// Round trip of every bob op, type and attribute: parse, print, parse again, print again
// (the score modifications' ops: score-mod.mlir).
// The CHECK lines pin the printed (custom) form of each construct.
// RUN: flashbob-opt %s | flashbob-opt | FileCheck %s
// Generic form must round-trip too (no custom-syntax-only state).
// RUN: flashbob-opt %s -mlir-print-op-generic | flashbob-opt | FileCheck %s

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
!H = memref<?x?x?x32xf16, strided<[?, ?, ?, 1]>>
!R = memref<?x?x?xf32>

// CHECK-LABEL: bob.kernel @all_ops(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
// CHECK-SAME: %[[LSE:[a-z0-9]+]]: memref<?x?x?xf32>)
// CHECK-SAME: attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 32, warps = 4, stages = 2, dtype = bf16, causal = true, arch = sm_90a>}
bob.kernel @all_ops(%q: !T, %o: !T, %lse: !R) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 32, warps = 4, stages = 2, dtype = bf16, causal = true, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  // CHECK: %[[QS:.+]] = bob.alloc_shared : <64x64xbf16>
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  // CHECK: %[[KS:.+]] = bob.alloc_shared {offset = 9216 : i64} : <32x64xbf16>
  %ks = bob.alloc_shared {offset = 9216 : i64} : !bob.smem<32x64xbf16>
  // CHECK: %[[PS:.+]] = bob.alloc_shared : <64x32xbf16>
  %ps = bob.alloc_shared : !bob.smem<64x32xbf16>
  // CHECK: bob.load_shared %[[Q]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} into %[[QS]] : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>, <64x64xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x64xbf16>
  // The asynchronous form (bob-pipeline-loads) and the wait that completes it.
  // CHECK: bob.load_shared %[[Q]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} into %[[QS]] {async} :
  // CHECK-NEXT: bob.wait_shared
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs {async} : !T, !bob.smem<64x64xbf16>
  bob.wait_shared
  // CHECK: %[[ZERO:.+]] = bob.splat 0.000000e+00 : !bob.rtile<64x32xf32>
  %zero = bob.splat 0.0 : !bob.rtile<64x32xf32>
  // CHECK: %[[NINF:.+]] = bob.splat 0xFF800000 : !bob.rowvec<64>
  %ninf = bob.splat 0xFF800000 : !bob.rowvec<64>
  // CHECK: bob.splat 1.000000e+00 : !bob.colvec<32>
  %ones = bob.splat 1.0 : !bob.colvec<32>
  // mma with both transpose flags and from a shared A.
  // CHECK: %[[S:.+]] = bob.mma %[[QS]], %[[KS]], %[[ZERO]] {transpose_b} : !bob.smem<64x64xbf16>, <32x64xbf16>, <64x32xf32>
  %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<32x64xbf16>, !bob.rtile<64x32xf32>
  // CHECK: bob.mma %[[QS]], %[[QS]], %[[Z3:.+]] {transpose_a} : !bob.smem<64x64xbf16>, <64x64xbf16>, <64x64xf32>
  %z3 = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %t = bob.mma %qs, %qs, %z3 {transpose_a} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  // CHECK: bob.mma %[[QS]], %[[KS]], %[[ZERO]] {transpose_a, transpose_b} : !bob.smem<64x64xbf16>, <32x64xbf16>, <64x32xf32>
  %u = bob.mma %qs, %ks, %zero {transpose_a, transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<32x64xbf16>, !bob.rtile<64x32xf32>
  // Element-wise ops with each kind of rhs: same type, row vector, column vector, f32 scalar.
  // CHECK: %[[SC:.+]] = arith.constant 1.250000e-01 : f32
  %sc = arith.constant 0.125 : f32
  // CHECK: bob.mul %[[S]], %[[SC]] : !bob.rtile<64x32xf32>, f32
  %s1 = bob.mul %s, %sc : !bob.rtile<64x32xf32>, f32
  // CHECK: bob.add %{{.+}}, %{{.+}} : !bob.rtile<64x32xf32>, !bob.rtile<64x32xf32>
  %s2 = bob.add %s1, %s : !bob.rtile<64x32xf32>, !bob.rtile<64x32xf32>
  // CHECK: bob.div %{{.+}}, %{{.+}} : !bob.rtile<64x32xf32>, !bob.colvec<32>
  %s3 = bob.div %s2, %ones : !bob.rtile<64x32xf32>, !bob.colvec<32>
  // CHECK: bob.mask %{{.+}} at(%{{.+}}, %{{.+}}) within(%{{.+}}, %{{.+}}) {causal} : <64x32xf32>
  %s4 = bob.mask %s3 at (%c0, %c0) within (%n, %n) {causal} : !bob.rtile<64x32xf32>
  // CHECK: bob.mask %{{.+}} at(%{{.+}}, %{{.+}}) within(%{{.+}}, %{{.+}}) {keys_on_rows, value = 0.000000e+00 : f32} : <64x32xf32>
  %s5 = bob.mask %s4 at (%c0, %c0) within (%n, %n) {keys_on_rows, value = 0.0 : f32} : !bob.rtile<64x32xf32>
  // CHECK: bob.mask %{{.+}} at(%{{.+}}, %{{.+}}) within(%{{.+}}, %{{.+}}) {window_left = 128 : i64, window_right = 3 : i64} : <64x32xf32>
  %s5w = bob.mask %s5 at (%c0, %c0) within (%n, %n) {window_left = 128, window_right = 3} : !bob.rtile<64x32xf32>
  // CHECK: bob.multi_key_rows at %{{.+}} within(%{{.+}}, %{{.+}}) {causal, window_left = 0 : i64} : <64>
  %several = bob.multi_key_rows at %c0 within (%n, %n) {causal, window_left = 0} : !bob.rowvec<64>
  // CHECK: %[[RM:.+]] = bob.reduce max %{{.+}} : <64x32xf32> -> <64>
  %rm = bob.reduce max %s5 : !bob.rtile<64x32xf32> -> !bob.rowvec<64>
  // CHECK: bob.max %[[NINF]], %[[RM]] : !bob.rowvec<64>, !bob.rowvec<64>
  %mx = bob.max %ninf, %rm : !bob.rowvec<64>, !bob.rowvec<64>
  // CHECK: bob.replace %{{.+}}, 0xFF800000 -> 0.000000e+00 : !bob.rowvec<64>
  %safe = bob.replace %mx, 0xFF800000 -> 0.0 : !bob.rowvec<64>
  // CHECK: bob.sub %{{.+}}, %{{.+}} : !bob.rtile<64x32xf32>, !bob.rowvec<64>
  %d = bob.sub %s5, %safe : !bob.rtile<64x32xf32>, !bob.rowvec<64>
  // CHECK: %[[P:.+]] = bob.exp2 %{{.+}} : !bob.rtile<64x32xf32>
  %p = bob.exp2 %d : !bob.rtile<64x32xf32>
  // CHECK: %[[L:.+]] = bob.reduce sum %[[P]] : <64x32xf32> -> <64>
  %l = bob.reduce sum %p : !bob.rtile<64x32xf32> -> !bob.rowvec<64>
  // CHECK: bob.log2 %[[L]] : !bob.rowvec<64>
  %lg = bob.log2 %l : !bob.rowvec<64>
  // Register A operand (P converted to bf16).
  // CHECK: %[[PB:.+]] = bob.convert %[[P]] : <64x32xf32> -> <64x32xbf16>
  %pb = bob.convert %p : !bob.rtile<64x32xf32> -> !bob.rtile<64x32xbf16>
  // CHECK: %[[ACC:.+]] = bob.mma %[[PB]], %[[KS]], %{{.+}} : !bob.rtile<64x32xbf16>, <32x64xbf16>, <64x64xf32>
  %acc = bob.mma %pb, %ks, %z3 : !bob.rtile<64x32xbf16>, !bob.smem<32x64xbf16>, !bob.rtile<64x64xf32>
  // CHECK: bob.store_shared %[[ACC]] into %[[QS]] : <64x64xf32>, <64x64xbf16>
  bob.store_shared %acc into %qs : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>
  // CHECK: bob.store_shared %[[P]] into %[[PS]] : <64x32xf32>, <64x32xbf16>
  bob.store_shared %p into %ps : !bob.rtile<64x32xf32>, !bob.smem<64x32xbf16>
  // CHECK: %[[LT:.+]] = bob.load_tile %[[Q]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>> -> <64x64xf32>
  %lt = bob.load_tile %q[%c0, %c0, %c0] bound %n : !T -> !bob.rtile<64x64xf32>
  // CHECK: bob.store_tile %[[LT]], %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : <64x64xf32>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
  bob.store_tile %lt, %o[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  // CHECK: bob.load_vec %[[LSE]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : memref<?x?x?xf32> -> !bob.rowvec<64>
  %lv = bob.load_vec %lse[%c0, %c0, %c0] bound %n : !R -> !bob.rowvec<64>
  // CHECK: bob.load_vec %[[LSE]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} {padding = 0xFF800000 : f32} : memref<?x?x?xf32> -> !bob.colvec<32>
  %cv = bob.load_vec %lse[%c0, %c0, %c0] bound %n {padding = 0xFF800000 : f32} : !R -> !bob.colvec<32>
  // CHECK: bob.store_vec %{{.+}}, %[[LSE]][%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : <64>, memref<?x?x?xf32>
  bob.store_vec %lg, %lse[%c0, %c0, %c0] bound %n : !bob.rowvec<64>, !R
  // Register values are loop-carried through scf.for.
  // CHECK: scf.for {{.+}} iter_args({{.+}}) -> (!bob.rtile<64x64xf32>, !bob.rowvec<64>) {
  // CHECK: scf.yield {{.+}} : !bob.rtile<64x64xf32>, !bob.rowvec<64>
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %lt, %v = %lv) -> (!bob.rtile<64x64xf32>, !bob.rowvec<64>) {
    %a2 = bob.mul %a, %v : !bob.rtile<64x64xf32>, !bob.rowvec<64>
    scf.yield %a2, %v : !bob.rtile<64x64xf32>, !bob.rowvec<64>
  }
  // CHECK: bob.return
  bob.return
}

// The implicit terminator may be omitted in the input; every kind, f16 and other archs parse.
// CHECK-LABEL: bob.kernel @f16_kernel(
// CHECK-SAME: #bob.spec<kind = bwd_kv, head_dim = 32, block_m = 16, block_n = 64, warps = 2, stages = 2, dtype = f16, causal = false, arch = sm_80>
bob.kernel @f16_kernel(%k: !H) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 32, block_m = 16, block_n = 64, warps = 2, stages = 2, dtype = f16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  // CHECK: %[[KS16:.+]] = bob.alloc_shared : <64x32xf16>
  %ks = bob.alloc_shared : !bob.smem<64x32xf16>
  // CHECK: bob.load_shared %{{.+}} into %[[KS16]] : memref<?x?x?x32xf16, strided<[?, ?, ?, 1]>>, <64x32xf16>
  bob.load_shared %k[%c0, %c0, %c0] bound %c0 into %ks : !H, !bob.smem<64x32xf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  // CHECK: bob.mma %[[KS16]], %[[KS16]], %{{.+}} {transpose_b} : !bob.smem<64x32xf16>, <64x32xf16>, <64x64xf32>
  %s = bob.mma %ks, %ks, %z {transpose_b} : !bob.smem<64x32xf16>, !bob.smem<64x32xf16>, !bob.rtile<64x64xf32>
  // CHECK: bob.convert %{{.+}} : <64x64xf32> -> <64x64xf16>
  %h = bob.convert %s : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xf16>
  // CHECK: bob.return
}

// CHECK-LABEL: bob.kernel @kinds_bwd_q
// CHECK-SAME: kind = bwd_q, {{.*}} arch = sm_86
bob.kernel @kinds_bwd_q() attributes {spec = #bob.spec<kind = bwd_q, head_dim = 256, block_m = 128, block_n = 16, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_86>} {
  bob.return
}
// CHECK-LABEL: bob.kernel @kinds_bob_q
// CHECK-SAME: kind = bob_q, {{.*}} arch = sm_89
bob.kernel @kinds_bob_q() attributes {spec = #bob.spec<kind = bob_q, head_dim = 16, block_m = 16, block_n = 16, warps = 1, stages = 1, dtype = bf16, causal = false, arch = sm_89>} {
  bob.return
}
// CHECK-LABEL: bob.kernel @kinds_bob_kv
// CHECK-SAME: kind = bob_kv, {{.*}} arch = sm_90
bob.kernel @kinds_bob_kv() attributes {spec = #bob.spec<kind = bob_kv, head_dim = 128, block_m = 16, block_n = 128, warps = 8, stages = 2, dtype = bf16, causal = true, arch = sm_90>} {
  bob.return
}
// Column groups: warp_cols is printed when it is not 1.
// CHECK-LABEL: bob.kernel @column_groups
// CHECK-SAME: warps = 8, {{.*}} arch = sm_90a, warp_cols = 2>
bob.kernel @column_groups() attributes {spec = #bob.spec<kind = bob_q, head_dim = 128, block_m = 64, block_n = 64, warps = 8, stages = 2, dtype = bf16, causal = false, arch = sm_90a, warp_cols = 2>} {
  bob.return
}
// Warp specialization: producer is printed when true; the role split and the buffer handshake
// (placed by bob-pipeline-loads).
// CHECK-LABEL: bob.kernel @producer
// CHECK-SAME: arch = sm_90a, producer = true>
// CHECK:      bob.warp_specialize producer {
// CHECK-NEXT:   bob.producer_acquire %[[B:.+]] : !bob.smem<64x64xbf16>
// CHECK-NEXT: } consumer {
// CHECK-NEXT:   bob.consumer_wait %[[B]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:   bob.consumer_release %[[B]] : !bob.smem<64x64xbf16>
// CHECK-NEXT: }
bob.kernel @producer() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, producer = true>} {
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.warp_specialize producer {
    bob.producer_acquire %b : !bob.smem<64x64xbf16>
  } consumer {
    bob.consumer_wait %b : !bob.smem<64x64xbf16>
    bob.consumer_release %b : !bob.smem<64x64xbf16>
  }
  bob.return
}
// Register-A products: register_a is printed when true. bob.product_wait (made by
// bob-lower-tiles' placeProductWaits) passes a product's result and its A operand through.
// CHECK-LABEL: bob.kernel @register_a
// CHECK-SAME: arch = sm_90a, register_a = true>
// CHECK:      %[[O:.+]] = bob.mma %[[P:.+]], %{{.+}}, %{{.+}} : !bob.rtile<64x64xbf16>, <64x64xbf16>, <64x64xf32>
// CHECK-NEXT: %{{.+}}:2 = bob.product_wait 1(%[[O]], %[[P]]) : (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>)
bob.kernel @register_a() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, register_a = true>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %s = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %p = bob.convert %s : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %o = bob.mma %p, %vs, %s : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %w:2 = bob.product_wait 1 (%o, %p) : (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>)
  bob.return
}
// Reserves in local memory: an accumulator flushed into one every 16 steps of a loop, and
// where it stands; then read back.
// CHECK-LABEL: bob.kernel @reserves
// CHECK:      %[[R:.+]] = bob.alloc_local : !bob.ltile<64x64xf32>
// CHECK:      scf.for
// CHECK:        bob.flush %{{.+}} into %[[R]] every 16 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
// CHECK:      bob.flush %{{.+}} into %[[R]] : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
// CHECK:      bob.load_local %[[R]] : !bob.ltile<64x64xf32> -> !bob.rtile<64x64xf32>
bob.kernel @reserves(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %c1 = arith.constant 1 : index
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %acc = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%a = %acc) -> (!bob.rtile<64x64xf32>) {
    %f = bob.flush %a into %r every 16 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %f : !bob.rtile<64x64xf32>
  }
  %g = bob.flush %last into %r : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
  %kept = bob.load_local %r : !bob.ltile<64x64xf32> -> !bob.rtile<64x64xf32>
  bob.return
}
// Sums across blocks (the fused backward's dQ): an f32 shared tile, a bulk reduction of it into
// an f32 tensor, the waits for it (complete, or `read`), and the semaphore ops.
// CHECK-LABEL: bob.kernel @bulk_sums
// CHECK:      %[[T:.+]] = bob.alloc_shared : <64x64xf32>
// CHECK:      bob.semaphore_wait %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] equals %{{.+}} : memref<?x?x?xi32>
// CHECK-NEXT: bob.bulk_reduce_add %[[T]] into %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : <64x64xf32>, memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>
// CHECK-NEXT: bob.bulk_wait read{{$}}
// CHECK-NEXT: bob.bulk_wait{{$}}
// CHECK-NEXT: bob.semaphore_signal %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x?xi32>
bob.kernel @bulk_sums(%dq: memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>, %sem: memref<?x?x?xi32>) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %t = bob.alloc_shared : !bob.smem<64x64xf32>
  bob.semaphore_wait %sem[%c0, %c0, %c0] equals %c0 : memref<?x?x?xi32>
  bob.bulk_reduce_add %t into %dq[%c0, %c0, %c0] bound %c0 : !bob.smem<64x64xf32>, memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>
  bob.bulk_wait read
  bob.bulk_wait
  bob.semaphore_signal %sem[%c0, %c0, %c0] : memref<?x?x?xi32>
  bob.return
}

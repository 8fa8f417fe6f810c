// bob-lower-tiles, reserves in local memory (LocalPatterns.cpp): a reserve is a stack slot of
// each thread (the thread's elements of the tile, 64x64 over 4 warps: 32 floats), allocated at
// the kernel's entry and zeroed where the reserve is made; a flush is a branch that adds the
// accumulator into it and restarts the accumulator from zero. Every access is volatile, so
// LLVM cannot promote the slot back into registers.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=unrealized_conversion_cast

// CHECK-LABEL: gpu.func @reserves(
// CHECK-NEXT:  %[[ONE:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:  %[[SLOT:.+]] = llvm.alloca %[[ONE]] x vector<32xf32> {alignment = 16 : i64} : (i32) -> !llvm.ptr
// CHECK:       arith.constant dense<1.000000e+00> : vector<32xf32>
// CHECK-NEXT:  %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK-NEXT:  llvm.store volatile %[[ZERO]], %[[SLOT]] {alignment = 16 : i64} : vector<32xf32>, !llvm.ptr
// CHECK:       scf.for
// CHECK:         %[[ACC:.+]] = arith.addf
// CHECK:         %[[FLUSHED:.+]] = scf.if %{{.+}} -> (vector<32xf32>) {
// CHECK-NEXT:      %[[OLD:.+]] = llvm.load volatile %[[SLOT]] {alignment = 16 : i64} : !llvm.ptr -> vector<32xf32>
// CHECK-NEXT:      %[[SUM:.+]] = arith.addf %[[OLD]], %[[ACC]] : vector<32xf32>
// CHECK-NEXT:      llvm.store volatile %[[SUM]], %[[SLOT]] {alignment = 16 : i64} : vector<32xf32>, !llvm.ptr
// The restart's zeros pass an empty asm statement (no instruction) so that LLVM keeps them in
// the branch instead of selecting between zeros and the accumulator on every step.
// CHECK-NEXT:      %[[ZERO0:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[OPAQUE:.+]] = llvm.inline_asm has_side_effects "", "=f,0" %[[ZERO0]] : (f32) -> f32
// CHECK-NEXT:      %[[RESTART:.+]] = vector.broadcast %[[OPAQUE]] : f32 to vector<32xf32>
// CHECK-NEXT:      scf.yield %[[RESTART]] : vector<32xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[ACC]] : vector<32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.yield %[[FLUSHED]] : vector<32xf32>
// CHECK:       %[[KEPT:.+]] = llvm.load volatile %[[SLOT]] {alignment = 16 : i64} : !llvm.ptr -> vector<32xf32>
// CHECK-NEXT:  arith.addf %{{.+}}, %[[KEPT]] : vector<32xf32>
bob.kernel @reserves(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %steps = memref.dim %x, %c0 : memref<?xf32>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %one = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %last = scf.for %i = %c0 to %steps step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %next = bob.add %acc, %one : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
    %i1 = arith.addi %i, %c1 : index
    %phase = arith.remui %i1, %c64 : index
    %due = arith.cmpi eq, %phase, %c0 : index
    %flushed = bob.flush %next into %r if %due : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %flushed : !bob.rtile<64x64xf32>
  }
  %kept = bob.load_local %r : !bob.ltile<64x64xf32> -> !bob.rtile<64x64xf32>
  %total = bob.add %last, %kept : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  bob.return
}

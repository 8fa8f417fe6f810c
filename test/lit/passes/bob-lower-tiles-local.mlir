// bob-lower-tiles, reserves in local memory (LocalPatterns.cpp): a reserve is a stack slot of
// each thread (the thread's elements of the tile, 64x64 over 4 warps: 32 floats), allocated at
// the kernel's entry and zeroed where the reserve is made; a flush (placed between two chunks of
// a sweep by bob-chunk-sweeps) adds the accumulator into it and restarts the accumulator from
// zero, with no branch. Every access is volatile, so LLVM cannot promote the slot back into
// registers.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=unrealized_conversion_cast --implicit-check-not=scf.if

// CHECK-LABEL: gpu.func @reserves(
// CHECK-NEXT:  %[[ONE:.+]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:  %[[SLOT:.+]] = llvm.alloca %[[ONE]] x vector<32xf32> {alignment = 16 : i64} : (i32) -> !llvm.ptr
// CHECK:       arith.constant dense<1.000000e+00> : vector<32xf32>
// CHECK-NEXT:  %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK-NEXT:  llvm.store volatile %[[ZERO]], %[[SLOT]] {alignment = 16 : i64} : vector<32xf32>, !llvm.ptr
// CHECK:       scf.for
// CHECK:         %[[ACC:.+]] = scf.for
// CHECK:           arith.addf
// CHECK:         }
// CHECK-NEXT:    %[[OLD:.+]] = llvm.load volatile %[[SLOT]] {alignment = 16 : i64} : !llvm.ptr -> vector<32xf32>
// CHECK-NEXT:    %[[SUM:.+]] = arith.addf %[[OLD]], %[[ACC]] : vector<32xf32>
// CHECK-NEXT:    llvm.store volatile %[[SUM]], %[[SLOT]] {alignment = 16 : i64} : vector<32xf32>, !llvm.ptr
// CHECK-NEXT:    %[[RESTART:.+]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK-NEXT:    scf.yield %[[RESTART]] : vector<32xf32>
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
  %last = scf.for %c = %c0 to %steps step %c64 iter_args(%chunkAcc = %zero) -> (!bob.rtile<64x64xf32>) {
    %end = arith.addi %c, %c64 : index
    %hi = arith.minsi %end, %steps : index
    %acc = scf.for %i = %c to %hi step %c1 iter_args(%a = %chunkAcc) -> (!bob.rtile<64x64xf32>) {
      %next = bob.add %a, %one : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
      scf.yield %next : !bob.rtile<64x64xf32>
    }
    %flushed = bob.flush %acc into %r : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %flushed : !bob.rtile<64x64xf32>
  }
  %kept = bob.load_local %r : !bob.ltile<64x64xf32> -> !bob.rtile<64x64xf32>
  %total = bob.add %last, %kept : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  bob.return
}


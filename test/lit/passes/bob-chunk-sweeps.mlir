// bob-chunk-sweeps: a loop whose body yields flushes due `every` N steps runs as chunks of N
// steps (the original loop inside, over [chunk, min(chunk + N * step, ub))) with plain flushes
// after each chunk; values that do not flush are carried through; the original loop's results'
// users read the chunk loop's. Loops without such flushes are left alone.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-chunk-sweeps))' -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: bob.kernel @sweep(
// CHECK:       %[[LB:.+]] = memref.dim %{{.+}}, %c0
// CHECK-NEXT:  %[[UB:.+]] = memref.dim %{{.+}}, %c1
// CHECK:       %[[STEP:.+]] = arith.constant 2 : index
// CHECK:       %[[R:.+]] = bob.alloc_local
// CHECK:       %[[N:.+]] = arith.constant 512 : index
// CHECK-NEXT:  %[[CHUNK:.+]] = arith.muli %[[STEP]], %[[N]] : index
// CHECK-NEXT:  %[[OUT:.+]]:2 = scf.for %[[C:.+]] = %[[LB]] to %[[UB]] step %[[CHUNK]] iter_args(%[[A0:.+]] = %{{.+}}, %[[S0:.+]] = %{{.+}})
// CHECK-NEXT:    %[[END:.+]] = arith.addi %[[C]], %[[CHUNK]] : index
// CHECK-NEXT:    %[[HI:.+]] = arith.minsi %[[END]], %[[UB]] : index
// CHECK-NEXT:    %[[IN:.+]]:2 = scf.for %[[I:.+]] = %[[C]] to %[[HI]] step %[[STEP]] iter_args(%[[A:.+]] = %[[A0]], %[[S:.+]] = %[[S0]])
// CHECK-NEXT:      %[[NEXT:.+]] = bob.add %[[A]], %{{.+}}
// CHECK-NEXT:      %[[SUM:.+]] = bob.add %[[S]], %{{.+}}
// CHECK-NEXT:      scf.yield %[[NEXT]], %[[SUM]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[F:.+]] = bob.flush %[[IN]]#0 into %[[R]] : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
// CHECK-NEXT:    scf.yield %[[F]], %[[IN]]#1
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[KEPT:.+]] = bob.load_local %[[R]]
// CHECK-NEXT:  bob.add %[[OUT]]#0, %[[KEPT]]
// CHECK-NEXT:  bob.add %[[OUT]]#1, %[[OUT]]#1
// CHECK-NOT:   every
bob.kernel @sweep(%x: memref<?x?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %lb = memref.dim %x, %c0 : memref<?x?xf32>
  %ub = memref.dim %x, %c1 : memref<?x?xf32>
  %c2 = arith.constant 2 : index
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %one = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %last:2 = scf.for %i = %lb to %ub step %c2 iter_args(%a = %zero, %s = %zero) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>) {
    %next = bob.add %a, %one : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
    %sum = bob.add %s, %one : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
    %f = bob.flush %next into %r every 512 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %f, %sum : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  }
  %kept = bob.load_local %r : !bob.ltile<64x64xf32> -> !bob.rtile<64x64xf32>
  %total = bob.add %last#0, %kept : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  %other = bob.add %last#1, %last#1 : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// A loop without flushes due `every` N steps keeps its form.
// CHECK-LABEL: bob.kernel @plain(
// CHECK:       scf.for
// CHECK-NOT:   scf.for
// CHECK:       bob.return
bob.kernel @plain(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %c1 = arith.constant 1 : index
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %one = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (!bob.rtile<64x64xf32>) {
    %next = bob.add %a, %one : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
    scf.yield %next : !bob.rtile<64x64xf32>
  }
  bob.return
}

// -----

// One interval per loop.
bob.kernel @two(%x: memref<?xf32>) attributes {spec = #bob.spec<kind = bwd_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %c1 = arith.constant 1 : index
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = bob.alloc_local : !bob.ltile<64x64xf32>
  %q = bob.alloc_local : !bob.ltile<64x64xf32>
  %last:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero, %b = %zero) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>) {
    %f = bob.flush %a into %r every 64 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    // expected-error @+1 {{flushes every 32 steps, another value of its loop every 64}}
    %g = bob.flush %b into %q every 32 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>
    scf.yield %f, %g : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  }
  bob.return
}

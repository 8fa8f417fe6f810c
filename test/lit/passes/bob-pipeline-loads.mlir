// bob-pipeline-loads: with stages = 2 a loop's tile loads become double-buffered: the first
// iteration's copies start before the loop, each iteration waits for its own copies and then
// starts the next iteration's into the other buffers, and reads its buffer by parity.
// RUN: flashbob-opt %s -split-input-file --bob-pipeline-loads | FileCheck %s

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// CHECK-LABEL: bob.kernel @double_buffered
// CHECK-SAME: (%[[Q:.+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>, %[[K:.+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>)
// The loop's tile gets a second buffer next to the first; the tile loaded before the loop none.
// CHECK:      %[[QS:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[K0:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[K1:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: bob.load_shared %[[Q]]{{.*}} into %[[QS]] :
// Prologue: if the loop runs, iteration 0's rows (0 * 64) start loading into the first buffer.
// CHECK:      %[[RUNS:.+]] = arith.cmpi slt, %[[LB:.+]], %[[UB:.+]] : index
// CHECK-NEXT: scf.if %[[RUNS]] {
// CHECK-NEXT:   %[[ROW0:.+]] = arith.muli %[[LB]], %{{.+}} : index
// CHECK-NEXT:   bob.load_shared %[[K]][%{{.+}}, %{{.+}}, %[[ROW0]]] bound %{{.+}} into %[[K0]] {async}
// CHECK-NEXT: }
// CHECK:      scf.for %[[I:.+]] = %[[LB]] to %[[UB]] step %[[STEP:.+]] iter_args
// Buffers by parity of (i - lb) / step.
// CHECK:        %[[EVEN:.+]] = arith.cmpi eq
// CHECK-NEXT:   %[[CUR:.+]] = arith.select %[[EVEN]], %[[K0]], %[[K1]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:   %[[NXT:.+]] = arith.select %[[EVEN]], %[[K1]], %[[K0]] : !bob.smem<64x64xbf16>
// Where the load was: wait, then the next iteration's rows into the other buffer.
// CHECK:        bob.wait_shared
// CHECK-NEXT:   %[[NEXTI:.+]] = arith.addi %[[I]], %[[STEP]] : index
// CHECK-NEXT:   %[[HASNEXT:.+]] = arith.cmpi slt, %[[NEXTI]], %[[UB]] : index
// CHECK-NEXT:   scf.if %[[HASNEXT]] {
// CHECK-NEXT:     %[[ROWN:.+]] = arith.muli %[[NEXTI]], %{{.+}} : index
// CHECK-NEXT:     bob.load_shared %[[K]][%{{.+}}, %{{.+}}, %[[ROWN]]] bound %{{.+}} into %[[NXT]] {async}
// CHECK-NEXT:   }
// The body reads the current buffer; no synchronous load is left in the loop.
// CHECK-NOT:    bob.load_shared
// CHECK:        bob.mma %[[QS]], %[[CUR]], %{{.+}} {transpose_b}
// CHECK:        scf.yield
bob.kernel @double_buffered(%q: !T, %k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %q, %c2 : !T
  %blocks = arith.divui %n, %c64 : index
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %n into %qs : !T, !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = scf.for %i = %c0 to %blocks step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %row = arith.muli %i, %c64 : index
    bob.load_shared %k[%c0, %c0, %row] bound %n into %ks : !T, !bob.smem<64x64xbf16>
    %s = bob.mma %qs, %ks, %acc {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    scf.yield %s : !bob.rtile<64x64xf32>
  }
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// stages = 1: unchanged.
// CHECK-LABEL: bob.kernel @synchronous
// CHECK-NOT: bob.wait_shared
// CHECK-NOT: {async}
// CHECK: scf.for
// CHECK-NEXT: arith.muli
// CHECK-NEXT: bob.load_shared
bob.kernel @synchronous(%k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  scf.for %i = %c0 to %c4 step %c1 {
    %row = arith.muli %i, %c64 : index
    bob.load_shared %k[%c0, %c0, %row] bound %c64 into %ks : !T, !bob.smem<64x64xbf16>
  }
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// A load whose row is not computed from the induction variable by pure ops of the body (here
// it comes out of an scf.if) is left synchronous, and so is the whole loop.
// CHECK-LABEL: bob.kernel @not_pipelined
// CHECK-NOT: bob.wait_shared
// CHECK-NOT: {async}
bob.kernel @not_pipelined(%k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  scf.for %i = %c0 to %c4 step %c1 {
    %flag = arith.cmpi eq, %i, %c0 : index
    %row = scf.if %flag -> index {
      scf.yield %i : index
    } else {
      scf.yield %c0 : index
    }
    bob.load_shared %k[%c0, %c0, %row] bound %c64 into %ks : !T, !bob.smem<64x64xbf16>
  }
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// A tile read after the loop keeps its single buffer (the last block could sit in the other).
// CHECK-LABEL: bob.kernel @read_after_loop
// CHECK-NOT: bob.wait_shared
// CHECK-NOT: {async}
bob.kernel @read_after_loop(%k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  scf.for %i = %c0 to %c4 step %c1 {
    %row = arith.muli %i, %c64 : index
    bob.load_shared %k[%c0, %c0, %row] bound %c64 into %ks : !T, !bob.smem<64x64xbf16>
  }
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %ks, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// With a producer (warp specialization) the loop is split by role instead: everything after
// the allocs moves into the consumer region; the producer region recomputes the loop bounds and
// runs the same iterations, each acquiring this iteration's buffer and starting its load there.
// The consumers wait for their buffer where the load was and release it at the end of the body.
!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// CHECK-LABEL: bob.kernel @producer
// CHECK-SAME: (%[[Q:.+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>, %[[K:.+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>)
// CHECK-SAME: producer = true
// CHECK:      %[[N:.+]] = memref.dim %[[Q]]
// CHECK:      %[[QS:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[K0:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: %[[K1:.+]] = bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: bob.warp_specialize producer {
// CHECK-NEXT:   %[[PUB:.+]] = arith.divui %[[N]], %{{.+}} : index
// CHECK-NEXT:   scf.for %[[PI:.+]] = %{{.+}} to %[[PUB]] step
// CHECK:          %[[PEVEN:.+]] = arith.cmpi eq
// CHECK-NEXT:     %[[PBUF:.+]] = arith.select %[[PEVEN]], %[[K0]], %[[K1]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:     bob.producer_acquire %[[PBUF]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:     %[[PROW:.+]] = arith.muli %[[PI]], %{{.+}} : index
// CHECK-NEXT:     bob.load_shared %[[K]][%{{.+}}, %{{.+}}, %[[PROW]]] bound %[[N]] into %[[PBUF]] {async}
// CHECK-NEXT:   }
// CHECK-NEXT: } consumer {
// The load before the loop stays the consumers' own (synchronous).
// CHECK-NEXT:   bob.load_shared %[[Q]]{{.*}} into %[[QS]] :
// CHECK:        scf.for %[[I:.+]] = {{.*}} iter_args
// CHECK:          %[[EVEN:.+]] = arith.cmpi eq
// CHECK-NEXT:     %[[CUR:.+]] = arith.select %[[EVEN]], %[[K0]], %[[K1]] : !bob.smem<64x64xbf16>
// CHECK-NOT:      bob.load_shared
// CHECK:          bob.consumer_wait %[[CUR]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:     %[[S:.+]] = bob.mma %[[QS]], %[[CUR]], %{{.+}} {transpose_b}
// CHECK-NEXT:     bob.consumer_release %[[CUR]] : !bob.smem<64x64xbf16>
// CHECK-NEXT:     scf.yield %[[S]]
// CHECK:        bob.store_tile
// CHECK-NEXT: }
// CHECK-NEXT: bob.return
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

// -----

// An alloc after the loop (say an epilogue's staging tile) does not move the split: the loop is in
// the consumer region, and so is the late alloc. Split after it, the loop would run outside the
// roles, its barriers waiting for the producer.
!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// CHECK-LABEL: bob.kernel @alloc_after_loop
// CHECK-COUNT-3: bob.alloc_shared : <64x64xbf16>
// CHECK-NEXT: bob.warp_specialize producer {
// CHECK:      } consumer {
// CHECK:        scf.for
// CHECK:          bob.consumer_wait
// CHECK:        bob.alloc_shared : <64x32xbf16>
// CHECK-NEXT:   bob.store_tile
// CHECK-NEXT: }
// CHECK-NEXT: bob.return
bob.kernel @alloc_after_loop(%q: !T, %k: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a, producer = true>} {
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
  %late = bob.alloc_shared : !bob.smem<64x32xbf16>
  bob.store_tile %r, %q[%c0, %c0, %c0] bound %n : !bob.rtile<64x64xf32>, !T
  bob.return
}

// -----

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>

// A head computed in the body from the induction variable, as in the grouped key-major sweep
// (step t: head h0 + t / blocks, rows of block t % blocks): the head's ops are recomputed with
// the row's for each issue, divisions included (they run only for iterations that run), once
// for all the loads sharing them; then the loads back to back, so that lowering gives them one
// TMA transaction (a division between two loads would split it).
// CHECK-LABEL: bob.kernel @head_in_loop
// CHECK:      %[[RUNS:.+]] = arith.cmpi slt, %[[LB:.+]], %[[UB:.+]] : index
// CHECK-NEXT: scf.if %[[RUNS]] {
// CHECK-NEXT:   %[[DH0:.+]] = arith.divui %[[LB]], %[[BLOCKS:.+]] : index
// CHECK-NEXT:   %[[H0:.+]] = arith.addi %[[FIRSTHEAD:.+]], %[[DH0]] : index
// CHECK-NEXT:   %[[B0:.+]] = arith.remui %[[LB]], %[[BLOCKS]] : index
// CHECK-NEXT:   %[[ROW0:.+]] = arith.muli %[[B0]], %{{.+}} : index
// CHECK-NEXT:   bob.load_shared %{{.+}}[%{{.+}}, %[[H0]], %[[ROW0]]] bound %{{.+}} into %{{.+}} {async}
// CHECK-NEXT:   bob.load_shared %{{.+}}[%{{.+}}, %[[H0]], %[[ROW0]]] bound %{{.+}} into %{{.+}} {async}
// CHECK-NEXT: }
// CHECK:      scf.for %[[I:.+]] = %[[LB]] to %[[UB]] step %[[STEP:.+]] iter_args
// CHECK:        bob.wait_shared
// CHECK-NEXT:   %[[NEXTI:.+]] = arith.addi %[[I]], %[[STEP]] : index
// CHECK-NEXT:   %[[HASNEXT:.+]] = arith.cmpi slt, %[[NEXTI]], %[[UB]] : index
// CHECK-NEXT:   scf.if %[[HASNEXT]] {
// CHECK-NEXT:     %[[DHN:.+]] = arith.divui %[[NEXTI]], %[[BLOCKS]] : index
// CHECK-NEXT:     %[[HN:.+]] = arith.addi %[[FIRSTHEAD]], %[[DHN]] : index
// CHECK-NEXT:     %[[BN:.+]] = arith.remui %[[NEXTI]], %[[BLOCKS]] : index
// CHECK-NEXT:     %[[ROWN:.+]] = arith.muli %[[BN]], %{{.+}} : index
// CHECK-NEXT:     bob.load_shared %{{.+}}[%{{.+}}, %[[HN]], %[[ROWN]]] bound %{{.+}} into %{{.+}} {async}
// CHECK-NEXT:     bob.load_shared %{{.+}}[%{{.+}}, %[[HN]], %[[ROWN]]] bound %{{.+}} into %{{.+}} {async}
// CHECK-NEXT:   }
// CHECK-NOT:    bob.load_shared
// CHECK:        scf.yield
bob.kernel @head_in_loop(%q: !T, %k: !T, %do: !T) attributes {spec = #bob.spec<kind = bob_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 2, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %q, %c2 : !T
  %qh = memref.dim %q, %c1 : !T
  %kh = memref.dim %k, %c1 : !T
  %group = arith.divui %qh, %kh : index
  %firsthead = arith.muli %c1, %group : index
  %blocks = arith.ceildivui %n, %c64 : index
  %steps = arith.muli %blocks, %group : index
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %dos = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %r = scf.for %t = %c0 to %steps step %c1 iter_args(%acc = %zero) -> (!bob.rtile<64x64xf32>) {
    %dh = arith.divui %t, %blocks : index
    %head = arith.addi %firsthead, %dh : index
    %block = arith.remui %t, %blocks : index
    %row = arith.muli %block, %c64 : index
    bob.load_shared %q[%c0, %head, %row] bound %n into %qs : !T, !bob.smem<64x64xbf16>
    bob.load_shared %do[%c0, %head, %row] bound %n into %dos : !T, !bob.smem<64x64xbf16>
    %s = bob.mma %qs, %dos, %acc {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    scf.yield %s : !bob.rtile<64x64xf32>
  }
  bob.return
}

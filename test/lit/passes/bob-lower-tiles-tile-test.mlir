// bob-lower-tiles: bob.mask's tile_test on a plain mask (no window). With it the whole tile is
// tested first (inside N and M, and with causal its last key at or before its first query's
// diagonal) and only a tile the mask cuts runs the element tests; without it every tile runs
// them and there is no branch.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

// CHECK-LABEL: gpu.func @tile_test(
// CHECK: %[[MN:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[Q0:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[K0:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[QEND:.+]] = arith.addi %[[Q0]], %{{.+}} : i32
// CHECK: %[[KEND:.+]] = arith.addi %[[K0]], %{{.+}} : i32
// CHECK: %[[QIN:.+]] = arith.cmpi sle, %[[QEND]], %{{.+}} : i32
// CHECK: %[[KIN:.+]] = arith.cmpi sle, %[[KEND]], %{{.+}} : i32
// CHECK: %[[IN:.+]] = arith.andi %[[QIN]], %[[KIN]] : i1
// CHECK: %[[DIAG0:.+]] = arith.addi %[[Q0]], %[[MN]] : i32
// CHECK: %[[LASTK:.+]] = arith.subi %[[KEND]], %{{.+}} : i32
// CHECK: %[[NEAR:.+]] = arith.cmpi sle, %[[LASTK]], %[[DIAG0]] : i32
// CHECK: %[[CLEAR:.+]] = arith.andi %[[IN]], %[[NEAR]] : i1
// CHECK: scf.if %[[CLEAR]] -> (vector<32xf32>) {
// CHECK: arith.cmpi sgt, %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: arith.select
// Sequence ends only (no causal): the tile test has no diagonal term.
// CHECK: arith.andi %{{.+}}, %{{.+}} : i1
// CHECK-NEXT: scf.if
// The same mask without tile_test: element tests on every tile, no branch.
// CHECK: arith.cmpi sgt, %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK-NOT: scf.if
// CHECK: gpu.return
bob.kernel @tile_test(%args: memref<4xindex>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = true, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %row0 = memref.load %args[%c0] : memref<4xindex>
  %col0 = memref.load %args[%c1] : memref<4xindex>
  %n = memref.load %args[%c2] : memref<4xindex>
  %m = memref.load %args[%c3] : memref<4xindex>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %a = bob.mask %t at (%row0, %col0) within (%n, %m) {causal, tile_test} : !bob.rtile<64x64xf32>
  %b = bob.mask %a at (%row0, %col0) within (%n, %m) {tile_test} : !bob.rtile<64x64xf32>
  %c = bob.mask %b at (%row0, %col0) within (%n, %m) {causal} : !bob.rtile<64x64xf32>
  bob.return
}

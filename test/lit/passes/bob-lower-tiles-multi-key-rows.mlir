// bob-lower-tiles: bob.multi_key_rows, per query row 1.0 when the mask lets it see two keys or
// more, else 0.0. Row vector element mi * 2 + h is row g + 8h of fragment mi (here one fragment
// per warp: rows +0 and +8 of the thread's base). A row sees the keys from max(0, diagonal -
// left) to min(M - 1, diagonal + right) (diagonal = query + M - N), each bound only where the
// mask has that side, and nothing at or past N.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

// CHECK-LABEL: gpu.func @several_keys(
// The thread's rows: row0 + its base row + [0, 8].
// CHECK: %[[OFFS:.+]] = arith.constant dense<[0, 8]> : vector<2xi32>
// CHECK: %[[Q:.+]] = arith.addi %{{.+}}, %[[OFFS]] : vector<2xi32>
// CHECK: %[[N:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[M:.+]] = arith.index_cast %{{.+}} : index to i32
// No mask side: the last key is M - 1 and the first 0 for every row.
// CHECK: %[[MINUS1:.+]] = arith.subi %[[M]], %{{.+}} : i32
// CHECK: %[[LAST:.+]] = vector.broadcast %[[MINUS1]] : i32 to vector<2xi32>
// CHECK: %[[FIRST:.+]] = arith.constant dense<0> : vector<2xi32>
// CHECK: %[[NV:.+]] = vector.broadcast %[[N]] : i32 to vector<2xi32>
// CHECK: %[[INSIDE:.+]] = arith.cmpi slt, %[[Q]], %[[NV]] : vector<2xi32>
// CHECK: %[[TWO:.+]] = arith.cmpi sgt, %[[LAST]], %[[FIRST]] : vector<2xi32>
// CHECK: %[[BOTH:.+]] = arith.andi %[[INSIDE]], %[[TWO]] : vector<2xi1>
// CHECK: %[[ONE:.+]] = arith.constant dense<1.000000e+00> : vector<2xf32>
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<2xf32>
// CHECK: arith.select %[[BOTH]], %[[ONE]], %[[ZERO]] : vector<2xi1>, vector<2xf32>
// Causal with a left side of 2: the last key is min(diagonal, M - 1), the first
// max(diagonal - 2, 0).
// CHECK: %[[Q2:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<2xi32>
// CHECK: %[[N2:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[M2:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[MN2:.+]] = arith.subi %[[M2]], %[[N2]] : i32
// CHECK: %[[MNV2:.+]] = vector.broadcast %[[MN2]] : i32 to vector<2xi32>
// CHECK: %[[DIAG2:.+]] = arith.addi %[[Q2]], %[[MNV2]] : vector<2xi32>
// CHECK: %[[LAST2:.+]] = arith.minsi %[[DIAG2]], %{{.+}} : vector<2xi32>
// CHECK: %[[L2:.+]] = arith.constant dense<2> : vector<2xi32>
// CHECK: %[[BACK2:.+]] = arith.subi %[[DIAG2]], %[[L2]] : vector<2xi32>
// CHECK: %[[FIRST2:.+]] = arith.maxsi %[[BACK2]], %{{.+}} : vector<2xi32>
// CHECK: arith.cmpi slt, %[[Q2]], %{{.+}} : vector<2xi32>
// CHECK: arith.cmpi sgt, %[[LAST2]], %[[FIRST2]] : vector<2xi32>
// A right side of 3 without causal: the last key is min(diagonal + 3, M - 1); no left bound.
// CHECK: %[[Q3:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<2xi32>
// CHECK: %[[MN3:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[MNV3:.+]] = vector.broadcast %[[MN3]] : i32 to vector<2xi32>
// CHECK: %[[DIAG3:.+]] = arith.addi %[[Q3]], %[[MNV3]] : vector<2xi32>
// CHECK: %[[R3:.+]] = arith.constant dense<3> : vector<2xi32>
// CHECK: %[[REACH3:.+]] = arith.addi %[[DIAG3]], %[[R3]] : vector<2xi32>
// CHECK: %[[LAST3:.+]] = arith.minsi %[[REACH3]], %{{.+}} : vector<2xi32>
// CHECK-NEXT: %[[FIRST3:.+]] = arith.constant dense<0> : vector<2xi32>
// CHECK-NOT: arith.maxsi
// CHECK: arith.cmpi sgt, %[[LAST3]], %[[FIRST3]] : vector<2xi32>
// CHECK: gpu.return
bob.kernel @several_keys(%args: memref<3xindex>) attributes {spec = #bob.spec<kind = bob_q, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %row0 = memref.load %args[%c0] : memref<3xindex>
  %n = memref.load %args[%c1] : memref<3xindex>
  %m = memref.load %args[%c2] : memref<3xindex>
  %a = bob.multi_key_rows at %row0 within (%n, %m) : !bob.rowvec<64>
  %b = bob.multi_key_rows at %row0 within (%n, %m) {causal, window_left = 2} : !bob.rowvec<64>
  %c = bob.multi_key_rows at %row0 within (%n, %m) {window_right = 3} : !bob.rowvec<64>
  bob.return
}

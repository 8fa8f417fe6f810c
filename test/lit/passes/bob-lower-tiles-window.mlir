// bob-lower-tiles: bob.mask with a sliding window (flash-attn's window_size). After the tests of
// the plain mask (outside N or M, and with causal key > diagonal = query + M - N), a window adds
// key > diagonal + window_right and key < diagonal - window_left, each only when given; causal
// sets the right side at 0 (the diagonal itself). Keys on rows: rows are the keys.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

// CHECK-LABEL: gpu.func @window(
// Both sides. The tile passes through when its last key is within `right` of its first query's
// diagonal and its first key within `left` of its last query's (q0 = row0, k0 = col0, tiles of
// 64 x 64, M - N = %MN)...
// CHECK: %[[MN:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[Q0:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[K0:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK: %[[QEND:.+]] = arith.addi %[[Q0]], %{{.+}} : i32
// CHECK: %[[KEND:.+]] = arith.addi %[[K0]], %{{.+}} : i32
// CHECK: %[[IN:.+]] = arith.andi %{{.+}}, %{{.+}} : i1
// CHECK: %[[DIAG0:.+]] = arith.addi %[[Q0]], %[[MN]] : i32
// CHECK: %[[R0:.+]] = arith.constant 3 : i32
// CHECK: %[[REACH:.+]] = arith.addi %[[DIAG0]], %[[R0]] : i32
// CHECK: %[[LASTK:.+]] = arith.subi %[[KEND]], %{{.+}} : i32
// CHECK: %[[NEAR:.+]] = arith.cmpi sle, %[[LASTK]], %[[REACH]] : i32
// CHECK: %[[C1:.+]] = arith.andi %[[IN]], %[[NEAR]] : i1
// CHECK: %[[LASTQ:.+]] = arith.subi %[[QEND]], %{{.+}} : i32
// CHECK: %[[DIAG1:.+]] = arith.addi %[[LASTQ]], %[[MN]] : i32
// CHECK: %[[L0:.+]] = arith.constant 5 : i32
// CHECK: %[[START:.+]] = arith.subi %[[DIAG1]], %[[L0]] : i32
// CHECK: %[[AFTER:.+]] = arith.cmpi sge, %[[K0]], %[[START]] : i32
// CHECK: %[[CLEAR:.+]] = arith.andi %[[C1]], %[[AFTER]] : i1
// CHECK: scf.if %[[CLEAR]] -> (vector<32xf32>) {
// ...else the element tests: (query, key) positions, the sequence bounds, the two window tests.
// CHECK: %[[Q:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[K:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[OUT:.+]] = arith.ori %{{.+}}, %{{.+}} : vector<32xi1>
// CHECK: %[[MNE:.+]] = arith.subi %{{.+}}, %{{.+}} : i32
// CHECK: %[[MNV:.+]] = vector.broadcast %[[MNE]] : i32 to vector<32xi32>
// CHECK: %[[DIAG:.+]] = arith.addi %[[Q]], %[[MNV]] : vector<32xi32>
// CHECK: %[[R:.+]] = arith.constant dense<3> : vector<32xi32>
// CHECK: %[[LAST:.+]] = arith.addi %[[DIAG]], %[[R]] : vector<32xi32>
// CHECK: %[[PAST:.+]] = arith.cmpi sgt, %[[K]], %[[LAST]] : vector<32xi32>
// CHECK: %[[M1:.+]] = arith.ori %[[OUT]], %[[PAST]] : vector<32xi1>
// CHECK: %[[L:.+]] = arith.constant dense<-5> : vector<32xi32>
// CHECK: %[[FIRST:.+]] = arith.addi %[[DIAG]], %[[L]] : vector<32xi32>
// CHECK: %[[BEFORE:.+]] = arith.cmpi slt, %[[K]], %[[FIRST]] : vector<32xi32>
// CHECK: %[[M2:.+]] = arith.ori %[[M1]], %[[BEFORE]] : vector<32xi1>
// CHECK: arith.select %[[M2]], %{{.+}}, %{{.+}} : vector<32xi1>, vector<32xf32>
// Causal with a left side: the diagonal itself bounds the right (no constant added).
// CHECK: %[[Q2:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[K2:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[DIAG2:.+]] = arith.addi %[[Q2]], %{{.+}} : vector<32xi32>
// CHECK-NEXT: arith.cmpi sgt, %[[K2]], %[[DIAG2]] : vector<32xi32>
// CHECK-NEXT: arith.ori
// CHECK-NEXT: %[[L2:.+]] = arith.constant dense<-7> : vector<32xi32>
// CHECK-NEXT: %[[FIRST2:.+]] = arith.addi %[[DIAG2]], %[[L2]] : vector<32xi32>
// CHECK-NEXT: arith.cmpi slt, %[[K2]], %[[FIRST2]] : vector<32xi32>
// Keys on rows, window (-1, 0) written as a right side of 0: rows (keys) past the diagonal of
// the columns (queries), and no left test.
// CHECK: %[[KR:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[QC:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[DIAG3:.+]] = arith.addi %[[QC]], %{{.+}} : vector<32xi32>
// CHECK-NEXT: arith.cmpi sgt, %[[KR]], %[[DIAG3]] : vector<32xi32>
// CHECK-NOT: arith.cmpi slt
// CHECK: gpu.return
bob.kernel @window(%args: memref<4xindex>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %row0 = memref.load %args[%c0] : memref<4xindex>
  %col0 = memref.load %args[%c1] : memref<4xindex>
  %n = memref.load %args[%c2] : memref<4xindex>
  %m = memref.load %args[%c3] : memref<4xindex>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %a = bob.mask %t at (%row0, %col0) within (%n, %m) {window_left = 5, window_right = 3} : !bob.rtile<64x64xf32>
  %b = bob.mask %a at (%row0, %col0) within (%n, %m) {causal, window_left = 7} : !bob.rtile<64x64xf32>
  %c = bob.mask %b at (%row0, %col0) within (%n, %m) {keys_on_rows, window_right = 0} : !bob.rtile<64x64xf32>
  bob.return
}

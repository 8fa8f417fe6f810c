// bob-lower-tiles on the mma.sync path (sm_80 specs; the sm_90a wgmma path: bob-lower-tiles-wgmma.mlir):
// each tile op becomes per-thread vector code, cp.async, ldmatrix and mma.sync.
// The kernels go through bob-allocate-shared and bob-lower-kernel first, as in the pipeline.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s
// Nothing of the bob dialect survives, and no conversion cast is left behind (generic form, so
// every op is spelled "dialect.op").
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' -mlir-print-op-generic | FileCheck %s --check-prefix=NOBOB
// NOBOB: "gpu.module"
// NOBOB-NOT: "bob.
// NOBOB-NOT: !bob.
// NOBOB-NOT: unrealized_conversion_cast

!T = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
!T16 = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1]>>
!H = memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>
!R = memref<?x?x?xf32>

// The one shared-memory symbol, declared once per gpu.module.
// CHECK: gpu.module @flashbob_kernels {
// CHECK-NEXT: memref.global "public" @flashbob_smem : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-NOT: memref.global

//===----------------------------------------------------------------------===//
// alloc_shared: a view of @flashbob_smem at the tile's byte offset, rows padded by 8 elements.
// CHECK-LABEL: gpu.func @alloc_shared(
// CHECK: %[[G0:.+]] = memref.get_global @flashbob_smem : memref<0xi8, #gpu.address_space<workgroup>>
// CHECK: %[[C0:.+]] = memref.cast %[[G0]] : memref<0xi8, #gpu.address_space<workgroup>> to memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[OFF0:.+]] = arith.constant 0 : index
// CHECK: memref.view %[[C0]][%[[OFF0]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x24xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[G1:.+]] = memref.get_global @flashbob_smem
// CHECK: %[[C1:.+]] = memref.cast %[[G1]]
// CHECK: %[[OFF1:.+]] = arith.constant 768 : index
// CHECK: memref.view %[[C1]][%[[OFF1]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[OFF2:.+]] = arith.constant 9984 : index
// CHECK: memref.view %{{.+}}[%[[OFF2]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32x136xf16, #gpu.address_space<workgroup>>
// CHECK: gpu.return
bob.kernel @alloc_shared() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %a = bob.alloc_shared : !bob.smem<16x16xbf16>
  %b = bob.alloc_shared : !bob.smem<64x64xbf16>
  %c = bob.alloc_shared : !bob.smem<32x128xf16>
  bob.return
}

//===----------------------------------------------------------------------===//
// load_shared of a 64x64 bf16 tile by 128 threads: 512 chunks of 16 bytes (8 elements), four
// full rounds of cp.async (no partial round, so no scf.if), zero-filled past `bound`, between
// two barriers.
// CHECK-LABEL: gpu.func @load_shared(
// CHECK-SAME: %[[SRC:[a-z0-9]+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
// CHECK: %[[ROW:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<2xindex>
// CHECK: %[[BOUND:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<2xindex>
// CHECK: %[[VIEW:.+]] = memref.view {{.+}} to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: gpu.barrier
// CHECK-NOT: scf.if
// Round 0: chunk = tid, row r = chunk / 8, column 8 * (chunk % 8).
// CHECK: %[[R:.+]] = arith.divui %[[TID]], %{{.+}} : index
// CHECK: %[[COL:.+]] = arith.muli %{{.+}}, %{{.+}} : index
// CHECK: %[[GROW:.+]] = arith.addi %[[ROW]], %[[R]] : index
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[GROW]], %[[BOUND]] : index
// CHECK: %[[SROW:.+]] = arith.select %[[IN]], %[[GROW]], %{{.+}} : index
// CHECK: %[[N:.+]] = arith.select %[[IN]], %{{.+}}, %{{.+}} : index
// CHECK: %[[T0:.+]] = nvgpu.device_async_copy %[[SRC]][%{{.+}}, %{{.+}}, %[[SROW]], %[[COL]]], %[[VIEW]][%[[R]], %[[COL]]], 8, %[[N]] {bypassL1} : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>> to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CHECK: arith.constant 128 : index
// CHECK: %[[T1:.+]] = nvgpu.device_async_copy {{.+}}, 8, %{{.+}} {bypassL1}
// CHECK: arith.constant 256 : index
// CHECK: %[[T2:.+]] = nvgpu.device_async_copy {{.+}}, 8, %{{.+}} {bypassL1}
// CHECK: arith.constant 384 : index
// CHECK: %[[T3:.+]] = nvgpu.device_async_copy {{.+}}, 8, %{{.+}} {bypassL1}
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: %[[GROUP:.+]] = nvgpu.device_async_create_group %[[T0]], %[[T1]], %[[T2]], %[[T3]]
// CHECK-NEXT: nvgpu.device_async_wait %[[GROUP]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: gpu.return
bob.kernel @load_shared(%q: !T, %args: memref<2xindex>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %row = memref.load %args[%c0] : memref<2xindex>
  %bound = memref.load %args[%c1] : memref<2xindex>
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.load_shared %q[%c0, %c0, %row] bound %bound into %qs : !T, !bob.smem<64x64xbf16>
  bob.return
}

// A 16x16 tile is 32 chunks for 128 threads: one partial round, guarded by chunk < 32.
// CHECK-LABEL: gpu.func @load_shared_partial(
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: gpu.barrier
// CHECK: %[[C32:.+]] = arith.constant 32 : index
// CHECK: %[[OK:.+]] = arith.cmpi ult, %[[TID]], %[[C32]] : index
// CHECK: scf.if %[[OK]] {
// CHECK: nvgpu.device_async_copy {{.+}}, 8, %{{.+}} {bypassL1} : memref<?x?x?x16xbf16, strided<[?, ?, ?, 1]>> to memref<16x24xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: {{^ +}$}}
// CHECK-NEXT: %[[GROUP:.+]] = nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %[[GROUP]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
bob.kernel @load_shared_partial(%q: !T16) attributes {spec = #bob.spec<kind = fwd, head_dim = 16, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %s = bob.alloc_shared : !bob.smem<16x16xbf16>
  bob.load_shared %q[%c0, %c0, %c0] bound %c0 into %s : !T16, !bob.smem<16x16xbf16>
  bob.return
}

//===----------------------------------------------------------------------===//
// S = Q K^T, 64x64x64 with 4 warps: each warp owns 16 rows (1 row fragment) x 8 column
// fragments, over 4 k-slices: 1 * 8 * 4 = 32 mma.sync per thread. Per k-slice, one ldmatrix x4
// for A (Q, row-major: no transpose) and 4 for B (K^T from a [n][k] tile: no transpose).
// CHECK-LABEL: gpu.func @mma_qk(
// CHECK-NOT: transpose = true
// CHECK-COUNT-20: nvgpu.ldmatrix %{{.+}} {numTiles = 4 : i32, transpose = false} : memref<64x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK-NOT: transpose = true
// CHECK-NOT: nvgpu.ldmatrix
// CHECK-LABEL: gpu.return
bob.kernel @mma_qk() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %ks, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}
// Same kernel, counting the products (a second RUN would need its own labels: the counts are
// taken between the function label and its return).
// CHECK-LABEL: gpu.func @mma_qk_count(
// CHECK-COUNT-32: nvvm.mma.sync A[{{.+}}] B[{{.+}}] C[{{.+}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: nvvm.mma.sync
// CHECK-LABEL: gpu.return
bob.kernel @mma_qk_count() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %ks, %z {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// O += P V with P in registers: convert rounds the accumulator to bf16 and views pairs as i32
// (vector<32xf32> -> vector<16xi32>); A comes from those registers (no ldmatrix), B = V from a
// [k][n] tile through ldmatrix.trans: 4 per k-slice, 16 in all, and 32 mma.sync.
// CHECK-LABEL: gpu.func @mma_pv(
// CHECK: %[[NARROW:.+]] = arith.truncf %{{.+}} : vector<32xf32> to vector<32xbf16>
// CHECK-NEXT: %[[P:.+]] = vector.bitcast %[[NARROW]] : vector<32xbf16> to vector<16xi32>
// CHECK: vector.extract %[[P]][0] : i32 from vector<16xi32>
// CHECK-NEXT: vector.extract %[[P]][1] : i32 from vector<16xi32>
// CHECK-NEXT: vector.extract %[[P]][2] : i32 from vector<16xi32>
// CHECK-NEXT: vector.extract %[[P]][3] : i32 from vector<16xi32>
// CHECK-COUNT-16: nvgpu.ldmatrix %{{.+}} {numTiles = 4 : i32, transpose = true}
// CHECK-NOT: nvgpu.ldmatrix
// CHECK-LABEL: gpu.return
bob.kernel @mma_pv() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %acc = bob.mma %pb, %vs, %p : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}
// CHECK-LABEL: gpu.func @mma_pv_count(
// CHECK-COUNT-32: nvvm.mma.sync {{.+}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>{{.+}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: nvvm.mma.sync
// CHECK-LABEL: gpu.return
bob.kernel @mma_pv_count() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %p = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %pb = bob.convert %p : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %acc = bob.mma %pb, %vs, %p : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  bob.return
}

// A^T (B^T): A is read from a [k][m] tile with ldmatrix.trans, B from a [n][k] tile without.
// 64x32x32, 4 warps: per k-slice 1 A load then 2 B loads; 2 k-slices; 1 * 4 * 2 = 8 mma.sync.
// CHECK-LABEL: gpu.func @mma_transposes(
// CHECK: nvgpu.ldmatrix %[[AT:.+]][{{.+}}] {numTiles = 4 : i32, transpose = true} : memref<32x72xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: vector.extract
// CHECK: nvgpu.ldmatrix %[[BT:.+]][{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<32x40xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix %[[BT]][{{.+}}] {numTiles = 4 : i32, transpose = false} : memref<32x40xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix %[[AT]][{{.+}}] {numTiles = 4 : i32, transpose = true}
// CHECK: nvgpu.ldmatrix %[[BT]][{{.+}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.ldmatrix %[[BT]][{{.+}}] {numTiles = 4 : i32, transpose = false}
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-LABEL: gpu.return
bob.kernel @mma_transposes() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %at = bob.alloc_shared : !bob.smem<32x64xbf16>
  %bt = bob.alloc_shared : !bob.smem<32x32xbf16>
  %z = bob.splat 0.0 : !bob.rtile<64x32xf32>
  %s = bob.mma %at, %bt, %z {transpose_a, transpose_b} : !bob.smem<32x64xbf16>, !bob.smem<32x32xbf16>, !bob.rtile<64x32xf32>
  bob.return
}

// f16 operands go to mma.sync as vector<2xf16> (bitcast from the i32 registers).
// CHECK-LABEL: gpu.func @mma_f16(
// CHECK: nvgpu.ldmatrix {{.+}} : memref<64x72xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: llvm.bitcast %{{.+}} : i32 to vector<2xf16>
// CHECK: nvvm.mma.sync {{.+}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: mma_type<bf16>
// CHECK-LABEL: gpu.return
bob.kernel @mma_f16() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = f16, causal = false, arch = sm_80>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xf16>
  %z = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %qs, %z {transpose_b} : !bob.smem<64x64xf16>, !bob.smem<64x64xf16>, !bob.rtile<64x64xf32>
  bob.return
}

//===----------------------------------------------------------------------===//
// Row reductions: each thread combines its 2 * 8 values of a row (15 ops), then across its quad
// with shuffles xor 1 and xor 2; two rows (g, g + 8) per 16-row fragment -> vector<2xf32>.
// CHECK-LABEL: gpu.func @reduce(
// CHECK-COUNT-15: arith.maxnumf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: %[[C1:.+]] = arith.constant 1 : i32
// CHECK-NEXT: %[[W1:.+]] = arith.constant 32 : i32
// CHECK-NEXT: %[[S1:.+]], %{{.+}} = gpu.shuffle xor %[[X1:.+]], %[[C1]], %[[W1]] : f32
// CHECK-NEXT: %[[M1:.+]] = arith.maxnumf %[[X1]], %[[S1]] : f32
// CHECK-NEXT: %[[C2:.+]] = arith.constant 2 : i32
// CHECK-NEXT: %[[W2:.+]] = arith.constant 32 : i32
// CHECK-NEXT: %[[S2:.+]], %{{.+}} = gpu.shuffle xor %[[M1]], %[[C2]], %[[W2]] : f32
// CHECK-NEXT: %[[M2:.+]] = arith.maxnumf %[[M1]], %[[S2]] : f32
// CHECK-NEXT: vector.insert %[[M2]], %{{.+}} [0] : f32 into vector<2xf32>
// CHECK-COUNT-15: arith.maxnumf %{{.+}}, %{{.+}} : f32
// CHECK: gpu.shuffle xor %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: gpu.shuffle xor %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: vector.insert %{{.+}}, %{{.+}} [1] : f32 into vector<2xf32>
// Sum: the same with addf.
// CHECK-COUNT-15: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK: gpu.shuffle xor
// CHECK-NEXT: arith.addf
// CHECK: gpu.shuffle xor
// CHECK-NEXT: arith.addf
// CHECK-NEXT: vector.insert %{{.+}}, %{{.+}} [0] : f32 into vector<2xf32>
// CHECK-COUNT-15: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK: gpu.shuffle xor
// CHECK-NEXT: arith.addf
// CHECK: gpu.shuffle xor
// CHECK-NEXT: arith.addf
// CHECK-NEXT: vector.insert %{{.+}}, %{{.+}} [1] : f32 into vector<2xf32>
// CHECK-NOT: gpu.shuffle
// CHECK-LABEL: gpu.return
bob.kernel @reduce(%lse: !R) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %mx = bob.reduce max %t : !bob.rtile<64x64xf32> -> !bob.rowvec<64>
  %sm = bob.reduce sum %t : !bob.rtile<64x64xf32> -> !bob.rowvec<64>
  %x = bob.add %mx, %sm : !bob.rowvec<64>, !bob.rowvec<64>
  bob.store_vec %x, %lse[%c0, %c0, %c0] bound %c0 : !bob.rowvec<64>, !R
  bob.return
}

//===----------------------------------------------------------------------===//
// mask: query/key positions of the 32 elements as vector<32xi32>, compared with N and M (and,
// causal, key > query + M - N), then one select with the fill value.
// CHECK-LABEL: gpu.func @mask(
// CHECK: %[[ROW0:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<4xindex>
// CHECK: %[[COL0:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<4xindex>
// CHECK: %[[NQ:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<4xindex>
// CHECK: %[[MK:.+]] = memref.load %{{.+}}[%{{.+}}] : memref<4xindex>
// Row offsets of the 4 elements of each fragment: g, g, g + 8, g + 8; columns 2t + 8ni + (0, 1).
// CHECK: %[[ROWOFF:.+]] = arith.constant dense<[0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8]> : vector<32xi32>
// CHECK: %[[QROW:.+]] = arith.addi %[[ROW0]], %{{.+}} : index
// CHECK: %[[QROW32:.+]] = arith.index_cast %[[QROW]] : index to i32
// CHECK: %[[QROWV:.+]] = vector.broadcast %[[QROW32]] : i32 to vector<32xi32>
// CHECK: %[[Q:.+]] = arith.addi %[[QROWV]], %[[ROWOFF]] : vector<32xi32>
// CHECK: %[[COLOFF:.+]] = arith.constant dense<[0, 1, 0, 1, 8, 9, 8, 9, 16, 17, 16, 17, 24, 25, 24, 25, 32, 33, 32, 33, 40, 41, 40, 41, 48, 49, 48, 49, 56, 57, 56, 57]> : vector<32xi32>
// CHECK: %[[KCOL:.+]] = arith.addi %[[COL0]], %{{.+}} : index
// CHECK: %[[KCOL32:.+]] = arith.index_cast %[[KCOL]] : index to i32
// CHECK: %[[KCOLV:.+]] = vector.broadcast %[[KCOL32]] : i32 to vector<32xi32>
// CHECK: %[[K:.+]] = arith.addi %[[KCOLV]], %[[COLOFF]] : vector<32xi32>
// CHECK: %[[N:.+]] = arith.index_cast %[[NQ]] : index to i32
// CHECK: %[[M:.+]] = arith.index_cast %[[MK]] : index to i32
// CHECK: %[[MV:.+]] = vector.broadcast %[[M]] : i32 to vector<32xi32>
// CHECK: %[[PASTK:.+]] = arith.cmpi sge, %[[K]], %[[MV]] : vector<32xi32>
// CHECK: %[[NV:.+]] = vector.broadcast %[[N]] : i32 to vector<32xi32>
// CHECK: %[[PASTQ:.+]] = arith.cmpi sge, %[[Q]], %[[NV]] : vector<32xi32>
// CHECK: %[[OUT:.+]] = arith.ori %[[PASTQ]], %[[PASTK]] : vector<32xi1>
// CHECK: %[[MN:.+]] = arith.subi %[[M]], %[[N]] : i32
// CHECK: %[[MNV:.+]] = vector.broadcast %[[MN]] : i32 to vector<32xi32>
// CHECK: %[[DIAG:.+]] = arith.addi %[[Q]], %[[MNV]] : vector<32xi32>
// CHECK: %[[ABOVE:.+]] = arith.cmpi sgt, %[[K]], %[[DIAG]] : vector<32xi32>
// CHECK: %[[MASKED:.+]] = arith.ori %[[OUT]], %[[ABOVE]] : vector<32xi1>
// CHECK: %[[FILL:.+]] = arith.constant dense<0xFF800000> : vector<32xf32>
// CHECK: arith.select %[[MASKED]], %[[FILL]], %{{.+}} : vector<32xi1>, vector<32xf32>
// Not causal, keys on rows, fill 0: rows are compared with M (keys), columns with N (queries),
// and there is no diagonal test.
// CHECK: %[[ROWS2:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[COLS2:.+]] = arith.addi %{{.+}}, %{{.+}} : vector<32xi32>
// CHECK: %[[N2:.+]] = arith.index_cast %[[NQ]] : index to i32
// CHECK: %[[M2:.+]] = arith.index_cast %[[MK]] : index to i32
// CHECK: %[[MV2:.+]] = vector.broadcast %[[M2]] : i32 to vector<32xi32>
// CHECK: arith.cmpi sge, %[[ROWS2]], %[[MV2]] : vector<32xi32>
// CHECK: %[[NV2:.+]] = vector.broadcast %[[N2]] : i32 to vector<32xi32>
// CHECK: arith.cmpi sge, %[[COLS2]], %[[NV2]] : vector<32xi32>
// CHECK-NOT: arith.cmpi sgt
// CHECK: %[[FILL0:.+]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK: arith.select %{{.+}}, %[[FILL0]], %{{.+}} : vector<32xi1>, vector<32xf32>
// CHECK-LABEL: gpu.return
bob.kernel @mask(%args: memref<4xindex>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = true, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %row0 = memref.load %args[%c0] : memref<4xindex>
  %col0 = memref.load %args[%c1] : memref<4xindex>
  %n = memref.load %args[%c2] : memref<4xindex>
  %m = memref.load %args[%c3] : memref<4xindex>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %a = bob.mask %t at (%row0, %col0) within (%n, %m) {causal} : !bob.rtile<64x64xf32>
  %b = bob.mask %a at (%row0, %col0) within (%n, %m) {keys_on_rows, value = 0.0 : f32} : !bob.rtile<64x64xf32>
  bob.return
}

//===----------------------------------------------------------------------===//
// exp2 / log2: one PTX approximation per element (rowvec<64> with 4 warps is vector<2xf32>).
// CHECK-LABEL: gpu.func @exp2_log2(
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%{{.+}}) : (f32) -> f32
// CHECK-NOT: llvm.nvvm.ex2.approx.ftz.f32
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"(%{{.+}}) : (f32) -> f32
// CHECK-NOT: llvm.call_intrinsic
// CHECK-LABEL: gpu.return
bob.kernel @exp2_log2(%lse: !R) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %v = bob.splat 1.0 : !bob.rowvec<64>
  %e = bob.exp2 %v : !bob.rowvec<64>
  %l = bob.log2 %e : !bob.rowvec<64>
  bob.store_vec %l, %lse[%c0, %c0, %c0] bound %c0 : !bob.rowvec<64>, !R
  bob.return
}

//===----------------------------------------------------------------------===//
// Element-wise ops and broadcasts: a scalar is vector.broadcast, a row vector is gathered with
// element (mi, ni, e) <- row slot e / 2, a column vector with slot 2 * ni + e % 2; replace is a
// compare and a select.
// CHECK-LABEL: gpu.func @elementwise(
// CHECK: %[[SCALE:.+]] = memref.load %{{.+}}[] : memref<f32>
// CHECK: %[[T:.+]] = arith.constant dense<1.000000e+00> : vector<32xf32>
// CHECK: %[[R:.+]] = arith.constant dense<2.000000e+00> : vector<2xf32>
// CHECK: %[[C:.+]] = arith.constant dense<3.000000e+00> : vector<16xf32>
// CHECK: %[[SB:.+]] = vector.broadcast %[[SCALE]] : f32 to vector<32xf32>
// CHECK: %[[T1:.+]] = arith.mulf %[[T]], %[[SB]] : vector<32xf32>
// CHECK: %[[RB:.+]] = vector.shuffle %[[R]], %[[R]] [0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1] : vector<2xf32>, vector<2xf32>
// CHECK: %[[T2:.+]] = arith.subf %[[T1]], %[[RB]] : vector<32xf32>
// CHECK: %[[CB:.+]] = vector.shuffle %[[C]], %[[C]] [0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15] : vector<16xf32>, vector<16xf32>
// CHECK: %[[T3:.+]] = arith.divf %[[T2]], %[[CB]] : vector<32xf32>
// CHECK: %[[T4:.+]] = arith.addf %[[T3]], %[[T3]] : vector<32xf32>
// CHECK: %[[T5:.+]] = arith.maxnumf %[[T4]], %[[T]] : vector<32xf32>
// CHECK: %[[FROM:.+]] = arith.constant dense<0xFF800000> : vector<32xf32>
// CHECK: %[[TO:.+]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK: %[[HIT:.+]] = arith.cmpf oeq, %[[T5]], %[[FROM]] : vector<32xf32>
// CHECK: arith.select %[[HIT]], %[[TO]], %[[T5]] : vector<32xi1>, vector<32xf32>
// CHECK-LABEL: gpu.return
bob.kernel @elementwise(%scale_ref: memref<f32>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %scale = memref.load %scale_ref[] : memref<f32>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %r = bob.splat 2.0 : !bob.rowvec<64>
  %c = bob.splat 3.0 : !bob.colvec<64>
  %t1 = bob.mul %t, %scale : !bob.rtile<64x64xf32>, f32
  %t2 = bob.sub %t1, %r : !bob.rtile<64x64xf32>, !bob.rowvec<64>
  %t3 = bob.div %t2, %c : !bob.rtile<64x64xf32>, !bob.colvec<64>
  %t4 = bob.add %t3, %t3 : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  %t5 = bob.max %t4, %t : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  %t6 = bob.replace %t5, 0xFF800000 -> 0.0 : !bob.rtile<64x64xf32>
  bob.return
}

//===----------------------------------------------------------------------===//
// Register values become per-thread vectors, also through scf.for iter_args:
//   rtile<64x64xf32>, 4 warps -> 1 x 8 fragments x 4 = vector<32xf32>
//   rowvec<64>                -> vector<2xf32>;  colvec<64> -> vector<16xf32>
//   rtile<64x64xbf16>         -> vector<16xi32> (pairs of bf16)
// CHECK-LABEL: gpu.func @loop_types(
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (vector<32xf32>, vector<2xf32>, vector<16xf32>, vector<16xi32>) {
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<32xf32>
// CHECK: scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : vector<32xf32>, vector<2xf32>, vector<16xf32>, vector<16xi32>
// CHECK-LABEL: gpu.return
bob.kernel @loop_types(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %c1 = arith.constant 1 : index
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %r = bob.splat 2.0 : !bob.rowvec<64>
  %c = bob.splat 3.0 : !bob.colvec<64>
  %h = bob.convert %t : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %res:4 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %t, %b = %r, %d = %c, %e = %h) -> (!bob.rtile<64x64xf32>, !bob.rowvec<64>, !bob.colvec<64>, !bob.rtile<64x64xbf16>) {
    %a2 = bob.mul %a, %b : !bob.rtile<64x64xf32>, !bob.rowvec<64>
    scf.yield %a2, %b, %d, %e : !bob.rtile<64x64xf32>, !bob.rowvec<64>, !bob.colvec<64>, !bob.rtile<64x64xbf16>
  }
  bob.return
}

// The per-thread sizes follow the warp count: with 8 warps a 128-row tile is still one row
// fragment per warp (vector<32xf32>); with 1 warp a 64-row tile is 4 (vector<128xf32>), and
// its row vector holds 8 rows per thread.
// CHECK-LABEL: gpu.func @warps8(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: arith.constant dense<1.000000e+00> : vector<32xf32>
// CHECK: arith.constant dense<2.000000e+00> : vector<2xf32>
// CHECK-LABEL: gpu.return
bob.kernel @warps8() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %t = bob.splat 1.0 : !bob.rtile<128x64xf32>
  %r = bob.splat 2.0 : !bob.rowvec<128>
  bob.return
}
// CHECK-LABEL: gpu.func @warps1(
// CHECK-SAME: known_block_size = array<i32: 32, 1, 1>
// CHECK: arith.constant dense<1.000000e+00> : vector<128xf32>
// CHECK: arith.constant dense<2.000000e+00> : vector<8xf32>
// CHECK-LABEL: gpu.return
bob.kernel @warps1() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 1, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  %r = bob.splat 2.0 : !bob.rowvec<64>
  bob.return
}

//===----------------------------------------------------------------------===//
// Register tiles to and from memory. store_shared: barrier, one 2-element store per (row half,
// column fragment) = 2 * 8 = 16 per thread, converted to bf16, barrier.
// CHECK-LABEL: gpu.func @store_shared(
// CHECK: gpu.barrier
// CHECK-COUNT-16: vector.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 4 : i64} : memref<64x72xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: vector.store
// CHECK-LABEL: gpu.return
bob.kernel @store_shared() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  bob.store_shared %t into %s : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>
  bob.return
}

// In and after a loop the thread index an op's lowering reads passes an empty asm statement
// (keepHere), so that the addresses derived from it are formed next to the op, not hoisted out
// of the loop (or shared with the code before it) and held in registers across it; before the
// first loop it is read as it is.
// CHECK-LABEL: gpu.func @thread_index_in_loops(
// CHECK: %[[T0:.+]] = gpu.thread_id x
// CHECK-NOT: llvm.inline_asm
// CHECK: scf.for
// CHECK: %[[T1:.+]] = gpu.thread_id x
// CHECK-NEXT: %[[W1:.+]] = arith.index_castui %[[T1]] : index to i64
// CHECK-NEXT: %[[K1:.+]] = llvm.inline_asm has_side_effects "", "=l,0" %[[W1]] : (i64) -> i64
// CHECK-NEXT: %[[I1:.+]] = arith.index_castui %[[K1]] : i64 to index
// CHECK: arith.divui %[[I1]], %{{.+}} : index
// CHECK: vector.store
// CHECK: scf.yield
// CHECK: %[[T2:.+]] = gpu.thread_id x
// CHECK-NEXT: %[[W2:.+]] = arith.index_castui %[[T2]] : index to i64
// CHECK-NEXT: llvm.inline_asm has_side_effects "", "=l,0" %[[W2]] : (i64) -> i64
// CHECK: vector.store
// CHECK-LABEL: gpu.return
bob.kernel @thread_index_in_loops(%q: !T) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : !T
  %s = bob.alloc_shared : !bob.smem<64x64xbf16>
  %t = bob.splat 1.0 : !bob.rtile<64x64xf32>
  bob.store_shared %t into %s : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %t) -> (!bob.rtile<64x64xf32>) {
    bob.store_shared %a into %s : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>
    scf.yield %a : !bob.rtile<64x64xf32>
  }
  bob.store_shared %r into %s : !bob.rtile<64x64xf32>, !bob.smem<64x64xbf16>
  bob.return
}

// load_tile: per owned row and column fragment, a guarded 2-element load widened to f32 (else
// zeros). store_tile: per owned row, a guarded block of 8 truncating stores.
// CHECK-LABEL: gpu.func @tile_io(
// CHECK-SAME: %[[IN:[a-z0-9]+]]: memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>, %[[OUT:[a-z0-9]+]]: memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>
// CHECK: %[[B:.+]] = memref.dim %[[IN]], %{{.+}} : memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>
// CHECK: %[[OK:.+]] = arith.cmpi ult, %[[ROW:[^,]+]], %[[B]] : index
// CHECK-NEXT: scf.if %[[OK]] -> (vector<2xf32>) {
// CHECK-NEXT: %[[RAW:.+]] = vector.load %[[IN]][%{{.+}}, %{{.+}}, %[[ROW]], %{{.+}}] {alignment = 4 : i64} : memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>, vector<2xf16>
// CHECK-NEXT: %[[WIDE:.+]] = arith.extf %[[RAW]] : vector<2xf16> to vector<2xf32>
// CHECK-NEXT: scf.yield %[[WIDE]] : vector<2xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[Z:.+]] = arith.constant dense<0.000000e+00> : vector<2xf32>
// CHECK-NEXT: scf.yield %[[Z]] : vector<2xf32>
// CHECK-COUNT-15: vector.load %[[IN]]
// CHECK-NOT: vector.load
// CHECK: scf.if %{{.+}} {
// CHECK: %[[NARROW:.+]] = arith.truncf %{{.+}} : vector<2xf32> to vector<2xf16>
// CHECK-NEXT: vector.store %[[NARROW]], %[[OUT]][%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] {alignment = 4 : i64} : memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>, vector<2xf16>
// CHECK-COUNT-7: vector.store %{{.+}}, %[[OUT]]
// CHECK-NEXT: {{^ +}$}}
// CHECK: scf.if %{{.+}} {
// CHECK-COUNT-8: vector.store %{{.+}}, %[[OUT]]
// CHECK-NEXT: {{^ +}$}}
// CHECK-NOT: vector.store
// CHECK-LABEL: gpu.return
bob.kernel @tile_io(%in: !H, %out: !H) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = f16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %bound = memref.dim %in, %c2 : !H
  %t = bob.load_tile %in[%c0, %c0, %c0] bound %bound : !H -> !bob.rtile<64x64xf32>
  bob.store_tile %t, %out[%c0, %c0, %c0] bound %bound : !bob.rtile<64x64xf32>, !H
  bob.return
}

// Vectors: load_vec reads one f32 per owned row (else the padding); store_vec is written by the
// first thread of each quad (t == 0) for rows below the bound.
// CHECK-LABEL: gpu.func @vec_io(
// CHECK-SAME: %[[L:[a-z0-9]+]]: memref<?x?x?xf32>
// CHECK: %[[B:.+]] = memref.dim %[[L]], %{{.+}} : memref<?x?x?xf32>
// CHECK: %[[PAD:.+]] = arith.constant 0xFF800000 : f32
// CHECK: scf.if %{{.+}} -> (f32) {
// CHECK-NEXT: %[[V:.+]] = memref.load %[[L]][%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x?xf32>
// CHECK-NEXT: scf.yield %[[V]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[PAD]] : f32
// CHECK: %[[WRITER:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : index
// CHECK: %[[IN:.+]] = arith.cmpi ult, %{{.+}}, %[[B]] : index
// CHECK: %[[OK:.+]] = arith.andi %[[WRITER]], %[[IN]] : i1
// CHECK: scf.if %[[OK]] {
// CHECK: memref.store %{{.+}}, %[[L]][%{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x?xf32>
// CHECK: arith.andi %[[WRITER]], %{{.+}} : i1
// CHECK: memref.store
// CHECK-NOT: memref.store
// CHECK-LABEL: gpu.return
bob.kernel @vec_io(%lse: !R) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %bound = memref.dim %lse, %c2 : !R
  %v = bob.load_vec %lse[%c0, %c0, %c0] bound %bound {padding = 0xFF800000 : f32} : !R -> !bob.rowvec<64>
  bob.store_vec %v, %lse[%c0, %c0, %c0] bound %bound : !bob.rowvec<64>, !R
  bob.return
}

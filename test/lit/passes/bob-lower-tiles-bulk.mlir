// bob-lower-tiles, sums across blocks (BulkPatterns.cpp), all on the bulk writer warp (the last
// consumer warp: warp 3 of 4). An f32 shared tile keeps padded rows on sm_90a (64 + 4 floats,
// 272 bytes); a bulk reduction starts, from lane l, one cp.reduce.async.bulk of 256 bytes (a
// row) for rows l and l + 32 when they lie before the bound, at the row's global address
// (offset + b s0 + h s1 + row s2 floats from the aligned pointer, all i64 from the memref's LLVM
// descriptor: 64 bits whatever width index arithmetic is lowered at) and its shared address
// (the tile's + r * 272, truncated to 32 bits), then commits; the wait is the bulk group's;
// the semaphore wait polls on lane 0 with an acquire load at GPU scope, then the warp meets
// and fences the async proxy; the signal meets the warp and adds 1 from lane 0 with
// red.release.gpu.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s

// CHECK-LABEL: gpu.func @dq_sums(
// CHECK-SAME: %[[DQ:[^:]+]]: memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>, %[[SEM:[^:]+]]: memref<?x?x?xi32>
// The staged tile: padded rows of 68 floats.
// CHECK: %[[TILE:.+]] = memref.view %{{.+}}[%{{.+}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x68xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// Semaphore wait: warp 3, lane 0 polls.
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: %[[WARP:.+]] = arith.divui %[[TID]], %c32
// CHECK: %[[LANE:.+]] = arith.remui %[[TID]], %c32
// CHECK: %[[W:.+]] = arith.cmpi eq, %[[WARP]], %c3
// CHECK: %[[L0:.+]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK: scf.if %[[W]] {
// CHECK:   scf.if %[[L0]] {
// CHECK:     builtin.unrealized_conversion_cast %[[SEM]] : memref<?x?x?xi32> to !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// CHECK:     %[[PTR:.+]] = llvm.inttoptr %{{.+}} : i64 to !llvm.ptr<1>
// CHECK:     %[[TURN:.+]] = arith.index_cast %{{.+}} : index to i32
// CHECK:     scf.while : () -> () {
// CHECK:       %[[SEEN:.+]] = llvm.load %[[PTR]] atomic syncscope("device") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK:       %[[NOT:.+]] = arith.cmpi ne, %[[SEEN]], %[[TURN]] : i32
// CHECK:       scf.condition(%[[NOT]])
// CHECK:   nvvm.bar.warp.sync %{{.+}}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// Bulk reduction: rows lane and lane + 32, each before the bound.
// CHECK: %[[LANE2:.+]] = arith.remui %{{.+}}, %c32
// CHECK: %[[W2:.+]] = arith.cmpi eq, %{{.+}}, %c3
// CHECK: scf.if %[[W2]] {
// CHECK:   memref.extract_aligned_pointer_as_index %[[TILE]]
// CHECK:   %[[ROW0:.+]] = arith.addi %{{.+}}, %[[LANE2]] : index
// CHECK:   %[[IN0:.+]] = arith.cmpi ult, %[[ROW0]], %{{.+}} : index
// CHECK:   scf.if %[[IN0]] {
// CHECK:     %[[DESC:.+]] = builtin.unrealized_conversion_cast %[[DQ]] : memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>> to !llvm.struct<(ptr, ptr, i64, array<4 x i64>, array<4 x i64>)>
// CHECK:     %[[OFFSET:.+]] = llvm.extractvalue %[[DESC]][2]
// CHECK:     %[[WIDE:.+]] = arith.index_castui %[[ROW0]] : index to i64
// CHECK:     %[[S2:.+]] = llvm.extractvalue %[[DESC]][4, 2]
// CHECK:     arith.muli %[[WIDE]], %[[S2]] : i64
// CHECK:     %[[ALIGNED:.+]] = llvm.extractvalue %[[DESC]][1]
// CHECK:     %[[BASE:.+]] = llvm.ptrtoint %[[ALIGNED]] : !llvm.ptr to i64
// CHECK:     %[[BYTES:.+]] = arith.muli %{{.+}}, %c4_i64 : i64
// CHECK:     %[[DST:.+]] = arith.addi %[[BASE]], %[[BYTES]] : i64
// CHECK:     arith.muli %[[LANE2]], %c272 : index
// CHECK:     %[[SRC:.+]] = arith.trunci %{{.+}} : i64 to i32
// CHECK:     llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], 256;", "l,r" %[[DST]], %[[SRC]] : (i64, i32) -> ()
// CHECK:   }
// CHECK:   arith.addi %[[LANE2]], %c32
// CHECK:   scf.if
// CHECK:     llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], 256;", "l,r"
// CHECK:   }
// CHECK:   nvvm.cp.async.bulk.commit.group
// CHECK: }
// Bulk wait: until the reductions are performed.
// CHECK: scf.if %{{.+}} {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK-NEXT: }
// Semaphore signal.
// CHECK: scf.if %{{.+}} {
// CHECK: nvvm.bar.warp.sync %{{.+}}
// CHECK-NEXT: scf.if %{{.+}} {
// CHECK:   llvm.inline_asm has_side_effects "red.release.gpu.global.add.s32 [$0], 1;", "l" %{{.+}} : (i64) -> ()
// CHECK: gpu.return
!DQ = memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>
!S = memref<?x?x?xi32>
bob.kernel @dq_sums(%dq: !DQ, %sem: !S) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c5 = arith.constant 5 : index
  %n = memref.dim %dq, %c2 : !DQ
  %staged = bob.alloc_shared : !bob.smem<64x64xf32>
  %part = bob.splat 1.0 : !bob.rtile<64x64xf32>
  bob.store_shared %part into %staged : !bob.rtile<64x64xf32>, !bob.smem<64x64xf32>
  bob.semaphore_wait %sem[%c0, %c0, %c5] equals %c2 : !S
  bob.bulk_reduce_add %staged into %dq[%c0, %c0, %c0] bound %n : !bob.smem<64x64xf32>, !DQ
  bob.bulk_wait
  bob.semaphore_signal %sem[%c0, %c0, %c5] : !S
  bob.return
}

// -----

// `read`: the reductions have read the tile (.read), not yet written global memory. 16 rows:
// lanes 16..31 issue none (the row test also checks r < 16).
// CHECK-LABEL: gpu.func @read_only(
// CHECK: arith.cmpi ult, %{{.+}}, %c16
// CHECK: llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], 512;"
// CHECK-NOT: cp.reduce.async.bulk
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
!DQ = memref<?x?x?x128xf32, strided<[?, ?, ?, 1]>>
bob.kernel @read_only(%dq: !DQ) attributes {spec = #bob.spec<kind = bwd_kv, head_dim = 128, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %dq, %c2 : !DQ
  %staged = bob.alloc_shared : !bob.smem<16x128xf32>
  bob.bulk_reduce_add %staged into %dq[%c0, %c0, %c0] bound %n : !bob.smem<16x128xf32>, !DQ
  bob.bulk_wait read
  bob.return
}

// 32-bit index arithmetic (compiler/pipeline/Pipeline.cpp, narrowIndexFor): the upstream
// conversions as buildLoweringPipeline runs them for such a kernel, arith and index at
// index-bitwidth 32, memref and GPU at 64, then bob-join-index-widths. A row's arithmetic
// (block start + thread row) is i32; it reaches the global address zero-extended, and the
// address is the memref descriptor's 64-bit strides times the indices: batch * s0 + head * s1 +
// row * s2 + col in i64, so a (batch, head) slice may pass 2^31 elements. A memref size (the
// sequence length) comes back to the i32 arithmetic truncated. No cast is left for
// reconcile-unrealized-casts.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,convert-arith-to-llvm{index-bitwidth=32},convert-index-to-llvm{index-bitwidth=32},canonicalize,cse,gpu.module(convert-gpu-to-nvvm,bob-join-index-widths,canonicalize,cse,reconcile-unrealized-casts))' | FileCheck %s
// Without the join the two widths do not meet: casts through index are left, which the
// translation to LLVM IR refuses.
// RUN: flashbob-opt %s --pass-pipeline='builtin.module(convert-scf-to-cf,expand-strided-metadata,lower-affine,convert-arith-to-llvm{index-bitwidth=32},convert-index-to-llvm{index-bitwidth=32},canonicalize,cse,gpu.module(convert-gpu-to-nvvm,canonicalize,cse,reconcile-unrealized-casts))' | FileCheck %s --check-prefix=UNJOINED
// UNJOINED: builtin.unrealized_conversion_cast %{{.+}} : i32 to index

// CHECK-LABEL: llvm.func @row_load
// CHECK-SAME: (%{{[^:]+}}: !llvm.ptr, %[[ALIGNED:[^:]+]]: !llvm.ptr, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %{{[^:]+}}: i64, %[[S0:[^:]+]]: i64, %[[S1:[^:]+]]: i64, %[[S2:[^:]+]]: i64, %{{[^:]+}}: i64, %[[B:[^:]+]]: i64, %[[H:[^:]+]]: i64)
// The row: block id * 64 + thread id, in i32 (the ids truncated from the 64-bit GPU ops).
// CHECK:      %[[BID:.+]] = llvm.trunc %{{.+}} : i64 to i32
// CHECK:      %[[TID:.+]] = llvm.trunc %{{.+}} : i64 to i32
// CHECK:      %[[START:.+]] = llvm.mul %[[BID]], %{{.+}} : i32
// CHECK:      %[[ROW:.+]] = llvm.add %[[START]], %[[TID]] : i32
// CHECK:      %[[ROW64:.+]] = llvm.zext %[[ROW]] : i32 to i64
// The bound: the sequence length (a memref size, i64 in the descriptor) truncated; compared in i32.
// CHECK:      %[[N:.+]] = llvm.trunc %{{.+}} : i64 to i32
// CHECK:      llvm.icmp "ult" %[[ROW]], %[[N]] : i32
// The address: 64-bit, from the descriptor's strides.
// CHECK-DAG:  llvm.mul %[[B]], %[[S0]] {{.*}}: i64
// CHECK-DAG:  llvm.mul %[[H]], %[[S1]] {{.*}}: i64
// CHECK-DAG:  llvm.mul %[[ROW64]], %[[S2]] {{.*}}: i64
// CHECK:      llvm.getelementptr {{.*}}%[[ALIGNED]][%{{.+}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK-NOT:  unrealized_conversion_cast
gpu.module @kernels {
  gpu.func @row_load(%t: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>, %b: index, %h: index) kernel {
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %bid = gpu.block_id x
    %tid = gpu.thread_id x
    %start = arith.muli %bid, %c64 : index
    %row = arith.addi %start, %tid : index
    %n = memref.dim %t, %c2 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
    %inside = arith.cmpi ult, %row, %n : index
    scf.if %inside {
      %v = memref.load %t[%b, %h, %row, %c0] : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
      memref.store %v, %t[%b, %h, %row, %c2] : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1]>>
    }
    gpu.return
  }
}

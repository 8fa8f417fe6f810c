// bob-lower-tiles on sm_90a with #bob.spec register_a: a product whose A operand is a converted
// register tile in wgmma's layout (WgmmaRules.h, registerAFits) keeps it in registers and
// becomes one wgmma.mma_async per k16 slice in inline PTX (lower_tiles/WgmmaRegisterA.cpp):
// N/2 accumulators "=f" tied to "0".."N/2-1", the four A registers "r" (registers 4kf..4kf+3
// of the converted tile), B's descriptor "l"; a wgmma.fence before the first slice, a commit
// after the last. The waits that complete such products (bob.product_wait) are
// wgmma.wait_group statements whose operands are every accumulator and A register, tied the
// same way, and the products' readers read its results.
// (Both operands from shared memory: bob-lower-tiles-wgmma.mlir.)
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-stage-operands,bob-allocate-shared),bob-lower-kernel,gpu.module(bob-lower-tiles))' | FileCheck %s --implicit-check-not=unrealized_conversion_cast

// P = convert(S) (64 x 64: 16 registers a thread) times V at N = 32, 64 and 128. S reads both
// operands from shared memory and is waited for, untied, before the convert; P is not staged.
// CHECK-LABEL: gpu.func @widths(
// CHECK:      nvvm.wgmma.mma_async
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  wgmma
// CHECK:      nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:  vector.store
// CHECK:      %[[P:.+]] = vector.bitcast %{{.+}} : vector<32xbf16> to vector<16xi32>
// CHECK-NOT:  vector.store
// N = 32, into zeros: the first slice has scale-d 0 (its accumulator inputs are undef), the
// others 1; V is read MN-major (trans-b 1). Slice kf takes registers 4kf .. 4kf + 3 of P.
// CHECK:      %[[UNDEF:.+]] = llvm.mlir.undef : f32
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[A0:.+]] = vector.extract %[[P]][0] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A1:.+]] = vector.extract %[[P]][1] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A2:.+]] = vector.extract %[[P]][2] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A3:.+]] = vector.extract %[[P]][3] : i32 from vector<16xi32>
// CHECK:      %[[D0:.+]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 0, 0;\0Awgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$32, $33, $34, $35}, $36, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,r,r,r,r,l" %[[UNDEF]], {{.*}}, %[[UNDEF]], %[[A0]], %[[A1]], %[[A2]], %[[A3]], %{{.+}} : (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, i32, i32, i32, i32, i64) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK:      %[[D0_0:.+]] = llvm.extractvalue %[[D0]][0]
// CHECK:      %[[A4:.+]] = vector.extract %[[P]][4] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A5:.+]] = vector.extract %[[P]][5] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A6:.+]] = vector.extract %[[P]][6] : i32 from vector<16xi32>
// CHECK-NEXT: %[[A7:.+]] = vector.extract %[[P]][7] : i32 from vector<16xi32>
// CHECK:      llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$32, $33, $34, $35}, $36, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,r,r,r,r,l" %[[D0_0]], {{.*}}, %[[A4]], %[[A5]], %[[A6]], %[[A7]], %{{.+}} :
// CHECK-COUNT-2: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, {$32, $33, $34, $35}, $36, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,r,r,r,r,l"
// CHECK-NOT:  llvm.inline_asm has_side_effects "{
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// N = 64, into S (not zeros): S's values are the accumulator inputs, every slice has scale-d 1.
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,r,r,r,r,l"
// CHECK-NOT:  llvm.inline_asm has_side_effects "{
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// N = 128.
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      nvvm.wgmma.fence.aligned
// CHECK-NEXT: %{{.+}} = vector.extract %[[P]][0]
// CHECK:      llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 0, 0;\0Awgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,r,r,r,r,l"
// CHECK-COUNT-3: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,r,r,r,r,l"
// CHECK-NOT:  llvm.inline_asm has_side_effects "{
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// The add reads the N = 64 product: the wait before it completes the N = 32 and N = 64
// products (N = 128 stays in flight: wait_group 1) and passes through their accumulators and
// P, once: 16 + 16 + 32 registers, each tied to itself. The add reads the wait's results.
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      %[[W:.+]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63"
// CHECK:      %[[LAST:.+]] = llvm.extractvalue %[[W]][63]
// CHECK-NEXT: %[[O64:.+]] = vector.insert %[[LAST]], %{{.+}} [31] : f32 into vector<32xf32>
// CHECK-NEXT: arith.addf %[[O64]], %[[O64]] : vector<32xf32>
// The kernel's end waits for the last product, with its accumulators (64) and P.
// CHECK-NOT:  nvvm.wgmma.wait.group
// CHECK:      llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79"
// CHECK-NOT:  wgmma
// CHECK:      gpu.return
bob.kernel @widths() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a, register_a = true>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %v32 = bob.alloc_shared : !bob.smem<64x32xbf16>
  %v64 = bob.alloc_shared : !bob.smem<64x64xbf16>
  %v128 = bob.alloc_shared : !bob.smem<64x128xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %s = bob.mma %qs, %ks, %zero {transpose_b} : !bob.smem<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %p = bob.convert %s : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %z32 = bob.splat 0.0 : !bob.rtile<64x32xf32>
  %o32 = bob.mma %p, %v32, %z32 : !bob.rtile<64x64xbf16>, !bob.smem<64x32xbf16>, !bob.rtile<64x32xf32>
  %o64 = bob.mma %p, %v64, %s : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
  %z128 = bob.splat 0.0 : !bob.rtile<64x128xf32>
  %o128 = bob.mma %p, %v128, %z128 : !bob.rtile<64x64xbf16>, !bob.smem<64x128xbf16>, !bob.rtile<64x128xf32>
  %sum = bob.add %o64, %o64 : !bob.rtile<64x64xf32>, !bob.rtile<64x64xf32>
  bob.return
}

// -----

// f16, B read K-major (B = tile^T: trans-b 0), two row warpgroups (8 warps over 128 rows): each
// warpgroup issues the product for its own 64 rows from its own registers. The wait before the
// store (a write) completes it.
// CHECK-LABEL: gpu.func @f16_k_major(
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, {{[01]}}, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 0;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,r,r,r,r,l"
// CHECK-NOT:  llvm.inline_asm has_side_effects "{
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:  wgmma
// CHECK:      llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47"
// CHECK-NOT:  wgmma
// CHECK:      vector.store
bob.kernel @f16_k_major(%q: memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 8, stages = 1, dtype = f16, causal = false, arch = sm_90a, register_a = true>} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %q, %c2 : memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>
  %ks = bob.alloc_shared : !bob.smem<64x64xf16>
  %x = bob.splat 1.0 : !bob.rtile<128x64xf32>
  %zero = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %xh = bob.convert %x : !bob.rtile<128x64xf32> -> !bob.rtile<128x64xf16>
  %o = bob.mma %xh, %ks, %zero {transpose_b} : !bob.rtile<128x64xf16>, !bob.smem<64x64xf16>, !bob.rtile<128x64xf32>
  bob.store_tile %o, %q[%c0, %c0, %c0] bound %n : !bob.rtile<128x64xf32>, memref<?x?x?x64xf16, strided<[?, ?, ?, 1]>>
  bob.return
}

// -----

// Not in wgmma's register layout: a tile of two fragments per warp (128 rows over 4 warps) is
// multiplied by mma.sync from its registers, as without register_a; no wgmma, no tied wait.
// CHECK-LABEL: gpu.func @not_warpgroup_shaped(
// CHECK-NOT:  wgmma
// CHECK:      nvvm.mma.sync
// CHECK-NOT:  wgmma
// CHECK:      gpu.return
bob.kernel @not_warpgroup_shaped() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 128, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a, register_a = true>} {
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %x = bob.splat 1.0 : !bob.rtile<128x64xf32>
  %zero = bob.splat 0.0 : !bob.rtile<128x64xf32>
  %xb = bob.convert %x : !bob.rtile<128x64xf32> -> !bob.rtile<128x64xbf16>
  %o = bob.mma %xb, %vs, %zero : !bob.rtile<128x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<128x64xf32>
  bob.return
}

// -----

// A register tile carried by a loop (the forward's P of the previous step) feeds the product in
// the next iteration; the loop's yield (a terminator) waits for the product, tying its
// accumulators and the carried A registers, and yields the wait's accumulators.
// CHECK-LABEL: gpu.func @carried(
// CHECK:      scf.for {{.*}} iter_args(%[[ACC:.+]] = %{{.+}}, %[[PA:.+]] = %{{.+}}) -> (vector<32xf32>, vector<16xi32>)
// CHECK:      nvvm.wgmma.fence.aligned
// CHECK-NEXT: vector.extract %[[PA]][0] : i32 from vector<16xi32>
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, 1, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,r,r,r,r,l"
// CHECK:      nvvm.wgmma.commit.group.sync.aligned
// CHECK:      %[[W:.+]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47"
// CHECK:      %[[OUT:.+]] = vector.insert %{{.+}}, %{{.+}} [31] : f32 into vector<32xf32>
// CHECK-NOT:  wgmma
// CHECK:      scf.yield %[[OUT]], %{{.+}} : vector<32xf32>, vector<16xi32>
bob.kernel @carried() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a, register_a = true>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %zero = bob.splat 0.0 : !bob.rtile<64x64xf32>
  %p0 = bob.convert %zero : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
  %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero, %p = %p0) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>) {
    %o = bob.mma %p, %vs, %acc : !bob.rtile<64x64xbf16>, !bob.smem<64x64xbf16>, !bob.rtile<64x64xf32>
    %next = bob.convert %acc : !bob.rtile<64x64xf32> -> !bob.rtile<64x64xbf16>
    scf.yield %o, %next : !bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>
  }
  bob.return
}

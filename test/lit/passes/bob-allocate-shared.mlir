// bob-allocate-shared (sm_80: padded layout): shared tiles are placed one after another in program order, each at a
// 128-byte aligned offset, rows padded by 8 elements (16 bytes): size = rows * (cols + 8) * 2
// (sm_90a swizzled tiles: the last case).
// The total goes into the kernel's bob.shared_bytes.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared))' | FileCheck %s
// The flag form nests the pass on bob.kernel implicitly.
// RUN: flashbob-opt %s -split-input-file --bob-allocate-shared | FileCheck %s
// A limit below the need fails on that kernel, naming the bytes it needs; kernels under the
// limit are still placed. (The limit itself is also named: bob-allocate-shared-limit-message.mlir.)
// RUN: not flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared{max-bytes=27647}))' 2>&1 | FileCheck %s --check-prefix=LIMIT
// Exactly at the limit is fine.
// RUN: flashbob-opt %s -split-input-file --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared{max-bytes=36352}))' | FileCheck %s

// The forward kernel's Q, K, V tiles (64x64 bf16): 64 * 72 * 2 = 9216 bytes each.
// CHECK-LABEL: bob.kernel @fwd_tiles
// CHECK-SAME: bob.shared_bytes = 27648 : i64
// CHECK: bob.alloc_shared {offset = 0 : i64} : <64x64xbf16>
// CHECK: bob.alloc_shared {offset = 9216 : i64} : <64x64xbf16>
// CHECK: scf.for
// CHECK: bob.alloc_shared {offset = 18432 : i64} : <64x64xbf16>
// LIMIT: bob-allocate-shared.mlir:[[@LINE+2]]:1: error: shared tiles need 27648 bytes of shared memory, more than the
// LIMIT-SAME: a block may use; use smaller block_m/block_n
bob.kernel @fwd_tiles(%q: memref<?x?x?x64xbf16>) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  // Allocations inside loops are placed too (walk order = program order).
  scf.for %i = %c0 to %c1 step %c1 {
    %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  }
  bob.return
}

// -----

// Mixed shapes: 16x16 -> 16 * 24 * 2 = 768; 32x128 f16 -> 32 * 136 * 2 = 8704;
// 128x64 -> 128 * 72 * 2 = 18432; 16x256 -> 16 * 264 * 2 = 8448. Running offsets 0, 768, 9472,
// 27904; total 36352. Any offset written in the input is replaced.
// CHECK-LABEL: bob.kernel @mixed
// CHECK-SAME: bob.shared_bytes = 36352 : i64
// CHECK: bob.alloc_shared {offset = 0 : i64} : <16x16xbf16>
// CHECK: bob.alloc_shared {offset = 768 : i64} : <32x128xf16>
// CHECK: bob.alloc_shared {offset = 9472 : i64} : <128x64xbf16>
// CHECK: bob.alloc_shared {offset = 27904 : i64} : <16x256xbf16>
// LIMIT: bob-allocate-shared.mlir:[[@LINE+1]]:1: error: shared tiles need 36352 bytes of shared memory
bob.kernel @mixed() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %a = bob.alloc_shared {offset = 12345 : i64} : !bob.smem<16x16xbf16>
  %b = bob.alloc_shared : !bob.smem<32x128xf16>
  %c = bob.alloc_shared : !bob.smem<128x64xbf16>
  %d = bob.alloc_shared : !bob.smem<16x256xbf16>
  bob.return
}

// -----

// No shared tiles: 0 bytes.
// CHECK-LABEL: bob.kernel @no_tiles
// CHECK-SAME: bob.shared_bytes = 0 : i64
bob.kernel @no_tiles() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  bob.return
}

// -----

// Each kernel is placed on its own: offsets restart at 0.
// CHECK-LABEL: bob.kernel @first
// CHECK-SAME: bob.shared_bytes = 9216 : i64
// CHECK: bob.alloc_shared {offset = 0 : i64} : <64x64xbf16>
// CHECK-LABEL: bob.kernel @second
// CHECK-SAME: bob.shared_bytes = 18432 : i64
// CHECK: bob.alloc_shared {offset = 0 : i64} : <128x64xbf16>
// LIMIT-NOT: error:
// LIMIT: bob.kernel @first() attributes {bob.shared_bytes = 9216 : i64
// LIMIT: bob.kernel @second() attributes {bob.shared_bytes = 18432 : i64
bob.kernel @first() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %a = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.return
}
bob.kernel @second() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %a = bob.alloc_shared : !bob.smem<128x64xbf16>
  bob.return
}

// -----

// sm_90a: tiles take the wgmma swizzle (SharedLayout.h): no padding, 1024-byte aligned.
// 64x64 bf16 = 8192 bytes at 0; 16x96 bf16 (three 64-byte column blocks) = 3072 at 8192;
// 32x128 f16 = 8192 at 11264 (already a multiple of 1024); total 19456. Alignment shows when
// 16x16 bf16 (one 32-byte block: 512 bytes) is followed by anything: 19456 + 512 -> 20480.
// CHECK-LABEL: bob.kernel @swizzled
// CHECK-SAME: bob.shared_bytes = 21504 : i64
// CHECK: bob.alloc_shared {offset = 0 : i64} : <64x64xbf16>
// CHECK: bob.alloc_shared {offset = 8192 : i64} : <16x96xbf16>
// CHECK: bob.alloc_shared {offset = 11264 : i64} : <32x128xf16>
// CHECK: bob.alloc_shared {offset = 19456 : i64} : <16x16xbf16>
// CHECK: bob.alloc_shared {offset = 20480 : i64} : <16x32xbf16>
bob.kernel @swizzled() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  %a = bob.alloc_shared : !bob.smem<64x64xbf16>
  %b = bob.alloc_shared : !bob.smem<16x96xbf16>
  %c = bob.alloc_shared : !bob.smem<32x128xf16>
  %d = bob.alloc_shared : !bob.smem<16x16xbf16>
  %e = bob.alloc_shared : !bob.smem<16x32xbf16>
  bob.return
}

// The over-limit error of bob-allocate-shared must name the limit as a number.
//
// RUN: not flashbob-opt %s --pass-pipeline='builtin.module(bob.kernel(bob-allocate-shared{max-bytes=1000}))' 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not flashbob-opt %s --split-input-file --bob-allocate-shared 2>&1 | FileCheck %s --check-prefix=DEFAULT

// SMALL: error: shared tiles need 27648 bytes of shared memory, more than the 1000 a block may use; use smaller block_m/block_n
bob.kernel @fwd_tiles() attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %qs = bob.alloc_shared : !bob.smem<64x64xbf16>
  %ks = bob.alloc_shared : !bob.smem<64x64xbf16>
  %vs = bob.alloc_shared : !bob.smem<64x64xbf16>
  bob.return
}

// -----

// Default limit: the target's (compiler/dialect/Target.h; sm_80: 163 KiB). Two 256x256 tiles
// need 2 * 256 * 264 * 2 = 270336.
// DEFAULT: error: shared tiles need 270336 bytes of shared memory, more than the 166912 a block may use; use smaller block_m/block_n
bob.kernel @too_big() attributes {spec = #bob.spec<kind = fwd, head_dim = 256, block_m = 256, block_n = 256, warps = 8, stages = 1, dtype = bf16, causal = false, arch = sm_80>} {
  %a = bob.alloc_shared : !bob.smem<256x256xbf16>
  %b = bob.alloc_shared : !bob.smem<256x256xbf16>
  bob.return
}

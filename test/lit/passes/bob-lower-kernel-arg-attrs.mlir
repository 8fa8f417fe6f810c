// bob-lower-kernel must keep the kernel's argument attributes (the op accepts and prints them,
// and the pass promises the kernel "moves unchanged").
//
// RUN: flashbob-opt %s --bob-lower-kernel | FileCheck %s

// CHECK: gpu.func @k(%{{.+}}: memref<?x?x?x64xbf16> {llvm.noalias, llvm.readonly}, %{{.+}}: memref<?x?x?x64xbf16> {llvm.noalias}) kernel
bob.kernel @k(%q: memref<?x?x?x64xbf16> {llvm.noalias, llvm.readonly}, %o: memref<?x?x?x64xbf16> {llvm.noalias}) attributes {spec = #bob.spec<kind = fwd, head_dim = 64, block_m = 64, block_n = 64, warps = 4, stages = 1, dtype = bf16, causal = false, arch = sm_90a>} {
  bob.return
}

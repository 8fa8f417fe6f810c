// bob-tensor-map-params: after the GPU-to-NVVM conversion, the tensor-map arguments bob-use-tma
// appended (the last ones, one per entry of bob.tensor_maps) become 128-byte grid-constant
// parameters passed by value; every other argument keeps its attributes, and kernels without
// tensor maps are unchanged.
// RUN: flashbob-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(gpu.module(bob-tensor-map-params))' | FileCheck %s

// CHECK-LABEL: llvm.func @two_maps
// CHECK-SAME: (%{{.+}}: !llvm.ptr {llvm.noalias}, %{{.+}}: i64, %{{.+}}: f32,
// CHECK-SAME: %{{.+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %{{.+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK-LABEL: llvm.func @no_maps
// CHECK-SAME: (%{{.+}}: !llvm.ptr, %{{.+}}: f32)
// CHECK-NOT: grid_constant
gpu.module @kernels {
  llvm.func @two_maps(%a: !llvm.ptr {llvm.noalias}, %n: i64, %s: f32, %m0: !llvm.ptr, %m1: !llvm.ptr) attributes {nvvm.kernel, bob.tensor_maps = [#bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 64, box_cols = 64, swizzle = 128, element_bytes = 2>, #bob.tensor_map<map = 2, tensor = 0, rows_of = 0, box_rows = 32, box_cols = 64, swizzle = 128, element_bytes = 2>]} {
    llvm.return
  }
  llvm.func @no_maps(%a: !llvm.ptr, %s: f32) attributes {nvvm.kernel} {
    llvm.return
  }
}

// -----

// A trailing argument that is not a pointer cannot be a tensor map: the IR did not come from
// bob-use-tma, and passing it by value would change the kernel's parameters silently.
gpu.module @kernels {
  // expected-error @+1 {{tensor-map argument 1 is not an !llvm.ptr}}
  llvm.func @not_a_pointer(%a: !llvm.ptr, %m0: f32) attributes {nvvm.kernel, bob.tensor_maps = [#bob.tensor_map<map = 1, tensor = 0, rows_of = 0, box_rows = 64, box_cols = 64, swizzle = 128, element_bytes = 2>]} {
    llvm.return
  }
}

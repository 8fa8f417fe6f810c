// The kernel specialization: everything the generated code is specialized on.
#ifndef BOB_ATTRS_TD
#define BOB_ATTRS_TD

include "compiler/dialect/BobBase.td"

def Bob_KernelKind : I32EnumAttr<"KernelKind", "which attention kernel", [
    I32EnumAttrCase<"fwd", 0>,        // O and log-sum-exp L
    I32EnumAttrCase<"bwd_q", 1>,      // first backward, query-major: dQ
    I32EnumAttrCase<"bwd_kv", 2>,     // first backward, key-major: dK, dV
    I32EnumAttrCase<"bob_q", 3>,      // BoB pass 1, query-major: gQ, gdO, c, b
    I32EnumAttrCase<"bob_kv", 4>,     // BoB pass 2, key-major: gK, gV
    I32EnumAttrCase<"fwd_jvp", 5>,    // the forward's JVP, query-major: tO
    I32EnumAttrCase<"fwd_dual", 6>,   // the forward and its JVP in one sweep: O, L, tO
    // The fused first backward (sm_90a): bwd_dot, then bwd_fused, then bwd_dq.
    I32EnumAttrCase<"bwd_dot", 7>,    // query-major: D = rowsum(dO o O)
    I32EnumAttrCase<"bwd_fused", 8>,  // key-major: dK, dV, and dQ's parts added into an f32 sum
    I32EnumAttrCase<"bwd_dq", 9>,     // query-major: dQ = s (the f32 sum), in the input type
  ]> {
  let cppNamespace = "::flashbob::bob";
  let genSpecializedAttr = 0;
}
def Bob_KernelKindAttr : EnumAttr<Bob_Dialect, Bob_KernelKind, "kind">;

def Bob_ElemType : I32EnumAttr<"ElemType", "input element type", [
    I32EnumAttrCase<"bf16", 0>,
    I32EnumAttrCase<"f16", 1>,
  ]> {
  let cppNamespace = "::flashbob::bob";
  let genSpecializedAttr = 0;
}
def Bob_ElemTypeAttr : EnumAttr<Bob_Dialect, Bob_ElemType, "dtype">;

// The SM targets code is generated for. What each can do and its limits are one table,
// compiler/dialect/Target.h; sm_90a is the only one with wgmma, TMA and setmaxnreg.
def Bob_Arch : I32EnumAttr<"Arch", "SM target", [
    I32EnumAttrCase<"sm_80", 0>,      // A100
    I32EnumAttrCase<"sm_86", 1>,      // RTX 30xx, A40
    I32EnumAttrCase<"sm_89", 2>,      // RTX 40xx, L40
    I32EnumAttrCase<"sm_90", 3>,      // H100/H200, generic path (mma.sync, cp.async)
    I32EnumAttrCase<"sm_90a", 4>,     // H100/H200 with wgmma, TMA, setmaxnreg
  ]> {
  let cppNamespace = "::flashbob::bob";
  let genSpecializedAttr = 0;
}
def Bob_ArchAttr : EnumAttr<Bob_Dialect, Bob_Arch, "arch">;

def Bob_SpecAttr : AttrDef<Bob_Dialect, "Spec"> {
  let mnemonic = "spec";
  let summary = "Specialization of one kernel variant";
  let description = [{
    The values the code is specialized on. `arch` is the SM target (sm_80 ... sm_90a);
    `stages` the depth of the global->shared pipeline. The softmax scale is not one of them:
    it is a kernel argument (kernels/Signature.h), so a new scale runs the same code.
    `producer` (sm_90a, stages = 2) adds a producer warpgroup after the `warps` consumer warps:
    it issues the key/query loop's TMA loads, so the consumers only wait for full buffers and
    release empty ones (warp specialization; bob-pipeline-loads).
    `register_a` (sm_90a) lets products whose A operand is a converted register tile, in the
    accumulator layout wgmma expects (WgmmaRules.h), read it from registers (wgmma register-A,
    lower_tiles/WgmmaRegisterA.cpp) instead of through a scratch shared tile
    (bob-stage-operands); FLASHBOB_REGISTER_A sets it.
    `tensor_dim` (0: head_dim) is the width of the kernel's global tensors when it is narrower
    than its tiles' head_dim (a multiple of 8 within 16 of it, compiler/dialect/Target.h): the
    kernel reads the columns past it as zeros (TMA's out-of-bounds fill, masked copies) and
    writes only the columns before it. The kernel's tensor memrefs are then tensor_dim wide, and
    its compiled-in default scale is 1/sqrt(tensor_dim).
    Example: `#bob.spec<kind = fwd, head_dim = 128, block_m = 64, block_n = 64, warps = 4,
              stages = 2, dtype = bf16, causal = false, arch = sm_90a>`
  }];
  let parameters = (ins
    "KernelKind":$kind,
    "int64_t":$head_dim,
    "int64_t":$block_m,
    "int64_t":$block_n,
    "int64_t":$warps,
    "int64_t":$stages,
    "ElemType":$dtype,
    "bool":$causal,
    "Arch":$arch,
    DefaultValuedParameter<"int64_t", "1">:$warp_cols,
    DefaultValuedParameter<"bool", "false">:$producer,
    DefaultValuedParameter<"bool", "false">:$register_a,
    DefaultValuedParameter<"int64_t", "0">:$tensor_dim
  );
  let assemblyFormat = [{
    `<` `kind` `=` $kind `,` `head_dim` `=` $head_dim `,` `block_m` `=` $block_m `,`
        `block_n` `=` $block_n `,` `warps` `=` $warps `,` `stages` `=` $stages `,`
        `dtype` `=` $dtype `,` `causal` `=` $causal `,` `arch` `=` $arch
        `` custom<SpecTail>($warp_cols, $producer, $register_a, $tensor_dim) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // Threads per block: the consumer warps, plus a whole producer warpgroup (setmaxnreg acts
    // per warpgroup) after them, so every consumer keeps its thread coordinates.
    int64_t getThreads() const { return 32 * (getWarps() + (getProducer() ? 4 : 0)); }
  }];
}

def Bob_TensorMapAttr : AttrDef<Bob_Dialect, "TensorMap"> {
  let mnemonic = "tensor_map";
  let summary = "A tensor-map argument of a kernel (TMA loads, sm_90a)";
  let description = [{
    Set by bob-use-tma, one per `!llvm.ptr` argument it appends (a CUtensorMap the launcher
    encodes and passes by value: bob-tensor-map-params, support/TensorMapSpec.h), in the
    kernel's `bob.tensor_maps` list:
      map:      index of that !llvm.ptr argument
      tensor:   index of the memref argument (batch, heads, seq, head_dim) it describes
      rows_of:  index of the memref argument whose seq length bounds the rows (zero fill
                past it)
      box_rows, box_cols: the box one TMA copy moves
      swizzle:  the shared tile's swizzle, 32, 64 or 128 bytes
      element_bytes: of the tensor's elements
    Example: `#bob.tensor_map<map = 5, tensor = 1, rows_of = 1, box_rows = 64, box_cols = 64,
              swizzle = 128, element_bytes = 2>`
  }];
  let parameters = (ins "int64_t":$map, "int64_t":$tensor, "int64_t":$rows_of,
                        "int64_t":$box_rows, "int64_t":$box_cols, "int64_t":$swizzle,
                        "int64_t":$element_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Bob_ReduceKind : I32EnumAttr<"ReduceKind", "row reduction", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>,
  ]> {
  let cppNamespace = "::flashbob::bob";
  let genSpecializedAttr = 0;
}
def Bob_ReduceKindAttr : EnumAttr<Bob_Dialect, Bob_ReduceKind, "reduce">;

#endif // BOB_ATTRS_TD

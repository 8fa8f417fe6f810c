// Tile types: the place (shared memory, registers) is the type.
#ifndef BOB_TYPES_TD
#define BOB_TYPES_TD

include "compiler/dialect/BobBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Bob_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Bob_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Bob_SharedTileType : Bob_Type<"SharedTile", "smem"> {
  let summary = "A rows x cols tile in shared memory";
  let description = [{
    Allocated by `bob.alloc_shared`; the compiler places it in the kernel's dynamic shared
    memory and chooses a bank-conflict-free layout (padded rows for ldmatrix).
    Elements are bf16 or f16 (tensor-core operands), or f32: sums staged for
    `bob.bulk_reduce_add`, which are never product operands (always padded rows).
    Example: `!bob.smem<64x128xbf16>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$cols, "::mlir::Type":$elementType);
  let assemblyFormat = "`<` custom<TileShape>($rows, $cols, $elementType) `>`";
  let genVerifyDecl = 1;
}

def Bob_RegTileType : Bob_Type<"RegTile", "rtile"> {
  let summary = "A rows x cols tile held in registers by the whole thread block";
  let description = [{
    Rows are split evenly across the warps of the block (each warp owns rows/warps rows, a
    multiple of 16); within a warp the elements sit in the m16n8 accumulator layout of
    mma.sync, so an f32 tile converted to bf16/f16 is directly the A operand of the next
    product (the FlashAttention-2 register reuse of P).
    Example: `!bob.rtile<64x128xf32>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$cols, "::mlir::Type":$elementType);
  let assemblyFormat = "`<` custom<TileShape>($rows, $cols, $elementType) `>`";
  let genVerifyDecl = 1;
}

def Bob_LocalTileType : Bob_Type<"LocalTile", "ltile"> {
  let summary = "An f32 register tile's copy in each thread's local memory";
  let description = [{
    Each thread keeps its own elements of a register tile of the same shape (same ownership),
    out of the register file: a reserve that a long sweep's accumulator is flushed into now and
    then (`bob.flush`), so that the accumulator restarts small. Allocated zero-filled by
    `bob.alloc_local`. Example: `!bob.ltile<64x128xf32>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$cols, "::mlir::Type":$elementType);
  let assemblyFormat = "`<` custom<TileShape>($rows, $cols, $elementType) `>`";
  let genVerifyDecl = 1;
}

def Bob_RowVecType : Bob_Type<"RowVec", "rowvec"> {
  let summary = "One f32 per row of a register tile, held by the threads owning the row";
  let parameters = (ins "int64_t":$size);
  let assemblyFormat = "`<` $size `>`";
}

def Bob_ColVecType : Bob_Type<"ColVec", "colvec"> {
  let summary = "One f32 per column of a register tile, held by the threads owning the column";
  let parameters = (ins "int64_t":$size);
  let assemblyFormat = "`<` $size `>`";
}

def Bob_ScoreFnType : Bob_Type<"ScoreFn", "score_fn"> {
  let summary = "A score modification defined by bob.score_mod (a handle on its regions)";
  let description = [{
    The value a kernel's tile ops will name to apply the modification, or one of its partial
    derivatives, to a score tile. Defined only by `bob.score_mod`. Example: `!bob.score_fn`.
  }];
}

def Bob_MaskFnType : Bob_Type<"MaskFn", "mask_fn"> {
  let summary = "A mask defined by bob.score_mask (a handle on its region)";
  let description = [{
    The value a kernel's tile ops will name to hide pairs of a score tile. Defined only by
    `bob.score_mask`. Example: `!bob.mask_fn`.
  }];
}

def Bob_AnyVec : AnyTypeOf<[Bob_RowVecType, Bob_ColVecType]>;
def Bob_RegValue : AnyTypeOf<[Bob_RegTileType, Bob_RowVecType, Bob_ColVecType]>;

#endif // BOB_TYPES_TD

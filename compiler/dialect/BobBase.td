// The `bob` dialect: attention kernels as tiles.
//
// Where data lives is part of the type (as in ThunderKittens), so the lowering never has to
// guess a layout:
//   memref<...>            global tensors (batch, heads, seq, head_dim) with runtime strides
//   !bob.smem<RxCxT>       a tile in shared memory (layout chosen by the lowering)
//   !bob.rtile<RxCxT>      a tile in registers, rows split across the warps of the block,
//                          each warp holding mma.sync accumulator fragments
//   !bob.rowvec<R>         one f32 per tile row, held by the threads that own that row
//   !bob.colvec<C>         one f32 per tile column, held by the threads that own that column
// Register values have value semantics (loop-carried through scf.for); shared tiles are memory.
#ifndef BOB_BASE_TD
#define BOB_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Bob_Dialect : Dialect {
  let name = "bob";
  let cppNamespace = "::flashbob::bob";
  let summary = "Tile-level description of attention kernels (forward, backward, BoB)";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect"];
}

class Bob_Op<string mnemonic, list<Trait> traits = []> : Op<Bob_Dialect, mnemonic, traits>;

#endif // BOB_BASE_TD

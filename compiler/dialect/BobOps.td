// Operations of the `bob` dialect. Kernels are written with these (kernels/), verified here,
// and lowered by compiler/passes/.
#ifndef BOB_OPS_TD
#define BOB_OPS_TD

include "compiler/dialect/BobBase.td"
include "compiler/dialect/BobAttrs.td"
include "compiler/dialect/BobTypes.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Dialect/LLVMIR/LLVMOpBase.td"

//===-- Kernel level ------------------------------------------------------------------------===//

def Bob_KernelOp : Bob_Op<"kernel", [FunctionOpInterface, IsolatedFromAbove, Symbol,
                                     SingleBlockImplicitTerminator<"ReturnOp">]> {
  let summary = "One specialized attention kernel";
  let description = [{
    A GPU kernel whose body is written in tile ops. Arguments are the global tensors as
    memrefs: (batch, heads, seq, head_dim) inputs/outputs with runtime sizes and strides, and
    (batch, heads, seq) f32 row vectors (L, D, c, b); then f32 scalars (the softmax scale).
    `spec` is what the code is specialized on.
    The grid is (ceil(seq / block), batch * heads); each block runs the body once.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       Bob_SpecAttr:$spec,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::FunctionType":$type,
                                "SpecAttr":$spec)>];
  let extraClassDeclaration = [{
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() { return getFunctionType().getInputs(); }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() { return getFunctionType().getResults(); }
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    // Bytes of dynamic shared memory, once bob-allocate-shared has run (else 0).
    int64_t getSharedBytes();
  }];
}

def Bob_ReturnOp : Bob_Op<"return", [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "End of a kernel body";
  let assemblyFormat = "attr-dict";
}

//===-- Shared memory and global memory -----------------------------------------------------===//

def Bob_AllocSharedOp : Bob_Op<"alloc_shared", [MemoryEffects<[MemAlloc]>]> {
  let summary = "A tile of the kernel's shared memory";
  let description = [{
    Placed by the compiler (bob-allocate-shared sets `offset`, in bytes, into the kernel's
    dynamic shared memory). Kernel authors never compute addresses or sizes.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Bob_SharedTileType:$tile);
  let assemblyFormat = "attr-dict `:` type($tile)";
}

def Bob_LoadSharedOp : Bob_Op<"load_shared"> {
  let summary = "Copy rows [row, row + tile rows) of src[batch, head] into a shared tile";
  let description = [{
    Rows at or past `bound` (the sequence length) are filled with zeros, so tiles need not
    divide the sequence. The copy is complete and visible to every thread after the op.

    With `async` (placed by bob-pipeline-loads, not by kernel authors) the op only starts the
    copy: it completes at the next `bob.wait_shared`, and whoever issues it must know that
    nobody still reads the tile.

    With `tma` (placed by bob-use-tma on sm_90a) the copy is one TMA box per column block of
    the tile, described by the CUtensorMap at `tensor_map` (a kernel argument the runtime
    fills): the tensor map's sequence length is `bound`, so TMA's own zero fill of rows past
    the end gives the same tile.
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$src, Index:$batch, Index:$head,
                       Index:$row, Index:$bound,
                       Arg<Bob_SharedTileType, "", [MemWrite]>:$dst,
                       Optional<LLVM_AnyPointer>:$tensor_map, UnitAttr:$async);
  let assemblyFormat = [{
    $src `[` $batch `,` $head `,` $row `]` `bound` $bound `into` $dst
    (`tma` $tensor_map^)? attr-dict `:` type($src) `,` type($dst) (`,` type($tensor_map)^)?
  }];
  let hasVerifier = 1;
}

def Bob_WaitSharedOp : Bob_Op<"wait_shared"> {
  let summary = "Complete every asynchronous bob.load_shared of this block";
  let description = [{
    After the op the tiles of all earlier `async` loads are complete and visible to every
    thread (and to wgmma), and every thread has finished what it did before the op.
  }];
  let assemblyFormat = "attr-dict";
}

//===-- Warp specialization (placed by bob-pipeline-loads for a `producer` spec) ------------===//

def Bob_WarpSpecializeOp : Bob_Op<"warp_specialize", [NoTerminator, SingleBlock]> {
  let summary = "Split the block into a producer and the consumers";
  let description = [{
    The `producer` region runs on one thread of the producer warpgroup (the spec's last four
    warps, which give up their registers to the consumers); the `consumer` region on the
    spec's `warps` warps. The producer only issues async TMA loads into buffers it acquired
    (`bob.producer_acquire`); the consumers wait for them (`bob.consumer_wait`) and give the
    buffers back when done (`bob.consumer_release`). Barriers inside the consumer region
    synchronise the consumers only.
  }];
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumer);
  let assemblyFormat = "`producer` $producer `consumer` $consumer attr-dict";
}

def Bob_ProducerAcquireOp : Bob_Op<"producer_acquire"> {
  let summary = "Wait until the consumers released these buffers (their last use is over)";
  let description = [{
    The first acquire of each buffer passes at once. Buffers are named by the shared tiles the
    loads fill (selects of double buffers); the TMA loads filling one batch share one barrier.
  }];
  let arguments = (ins Variadic<Bob_SharedTileType>:$tiles);
  let assemblyFormat = "$tiles attr-dict `:` type($tiles)";
}

def Bob_ConsumerWaitOp : Bob_Op<"consumer_wait"> {
  let summary = "Wait until the producer's loads into these tiles are complete";
  let description = [{
    After the op the tiles are complete and visible to the calling thread (and to wgmma).
    Unlike `bob.wait_shared` it does not synchronise the consumers with each other.
  }];
  let arguments = (ins Variadic<Bob_SharedTileType>:$tiles);
  let assemblyFormat = "$tiles attr-dict `:` type($tiles)";
}

def Bob_ConsumerReleaseOp : Bob_Op<"consumer_release"> {
  let summary = "The calling thread is done reading these tiles";
  let description = [{
    Once every consumer thread released them, the producer may load into them again.
  }];
  let arguments = (ins Variadic<Bob_SharedTileType>:$tiles);
  let assemblyFormat = "$tiles attr-dict `:` type($tiles)";
}

def Bob_StoreSharedOp : Bob_Op<"store_shared"> {
  let summary = "Write a register tile into a shared tile (converting to its element type)";
  let description = [{
    Used to re-read a register tile in another distribution, e.g. dS^T as the A operand of
    dQ = dS K. Visible to every thread after the op.
  }];
  let arguments = (ins Bob_RegTileType:$value, Arg<Bob_SharedTileType, "", [MemWrite]>:$dst);
  let assemblyFormat = "$value `into` $dst attr-dict `:` type($value) `,` type($dst)";
  let hasVerifier = 1;
}

def Bob_LoadTileOp : Bob_Op<"load_tile"> {
  let summary = "Load rows of src[batch, head] straight into a register tile (as f32)";
  let description = [{Rows at or past `bound` read as zero.}];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$src, Index:$batch, Index:$head,
                       Index:$row, Index:$bound);
  let results = (outs Bob_RegTileType:$result);
  let assemblyFormat = [{
    $src `[` $batch `,` $head `,` $row `]` `bound` $bound attr-dict `:` type($src) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Bob_StoreTileOp : Bob_Op<"store_tile", [AttrSizedOperandSegments]> {
  let summary = "Store a register tile to rows of dst[batch, head], converting to its element type";
  let description = [{
    Rows at or past `bound` are not written.

    `through` names a shared tile of the value's shape and the destination's element type
    that nobody reads any more (an epilogue's own input tile, such as the forward's Q for O),
    which the store may use as its staging buffer. With `tma` (placed by bob-use-tma on
    sm_90a when `bound` is the destination's sequence length) each warp writes its own rows
    of the value into that tile and one of its threads stores them with TMA (the tensor map's
    sequence length clips rows past `bound`); without it, and on targets without TMA, every
    thread writes its elements to global memory itself and the tile is untouched.
  }];
  let arguments = (ins Bob_RegTileType:$value, Arg<AnyMemRef, "", [MemWrite]>:$dst, Index:$batch,
                       Index:$head, Index:$row, Index:$bound,
                       Arg<Optional<Bob_SharedTileType>, "", [MemWrite]>:$staging,
                       Optional<LLVM_AnyPointer>:$tensor_map);
  let assemblyFormat = [{
    $value `,` $dst `[` $batch `,` $head `,` $row `]` `bound` $bound
    (`through` $staging^)? (`tma` $tensor_map^)? attr-dict
    `:` type($value) `,` type($dst) (`,` type($staging)^)? (`,` type($tensor_map)^)?
  }];
  let hasVerifier = 1;
}

def Bob_LoadVecOp : Bob_Op<"load_vec"> {
  let summary = "Load a row or column vector from src[batch, head, row : row + size]";
  let description = [{Entries at or past `bound` read as `padding` (default 0).}];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$src, Index:$batch, Index:$head, Index:$row,
                       Index:$bound, DefaultValuedAttr<F32Attr, "0.0">:$padding);
  let results = (outs Bob_AnyVec:$result);
  let assemblyFormat = [{
    $src `[` $batch `,` $head `,` $row `]` `bound` $bound attr-dict `:` type($src) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Bob_StoreVecOp : Bob_Op<"store_vec"> {
  let summary = "Store a row vector to dst[batch, head, row : row + size] (entries past bound skipped)";
  let arguments = (ins Bob_RowVecType:$value, Arg<AnyMemRef, "", [MemWrite]>:$dst, Index:$batch,
                       Index:$head, Index:$row, Index:$bound);
  let assemblyFormat = [{
    $value `,` $dst `[` $batch `,` $head `,` $row `]` `bound` $bound attr-dict
    `:` type($value) `,` type($dst)
  }];
  let hasVerifier = 1;
}

//===-- Sums across blocks: bulk reductions into global memory, semaphores ------------------===//
// What the fused backward (kernels/bwd/FusedBackwardKernel.cpp) adds dQ's partial sums with: each
// key block stages its (query block x head_dim) f32 part in a shared tile and adds it into an
// f32 accumulator in global memory by bulk reductions, one key block after the other in a fixed
// order (a counter per query block that each waits for and then increments), so the sums are
// the same on every run. All four ops run on the bulk writer warp, the last of the consumer
// warps (compiler/passes/WarpRoles.h, bulkWriterWarp); the other threads pass them. sm_90a only.

def Bob_BulkReduceAddOp : Bob_Op<"bulk_reduce_add"> {
  let summary = "dst[batch, head, row + r, :] += src row r, for each row r with row + r < bound";
  let description = [{
    Starts, for each row of the f32 shared tile `src` that lies before `bound` (the sequence
    length), one asynchronous bulk reduction of the row into the f32 tensor `dst`:
    `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32` from a lane of the bulk writer
    warp (lane l takes rows l, l + 32, ...), each lane's rows committed as one bulk group. Each
    element is added atomically; rows past `bound` are not touched. The writes of `src` must be
    visible to the async proxy first (`bob.store_shared` fences them), and `src` must not be
    written again before `bob.bulk_wait` (`read` is enough) says the reductions read it.
    Example: `bob.bulk_reduce_add %staged into %dq[%b, %h, %row] bound %n : !bob.smem<64x64xf32>, memref<?x?x?x64xf32, strided<[?, ?, ?, 1]>>`
  }];
  let arguments = (ins Arg<Bob_SharedTileType, "", [MemRead]>:$src,
                       Arg<AnyMemRef, "", [MemRead, MemWrite]>:$dst, Index:$batch, Index:$head,
                       Index:$row, Index:$bound);
  let assemblyFormat = [{
    $src `into` $dst `[` $batch `,` $head `,` $row `]` `bound` $bound attr-dict
    `:` type($src) `,` type($dst)
  }];
  let hasVerifier = 1;
}

def Bob_BulkWaitOp : Bob_Op<"bulk_wait"> {
  let summary = "Wait until the bulk writer warp's bulk reductions are complete";
  let description = [{
    `cp.async.bulk.wait_group 0` on each lane of the bulk writer warp: the reductions it
    started (`bob.bulk_reduce_add`) have been performed in global memory, so that a
    `bob.semaphore_signal` after it publishes them. With `read` it waits only until they have
    read their source tiles (`.read`), which may then be written again.
  }];
  let arguments = (ins UnitAttr:$read);
  let assemblyFormat = "(`read` $read^)? attr-dict";
  let hasVerifier = 1;
}

def Bob_SemaphoreWaitOp : Bob_Op<"semaphore_wait"> {
  let summary = "Wait until the i32 counter sem[batch, head, index] equals `value`";
  let description = [{
    Lane 0 of the bulk writer warp polls the counter with `ld.acquire.gpu` (an acquire load at
    GPU scope) until it reads `value`; the warp then meets (`bar.warp.sync`) and fences the
    async proxy (`fence.proxy.async.global`), so that the bulk reductions it starts next come
    after everything the counter's last increment published. A block only ever waits for blocks
    that the GPU started before it, or the wait never ends: the kernel orders its turns so.
    Example: `bob.semaphore_wait %sem[%b, %h, %qb] equals %turn : memref<?x?x?xi32>`
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$sem, Index:$batch, Index:$head,
                       Index:$index, Index:$value);
  let assemblyFormat = [{
    $sem `[` $batch `,` $head `,` $index `]` `equals` $value attr-dict `:` type($sem)
  }];
  let hasVerifier = 1;
}

def Bob_SemaphoreSignalOp : Bob_Op<"semaphore_signal"> {
  let summary = "Add 1 to the i32 counter sem[batch, head, index], publishing the warp's writes";
  let description = [{
    The bulk writer warp meets (`bar.warp.sync`: each lane's `bob.bulk_wait` is behind it),
    then its lane 0 adds 1 with `red.release.gpu.global.add.s32`: whoever reads the new value
    with `bob.semaphore_wait` sees the reductions the warp waited for.
    Example: `bob.semaphore_signal %sem[%b, %h, %qb] : memref<?x?x?xi32>`
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead, MemWrite]>:$sem, Index:$batch, Index:$head,
                       Index:$index);
  let assemblyFormat = [{
    $sem `[` $batch `,` $head `,` $index `]` attr-dict `:` type($sem)
  }];
  let hasVerifier = 1;
}

//===-- Local memory: reserves of long sweeps' accumulators --------------------------------===//

def Bob_AllocLocalOp : Bob_Op<"alloc_local", [MemoryEffects<[MemAlloc, MemWrite]>]> {
  let summary = "A zero-filled reserve in each thread's local memory";
  let results = (outs Bob_LocalTileType:$reserve);
  let assemblyFormat = "attr-dict `:` qualified(type($reserve))";
}

def Bob_FlushOp : Bob_Op<"flush", [AllTypesMatch<["acc", "result"]>]> {
  let summary = "reserve += acc (f32, rounded to nearest), and the result is zero";
  let description = [{
    The tensor cores add each product into the f32 accumulator and truncate the sum, so over a
    sweep of many blocks the accumulator drifts toward zero by an amount that grows with its
    magnitude and the number of steps (docs/numerics.md). Moving it into the reserve every few
    blocks and restarting it from zero keeps each truncation small; the sum
    acc + `bob.load_local` of the reserve is the same value in exact arithmetic.

    With `every N` the flush is due after every N-th step of the scf.for whose body holds it
    (counted from the loop's lower bound), the value its body yields: the op must sit in that
    body with the body's scf.yield as its only user. `bob-chunk-sweeps` turns such a loop into
    chunks of N steps with plain flushes between them, so the steps run without a test; a flush
    without `every` happens where it stands.

    Example: `%r = bob.flush %acc into %reserve every 512 : !bob.rtile<64x64xf32>, !bob.ltile<64x64xf32>`
  }];
  let arguments = (ins Bob_RegTileType:$acc,
                       Arg<Bob_LocalTileType, "", [MemRead, MemWrite]>:$reserve,
                       OptionalAttr<I64Attr>:$every);
  let results = (outs Bob_RegTileType:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$acc, "::mlir::Value":$reserve,
                                 CArg<"::mlir::IntegerAttr", "{}">:$every),
                            [{ build($_builder, $_state, acc.getType(), acc, reserve, every); }]>];
  let assemblyFormat = [{
    $acc `into` $reserve (`every` $every^)? attr-dict `:` qualified(type($acc)) `,`
    qualified(type($reserve))
  }];
  let hasVerifier = 1;
}

def Bob_LoadLocalOp : Bob_Op<"load_local"> {
  let summary = "The reserve's contents as a register tile of its shape";
  let arguments = (ins Arg<Bob_LocalTileType, "", [MemRead]>:$reserve);
  let results = (outs Bob_RegTileType:$result);
  let assemblyFormat = [{
    $reserve attr-dict `:` qualified(type($reserve)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

//===-- Register tile arithmetic ------------------------------------------------------------===//

def Bob_MmaOp : Bob_Op<"mma", [AllTypesMatch<["acc", "result"]>]> {
  let summary = "acc + op(a) * op(b) on tensor cores, f32 accumulation";
  let description = [{
    `a` is a shared tile or a bf16/f16 register tile (the converted result of an earlier
    product); `b` is a shared tile. `transpose_a` / `transpose_b` read the shared tile
    transposed (op(x) = x^T). Shapes: op(a) is R x K, op(b) is K x C, acc is R x C, K a multiple
    of 16. Each warp computes its own rows of the result.
  }];
  let arguments = (ins AnyTypeOf<[Bob_SharedTileType, Bob_RegTileType]>:$a,
                       Arg<Bob_SharedTileType, "", [MemRead]>:$b, Bob_RegTileType:$acc,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Bob_RegTileType:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$a, "::mlir::Value":$b, "::mlir::Value":$acc,
                                 "bool":$transposeA, "bool":$transposeB), [{
    build($_builder, $_state, acc.getType(), a, b, acc,
          transposeA ? $_builder.getUnitAttr() : nullptr,
          transposeB ? $_builder.getUnitAttr() : nullptr);
  }]>];
  let assemblyFormat = [{
    $a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `,` type($acc)
  }];
  let hasVerifier = 1;
}

def Bob_ProductWaitOp : Bob_Op<"product_wait"> {
  let summary = "Wait until at most `pending` wgmma products are in flight, passing tiles through";
  let description = [{
    Made by bob-lower-tiles, never by kernels: where a product that reads its A operand from
    registers (#bob.spec register_a) must have completed, placeProductWaits
    (lower_tiles/WgmmaPattern.cpp) puts this wait with the results of the products it completes
    and their register A operands, and the products' results are read from it afterwards. It
    becomes `wgmma.wait_group.sync.aligned pending` with each register as a read-write operand
    (lower_tiles/WgmmaRegisterA.cpp): no reader of the accumulators can be scheduled above the
    wait, and the A registers, which the tensor cores read asynchronously, stay live until it.
    Its results are its operands, in order.
    Example: `%o, %p = bob.product_wait 0 (%acc, %pb) : (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>) -> (!bob.rtile<64x64xf32>, !bob.rtile<64x64xbf16>)`
  }];
  let arguments = (ins I64Attr:$pending, Variadic<Bob_RegTileType>:$tiles);
  let results = (outs Variadic<Bob_RegTileType>:$results);
  let builders = [OpBuilder<(ins "int64_t":$pending, "::mlir::ValueRange":$tiles), [{
    build($_builder, $_state, tiles.getTypes(), $_builder.getI64IntegerAttr(pending), tiles);
  }]>];
  let assemblyFormat = [{
    $pending `(` $tiles `)` attr-dict `:` functional-type($tiles, $results)
  }];
  let hasVerifier = 1;
}

def Bob_SplatOp : Bob_Op<"splat", [Pure]> {
  let summary = "A register tile or vector with every element equal to `value`";
  let arguments = (ins F32Attr:$value);
  let results = (outs Bob_RegValue:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Bob_ConvertOp : Bob_Op<"convert", [Pure]> {
  let summary = "Round an f32 register tile to bf16/f16 (same shape, same thread ownership)";
  let arguments = (ins Bob_RegTileType:$source);
  let results = (outs Bob_RegTileType:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
}

class Bob_BinaryOp<string mnemonic, string what> : Bob_Op<mnemonic, [Pure, AllTypesMatch<["lhs", "result"]>]> {
  let summary = "Element-wise " # what # " with broadcasting";
  let description = [{
    `lhs` is an f32 register tile or vector. `rhs` is a value of the same type, a row vector
    (broadcast along the columns of a tile), a column vector (broadcast along its rows) or an
    f32 scalar.
  }];
  let arguments = (ins Bob_RegValue:$lhs, AnyTypeOf<[Bob_RegValue, F32]>:$rhs);
  let results = (outs Bob_RegValue:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs),
                            [{ build($_builder, $_state, lhs.getType(), lhs, rhs); }]>];
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasVerifier = 1;
}

def Bob_AddOp : Bob_BinaryOp<"add", "a + b">;
def Bob_SubOp : Bob_BinaryOp<"sub", "a - b">;
def Bob_MulOp : Bob_BinaryOp<"mul", "a * b">;
def Bob_DivOp : Bob_BinaryOp<"div", "a / b">;
def Bob_MaxOp : Bob_BinaryOp<"max", "max(a, b)">;

class Bob_UnaryOp<string mnemonic, string what> : Bob_Op<mnemonic, [Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "Element-wise " # what;
  let arguments = (ins Bob_RegValue:$source);
  let results = (outs Bob_RegValue:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$source),
                            [{ build($_builder, $_state, source.getType(), source); }]>];
  let assemblyFormat = "$source attr-dict `:` type($source)";
  let hasVerifier = 1;
}

def Bob_Exp2Op : Bob_UnaryOp<"exp2", "2^x (exp2(-inf) = 0)">;
def Bob_Log2Op : Bob_UnaryOp<"log2", "log2(x) (log2(0) = -inf)">;

def Bob_ReplaceOp : Bob_Op<"replace", [Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "Element-wise `x == from ? to : x`";
  let description = [{
    Guards the few exact special cases of the online softmax, e.g. a row whose keys are all
    masked keeps max = -inf, which is replaced by 0 before `s - max` so no NaN appears.
  }];
  let arguments = (ins Bob_RegValue:$source, F32Attr:$from, F32Attr:$to);
  let results = (outs Bob_RegValue:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$source, "double":$from, "double":$to), [{
    build($_builder, $_state, source.getType(), source,
          $_builder.getF32FloatAttr(static_cast<float>(from)),
          $_builder.getF32FloatAttr(static_cast<float>(to)));
  }]>];
  let assemblyFormat = "$source `,` $from `->` $to attr-dict `:` type($source)";
  let hasVerifier = 1;
}

def Bob_MaskOp : Bob_Op<"mask", [Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "Set masked positions of an S-like tile to `value` (default -inf)";
  let description = [{
    Rows are queries starting at `row`, columns keys starting at `col` (with `keys_on_rows`, the
    other way round). A position is masked when its query is at or past `queries` (N), its key
    at or past `keys` (M), or, with `causal`, key > query + M - N (bottom-right alignment).
    A sliding window masks key > query + M - N + `window_right` and
    key < query + M - N - `window_left` (each side only when given; flash-attn's window_size).
    With `tile_test` (implied by a window) the lowering first tests the whole tile and runs the
    element tests only on tiles the mask cuts (sequence ends, diagonal, window edges): fewer
    instructions per tile, at the cost of a branch whose join ptxas must allocate registers for.
  }];
  let arguments = (ins Bob_RegTileType:$source, Index:$row, Index:$col, Index:$queries,
                       Index:$keys, UnitAttr:$causal, UnitAttr:$keys_on_rows,
                       DefaultValuedAttr<F32Attr, "-std::numeric_limits<float>::infinity()">:$value,
                       OptionalAttr<I64Attr>:$window_left, OptionalAttr<I64Attr>:$window_right,
                       UnitAttr:$tile_test);
  let results = (outs Bob_RegTileType:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$source, "::mlir::Value":$row, "::mlir::Value":$col,
                                 "::mlir::Value":$queries, "::mlir::Value":$keys, "bool":$causal,
                                 "bool":$keysOnRows), [{
    build($_builder, $_state, source.getType(), source, row, col, queries, keys,
          causal ? $_builder.getUnitAttr() : nullptr, keysOnRows ? $_builder.getUnitAttr() : nullptr,
          $_builder.getF32FloatAttr(-std::numeric_limits<float>::infinity()),
          /*window_left=*/nullptr, /*window_right=*/nullptr, /*tile_test=*/nullptr);
  }]>];
  let assemblyFormat = [{
    $source `at` `(` $row `,` $col `)` `within` `(` $queries `,` $keys `)` attr-dict `:` type($source)
  }];
  let hasVerifier = 1;
}

def Bob_MultiKeyRowsOp : Bob_Op<"multi_key_rows", [Pure]> {
  let summary = "1.0 for each query row that sees at least two keys under the mask, else 0.0";
  let description = [{
    Rows are queries starting at `row`; the mask is bob.mask's (`queries` N, `keys` M, `causal`,
    `window_left`, `window_right`), so a row sees the keys from max(0, query + M - N -
    window_left) to min(M - 1, query + M - N + right side), and none when it is at or past N.
    A row that sees one key (or none) has a constant softmax (P = 1 on that key), so every
    derivative of its outputs with respect to its own scores and query is exactly zero. A
    kernel that forms such a derivative as a difference of separately rounded pieces (BoB's
    gQ = s (X1 - c X2 - b X3), whose terms cancel exactly there) multiplies it by this vector,
    so those rows come out as the exact zero rather than the pieces' rounding residue.
  }];
  let arguments = (ins Index:$row, Index:$queries, Index:$keys, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window_left, OptionalAttr<I64Attr>:$window_right);
  let results = (outs Bob_RowVecType:$result);
  let assemblyFormat = [{
    `at` $row `within` `(` $queries `,` $keys `)` attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Bob_ReduceOp : Bob_Op<"reduce", [Pure]> {
  let summary = "Reduce each row of an f32 register tile (sum or max) to a row vector";
  let description = [{
    With column groups (spec warp_cols > 1) each group holds some of the columns: the groups
    combine their partial results through shared memory (two block barriers). `within_group`
    stops at the group's own columns, leaving a partial row vector per group that
    bob.combine_groups finishes: a loop that accumulates row sums pays for the exchange once,
    after the loop. Without column groups `within_group` changes nothing.
  }];
  let arguments = (ins Bob_RegTileType:$source, Bob_ReduceKindAttr:$kind, UnitAttr:$within_group);
  let results = (outs Bob_RowVecType:$result);
  let assemblyFormat = [{
    $kind $source (`within_group` $within_group^)? attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Bob_CombineGroupsOp : Bob_Op<"combine_groups", [Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "Finish row reductions made `within_group`: combine the column groups' parts";
  let description = [{
    Sums (or takes the max of) the column groups' partial row vectors, giving every group the
    full result, through shared memory. The identity without column groups.
  }];
  let arguments = (ins Bob_RowVecType:$source, Bob_ReduceKindAttr:$kind);
  let results = (outs Bob_RowVecType:$result);
  let assemblyFormat = "$kind $source attr-dict `:` type($source)";
  let hasVerifier = 1;
}

//===-- Score modifications -----------------------------------------------------------------===//

def Bob_ScoreModOp : Bob_Op<"score_mod", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames", "getAsmResultNames"]>]> {
  let summary = "A score modification S = f(T): one score element to the modified score";
  let description = [{
    The function a model applies to the plain scores T = s Q K^T before the softmax
    (docs/bob-math.md, "Score modifications"): a softcap, ALiBi, an additive bias, a relative
    position table, or any composition of them. The `body` region maps one element:

      ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index, <captures>):
        ...
        bob.yield %modified : f32

    `b` is the batch, `h` the query head (not the key/value head of a grouped-query kernel),
    `q_idx` and `kv_idx` the query's and the key's positions in their sequences. The captures
    are the op's operands, one block argument each, of the operand's type: scalars (f32, index
    or a signless integer: a softcap, the offset M - N that aligns keys to queries bottom-right)
    and memrefs of f32 or signless integers (ALiBi slopes indexed by h, a bias indexed by
    (b, h, q_idx, kv_idx), a table indexed by (h, bucket)), read only by `memref.load` of the
    block argument itself. The body is straight-line code from a closed set of ops, on f32,
    index and signless integers (no vectors, no control flow, no other memory access):

      arith    constant, addf, subf, mulf, divf, negf, maximumf, minimumf, cmpf, select,
               addi, subi, muli, divsi, remsi, maxsi, minsi, cmpi, andi, ori, xori,
               sitofp, fptosi, index_cast
      math     tanh, exp, log, absf, absi
      memref   load (of a capture)
      bob      yield

    The set is closed under differentiation: every partial derivative below is written with
    the same ops, so whatever evaluates the body evaluates its derivatives too. The op only
    defines the function (it is Pure: its loads run where a kernel applies it). A pair the
    body gives -inf (through a select) is hidden; a mask that does not depend on the score
    should be a `bob.score_mask` instead, whose tiles the kernels can skip whole.

    Partial derivatives follow the body, each a region with the body's arguments, tagged
    `d(...)` with what it differentiates by: `score` (T) or `capture N` (an f32 capture,
    the parameters whose gradients the backward forms). bob-differentiate-score-mod writes
    them (docs/architecture.md):

      d(score)              F1 = f'(T): dT = F1 o dS in the backward, G' = F1 o G in BoB
      d(score, score)       F2 = f''(T): Tbar gains F2 o G o dS in BoB
      d(capture N)          df/dtheta: the first backward's parameter gradient reduces dS
                            with it, BoB's with Sbar
      d(score, capture N)   d(F1)/dtheta: BoB's parameter gradient reduces G o dS with it
      d(capture M, capture N)  d2f/dtheta dtheta': BoB through the parameter gradients

    A partial by scores and scalars yields its value, one f32. A partial by a memref capture
    is a sum over the loads of it: it yields groups, each an f32 coefficient followed by the
    indices of the load (for each memref in the tag, in order), and the gradient adds
    coefficient x cotangent at those indices (a bias's gradient at (b, h, q_idx, kv_idx), a
    table's at (h, bucket)); no group means zero. F1 and F2 are always there once the op is
    differentiated, the constant 1 and 0 (`bob.yield` of an `arith.constant`) when f is T plus
    terms that do not depend on T: getConstantPartial tells the kernels, which then use the
    plain schedule's lines as they are. A parameter partial that is identically zero is left
    out (getConstantPartial gives 0).

    Applying it (a later step: the kernels do not yet): a kernel applies f, F1 or F2 to a
    score tile elementwise over each thread's fragment, with q_idx and kv_idx the element's row
    and column in the tile plus the tile's first query and key (the indices bob.mask computes),
    b and h the block's batch and query head, and the captures the kernel's arguments; the
    lowering inlines the region once per fragment element. The kernels name the result of
    this op, a handle, with the tag of the region they want, so F1 and F2 are found by tag
    (getPartial) whether the front end differentiated the op before building the kernels or
    the pipeline does. Sinks are not part of f (a per-head logit in each row's normalizer,
    with gradients independent of f): the kernels will take them as a separate operand.

    Example (a softcap, c tanh(T / c)):

      %f = bob.score_mod captures(%cap : f32) {
      ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %c: f32):
        %a = arith.divf %s, %c : f32
        %t = math.tanh %a : f32
        %r = arith.mulf %c, %t : f32
        bob.yield %r : f32
      }
  }];
  let arguments = (ins Variadic<AnyType>:$captures, OptionalAttr<ArrayAttr>:$partials);
  let results = (outs Bob_ScoreFnType:$result);
  let regions = (region SizedRegion<1>:$body, VariadicRegion<SizedRegion<1>>:$derivatives);
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$captures,
                                 CArg<"::mlir::ArrayAttr", "{}">:$partials,
                                 CArg<"unsigned", "0">:$derivativesCount), [{
    build($_builder, $_state, ScoreFnType::get($_builder.getContext()), captures, partials,
          derivativesCount);
  }]>];
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    // A partial's tag: what it differentiates by, in order, `kScore` for T and N >= 0 for
    // capture N (score first, then captures in ascending order).
    static constexpr int64_t kScore = -1;
    // The body's leading block arguments before the captures: score, b, h, q_idx, kv_idx.
    static constexpr unsigned kLeadingArgs = 5;
    // The region of the partial tagged `key`, or null when the op has none.
    ::mlir::Region *getPartial(::llvm::ArrayRef<int64_t> key);
    // The partial's value where it is a constant: a region yielding one arith.constant, or 0
    // for a parameter partial left out of a differentiated op (one with d(score)).
    std::optional<double> getConstantPartial(::llvm::ArrayRef<int64_t> key);
    // The tags of the derivative regions, in order.
    ::llvm::SmallVector<::llvm::SmallVector<int64_t, 2>> getPartialKeys();
    // Whether the captures' f32 values (scalars or memref elements) can be differentiated by.
    bool isDifferentiable(int64_t capture);
  }];
}

def Bob_ScoreMaskOp : Bob_Op<"score_mask", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames", "getAsmResultNames"]>]> {
  let summary = "A mask: whether one (query, key) pair is visible";
  let description = [{
    The pairs a model hides beyond the causal mask and window of the kernel's spec (a document
    mask, a prefix-LM mask, a dense boolean mask). The `body` region maps one pair to i1
    (true: visible):

      ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, <captures>):
        ...
        bob.yield %visible : i1

    Arguments, captures and the allowed ops are bob.score_mod's, without the score: the mask
    does not depend on it, so a kernel can evaluate it per tile before any product (and a
    front end per block, to skip the tiles it hides entirely). A hidden pair gets P = 0 and no
    derivative; a mask has no partials. Example (a dense mask of int8 flags):

      %m = bob.score_mask captures(%mask : memref<?x?x?x?xi8>) {
      ^bb0(%b: index, %h: index, %q: index, %kv: index, %flags: memref<?x?x?x?xi8>):
        %x = memref.load %flags[%b, %h, %q, %kv] : memref<?x?x?x?xi8>
        %zero = arith.constant 0 : i8
        %visible = arith.cmpi ne, %x, %zero : i8
        bob.yield %visible : i1
      }
  }];
  let arguments = (ins Variadic<AnyType>:$captures);
  let results = (outs Bob_MaskFnType:$result);
  let regions = (region SizedRegion<1>:$body);
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$captures), [{
    build($_builder, $_state, MaskFnType::get($_builder.getContext()), captures);
  }]>];
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    // The body's leading block arguments before the captures: b, h, q_idx, kv_idx.
    static constexpr unsigned kLeadingArgs = 4;
  }];
}

def Bob_YieldOp : Bob_Op<"yield", [Pure, Terminator,
                                   ParentOneOf<["ScoreModOp", "ScoreMaskOp"]>]> {
  let summary = "End of a score modification's or mask's region: its values";
  let description = [{
    The modified score (bob.score_mod's body), the visibility (bob.score_mask's), or a
    partial derivative's value or groups (bob.score_mod's other regions).
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // BOB_OPS_TD

#include "compiler/passes/lower_tiles/TileLowering.h"
#include "compiler/passes/SharedLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;

namespace flashbob::bob::lowering {

TileTypeConverter::TileTypeConverter(MLIRContext *ctx, int64_t warps, int64_t warpCols, bool hopper)
    : warps_(warps), warpCols_(warpCols), hopper_(hopper) {
  addConversion([](Type t) { return t; });
  addConversion([this, ctx](RegTileType t) -> Type {
    layout::TileShape s = shape(t);
    if (t.getElementType().isF32())
      return VectorType::get({s.accSize()}, Float32Type::get(ctx));
    return VectorType::get({s.operandSize()}, IntegerType::get(ctx, 32));
  });
  addConversion([this, ctx](RowVecType t) -> Type {
    return VectorType::get({shape(t).rowVecSize()}, Float32Type::get(ctx));
  });
  addConversion([this, ctx](ColVecType t) -> Type {
    return VectorType::get({shape(t).colVecSize()}, Float32Type::get(ctx));
  });
  addConversion([ctx](LocalTileType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  // Padded tiles: [rows][pitch]; swizzled ones: [blocks][rows][block cols] (SharedLayout.h).
  addConversion([this, ctx](SharedTileType t) -> Type {
    auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    shared::Layout l = layout(t);
    SmallVector<int64_t> shape = {t.getRows(), l.rowPitch()};
    if (l.swizzled())
      shape = {l.blocks(), t.getRows(), l.blockCols()};
    return MemRefType::get(shape, t.getElementType(), MemRefLayoutAttrInterface(), space);
  });
  // Values crossing a not-yet-converted boundary are bridged by unrealized casts, which must all
  // disappear by the end of the pass (every bob op is converted).
  auto cast = [](OpBuilder &b, Type type, ValueRange inputs, Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs).getResult(0);
  };
  addSourceMaterialization(cast);
  addTargetMaterialization(cast);
}

Value Emitter::index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
Value Emitter::i32(int64_t v) { return arith::ConstantIntOp::create(b, v, 32); }
Value Emitter::f32(double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(), APFloat(static_cast<float>(v)));
}
Value Emitter::splat(VectorType type, double v) {
  Attribute element;
  if (type.getElementType().isF32())
    element = b.getF32FloatAttr(static_cast<float>(v));
  else
    element = b.getIntegerAttr(type.getElementType(), static_cast<int64_t>(v));
  return arith::ConstantOp::create(b, DenseElementsAttr::get(type, element));
}
Value Emitter::extract(Value vec, int64_t i) { return vector::ExtractOp::create(b, vec, i); }
Value Emitter::insert(Value scalar, Value vec, int64_t i) {
  return vector::InsertOp::create(b, scalar, vec, i);
}
Value Emitter::gather(Value vec, ArrayRef<int64_t> indices) {
  return vector::ShuffleOp::create(b, vec, vec, indices);
}
Value Emitter::add(Value a, Value c) { return arith::AddIOp::create(b, a, c); }
Value Emitter::mul(Value a, Value c) { return arith::MulIOp::create(b, a, c); }
Value Emitter::less(Value a, Value c) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, a, c);
}

void Emitter::ifThen(Value cond, llvm::function_ref<void()> then) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  then();
}

Value Emitter::ifElse(Type type, Value cond, llvm::function_ref<Value()> then,
                      llvm::function_ref<Value()> otherwise) {
  auto ifOp = scf::IfOp::create(b, type, cond, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, then());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, otherwise());
  return ifOp.getResult(0);
}

Value Emitter::keepHere(Value value) {
  assert(value.getType().isInteger(64) && "keepHere takes an i64");
  return LLVM::InlineAsmOp::create(b, value.getType(), ValueRange{value}, /*asm_string=*/"",
                                   /*constraints=*/"=l,0",
                                   /*has_side_effects=*/true,
                                   /*is_align_stack=*/false, LLVM::TailCallKind::None,
                                   LLVM::AsmDialectAttr(), ArrayAttr())
      .getRes();
}

namespace {
// Whether code inserted at `point` in `block` runs in a loop or after one in its function: some
// enclosing op is a loop, or some op before the insertion point (at any level of nesting, up to
// the function) is or holds one.
bool inOrAfterLoop(Block *block, Block::iterator point) {
  auto holdsLoop = [](Operation &op) {
    bool found = false;
    op.walk([&](LoopLikeOpInterface) { found = true; });
    return found;
  };
  while (block) {
    for (Operation &op : llvm::make_range(block->begin(), point))
      if (holdsLoop(op))
        return true;
    Operation *parent = block->getParentOp();
    if (!parent || parent->hasTrait<OpTrait::IsIsolatedFromAbove>())
      return false;
    if (isa<LoopLikeOpInterface>(parent))
      return true;
    block = parent->getBlock();
    if (!block)
      return false;
    point = Block::iterator(parent);
  }
  return false;
}
} // namespace

LLVM::InlineAsmOp Emitter::inlinePtx(Type resultType, ValueRange operands, StringRef ptx,
                                     StringRef constraints) {
  return LLVM::InlineAsmOp::create(b, resultType, operands, ptx, constraints,
                                   /*has_side_effects=*/true,
                                   /*is_align_stack=*/false, LLVM::TailCallKind::None,
                                   LLVM::AsmDialectAttr(), ArrayAttr());
}

ThreadCoords Emitter::coords(const TileTypeConverter *conv) {
  ThreadCoords c;
  c.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  // In a loop (the sweep) and after one, the thread index passes keepHere, so that what an op
  // derives from it (its fragment's shared addresses, swizzled store addresses, a column group's
  // descriptor offsets, its mask coordinates) is computed next to the op instead of hoisted out
  // of the loop, or shared with the code before the loop, and held in registers across it: a
  // few integer instructions a step against registers for the loop's whole length (bob_q
  // d = 128 on sm_90a: 255 registers and 60 bytes of spills -> 242 and none; d = 96: the
  // epilogue's addresses, shared with the prologue's, had spilled 8 bytes). Before the first
  // loop LLVM keeps sharing them.
  if (inOrAfterLoop(b.getInsertionBlock(), b.getInsertionPoint()))
    c.tid = arith::IndexCastUIOp::create(
        b, b.getIndexType(), keepHere(arith::IndexCastUIOp::create(b, b.getI64Type(), c.tid)));
  c.warp = arith::DivUIOp::create(b, c.tid, index(32));
  c.lane = arith::RemUIOp::create(b, c.tid, index(32));
  c.g = arith::DivUIOp::create(b, c.lane, index(4));
  c.t = arith::RemUIOp::create(b, c.lane, index(4));
  c.rowWarp = c.warp;
  if (conv && conv->warpCols() > 1) {
    Value groupWarps = index(conv->warps() / conv->warpCols());
    c.rowWarp = arith::RemUIOp::create(b, c.warp, groupWarps);
    c.colGroup = arith::DivUIOp::create(b, c.warp, groupWarps);
  }
  return c;
}

Value Emitter::threadRowBase(const ThreadCoords &c, const layout::TileShape &s) {
  return add(mul(c.rowWarp, index(s.rowsPerWarp())), c.g);
}

Value Emitter::groupColBase(const ThreadCoords &c, const layout::TileShape &s) {
  if (s.warpCols == 1)
    return index(0);
  return mul(c.colGroup, index(s.colsPerWarp()));
}

Value Emitter::threadColBase(const ThreadCoords &c, const layout::TileShape &s) {
  Value col = mul(c.t, index(2));
  if (s.warpCols == 1)
    return col;
  return add(groupColBase(c, s), col);
}

SmallVector<Value> Emitter::sharedIndices(const shared::Layout &l, Value row, Value col) {
  if (!l.swizzled())
    return {row, col};
  // col = block * blockCols + chunk * chunkElems + within; the chunk moves inside its row.
  const int64_t chunkElems = 16 / l.elemBytes;
  Value block = arith::DivUIOp::create(b, col, index(l.blockCols()));
  Value inBlock = arith::RemUIOp::create(b, col, index(l.blockCols()));
  Value chunk = arith::DivUIOp::create(b, inBlock, index(chunkElems));
  Value within = arith::RemUIOp::create(b, inBlock, index(chunkElems));
  Value phase = arith::RemUIOp::create(
      b, arith::DivUIOp::create(b, row, index(128 / l.swizzleBytes)), index(l.swizzleBytes / 16));
  Value stored = arith::XOrIOp::create(b, chunk, phase);
  return {block, row, add(mul(stored, index(chunkElems)), within)};
}

} // namespace flashbob::bob::lowering

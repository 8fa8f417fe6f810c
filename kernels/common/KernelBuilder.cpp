#include "kernels/common/KernelBuilder.h"

#include "kernels/common/AttentionTiles.h"
#include "kernels/common/Tile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::kernels {

KernelBuilder::KernelBuilder(MLIRContext *ctx, const compiler::KernelSpec &spec)
    : spec(spec), module(ModuleOp::create(UnknownLoc::get(ctx))),
      b(UnknownLoc::get(ctx), OpBuilder(ctx)) {
  ctx->loadDialect<bob::BobDialect>();
  b.setInsertionPointToEnd(module->getBody());
}

Type KernelBuilder::elementType() {
  return spec.dtype == bob::ElemType::bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
}

Type KernelBuilder::typeOf(const Param &param) {
  if (param.isScalar)
    return b.getF32Type();
  int64_t dyn = ShapedType::kDynamic;
  // Any strides but a unit one along head_dim (the kernels copy rows in 16-byte pieces).
  auto layout = StridedLayoutAttr::get(b.getContext(), 0, {dyn, dyn, dyn, 1});
  switch (operandInfo(param.operand).layout) {
  case Layout::rows: return MemRefType::get({dyn, dyn, dyn}, b.getF32Type());
  case Layout::offsets: return MemRefType::get({dyn}, b.getI32Type());
  case Layout::sums: return MemRefType::get({dyn, dyn, dyn, spec.headDim}, b.getF32Type(), layout);
  case Layout::counters: return MemRefType::get({dyn, dyn, dyn}, b.getI32Type());
  case Layout::tensor: break;
  }
  // A partial kernel's outputs are f32: the ring sums them over its steps unrounded.
  Type element = isFloat32Tensor(param, spec.partial) ? Type(b.getF32Type()) : elementType();
  // As wide as the tiles, or narrower (#bob.spec tensor_dim: the columns past it read as zeros).
  return MemRefType::get({dyn, dyn, dyn, spec.tensorWidth()}, element, layout);
}

void KernelBuilder::beginKernel() {
  llvm::SmallVector<Type> types;
  for (const Param &p : signature(spec.kind, spec.varlen, spec.partial))
    types.push_back(typeOf(p));
  auto kernel = bob::KernelOp::create(b, spec.name(), b.getFunctionType(types, {}),
                                      spec.toAttr(b.getContext()));
  Block &body = kernel.getBody().front();
  b.setInsertionPointToStart(&body);
  bob::ReturnOp::create(b);
  b.setInsertionPointToStart(&body);
  for (auto [p, value] :
       llvm::zip_equal(signature(spec.kind, spec.varlen, spec.partial), body.getArguments())) {
    if (!p.isScalar)
      args_[static_cast<size_t>(p.operand)] = value;
    else if (spec.scaleArgument)
      scalars_[static_cast<size_t>(p.scalar)] = value;
    else // specialized for the default scale: its values as constants, the argument unread
      scalars_[static_cast<size_t>(p.scalar)] = arith::ConstantOp::create(
          b, b.getF32FloatAttr(scalarValue(p.scalar, defaultScale(spec.tensorWidth()))));
  }

  // N and M from the first (batch, heads, seq, head_dim) operand of each side: q and k for
  // every kind that reads both; the fused backward's bwd_dot and bwd_dq have no key side (no M).
  auto firstOf = [&](Side side) -> Value {
    for (const Param &p : signature(spec.kind, spec.varlen, spec.partial)) {
      if (p.isScalar || operandInfo(p.operand).side != side)
        continue;
      const Layout layout = operandInfo(p.operand).layout;
      if (layout == Layout::tensor || layout == Layout::sums)
        return arg(p.operand);
    }
    return Value();
  };
  Value q = firstOf(Side::query), k = firstOf(Side::key);
  assert(q && "every kind reads or writes some query rows");
  n = dim(q, 2);
  m = k ? dim(k, 2) : Value();
  Value queryHeads = dim(q, 1);
  Value ownHeads = queryHeads;
  if (spec.grouped && k) {
    Value keyHeads = dim(k, 1);
    group = arith::DivUIOp::create(b, queryHeads, keyHeads);
    if (keyMajor())
      ownHeads = keyHeads;
  }
  Value y = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  batch = arith::DivUIOp::create(b, y, ownHeads);
  ownHead = arith::RemUIOp::create(b, y, ownHeads);
  sequence = batch;
  if (spec.varlen) {
    // Before the shared tiles' allocations, so that a producer warpgroup (bob-pipeline-loads)
    // sees the sequence's rows without reloading them.
    batch = index(0);
    std::tie(queryBase, n) = sequenceRows(arg(Operand::cuSeqlensQ), sequence, n);
    if (m)
      std::tie(keyBase, m) = sequenceRows(arg(Operand::cuSeqlensK), sequence, m);
  }
  if (!keyMajor())
    sweptHead = spec.grouped && group ? Value(arith::DivUIOp::create(b, ownHead, group)) : ownHead;
  ownStart = blockStart(ownRows());
}

Value KernelBuilder::arg(Operand operand) const {
  Value v = args_[static_cast<size_t>(operand)];
  assert(v && "the kernel's signature does not take this operand");
  return v;
}

Value KernelBuilder::arg(Scalar scalar) const {
  Value v = scalars_[static_cast<size_t>(scalar)];
  assert(v && "the kernel's signature does not take this scalar");
  return v;
}

Value KernelBuilder::blockStart(int64_t rowsPerBlock) {
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Causal query-major kernels take their query blocks last first: a later block sees more
  // keys, and the GPU starts blocks in blockIdx order, so the longest now start first and the
  // short ones fill the last wave instead of a few long ones running alone at the end.
  // The fused backward's key blocks take their turns at a query block from the last one that
  // sees it when the mask has a right edge (keyBlocksLastFirst): a block may only wait for
  // blocks the GPU started before it, so those start first.
  if ((spec.causal && !keyMajor()) || keyBlocksLastFirst()) {
    Value last = arith::SubIOp::create(b, gpu::GridDimOp::create(b, gpu::Dimension::x), index(1));
    block = arith::SubIOp::create(b, last, block);
  }
  return arith::MulIOp::create(b, block, index(rowsPerBlock));
}

Value KernelBuilder::headOf(Operand operand) const {
  if ((operandInfo(operand).side == Side::key) == keyMajor())
    return ownHead;
  assert(sweptHead && "the swept side's head is known only inside the sweep (key-major kinds)");
  return sweptHead;
}

std::pair<Value, Value> KernelBuilder::sequenceRows(Value offsets, Value sequence, Value total) {
  auto offset = [&](Value i) {
    Value loaded = memref::LoadOp::create(b, offsets, ValueRange{i});
    return arith::IndexCastOp::create(b, b.getIndexType(), loaded).getResult();
  };
  Value begin = offset(sequence);
  Value end = offset(arith::AddIOp::create(b, sequence, index(1)));
  // The host checks the offsets when it can read them (not while a CUDA graph is captured):
  // clamped here too, offsets out of order or past the tensors give a sequence rows inside
  // them, never a negative length or an access outside the tensors.
  begin = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, begin, index(0)), total);
  end = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, end, begin), total);
  return {begin, arith::SubIOp::create(b, end, begin)};
}

Value KernelBuilder::rowOf(Side side, Value local) {
  if (!spec.varlen)
    return local;
  return arith::AddIOp::create(b, side == Side::query ? queryBase : keyBase, local);
}

Value KernelBuilder::sharedBound(Operand operand) {
  const Side side = operandInfo(operand).side;
  if (spec.varlen)
    return dim(arg(operand), 2);
  return side == Side::query ? n : m;
}

std::pair<Value, Value> KernelBuilder::ownRange(Operand operand) {
  const Side side = operandInfo(operand).side;
  assert((side == Side::key) == keyMajor() && "not this block's own side");
  return {rowOf(side, ownStart), rowOf(side, keyMajor() ? m : n)};
}

void KernelBuilder::stage(std::initializer_list<Operand> own,
                          std::initializer_list<Operand> swept) {
  for (Operand o : own)
    shared_[static_cast<size_t>(o)] =
        bob::AllocSharedOp::create(b, smem(ownRows(), spec.headDim), nullptr);
  for (Operand o : swept)
    shared_[static_cast<size_t>(o)] =
        bob::AllocSharedOp::create(b, smem(sweptRows(), spec.headDim), nullptr);
  swept_.assign(swept.begin(), swept.end());
  for (Operand o : own)
    bob::LoadSharedOp::create(b, arg(o), batch, ownHead, ownRange(o).first, sharedBound(o),
                              shared(o), /*tensor_map=*/Value(), /*async=*/false);
}

Value KernelBuilder::shared(Operand operand) const {
  Value v = shared_[static_cast<size_t>(operand)];
  assert(v && "no shared tile was staged for this operand");
  return v;
}

llvm::SmallVector<Value> KernelBuilder::sweep(ValueRange initial, SweepBody body) {
  return sweepImpl(initial, {}, body);
}

llvm::SmallVector<Value> KernelBuilder::sweepLagging(ValueRange initial,
                                                     std::initializer_list<Operand> lagging,
                                                     SweepBody body) {
  assert(!keyMajor() && "the lagging sweep is written for query-major kernels");
  return sweepImpl(initial, llvm::ArrayRef<Operand>(lagging.begin(), lagging.size()), body);
}

Value KernelBuilder::scratch(int64_t rows, int64_t cols) {
  return bob::AllocSharedOp::create(b, smem(rows, cols), nullptr);
}

Value KernelBuilder::sumsTile(int64_t rows, int64_t cols) {
  return bob::AllocSharedOp::create(
      b, bob::SharedTileType::get(b.getContext(), rows, cols, b.getF32Type()), nullptr);
}

void KernelBuilder::addIntoSweptRows(Value staged, Operand operand, Value start) {
  assert(keyMajor() && insideSweep_ && operandInfo(operand).layout == Layout::sums &&
         operandInfo(operand).side == Side::query);
  // Rows past the sequence's own end are not touched (in a packed batch they are the next
  // sequence's).
  bob::BulkReduceAddOp::create(b, staged, arg(operand), batch, headOf(operand),
                               rowOf(Side::query, start), rowOf(Side::query, n));
}

void KernelBuilder::waitForBulk() { bob::BulkWaitOp::create(b, /*read=*/false); }

void KernelBuilder::waitForTurn(Operand counters, Value block, Value turn) {
  assert(keyMajor() && insideSweep_ && operandInfo(counters).layout == Layout::counters);
  bob::SemaphoreWaitOp::create(b, arg(counters), sequence, headOf(counters), block, turn);
}

void KernelBuilder::passTurn(Operand counters, Value block) {
  assert(keyMajor() && insideSweep_ && operandInfo(counters).layout == Layout::counters);
  bob::SemaphoreSignalOp::create(b, arg(counters), sequence, headOf(counters), block);
}

void KernelBuilder::storeInto(const Tile &tile, Value scratch) {
  bob::StoreSharedOp::create(b, tile, scratch);
}

llvm::SmallVector<Value> KernelBuilder::sweepImpl(ValueRange initial,
                                                  llvm::ArrayRef<Operand> lagging,
                                                  SweepBody body) {
  // Query-major: key blocks [firstKeyBlock, keyBlocksToVisit); key-major: query blocks
  // [firstQueryBlock, queryBlocksEnd) (AttentionTiles.h). Key-major with spec.grouped: the same blocks of each
  // of the group's query heads, in one loop over steps [0, group * blocks): step t visits block
  // first + t % blocks of query head ownHead * group + t / blocks.
  const bool groupSweep = keyMajor() && spec.grouped;
  Value lower, upper, first, blocks, blocks32, firstHead;
  if (keyMajor()) {
    upper = queryBlocksEnd(*this, ownStart, n, m);
    lower = first = firstQueryBlock(*this, ownStart, n, m);
    if (spec.windowed()) // a window can leave a key block no query: no steps, none negative
      upper = arith::MaxSIOp::create(b, upper, first);
    if (groupSweep) {
      blocks = arith::SubIOp::create(b, upper, first);
      lower = index(0);
      upper = arith::MulIOp::create(b, blocks, group);
      firstHead = arith::MulIOp::create(b, ownHead, group);
      // Each step divides by the blocks per head in 32 bits: a 64-bit division by a value known
      // only at run time is, from LLVM's NVPTX backend, a branch between a 32-bit and a 64-bit
      // routine on every step. Steps number group * (N / rows per block), far below 2^31.
      blocks32 = narrow(blocks);
    }
  } else {
    upper = keyBlocksToVisit(*this, ownStart, n, m);
    lower = firstKeyBlock(*this, ownStart, n, m);
  }
  if (spec.varlen) {
    // The grid covers the longest sequence: a block past the end of its own has no steps.
    Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, ownStart,
                                         keyMajor() ? m : n);
    upper = arith::SelectOp::create(b, inside, upper, lower);
  }
  // One step more when there are steps at all (a block with none keeps none).
  Value firstStep = lower;
  if (!lagging.empty()) {
    Value any = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, lower, upper);
    upper = arith::SelectOp::create(b, any, arith::AddIOp::create(b, upper, index(1)), upper);
  }
  const Side sweptSide = keyMajor() ? Side::query : Side::key;
  llvm::SmallVector<Value> bounds; // of each swept tile's loads, outside the loop
  for (Operand o : swept_)
    bounds.push_back(sharedBound(o));
  Value step = index(1);
  auto loop = scf::ForOp::create(
      b, lower, upper, step, initial,
      [&](OpBuilder &nested, Location, Value blockIndex, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        insideSweep_ = true;
        if (groupSweep) {
          Value t = narrow(blockIndex);
          sweptHead = arith::AddIOp::create(b, firstHead,
                                            widen(arith::DivUIOp::create(b, t, blocks32)));
          blockIndex = arith::AddIOp::create(b, first,
                                             widen(arith::RemUIOp::create(b, t, blocks32)));
        } else if (keyMajor()) {
          sweptHead = ownHead;
        }
        Value start = arith::MulIOp::create(b, blockIndex, index(sweptRows()));
        Value row = rowOf(sweptSide, start), laggingRow;
        if (!lagging.empty()) {
          // Block j - 1, and block `first` again on the first step (never a row before it).
          Value previous = arith::MaxSIOp::create(
              b, arith::SubIOp::create(b, blockIndex, index(1)), firstStep);
          laggingRow = rowOf(sweptSide, arith::MulIOp::create(b, previous, index(sweptRows())));
        }
        for (auto [o, bound] : llvm::zip_equal(swept_, bounds))
          bob::LoadSharedOp::create(b, arg(o), batch, headOf(o),
                                    llvm::is_contained(lagging, o) ? laggingRow : row, bound,
                                    shared(o), /*tensor_map=*/Value(), /*async=*/false);
        scf::YieldOp::create(b, body(start, carried));
      });
  if (keyMajor())
    sweptHead = Value();
  insideSweep_ = false;
  return llvm::SmallVector<Value>(loop.getResults());
}

Value KernelBuilder::reserve(const Tile &like) {
  if (!spec.longSweep)
    return Value();
  auto type = llvm::cast<bob::RegTileType>(like.value().getType());
  return bob::AllocLocalOp::create(
      b, bob::LocalTileType::get(b.getContext(), type.getRows(), type.getCols(), b.getF32Type()));
}

Tile KernelBuilder::flush(const Tile &acc, Value reserve) {
  assert(insideSweep_ && "flush is for accumulators inside a sweep");
  if (!reserve)
    return acc;
  // Due every kFlushBlocks steps; bob-chunk-sweeps runs the sweep in chunks of that many steps
  // with the flushes between them, so no step tests for it.
  return {*this, bob::FlushOp::create(b, acc, reserve, b.getI64IntegerAttr(kFlushBlocks))};
}

Tile KernelBuilder::withReserve(const Tile &acc, Value reserve) {
  if (!reserve)
    return acc;
  Tile kept{*this, bob::LoadLocalOp::create(b, acc.value().getType(), reserve)};
  return acc + kept;
}

Tile KernelBuilder::loadOwn(Operand operand) {
  auto [start, bound] = ownRange(operand);
  return {*this, bob::LoadTileOp::create(b, rtile(ownRows(), spec.headDim), arg(operand), batch,
                                         ownHead, start, bound)};
}

Tile KernelBuilder::loadOwnRows(Operand operand) {
  auto [start, bound] = ownRange(operand);
  return {*this, bob::LoadVecOp::create(b, rowvec(ownRows()), arg(operand), batch, ownHead, start,
                                        bound, b.getF32FloatAttr(0))};
}

Tile KernelBuilder::loadSweptRows(Operand operand, Value start) {
  assert(keyMajor() && operandInfo(operand).side == Side::query);
  return {*this, bob::LoadVecOp::create(b, colvec(sweptRows()), arg(operand), batch,
                                        headOf(operand), rowOf(Side::query, start),
                                        rowOf(Side::query, n), b.getF32FloatAttr(0))};
}

void KernelBuilder::storeOwn(Value tile, Operand operand, std::optional<Operand> through) {
  auto [start, bound] = ownRange(operand);
  // Shared tiles hold the input type: an f32 output (a ring step's partial) stores directly.
  const bool sameType = cast<MemRefType>(arg(operand).getType()).getElementType() == elementType();
  Value staging = through && sameType ? shared(*through) : Value();
  bob::StoreTileOp::create(b, tile, arg(operand), batch, ownHead, start, bound, staging,
                           /*tensor_map=*/Value());
}

void KernelBuilder::storeOwnRows(Value rows, Operand operand) {
  auto [start, bound] = ownRange(operand);
  bob::StoreVecOp::create(b, rows, arg(operand), batch, ownHead, start, bound);
}

bob::SharedTileType KernelBuilder::smem(int64_t rows, int64_t cols) {
  return bob::SharedTileType::get(b.getContext(), rows, cols, elementType());
}
bob::RegTileType KernelBuilder::rtile(int64_t rows, int64_t cols) {
  return bob::RegTileType::get(b.getContext(), rows, cols, b.getF32Type());
}
bob::RegTileType KernelBuilder::operandTile(int64_t rows, int64_t cols) {
  return bob::RegTileType::get(b.getContext(), rows, cols, elementType());
}
bob::RowVecType KernelBuilder::rowvec(int64_t size) {
  return bob::RowVecType::get(b.getContext(), size);
}
bob::ColVecType KernelBuilder::colvec(int64_t size) {
  return bob::ColVecType::get(b.getContext(), size);
}

Value KernelBuilder::index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
Value KernelBuilder::narrow(Value index) {
  return arith::IndexCastUIOp::create(b, b.getI32Type(), index);
}
Value KernelBuilder::widen(Value i32) {
  return arith::IndexCastUIOp::create(b, b.getIndexType(), i32);
}
Value KernelBuilder::f32(double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(), APFloat(static_cast<float>(v)));
}
Value KernelBuilder::dim(Value memref, int64_t axis) {
  return memref::DimOp::create(b, memref, index(axis));
}
Tile KernelBuilder::splat(Type type, double value) {
  return {*this, bob::SplatOp::create(b, type, b.getF32FloatAttr(static_cast<float>(value)))};
}

} // namespace flashbob::kernels

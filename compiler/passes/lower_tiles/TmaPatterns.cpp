// bob-lower-tiles, TMA side (sm_90a): bob.load_shared with a tensor map (bob-use-tma) becomes
// TMA box copies (one per column block of the swizzled tile) issued by one thread and completing
// on an mbarrier that every thread waits on.
//
// Loads issued together (a batch: consecutive TMA loads of one block with only pure ops between
// them, such as the K, V, uK, uV tiles of one key block) share one mbarrier, armed once with the
// bytes of all their tiles, and are waited for once: one arrive and one wait per batch instead
// of one per tile, which matters because the issuing thread's warp delays its warpgroup's next
// wgmma (measured on the H200, commit ac7c3ac: one barrier per tile cost BoB d = 64 ~10%;
// spreading the copies of a batch over the lanes 0 of all warps was slower than thread 0 alone).
// A batch's barrier belongs to its first destination tile (double buffers each have their
// own), used once per load: its phase flips each time a batch completes. Every thread keeps, in
// two private bit masks, the parity it must wait for next on each barrier and which barriers have
// a batch in flight (async loads complete at the next bob.wait_shared). Every thread runs the
// same loads and waits, so the masks agree across the block.
//
// With a producer warpgroup (bob.warp_specialize) the async loads are issued by the producer's
// one thread, and each barrier b of theirs has an "empty" partner (index count + b) that every
// consumer thread arrives on when done with the buffers (bob.consumer_release) and the producer
// waits on before refilling them (bob.producer_acquire). The consumers wait on the "full"
// barriers with their phase masks as before (bob.consumer_wait). An empty barrier's parity bit
// starts at 1: its first wait passes at once (the phase before the first counts as complete).
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include "llvm/ADT/DenseSet.h"

#include <type_traits>

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

// Bounds the mbarrier wait's suspend time hint (ns), as upstream's own examples do.
constexpr int64_t kWaitTicks = 10000000;
// Phases and loads in flight are bits of one i32 per thread.
constexpr int64_t kMaxBarriers = 32;

Value isFirstThread(Emitter &e) {
  Value tid = gpu::ThreadIdOp::create(e.b, gpu::Dimension::x);
  return arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, tid, e.index(0));
}

// 1 << bar as an i32.
Value barrierBit(Emitter &e, Value bar) {
  Value bar32 = arith::IndexCastOp::create(e.b, e.b.getI32Type(), bar);
  return arith::ShLIOp::create(e.b, e.i32(1), bar32);
}

// Shared tiles `tile` may be: an alloc (its own barrier), or the select between two buffers that
// bob-pipeline-loads emits (the same select between their barriers).
void collectTiles(Value tile, SmallVectorImpl<Value> &allocs, bool &ok) {
  if (tile.getDefiningOp<AllocSharedOp>()) {
    allocs.push_back(tile);
  } else if (auto select = tile.getDefiningOp<arith::SelectOp>()) {
    collectTiles(select.getTrueValue(), allocs, ok);
    collectTiles(select.getFalseValue(), allocs, ok);
  } else {
    ok = false;
  }
}

Value barrierOf(Emitter &e, ConversionPatternRewriter &rw, const TmaBarriers &tma, Value tile) {
  if (auto it = tma.index.find(tile); it != tma.index.end())
    return e.index(it->second);
  auto select = tile.getDefiningOp<arith::SelectOp>();
  return arith::SelectOp::create(e.b, rw.getRemappedValue(select.getCondition()),
                                 barrierOf(e, rw, tma, select.getTrueValue()),
                                 barrierOf(e, rw, tma, select.getFalseValue()));
}

nvgpu::TensorMapSwizzleKind swizzleKind(int64_t bytes) {
  switch (bytes) {
  case 32:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_32B;
  case 64:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_64B;
  default:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_128B;
  }
}

struct TmaLoadLowering : TilePattern<LoadSharedOp> {
  TmaLoadLowering(TileTypeConverter &conv, const TmaBarriers &tma, MLIRContext *ctx)
      : TilePattern(conv, ctx, /*benefit=*/2), tma(tma) {}

  LogicalResult lower(LoadSharedOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (!op.getTensorMap())
      return failure();
    auto conv = converter();
    SharedTileType tile = op.getDst().getType();
    shared::Layout layout = conv->layout(tile);
    if (!layout.swizzled())
      return rw.notifyMatchFailure(op, "TMA loads fill swizzled tiles only");
    const TmaBarriers::Batch &batch = tma.batches[tma.batchOf.lookup(op)];
    const bool first = batch.first == op.getOperation(), last = batch.last == op.getOperation();

    // Nobody may still be reading the batch's tiles' previous contents (as for cp.async loads).
    if (first && !op.getAsync())
      gpu::BarrierOp::create(e.b);
    Value bar = barrierOf(e, rw, tma, batch.leaderTile);

    // One box: the tile's rows by one column block.
    Value desc = tmaDescriptor(e, a.getTensorMap(), layout, layout.rows, tile.getElementType());

    // The producer region runs on its issuing thread only (WarpSpecialization.cpp).
    const bool byProducer = tma.producer && op.getAsync();
    auto issue = [&] {
      if (first)
        nvgpu::MBarrierArriveExpectTxOp::create(e.b, tma.group, e.index(batch.bytes), bar,
                                                Value());
      for (int64_t j = 0; j < layout.blocks(); ++j) {
        SmallVector<OpFoldResult> offsets = {e.b.getIndexAttr(j), e.b.getIndexAttr(0),
                                             e.b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {e.b.getIndexAttr(1), e.b.getIndexAttr(layout.rows),
                                           e.b.getIndexAttr(layout.blockCols())};
        SmallVector<OpFoldResult> strides(3, e.b.getIndexAttr(1));
        Value block = memref::SubViewOp::create(e.b, a.getDst(), offsets, sizes, strides);
        Value block4 = asTmaBox(e, block);
        Value col = e.index(j * layout.blockCols());
        nvgpu::TmaAsyncLoadOp::create(e.b, block4, tma.group, desc,
                                      ValueRange{col, a.getRow(), a.getHead(), a.getBatch()}, bar,
                                      Value(), Value());
      }
    };
    if (byProducer) {
      // Completion is the consumers' business (bob.consumer_wait).
      issue();
    } else {
      e.ifThen(isFirstThread(e), issue);
      if (last && op.getAsync()) {
        Value pending = memref::LoadOp::create(e.b, tma.pending);
        memref::StoreOp::create(e.b, arith::OrIOp::create(e.b, pending, barrierBit(e, bar)),
                                tma.pending);
      } else if (last) {
        waitTmaBarrier(e, tma, bar);
      }
    }
    rw.eraseOp(op);
    return success();
  }

  const TmaBarriers &tma;
};

// The barriers of `tiles` that TMA loads complete on (a tile that is not a batch's first
// destination has none), each once.
SmallVector<Value> barriersOf(Emitter &e, ConversionPatternRewriter &rw, const TmaBarriers &tma,
                              ValueRange tiles) {
  SmallVector<Value> bars;
  llvm::SmallDenseSet<Value, 4> seen;
  for (Value tile : tiles) {
    SmallVector<Value> allocs;
    bool ok = true;
    collectTiles(tile, allocs, ok);
    if (!ok || allocs.empty() || !seen.insert(tile).second ||
        !llvm::all_of(allocs, [&](Value a) { return tma.index.count(a) != 0; }))
      continue;
    bars.push_back(barrierOf(e, rw, tma, tile));
  }
  return bars;
}

Value emptyBarrier(Emitter &e, const TmaBarriers &tma, Value full) {
  return e.add(full, e.index(tma.count));
}

template <typename Op>
struct HandshakeLowering : TilePattern<Op> {
  HandshakeLowering(TileTypeConverter &conv, const TmaBarriers &tma, MLIRContext *ctx)
      : TilePattern<Op>(conv, ctx), tma(tma) {}
  const TmaBarriers &tma;

  LogicalResult lower(Op op, typename Op::Adaptor, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (!tma.producer)
      return rw.notifyMatchFailure(op, "only kernels with a producer hand buffers over");
    for (Value full : barriersOf(e, rw, tma, op.getTiles())) {
      if constexpr (std::is_same_v<Op, ConsumerWaitOp>) {
        waitTmaBarrier(e, tma, full);
      } else if constexpr (std::is_same_v<Op, ProducerAcquireOp>) {
        waitTmaBarrier(e, tma, emptyBarrier(e, tma, full));
      } else {
        nvgpu::MBarrierArriveOp::create(e.b, nvgpu::MBarrierTokenType::get(rw.getContext()),
                                        tma.group, emptyBarrier(e, tma, full));
      }
    }
    rw.eraseOp(op);
    return success();
  }
};

// Groups `loads` (in program order) into batches: consecutive TMA loads of one block with the
// same `async`, with nothing but pure ops between them.
void formBatches(ArrayRef<LoadSharedOp> loads, TmaBarriers &tma) {
  for (LoadSharedOp load : loads) {
    bool joins = false;
    if (!tma.batches.empty()) {
      auto prev = cast<LoadSharedOp>(tma.batches.back().last);
      joins = prev->getBlock() == load->getBlock() && prev.getAsync() == load.getAsync() &&
              prev->isBeforeInBlock(load);
      for (Operation *op = prev->getNextNode(); joins && op != load.getOperation();
           op = op->getNextNode())
        joins = isPure(op) && op->getNumRegions() == 0;
    }
    int64_t bytes = shared::layoutFor(load.getDst().getType(), /*hopper=*/true).bytes();
    if (!joins)
      tma.batches.push_back({load.getDst(), 0, load.getOperation(), nullptr});
    tma.batches.back().bytes += bytes;
    tma.batches.back().last = load.getOperation();
    tma.batchOf[load.getOperation()] = static_cast<int64_t>(tma.batches.size()) - 1;
  }
}

} // namespace

Value tmaDescriptor(Emitter &e, Value map, const shared::Layout &layout, int64_t boxRows,
                    Type elem) {
  // A box is 1 x 1 x boxRows x block columns of (batch, head, seq, head_dim), swizzled as the
  // tile's blocks are. The map argument is a plain pointer (a descriptor-typed gpu.func
  // argument does not legalize); the cast folds away once nvgpu is lowered.
  MLIRContext *ctx = e.b.getContext();
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto box = MemRefType::get({1, 1, boxRows, layout.blockCols()}, elem,
                             MemRefLayoutAttrInterface(), space);
  auto descType = nvgpu::TensorMapDescriptorType::get(
      ctx, box, swizzleKind(layout.swizzleBytes), nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
      nvgpu::TensorMapOOBKind::OOB_ZERO, nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  return UnrealizedConversionCastOp::create(e.b, TypeRange{descType}, map).getResult(0);
}

Value asTmaBox(Emitter &e, Value block) {
  auto type = cast<MemRefType>(block.getType());
  SmallVector<int64_t> shape = {1};
  llvm::append_range(shape, type.getShape());
  return memref::ExpandShapeOp::create(e.b, shape, block,
                                       SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
}

void waitTmaBarrier(Emitter &e, const TmaBarriers &tma, Value bar) {
  Value phases = memref::LoadOp::create(e.b, tma.phases);
  Value bit = barrierBit(e, bar);
  Value parity = arith::CmpIOp::create(e.b, arith::CmpIPredicate::ne,
                                       arith::AndIOp::create(e.b, phases, bit), e.i32(0));
  nvgpu::MBarrierTryWaitParityOp::create(e.b, tma.group, parity, e.index(kWaitTicks), bar);
  memref::StoreOp::create(e.b, arith::XOrIOp::create(e.b, phases, bit), tma.phases);
}

void waitPendingTmaLoads(Emitter &e, const TmaBarriers &tma) {
  for (int64_t b = 0; b < tma.count; ++b) {
    if (!(tma.asyncTargets & (uint32_t{1} << b)))
      continue;
    Value pending = memref::LoadOp::create(e.b, tma.pending);
    Value bit = e.i32(int64_t{1} << b);
    Value inFlight = arith::CmpIOp::create(e.b, arith::CmpIPredicate::ne,
                                           arith::AndIOp::create(e.b, pending, bit), e.i32(0));
    e.ifThen(inFlight, [&] { waitTmaBarrier(e, tma, e.index(b)); });
  }
  memref::StoreOp::create(e.b, e.i32(0), tma.pending);
}

LogicalResult prepareTmaBarriers(gpu::GPUFuncOp func, TmaBarriers &tma) {
  SpecAttr spec = func->getAttrOfType<SpecAttr>(kSpecAttrName);
  tma.producer = spec && spec.getProducer();
  SmallVector<LoadSharedOp> loads;
  LoadSharedOp untracked;
  func.walk([&](LoadSharedOp load) {
    if (load.getTensorMap())
      loads.push_back(load);
    else
      tma.cpAsync = true;
    if (!load.getTensorMap() && load.getAsync())
      untracked = load;
  });
  // The producer's copies must complete on barriers the consumers can wait on.
  if (tma.producer && untracked)
    return untracked.emitOpError("producer: the loop's loads must use TMA (bob-use-tma left "
                                 "this one a cp.async copy)");
  if (loads.empty())
    return success();
  formBatches(loads, tma);
  for (const TmaBarriers::Batch &batch : tma.batches) {
    SmallVector<Value> allocs;
    bool ok = true;
    collectTiles(batch.leaderTile, allocs, ok);
    if (!ok)
      return batch.first->emitOpError(
          "TMA destination must be a shared tile or a select of shared tiles");
    for (Value alloc : allocs) {
      int64_t b = tma.index.try_emplace(alloc, static_cast<int64_t>(tma.index.size())).first->second;
      if (cast<LoadSharedOp>(batch.first).getAsync() && b < kMaxBarriers)
        tma.asyncTargets |= uint32_t{1} << b;
    }
  }
  tma.count = static_cast<int64_t>(tma.index.size());
  const int64_t barriers = tma.producer ? 2 * tma.count : tma.count;
  if (barriers > kMaxBarriers)
    return func.emitOpError("more than ") << kMaxBarriers << " TMA barriers";

  MLIRContext *ctx = func.getContext();
  OpBuilder builder(ctx);
  builder.setInsertionPointToStart(&func.getBody().front());
  Emitter e(func.getLoc(), builder);
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  // The group fills what the row exchange leaves of the static reserve (only `barriers` are
  // initialized and used).
  int64_t exchangeBytes = 0;
  if (auto exchange = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
          func, StringAttr::get(ctx, kRowExchangeSymbol)))
    exchangeBytes = exchange.getType().getNumElements() * 4;
  const int64_t slots = shared::barrierGroupSlots(exchangeBytes);
  assert(slots >= barriers && "the static reserve holds kMaxBarriers barriers");
  tma.group = nvgpu::MBarrierCreateOp::create(
      e.b, nvgpu::MBarrierGroupType::get(ctx, space, static_cast<unsigned>(slots)));
  auto maskType = MemRefType::get({}, e.b.getI32Type());
  tma.phases = memref::AllocaOp::create(e.b, maskType);
  tma.pending = memref::AllocaOp::create(e.b, maskType);
  // Empty barriers' bits start at 1 (their first wait passes).
  const uint32_t emptyBits = tma.producer ? ((uint32_t{1} << tma.count) - 1) << tma.count : 0;
  memref::StoreOp::create(e.b, e.i32(static_cast<int32_t>(emptyBits)), tma.phases);
  memref::StoreOp::create(e.b, e.i32(0), tma.pending);
  // One arrival (the issuing thread's) plus the copies' bytes complete a full phase; an empty
  // phase completes when every consumer thread arrived.
  e.ifThen(isFirstThread(e), [&] {
    for (int64_t b = 0; b < tma.count; ++b)
      nvgpu::MBarrierInitOp::create(e.b, tma.group, e.index(1), e.index(b), Value());
    for (int64_t b = tma.count; b < barriers; ++b)
      nvgpu::MBarrierInitOp::create(e.b, tma.group, e.index(32 * spec.getWarps()), e.index(b),
                                    Value());
    NVVM::FenceMbarrierInitOp::create(e.b);
  });
  gpu::BarrierOp::create(e.b);
  return success();
}

void populateTmaPatterns(TileTypeConverter &converter, const TmaBarriers &tma,
                         RewritePatternSet &patterns) {
  if (tma.count > 0)
    patterns.add<TmaLoadLowering, HandshakeLowering<ProducerAcquireOp>,
                 HandshakeLowering<ConsumerWaitOp>, HandshakeLowering<ConsumerReleaseOp>>(
        converter, tma, patterns.getContext());
}

} // namespace flashbob::bob::lowering

// bob-lower-tiles, memory side: shared tile placement, global <-> shared copies (cp.async with
// zero fill past the sequence end; TMA copies are in TmaPatterns.cpp), register tile and vector
// loads/stores. Barriers that make shared tiles safe to overwrite and to read are emitted here,
// so kernel authors never write one.
#include "compiler/passes/SharedLayout.h"
#include "compiler/passes/WarpRoles.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

// The columns of global tensor `memref` when it is narrower than the tiles that move through it
// (#bob.spec tensor_dim: its static head_dim, a multiple of 8 below `tileCols`); nullopt when
// it is as wide. Columns from there on read as zeros and are never written: the verifier
// (verifyTileTensor) keeps the width a whole number of 16-byte cp.async chunks and of the
// 8-column groups of an mma fragment, so a chunk, an element pair or a fragment's 8 columns lie
// either all before it or all after it.
std::optional<int64_t> narrowerWidth(Type memref, int64_t tileCols) {
  auto type = cast<MemRefType>(memref);
  if (type.isDynamicDim(3) || type.getDimSize(3) >= tileCols)
    return std::nullopt;
  return type.getDimSize(3);
}

// `inside` and, for a tensor narrower than its tiles, `col` before its width.
Value withinColumns(Emitter &e, Value inside, Value col, std::optional<int64_t> width) {
  if (!width)
    return inside;
  return arith::AndIOp::create(e.b, inside, e.less(col, e.index(*width)));
}

// After this thread's writes to shared memory and before the barrier that publishes them: on
// sm_90a wgmma reads shared memory through the async proxy, which does not see generic-proxy
// writes (st.shared, cp.async) without this fence.
void publishToAsyncProxy(Emitter &e, const TileTypeConverter &conv) {
  if (conv.hopper())
    NVVM::FenceProxyOp::create(
        e.b, NVVM::ProxyKindAttr::get(e.b.getContext(), NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(e.b.getContext(), NVVM::SharedSpace::shared_cta));
}

// %base = view of the external shared-memory symbol at the tile's byte offset.
struct AllocSharedLowering : TilePattern<AllocSharedOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(AllocSharedOp op, OpAdaptor, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (!op.getOffset())
      return rw.notifyMatchFailure(op, "shared tile has no offset: run bob-allocate-shared first");
    auto space = gpu::AddressSpaceAttr::get(rw.getContext(), gpu::AddressSpace::Workgroup);
    auto rawType = MemRefType::get({0}, rw.getI8Type(), MemRefLayoutAttrInterface(), space);
    auto dynType = MemRefType::get({ShapedType::kDynamic}, rw.getI8Type(),
                                   MemRefLayoutAttrInterface(), space);
    Value raw = memref::GetGlobalOp::create(e.b, rawType, kSharedMemorySymbol);
    Value bytes = memref::CastOp::create(e.b, dynType, raw);
    Type tileType = converter()->convertType(op.getType());
    Value view = memref::ViewOp::create(e.b, tileType, bytes, e.index(*op.getOffset()), ValueRange{});
    rw.replaceOp(op, view);
    return success();
  }
};

struct LoadSharedLowering : TilePattern<LoadSharedOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(LoadSharedOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (op.getTensorMap())
      return rw.notifyMatchFailure(op, "TMA load: TmaPatterns.cpp");
    auto conv = converter();
    SharedTileType tile = op.getDst().getType();
    shared::Layout layout = conv->layout(tile);
    ThreadCoords c = e.coords();
    const int64_t elemsPerChunk = 16 / shared::elementBytes(tile); // one 16-byte cp.async
    const int64_t chunksPerRow = tile.getCols() / elemsPerChunk;
    const int64_t chunks = tile.getRows() * chunksPerRow;
    const int64_t threads = 32 * conv->warps();
    const std::optional<int64_t> width = narrowerWidth(op.getSrc().getType(), tile.getCols());

    // Nobody may still be reading the tile's previous contents (an async load's issuer
    // guarantees that itself: bob-pipeline-loads issues it right after a bob.wait_shared).
    if (!op.getAsync())
      gpu::BarrierOp::create(e.b);
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(rw.getContext());
    SmallVector<Value> tokens;
    for (int64_t first = 0; first < chunks; first += threads) {
      Value chunk = e.addConst(c.tid, first);
      auto copyChunk = [&](OpBuilder &) {
        Value r = arith::DivUIOp::create(e.b, chunk, e.index(chunksPerRow));
        Value col = e.mul(arith::RemUIOp::create(e.b, chunk, e.index(chunksPerRow)),
                          e.index(elemsPerChunk));
        Value row = e.add(a.getRow(), r);
        Value inBounds = withinColumns(e, e.less(row, a.getBound()), col, width);
        // Past the end (or the tensor's width): copy 0 source bytes (the 16 bytes are
        // zero-filled) from a safe address.
        Value srcRow = arith::SelectOp::create(e.b, inBounds, row, e.index(0));
        Value srcCol = width ? arith::SelectOp::create(e.b, inBounds, col, e.index(0)) : col;
        Value srcElems = arith::SelectOp::create(e.b, inBounds, e.index(elemsPerChunk), e.index(0));
        return nvgpu::DeviceAsyncCopyOp::create(
                   e.b, tokenType, a.getDst(), e.sharedIndices(layout, r, col), a.getSrc(),
                   ValueRange{a.getBatch(), a.getHead(), srcRow, srcCol},
                   e.b.getIndexAttr(elemsPerChunk), srcElems, e.b.getUnitAttr())
            .getResult();
      };
      if (first + threads <= chunks) {
        tokens.push_back(copyChunk(e.b));
      } else {
        // Last partial round: only threads whose chunk exists copy.
        e.ifThen(e.less(chunk, e.index(chunks)), [&] { copyChunk(e.b); });
      }
    }
    Value group = nvgpu::DeviceAsyncCreateGroupOp::create(e.b, tokenType, tokens);
    if (!op.getAsync()) {
      nvgpu::DeviceAsyncWaitOp::create(e.b, group, e.b.getI32IntegerAttr(0));
      // Every thread's copies are complete: make them visible to the whole block.
      publishToAsyncProxy(e, *conv);
      gpu::BarrierOp::create(e.b);
    }
    rw.eraseOp(op);
    return success();
  }
};

// The TMA loads in flight and all of this thread's cp.async groups complete, then visible to
// the block (TMA data is visible to each thread that waited on its mbarrier).
struct WaitSharedLowering : TilePattern<WaitSharedOp> {
  WaitSharedLowering(TileTypeConverter &conv, const TmaBarriers &tma, MLIRContext *ctx)
      : TilePattern(conv, ctx), tma(tma) {}
  LogicalResult lower(WaitSharedOp op, OpAdaptor, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    if (tma.count > 0)
      waitPendingTmaLoads(e, tma);
    if (tma.count == 0 || tma.cpAsync) {
      NVVM::CpAsyncWaitGroupOp::create(e.b, e.b.getI32IntegerAttr(0));
      publishToAsyncProxy(e, *conv);
    }
    gpu::BarrierOp::create(e.b);
    rw.eraseOp(op);
    return success();
  }
  const TmaBarriers &tma;
};

// arith.select between two shared tiles (bob-pipeline-loads picks this iteration's buffer):
// the same select on their converted memrefs.
struct SelectSharedLowering : TilePattern<arith::SelectOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(arith::SelectOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (!isa<SharedTileType>(op.getType()))
      return failure();
    rw.replaceOpWithNewOp<arith::SelectOp>(op, a.getCondition(), a.getTrueValue(),
                                           a.getFalseValue());
    return success();
  }
};

// Shared by register tile stores to shared and global memory: for every (mi, h) row the thread
// owns, call `body(row, mi, h)` where `row` is the row inside the tile.
template <typename Body>
void forEachOwnedRow(Emitter &e, const ThreadCoords &c, const layout::TileShape &s, Body body) {
  Value base = e.threadRowBase(c, s);
  for (int64_t mi = 0; mi < s.mFrags(); ++mi)
    for (int64_t h = 0; h < 2; ++h)
      body(e.addConst(base, mi * 16 + 8 * h), mi, h);
}

// Two adjacent columns move as one access; without the alignment LLVM splits it.
llvm::MaybeAlign pairAlignment(Type elem) {
  return llvm::MaybeAlign(2 * elem.getIntOrFloatBitWidth() / 8);
}

Value truncPair(Emitter &e, Value pair, Type elem) {
  if (elem.isF32())
    return pair;
  return arith::TruncFOp::create(e.b, VectorType::get({2}, elem), pair);
}

// The calling thread's warpgroup's own barrier (WarpRoles.h, row warpgroups): id
// kWarpgroupBarrier + warp / 4, its 128 threads.
void warpgroupBarrier(Emitter &e, const ThreadCoords &c) {
  Value warpgroup = arith::DivUIOp::create(e.b, c.warp, e.index(4));
  Value id = arith::AddIOp::create(e.b, e.i32(kWarpgroupBarrier),
                                   arith::IndexCastOp::create(e.b, e.b.getI32Type(), warpgroup));
  NVVM::BarrierOp::create(e.b, TypeRange{}, id, e.i32(128), NVVM::BarrierReductionAttr(), Value());
}

// The barrier that orders readers of a shared tile before writes to it and writes before its
// readers: row warpgroups read and write only their own rows (WarpRoles.h), so their own
// warpgroup's; else the block's.
void sharedTileBarrier(Emitter &e, const ThreadCoords &c, Operation *op) {
  if (hasRowWarpgroups(getEnclosingSpec(op)))
    warpgroupBarrier(e, c);
  else
    gpu::BarrierOp::create(e.b);
}

// The calling thread's element pairs of register tile `value` (shape `s`) into shared tile
// `tile` (layout `layout`), rounded to `elem`.
void writePairs(Emitter &e, const ThreadCoords &c, const layout::TileShape &s, Value value,
                Value tile, const shared::Layout &layout, Type elem) {
  Value colBase = e.threadColBase(c, s);
  forEachOwnedRow(e, c, s, [&](Value row, int64_t mi, int64_t h) {
    for (int64_t ni = 0; ni < s.nFrags(); ++ni) {
      Value pair = e.gather(value, {s.accIndex(mi, ni, 2 * h), s.accIndex(mi, ni, 2 * h + 1)});
      vector::StoreOp::create(e.b, truncPair(e, pair, elem), tile,
                              e.sharedIndices(layout, row, e.addConst(colBase, ni * 8)), false,
                              pairAlignment(elem));
    }
  });
}

// Register tile -> shared tile. The barrier before keeps readers of the tile's previous contents
// ahead of the writes; the one after publishes them. Inside a run of stores (StoreRuns) only
// the run's first store waits before and its last one publishes.
struct StoreSharedLowering : TilePattern<StoreSharedOp> {
  StoreSharedLowering(TileTypeConverter &conv, const StoreRuns &runs, MLIRContext *ctx)
      : TilePattern(conv, ctx), runs(runs) {}
  const StoreRuns &runs;
  LogicalResult lower(StoreSharedOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getValue().getType());
    Type elem = op.getDst().getType().getElementType();
    shared::Layout layout = conv->layout(op.getDst().getType());
    ThreadCoords c = e.coords(conv);
    if (!runs.continuing.contains(op))
      sharedTileBarrier(e, c, op);
    writePairs(e, c, s, a.getValue(), a.getDst(), layout, elem);
    if (!runs.continued.contains(op)) {
      publishToAsyncProxy(e, *conv);
      sharedTileBarrier(e, c, op);
    }
    rw.eraseOp(op);
    return success();
  }
};

// Register tile -> rows of a global tensor. Direct: every thread writes its element pairs, rows
// past `bound` skipped. Staged (a tensor map from bob-use-tma): see lowerStaged.
struct StoreTileLowering : TilePattern<StoreTileOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(StoreTileOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    if (op.getTensorMap()) {
      lowerStaged(op, a, e);
      rw.eraseOp(op);
      return success();
    }
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getValue().getType());
    Type elem = cast<MemRefType>(op.getDst().getType()).getElementType();
    const std::optional<int64_t> width =
        narrowerWidth(op.getDst().getType(), op.getValue().getType().getCols());
    ThreadCoords c = e.coords(conv);
    Value colBase = e.threadColBase(c, s);
    forEachOwnedRow(e, c, s, [&](Value tileRow, int64_t mi, int64_t h) {
      Value row = e.add(a.getRow(), tileRow);
      e.ifThen(e.less(row, a.getBound()), [&] {
        for (int64_t ni = 0; ni < s.nFrags(); ++ni) {
          Value pair =
              e.gather(a.getValue(), {s.accIndex(mi, ni, 2 * h), s.accIndex(mi, ni, 2 * h + 1)});
          Value col = e.addConst(colBase, ni * 8);
          auto store = [&] {
            vector::StoreOp::create(e.b, truncPair(e, pair, elem), a.getDst(),
                                    ValueRange{a.getBatch(), a.getHead(), row, col}, false,
                                    pairAlignment(elem));
          };
          // A tensor narrower than the tile: its columns only.
          if (width)
            e.ifThen(e.less(col, e.index(*width)), store);
          else
            store();
        }
      });
    });
    rw.eraseOp(op);
    return success();
  }

  // Through the staging tile by TMA, each warp on its own: once nobody reads the tile any more
  // (the barrier a store to shared memory has before it), the warp writes its band of rows (by
  // its columns) into the tile, makes the writes visible to the async proxy, and its lane 0
  // stores the band one column block at a time, then waits until TMA has read the band (the
  // block's shared memory must outlive the reads; the writes to global memory complete on
  // their own). The map's sequence length clips rows past `bound`.
  void lowerStaged(StoreTileOp op, OpAdaptor a, Emitter &e) const {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getValue().getType());
    SharedTileType staging = op.getStaging().getType();
    shared::Layout layout = conv->layout(staging);
    Type elem = staging.getElementType();
    ThreadCoords c = e.coords(conv);
    sharedTileBarrier(e, c, op);
    writePairs(e, c, s, a.getValue(), a.getStaging(), layout, elem);
    publishToAsyncProxy(e, *conv);
    NVVM::SyncWarpOp::create(e.b, e.i32(-1));
    Value bandRow = e.mul(c.rowWarp, e.index(s.rowsPerWarp()));
    Value firstCol = e.groupColBase(c, s);
    Value firstBlock = arith::DivUIOp::create(e.b, firstCol, e.index(layout.blockCols()));
    Value row = e.add(a.getRow(), bandRow);
    Value desc = tmaDescriptor(e, a.getTensorMap(), layout, s.rowsPerWarp(), elem);
    Value lane0 = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.lane, e.index(0));
    e.ifThen(lane0, [&] {
      for (int64_t j = 0; j < s.colsPerWarp() / layout.blockCols(); ++j) {
        SmallVector<OpFoldResult> offsets = {e.addConst(firstBlock, j), bandRow,
                                             e.b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {e.b.getIndexAttr(1), e.b.getIndexAttr(s.rowsPerWarp()),
                                           e.b.getIndexAttr(layout.blockCols())};
        SmallVector<OpFoldResult> strides(3, e.b.getIndexAttr(1));
        Value band = memref::SubViewOp::create(e.b, a.getStaging(), offsets, sizes, strides);
        Value col = e.addConst(firstCol, j * layout.blockCols());
        nvgpu::TmaAsyncStoreOp::create(e.b, asTmaBox(e, band), desc,
                                       ValueRange{col, row, a.getHead(), a.getBatch()}, Value());
      }
      NVVM::CpAsyncBulkCommitGroupOp::create(e.b);
      NVVM::CpAsyncBulkWaitGroupOp::create(e.b, e.b.getI32IntegerAttr(0), e.b.getUnitAttr());
    });
  }
};

struct LoadTileLowering : TilePattern<LoadTileOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(LoadTileOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getResult().getType());
    Type elem = cast<MemRefType>(op.getSrc().getType()).getElementType();
    auto resultType = cast<VectorType>(conv->convertType(op.getResult().getType()));
    auto pairType = VectorType::get({2}, rw.getF32Type());
    const std::optional<int64_t> width =
        narrowerWidth(op.getSrc().getType(), op.getResult().getType().getCols());
    ThreadCoords c = e.coords(conv);
    Value colBase = e.threadColBase(c, s);
    Value result = e.splat(resultType, 0.0);
    forEachOwnedRow(e, c, s, [&](Value tileRow, int64_t mi, int64_t h) {
      Value row = e.add(a.getRow(), tileRow);
      for (int64_t ni = 0; ni < s.nFrags(); ++ni) {
        Value col = e.addConst(colBase, ni * 8);
        // Rows past the end (and columns past a narrower tensor's width) read as zero.
        auto loadPair = [&]() -> Value {
          Value raw = vector::LoadOp::create(e.b, VectorType::get({2}, elem), a.getSrc(),
                                             ValueRange{a.getBatch(), a.getHead(), row, col},
                                             false, pairAlignment(elem));
          return elem.isF32() ? raw : arith::ExtFOp::create(e.b, pairType, raw).getResult();
        };
        Value pair = e.ifElse(pairType, withinColumns(e, e.less(row, a.getBound()), col, width),
                              loadPair, [&] { return e.splat(pairType, 0.0); });
        for (int64_t k = 0; k < 2; ++k)
          result = e.insert(e.extract(pair, k), result, s.accIndex(mi, ni, 2 * h + k));
      }
    });
    rw.replaceOp(op, result);
    return success();
  }
};

struct LoadVecLowering : TilePattern<LoadVecOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(LoadVecOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    auto resultType = cast<VectorType>(conv->convertType(op.getResult().getType()));
    ThreadCoords c = e.coords(conv);
    Value result = e.splat(resultType, 0.0);
    Value padding = e.f32(op.getPadding().convertToDouble());
    auto load = [&](Value pos, int64_t slot) {
      Value value = e.ifElse(
          rw.getF32Type(), e.less(pos, a.getBound()),
          [&] {
            return memref::LoadOp::create(e.b, a.getSrc(), ValueRange{a.getBatch(), a.getHead(), pos})
                .getResult();
          },
          [&] { return padding; });
      result = e.insert(value, result, slot);
    };
    if (auto rows = dyn_cast<RowVecType>(op.getResult().getType())) {
      layout::TileShape s = conv->shape(rows);
      Value base = e.add(a.getRow(), e.threadRowBase(c, s));
      for (int64_t mi = 0; mi < s.mFrags(); ++mi)
        for (int64_t h = 0; h < 2; ++h)
          load(e.addConst(base, mi * 16 + 8 * h), layout::TileShape::rowVecIndex(mi, h));
    } else {
      layout::TileShape s = conv->shape(cast<ColVecType>(op.getResult().getType()));
      Value base = e.add(a.getRow(), e.threadColBase(c, s));
      for (int64_t ni = 0; ni < s.nFrags(); ++ni)
        for (int64_t k = 0; k < 2; ++k)
          load(e.addConst(base, ni * 8 + k), layout::TileShape::colVecIndex(ni, k));
    }
    rw.replaceOp(op, result);
    return success();
  }
};

struct StoreVecLowering : TilePattern<StoreVecOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(StoreVecOp op, OpAdaptor a, Emitter &e, ConversionPatternRewriter &rw) const override {
    auto conv = converter();
    layout::TileShape s = conv->shape(op.getValue().getType());
    ThreadCoords c = e.coords(conv);
    // The 4 threads of a group (and every column group) hold the same row values: the first
    // one writes.
    Value writer = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.t, e.index(0));
    if (c.colGroup)
      writer = arith::AndIOp::create(
          e.b, writer, arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.colGroup, e.index(0)));
    Value base = e.add(a.getRow(), e.threadRowBase(c, s));
    for (int64_t mi = 0; mi < s.mFrags(); ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        Value row = e.addConst(base, mi * 16 + 8 * h);
        Value ok = arith::AndIOp::create(e.b, writer, e.less(row, a.getBound()));
        e.ifThen(ok, [&] {
          memref::StoreOp::create(e.b, e.extract(a.getValue(), layout::TileShape::rowVecIndex(mi, h)),
                                  a.getDst(), ValueRange{a.getBatch(), a.getHead(), row});
        });
      }
    rw.eraseOp(op);
    return success();
  }
};

} // namespace

StoreRuns findStoreRuns(gpu::GPUFuncOp func) {
  StoreRuns runs;
  func.walk([&](StoreSharedOp op) {
    if (isa_and_nonnull<StoreSharedOp>(op->getPrevNode()))
      runs.continuing.insert(op);
    if (isa_and_nonnull<StoreSharedOp>(op->getNextNode()))
      runs.continued.insert(op);
  });
  return runs;
}

void populateMemoryPatterns(TileTypeConverter &converter, const TmaBarriers &tma,
                            const StoreRuns &runs, RewritePatternSet &patterns) {
  patterns.add<AllocSharedLowering, LoadSharedLowering, SelectSharedLowering, StoreTileLowering,
               LoadTileLowering, LoadVecLowering, StoreVecLowering>(converter,
                                                                    patterns.getContext());
  patterns.add<WaitSharedLowering>(converter, tma, patterns.getContext());
  patterns.add<StoreSharedLowering>(converter, runs, patterns.getContext());
}

} // namespace flashbob::bob::lowering

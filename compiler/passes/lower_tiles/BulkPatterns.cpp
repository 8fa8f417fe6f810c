// bob-lower-tiles, sums across blocks (sm_90a): bob.bulk_reduce_add, bob.bulk_wait,
// bob.semaphore_wait and bob.semaphore_signal, all on the bulk writer warp (WarpRoles.h,
// bulkWriterWarp); every other thread skips them.
//
// bob.bulk_reduce_add: lane l of the warp starts the bulk reductions of rows l, l + 32, ... of
// the f32 shared tile (padded rows, SharedLayout.h: each row a contiguous run of cols * 4
// bytes, 16-byte aligned) into the matching rows of the f32 tensor, one
// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes;` per row
// before the bound, then commits them as one bulk group. Upstream has the copy
// (nvvm.cp.async.bulk.global.shared.cta) and the tensor-map reduction
// (nvvm.cp.async.bulk.tensor.reduce) but no op or intrinsic for this one: it is one inline PTX
// statement on typed operands (the row's global address "l", its shared address "r"). Rows,
// not the whole tile, because the tile's rows are padded and a sequence's end may cut it.
// bob.bulk_wait: nvvm.cp.async.bulk.wait_group 0 (with `read`, .read) on each lane.
//
// bob.semaphore_wait: lane 0 polls the counter with an acquire load at GPU scope (llvm.load
// atomic acquire syncscope("device"), which NVPTX emits as ld.acquire.gpu.global.b32) until it
// reads the turn; the warp meets, and each lane fences the async proxy for global memory
// (fence.proxy.async.global), so that its bulk reductions after the wait are ordered after
// what the acquire saw.
// bob.semaphore_signal: the warp meets (each lane's bulk_wait is done), then lane 0 adds 1 with
// `red.release.gpu.global.add.s32` as one inline PTX statement: LLVM 22's NVPTX backend
// lowers an atomicrmw add with release ordering to a plain atom.global.add (the release lost),
// and NVVM has no op for it.
#include "compiler/passes/WarpRoles.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

// Whether the calling thread is in the bulk writer warp, and whether it is that warp's lane 0.
struct Writer {
  Value inWarp, lane, firstLane;
};
Writer writer(Emitter &e, Operation *op) {
  ThreadCoords c = e.coords();
  Writer w;
  w.lane = c.lane;
  w.inWarp = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.warp,
                                   e.index(bulkWriterWarp(getEnclosingSpec(op))));
  w.firstLane = arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, c.lane, e.index(0));
  return w;
}

// The byte address of element [i0, i1, i2, (0)] of a global memref, as an i64 computed in
// 64 bits whatever width the pipeline lowers `index` arithmetic at: from the memref's LLVM
// descriptor (aligned pointer, offset, strides: i64), which the conversion inside the gpu.func
// gives the memref (the cast pairs up with the one it makes there, and
// reconcile-unrealized-casts removes both), and the indices widened to i64 first. A pointer
// taken through `index` (memref.extract_aligned_pointer_as_index) would keep only its low 32
// bits where index arithmetic is 32-bit.
Value globalAddress(Emitter &e, Value memref, ArrayRef<Value> indices) {
  auto type = cast<MemRefType>(memref.getType());
  MLIRContext *ctx = e.b.getContext();
  Type i64 = e.b.getI64Type();
  auto array = LLVM::LLVMArrayType::get(i64, type.getRank());
  auto descriptorType = LLVM::LLVMStructType::getLiteral(
      ctx, {LLVM::LLVMPointerType::get(ctx), LLVM::LLVMPointerType::get(ctx), i64, array, array});
  Value descriptor = UnrealizedConversionCastOp::create(e.b, descriptorType, memref).getResult(0);
  auto field = [&](ArrayRef<int64_t> position) -> Value {
    return LLVM::ExtractValueOp::create(e.b, descriptor, position);
  };
  Value element = field({2}); // the offset
  for (auto [i, index] : llvm::enumerate(indices)) {
    Value wide = arith::IndexCastUIOp::create(e.b, i64, index);
    element = arith::AddIOp::create(
        e.b, element, arith::MulIOp::create(e.b, wide, field({4, static_cast<int64_t>(i)})));
  }
  Value base = LLVM::PtrToIntOp::create(e.b, i64, field({1}));
  const int64_t bytes = type.getElementTypeBitWidth() / 8;
  return arith::AddIOp::create(
      e.b, base, arith::MulIOp::create(e.b, element, arith::ConstantIntOp::create(e.b, bytes, 64)));
}

struct BulkReduceAddLowering : TilePattern<BulkReduceAddOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(BulkReduceAddOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    SharedTileType tile = op.getSrc().getType();
    shared::Layout layout = converter()->layout(tile);
    if (layout.swizzled())
      return rw.notifyMatchFailure(op, "bulk reductions read padded (row-major) f32 tiles");
    // Row warpgroups meet only their own warpgroup after staging (WarpRoles.h): the warp reads
    // every row, so the whole block must have written them.
    if (hasRowWarpgroups(getEnclosingSpec(op)))
      gpu::BarrierOp::create(e.b);
    const int64_t rowBytes = tile.getCols() * 4, pitchBytes = layout.rowPitch() * 4;
    const std::string ptx =
        llvm::formatv("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], {0};",
                      rowBytes)
            .str();
    Writer w = writer(e, op);
    e.ifThen(w.inWarp, [&] {
      Value tileAddress = arith::IndexCastOp::create(
          e.b, e.b.getI64Type(), memref::ExtractAlignedPointerAsIndexOp::create(e.b, a.getSrc()));
      for (int64_t first = 0; first < tile.getRows(); first += 32) {
        Value r = e.addConst(w.lane, first);
        Value row = e.add(a.getRow(), r);
        Value issue = e.less(row, a.getBound());
        if (first + 32 > tile.getRows())
          issue = arith::AndIOp::create(e.b, issue, e.less(r, e.index(tile.getRows())));
        e.ifThen(issue, [&] {
          Value dst = globalAddress(e, a.getDst(), {a.getBatch(), a.getHead(), row});
          Value offset = arith::IndexCastOp::create(e.b, e.b.getI64Type(),
                                                    e.mul(r, e.index(pitchBytes)));
          // A shared::cta address fits 32 bits.
          Value src = arith::TruncIOp::create(e.b, e.b.getI32Type(),
                                              arith::AddIOp::create(e.b, tileAddress, offset));
          e.inlinePtx(Type(), ValueRange{dst, src}, ptx, "l,r");
        });
      }
      NVVM::CpAsyncBulkCommitGroupOp::create(e.b);
    });
    rw.eraseOp(op);
    return success();
  }
};

struct BulkWaitLowering : TilePattern<BulkWaitOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(BulkWaitOp op, OpAdaptor, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    Writer w = writer(e, op);
    e.ifThen(w.inWarp, [&] {
      NVVM::CpAsyncBulkWaitGroupOp::create(e.b, e.b.getI32IntegerAttr(0),
                                           op.getRead() ? e.b.getUnitAttr() : UnitAttr());
    });
    rw.eraseOp(op);
    return success();
  }
};

Value counterAddress(Emitter &e, Value sem, Value batch, Value head, Value index) {
  return globalAddress(e, sem, {batch, head, index});
}

struct SemaphoreWaitLowering : TilePattern<SemaphoreWaitOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(SemaphoreWaitOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    MLIRContext *ctx = rw.getContext();
    Writer w = writer(e, op);
    e.ifThen(w.inWarp, [&] {
      e.ifThen(w.firstLane, [&] {
        Value address = counterAddress(e, a.getSem(), a.getBatch(), a.getHead(), a.getIndex());
        Value pointer =
            LLVM::IntToPtrOp::create(e.b, LLVM::LLVMPointerType::get(ctx, /*global=*/1), address);
        Value turn = arith::IndexCastOp::create(e.b, e.b.getI32Type(), a.getValue());
        auto before = [&](OpBuilder &nested, Location loc, ValueRange) {
          Value seen = LLVM::LoadOp::create(nested, loc, nested.getI32Type(), pointer,
                                            /*alignment=*/4, /*isVolatile=*/false,
                                            /*isNonTemporal=*/false, /*isInvariant=*/false,
                                            /*isInvariantGroup=*/false,
                                            LLVM::AtomicOrdering::acquire, "device");
          Value notYet =
              arith::CmpIOp::create(nested, loc, arith::CmpIPredicate::ne, seen, turn);
          scf::ConditionOp::create(nested, loc, notYet, ValueRange{});
        };
        auto after = [](OpBuilder &nested, Location loc, ValueRange) {
          scf::YieldOp::create(nested, loc);
        };
        scf::WhileOp::create(e.b, TypeRange{}, ValueRange{}, before, after);
      });
      NVVM::SyncWarpOp::create(e.b, e.i32(-1));
      NVVM::FenceProxyOp::create(e.b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_global),
                                 NVVM::SharedSpaceAttr());
    });
    rw.eraseOp(op);
    return success();
  }
};

struct SemaphoreSignalLowering : TilePattern<SemaphoreSignalOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(SemaphoreSignalOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    Writer w = writer(e, op);
    e.ifThen(w.inWarp, [&] {
      NVVM::SyncWarpOp::create(e.b, e.i32(-1));
      e.ifThen(w.firstLane, [&] {
        Value address = counterAddress(e, a.getSem(), a.getBatch(), a.getHead(), a.getIndex());
        e.inlinePtx(Type(), ValueRange{address}, "red.release.gpu.global.add.s32 [$0], 1;", "l");
      });
    });
    rw.eraseOp(op);
    return success();
  }
};

} // namespace

void populateBulkPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<BulkReduceAddLowering, BulkWaitLowering, SemaphoreWaitLowering,
               SemaphoreSignalLowering>(converter, patterns.getContext());
}

} // namespace flashbob::bob::lowering

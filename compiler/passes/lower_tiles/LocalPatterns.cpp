// bob-lower-tiles, local memory: the reserves long sweeps flush their accumulators into
// (bob.alloc_local, bob.flush, bob.load_local). A reserve is each thread's own elements of the
// tile, in the register tile's order, in a stack slot of the thread (PTX local memory): it costs
// no registers and no shared memory, and the driver sizes it per resident thread, not per row.
// Its loads and stores are volatile: otherwise LLVM promotes a stack slot whose every access is
// a whole-vector load or store back into registers, which is what the reserve exists to avoid.
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

constexpr unsigned kReserveAlignment = 16; // whole-vector accesses: ld/st.local.v4

VectorType reserveVector(const TileTypeConverter &conv, LocalTileType t) {
  layout::TileShape s{t.getRows(), t.getCols(), conv.warps(), conv.warpCols()};
  return VectorType::get({s.accSize()}, Float32Type::get(t.getContext()));
}

Value loadReserve(Emitter &e, VectorType type, Value reserve) {
  return LLVM::LoadOp::create(e.b, type, reserve, kReserveAlignment, /*isVolatile=*/true);
}

void storeReserve(Emitter &e, Value value, Value reserve) {
  LLVM::StoreOp::create(e.b, value, reserve, kReserveAlignment, /*isVolatile=*/true);
}

// The stack slot at the kernel's entry (a fixed-size frame, not a dynamic alloca), zeroed here.
struct AllocLocalLowering : TilePattern<AllocLocalOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(AllocLocalOp op, OpAdaptor, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    VectorType type = reserveVector(*converter(), op.getType());
    auto func = op->getParentOfType<gpu::GPUFuncOp>();
    if (!func)
      return rw.notifyMatchFailure(op, "a reserve belongs to a gpu.func");
    Value slot;
    {
      OpBuilder::InsertionGuard guard(rw);
      rw.setInsertionPointToStart(&func.getBody().front());
      Value one = LLVM::ConstantOp::create(rw, op.getLoc(), rw.getI32Type(), rw.getI32IntegerAttr(1));
      slot = LLVM::AllocaOp::create(rw, op.getLoc(), LLVM::LLVMPointerType::get(rw.getContext()),
                                    type, one, kReserveAlignment);
    }
    storeReserve(e, e.splat(type, 0), slot);
    rw.replaceOp(op, slot);
    return success();
  }
};

// A flush where it stands: bob-chunk-sweeps has placed each one between two chunks of steps.
struct FlushLowering : TilePattern<FlushOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(FlushOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    if (op.getEvery())
      return rw.notifyMatchFailure(op, "flushes `every` steps: run bob-chunk-sweeps first");
    auto type = cast<VectorType>(a.getAcc().getType());
    Value sum = arith::AddFOp::create(e.b, loadReserve(e, type, a.getReserve()), a.getAcc());
    storeReserve(e, sum, a.getReserve());
    rw.replaceOp(op, e.splat(type, 0));
    return success();
  }
};

struct LoadLocalLowering : TilePattern<LoadLocalOp> {
  using TilePattern::TilePattern;
  LogicalResult lower(LoadLocalOp op, OpAdaptor a, Emitter &e,
                      ConversionPatternRewriter &rw) const override {
    auto type = cast<VectorType>(converter()->convertType(op.getType()));
    rw.replaceOp(op, loadReserve(e, type, a.getReserve()));
    return success();
  }
};

} // namespace

void populateLocalPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<AllocLocalLowering, FlushLowering, LoadLocalLowering>(converter,
                                                                     patterns.getContext());
}

} // namespace flashbob::bob::lowering

// bob-stage-operands: on sm_90a, route register A operands of products through shared memory so
// that the product can run as wgmma; with column groups (warp_cols > 1), on every target.
//
// Kernels multiply converted register tiles (P, dS, ...) by shared tiles; on mma.sync the
// register tile is the A fragment as is. wgmma can read A from registers too, but upstream
// nvvm.wgmma.mma_async takes shared-memory descriptors for both operands, and the alternative
// (a hand-written PTX string) is not something this compiler emits. So a product that otherwise
// qualifies (WgmmaRules.h) stores the f32 tile into a scratch shared tile (rounded exactly as
// bob.convert would) and reads A from there. One scratch tile per shape: stores and products run
// in program order, with barriers from bob.store_shared, and each product has finished reading
// (wgmma.wait_group 0 in WgmmaPattern) before the next store, so one buffer serves them all.
// Keeping products in flight later means one buffer per product in flight.
#include "compiler/passes/Passes.h"
#include "compiler/passes/WgmmaRules.h"

#include "llvm/ADT/DenseMap.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBSTAGEOPERANDS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

struct StageOperands : impl::BobStageOperandsBase<StageOperands> {
  void runOnOperation() override {
    KernelOp kernel = getOperation();
    SpecAttr spec = kernel.getSpec();
    // With column groups a register tile is split by columns, which no warp can use as an A
    // operand: those products read A from shared memory on every target (mma.sync: ldmatrix).
    const bool split = spec.getWarpCols() > 1;
    if (!shared::isHopper(spec) && !split)
      return;
    MLIRContext *ctx = &getContext();
    SmallVector<MmaOp> products;
    kernel.walk([&](MmaOp op) { products.push_back(op); });

    llvm::DenseMap<Type, Value> scratch; // shared tile type -> its one buffer
    OpBuilder b(ctx);
    for (MmaOp op : products) {
      auto convert = op.getA().getDefiningOp<ConvertOp>();
      if (!convert)
        continue;
      auto reg = cast<RegTileType>(op.getA().getType());
      auto tileType = SharedTileType::get(ctx, reg.getRows(), reg.getCols(), reg.getElementType());
      const bool hopper = shared::isHopper(spec);
      if (!split && (!wgmma::accumulatorFits(op.getAcc().getType(), spec) ||
                     !wgmma::operandFits(tileType, hopper) ||
                     !wgmma::operandFits(op.getB().getType(), hopper)))
        continue;
      Value &tile = scratch[tileType];
      if (!tile) {
        b.setInsertionPointToStart(&kernel.getBody().front());
        tile = AllocSharedOp::create(b, kernel.getLoc(), tileType, IntegerAttr());
      }
      b.setInsertionPoint(op);
      StoreSharedOp::create(b, op.getLoc(), convert.getSource(), tile);
      op.getAMutable().assign(tile);
      if (convert->use_empty())
        convert->erase();
    }
  }
};
} // namespace
} // namespace flashbob::bob

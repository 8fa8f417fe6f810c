// bob-stage-operands: on sm_90a, route register A operands of products through shared memory so
// that the product can run as wgmma; with column groups (warp_cols > 1), on every target.
//
// Kernels multiply converted register tiles (P, dS, ...) by shared tiles; on mma.sync the
// register tile is the A fragment as is. wgmma can read A from registers too, but upstream
// nvvm.wgmma.mma_async takes shared-memory descriptors for both operands. So a product that
// otherwise qualifies (WgmmaRules.h) stores the f32 tile into a scratch shared tile (rounded
// exactly as bob.convert would) and reads A from there, unless the spec says register_a and the
// tile is in the layout wgmma takes from registers (wgmma::registerAFits): bob-lower-tiles
// then issues the register-A form as one inline PTX instruction per k16 slice
// (lower_tiles/WgmmaRegisterA.cpp), and the product keeps its operand.
//
// Every staged value of a block gets its own scratch tile, stored once (P feeding two products
// is stored once), just before the block's first staged product after the value's definition:
// the values computed between two rounds of products are stored together, and bob-lower-tiles
// puts one barrier before and one after such a run of stores instead of two per store. Every
// store is still preceded by a block barrier after the previous iteration's products read its
// tile.
#include "compiler/passes/Passes.h"
#include "compiler/passes/WgmmaRules.h"

#include "mlir/IR/Dominance.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

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
    if (!hasHopperFeatures(spec) && !split)
      return;
    MLIRContext *ctx = &getContext();
    const bool hopper = hasHopperFeatures(spec);
    // The shared tile a product's register A operand would be staged in.
    auto scratchType = [&](MmaOp op) {
      auto reg = cast<RegTileType>(op.getA().getType());
      return SharedTileType::get(ctx, reg.getRows(), reg.getCols(), reg.getElementType());
    };
    // The convert whose source a product stages, or null when the product keeps its operands.
    auto staged = [&](MmaOp op) -> ConvertOp {
      auto convert = op.getA().getDefiningOp<ConvertOp>();
      if (!convert || split)
        return convert;
      if (wgmma::registerAFits(op, spec))
        return nullptr;
      if (!wgmma::accumulatorFits(op.getAcc().getType(), spec) ||
          !wgmma::operandFits(scratchType(op), hopper) ||
          !wgmma::operandFits(op.getB().getType(), hopper))
        return nullptr;
      return convert;
    };
    // The staged products of each block, in program order.
    llvm::MapVector<Block *, SmallVector<MmaOp>> products;
    kernel.walk([&](MmaOp op) {
      if (staged(op))
        products[op->getBlock()].push_back(op);
    });

    DominanceInfo dominance(kernel);
    OpBuilder b(ctx);
    for (auto &[block, ops] : products) {
      llvm::DenseMap<Value, Value> tileOf; // staged f32 value -> its scratch tile
      for (MmaOp op : ops) {
        ConvertOp convert = staged(op);
        Value value = convert.getSource();
        Value &tile = tileOf[value];
        if (!tile) {
          b.setInsertionPointToStart(&kernel.getBody().front());
          tile = AllocSharedOp::create(b, kernel.getLoc(), scratchType(op), IntegerAttr());
          // In the run before the block's first staged product after the value's definition.
          Operation *at = op;
          for (MmaOp candidate : ops)
            if (dominance.properlyDominates(value, candidate)) {
              at = candidate;
              break;
            }
          b.setInsertionPoint(at);
          StoreSharedOp::create(b, op.getLoc(), value, tile);
        }
        op.getAMutable().assign(tile);
        if (convert->use_empty())
          convert->erase();
      }
    }
  }
};
} // namespace
} // namespace flashbob::bob

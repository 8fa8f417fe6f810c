// bob-lower-tiles, row warpgroups (WarpRoles.h, hasRowWarpgroups): the barriers of one
// warpgroup, and the turns two of them take issuing each sweep step's first products.
//
// Ping-pong (FlashAttention-3's schedule): warpgroup w waits for its turn (named barrier
// kTurnBarrier + w, 256 threads: its own 128 syncing, the other's 128 arriving) before the
// step's first run of products, and passes the turn right after issuing them (bar.arrive on the
// other's barrier), before waiting for their results. So the tensor cores take the two
// warpgroups' score products in alternation, and one warpgroup's softmax and staging run while
// the other's products do, instead of both reaching the tensor cores together and both
// computing their exponentials while the tensor cores idle.
//
// The counts stay balanced: before each sweep loop warpgroup 1 arrives once on warpgroup 0's
// barrier (warpgroup 0 goes first), every step each warpgroup syncs on its own barrier once and
// arrives on the other's once, and after the loop warpgroup 0 takes the one turn warpgroup 1
// passed last. Both warpgroups run the same loops (the block's sweep bounds are the block's).
#include "compiler/passes/WarpRoles.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::bob::lowering {
namespace {

constexpr int64_t kWarpgroupThreads = 128;

// The calling thread's warpgroup (0 or 1) as i32, from its warp.
Value warpgroupOf(Emitter &e, Value warp) {
  Value wg = arith::DivUIOp::create(e.b, warp, e.index(4));
  return arith::IndexCastOp::create(e.b, e.b.getI32Type(), wg);
}

Value warpgroupOfThread(Emitter &e) {
  Value tid = gpu::ThreadIdOp::create(e.b, gpu::Dimension::x);
  return warpgroupOf(e, arith::DivUIOp::create(e.b, tid, e.index(32)));
}

void sync(Emitter &e, Value id, int64_t threads) {
  NVVM::BarrierOp::create(e.b, TypeRange{}, id, e.i32(threads), NVVM::BarrierReductionAttr(),
                          Value());
}

void arrive(Emitter &e, Value id, int64_t threads) {
  NVVM::BarrierArriveOp::create(e.b, id, e.i32(threads));
}

} // namespace

void warpgroupBarrier(Emitter &e, const ThreadCoords &c) {
  Value id = arith::AddIOp::create(e.b, e.i32(kWarpgroupBarrier), warpgroupOf(e, c.warp));
  sync(e, id, kWarpgroupThreads);
}

void waitForTurn(Emitter &e, const ThreadCoords &c) {
  Value id = arith::AddIOp::create(e.b, e.i32(kTurnBarrier), warpgroupOf(e, c.warp));
  sync(e, id, 2 * kWarpgroupThreads);
}

void passTurn(Emitter &e, const ThreadCoords &c) {
  // The other warpgroup's barrier: kTurnBarrier + (1 - w).
  Value id = arith::SubIOp::create(e.b, e.i32(kTurnBarrier + 1), warpgroupOf(e, c.warp));
  arrive(e, id, 2 * kWarpgroupThreads);
}

void openAndCloseTurns(const ProductRuns &runs) {
  for (Operation *loop : runs.turnLoops) {
    OpBuilder builder(loop);
    Emitter e(loop->getLoc(), builder);
    Value turn0 = e.i32(kTurnBarrier);
    auto isWarpgroup = [&](int64_t w) {
      return arith::CmpIOp::create(e.b, arith::CmpIPredicate::eq, warpgroupOfThread(e), e.i32(w));
    };
    e.ifThen(isWarpgroup(1), [&] { arrive(e, turn0, 2 * kWarpgroupThreads); });
    e.b.setInsertionPointAfter(loop);
    e.ifThen(isWarpgroup(0), [&] { sync(e, turn0, 2 * kWarpgroupThreads); });
  }
}

} // namespace flashbob::bob::lowering

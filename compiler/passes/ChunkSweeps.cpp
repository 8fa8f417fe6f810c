// bob-chunk-sweeps: a loop whose accumulators flush `every N` steps (bob.flush ... every N,
// KernelBuilder::flush) runs as a loop over chunks of N steps around the original loop, with the
// flushes after each chunk:
//
//   scf.for %i = lb to ub step s iter_args(%a = init) {      scf.for %c = lb to ub step N*s
//     ...                                                       iter_args(%a = init) {
//     %f = bob.flush %x into %r every N              ->         %hi = min(%c + N*s, ub)
//     scf.yield %f                                              %x = scf.for %i = %c to %hi step s
//   }                                                               iter_args(%a) { ...; scf.yield %x }
//                                                               %f = bob.flush %x into %r
//                                                               scf.yield %f
//                                                             }
//
// The inner loop keeps its body as it was (the induction values are the same, so the values
// computed from them and from the original bounds, such as bob-pipeline-loads' buffer parity and
// its test for a next step, are too), and no step tests whether a flush is due: that test, a
// branch on every step, cost 1-9% a step on the H200 (bench/results/2026-12-02-h200-long-sweeps.md).
// Chunks start at the lower bound, so flushes are N steps apart wherever the sweep starts.
#include "compiler/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBCHUNKSWEEPS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

struct ChunkSweeps : impl::BobChunkSweepsBase<ChunkSweeps> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (llvm::any_of(loop.getBody()->getOps<FlushOp>(),
                       [](FlushOp f) { return f.getEvery().has_value(); }))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops)
      if (failed(chunk(loop)))
        return signalPassFailure();
  }

  LogicalResult chunk(scf::ForOp loop) {
    // Which yielded values flush, and into what; one interval for the loop.
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    SmallVector<Value> reserves(yield.getNumOperands());
    std::optional<uint64_t> every; // FlushOp::getEvery's type
    for (FlushOp flush : llvm::make_early_inc_range(loop.getBody()->getOps<FlushOp>())) {
      if (!flush.getEvery())
        continue;
      if (every && *every != *flush.getEvery())
        return flush.emitOpError("flushes every ")
               << *flush.getEvery() << " steps, another value of its loop every " << *every;
      every = flush.getEvery();
      OpOperand &use = *flush.getResult().getUses().begin(); // the yield (verifier)
      reserves[use.getOperandNumber()] = flush.getReserve();
      flush.getResult().replaceAllUsesWith(flush.getAcc());
      flush.erase();
    }

    Location loc = loop.getLoc();
    OpBuilder b(loop);
    Value chunkStep = arith::MulIOp::create(
        b, loc, loop.getStep(), arith::ConstantIndexOp::create(b, loc, *every));
    auto outer = scf::ForOp::create(b, loc, loop.getLowerBound(), loop.getUpperBound(),
                                    chunkStep, loop.getInitArgs());
    loop.replaceAllUsesWith(outer.getResults());

    // The original loop, over this chunk's steps, from the values the chunks carry.
    Block *body = outer.getBody();
    b.setInsertionPointToStart(body);
    Value chunkEnd = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, outer.getInductionVar(), chunkStep),
        loop.getUpperBound());
    loop->moveBefore(body, body->end());
    loop.getLowerBoundMutable().assign(outer.getInductionVar());
    loop.getUpperBoundMutable().assign(chunkEnd);
    loop.getInitArgsMutable().assign(outer.getRegionIterArgs());

    b.setInsertionPointToEnd(body);
    SmallVector<Value> carried;
    for (auto [result, reserve] : llvm::zip_equal(loop.getResults(), reserves))
      carried.push_back(reserve ? Value(FlushOp::create(b, loc, result, reserve)) : Value(result));
    scf::YieldOp::create(b, loc, carried);
    return success();
  }
};

} // namespace
} // namespace flashbob::bob

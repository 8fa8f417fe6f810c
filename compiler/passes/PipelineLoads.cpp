// bob-pipeline-loads: with `stages = 2`, the tiles a loop loads for iteration i + 1 are copied
// while iteration i computes (double buffering), instead of every iteration waiting for its own
// copies first.
//
// For each scf.for whose body (at its top level) has bob.load_shared ops into tiles allocated
// outside the loop, with every operand but the row defined outside the loop and the row computed
// from the induction variable inside the body, each tile loaded once and read only in the loop:
//   - each such tile gets a second buffer; iteration i reads buffer (i - lb) / step % 2;
//   - before the loop: if it runs at all, the first iteration's loads start (async);
//   - in the body, where the first load was: bob.wait_shared (this iteration's tiles are there,
//     and every thread is done with the previous iteration, so its buffers are free), then, if
//     there is a next iteration, its loads start into the other buffers (async);
//   - the loads themselves are gone.
// Other loops and other targets of the loads are left alone. With `stages = 1`: no change.
#include "compiler/passes/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBPIPELINELOADS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

// Ops of the body that `value` is computed from (in body order), if it depends only on the
// induction variable, values from outside the loop and pure ops of the body's top level.
std::optional<SmallVector<Operation *>> rowSlice(scf::ForOp loop, Value value) {
  Block *body = loop.getBody();
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.filter = [&](Operation *op) { return op->getBlock() == body; };
  if (Operation *def = value.getDefiningOp(); def && def->getBlock() == body) {
    if (failed(getBackwardSlice(def, &slice, options)))
      return std::nullopt;
  }
  for (Operation *op : slice) {
    if (!isPure(op) || op->getNumRegions() != 0)
      return std::nullopt;
    for (Value operand : op->getOperands())
      if (operand.getParentBlock() == body && operand != loop.getInductionVar() &&
          !slice.contains(operand.getDefiningOp()))
        return std::nullopt;
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

bool definedOutside(scf::ForOp loop, Value v) {
  return !loop->isAncestor(v.getParentBlock()->getParentOp());
}

struct PipelineLoads : impl::BobPipelineLoadsBase<PipelineLoads> {
  void runOnOperation() override {
    KernelOp kernel = getOperation();
    if (kernel.getSpec().getStages() < 2)
      return;
    SmallVector<scf::ForOp> loops;
    kernel.walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      pipeline(loop);
  }

  void pipeline(scf::ForOp loop) {
    Block *body = loop.getBody();
    SmallVector<LoadSharedOp> loads;
    for (Operation &op : *body)
      if (auto load = dyn_cast<LoadSharedOp>(op))
        if (!load.getAsync())
          loads.push_back(load);
    if (loads.empty())
      return;
    llvm::DenseMap<LoadSharedOp, SmallVector<Operation *>> slices;
    llvm::SmallPtrSet<Value, 8> tiles;
    for (LoadSharedOp load : loads) {
      Value tile = load.getDst();
      // One load per tile, and nothing outside the loop reads it (after the loop the last
      // iteration's data may sit in the second buffer).
      if (!tiles.insert(tile).second)
        return;
      for (Operation *user : tile.getUsers())
        if (!loop->isAncestor(user))
          return;
      if (!definedOutside(loop, tile) || !tile.getDefiningOp<AllocSharedOp>() ||
          !definedOutside(loop, load.getSrc()) || !definedOutside(loop, load.getBatch()) ||
          !definedOutside(loop, load.getHead()) || !definedOutside(loop, load.getBound()))
        return;
      auto slice = rowSlice(loop, load.getRow());
      if (!slice)
        return;
      slices[load] = *slice;
    }

    OpBuilder b(loop);
    Location loc = loop.getLoc();
    // Second buffers, next to the first ones.
    llvm::DenseMap<Value, Value> second;
    for (LoadSharedOp load : loads) {
      Value tile = load.getDst();
      if (second.count(tile))
        continue;
      auto alloc = tile.getDefiningOp<AllocSharedOp>();
      OpBuilder atAlloc(alloc);
      atAlloc.setInsertionPointAfter(alloc);
      second[tile] = AllocSharedOp::create(atAlloc, alloc.getLoc(), alloc.getType(), IntegerAttr());
    }

    // Starts the loads of iteration `iv` into `tiles(first)`, rows recomputed from `iv`.
    auto issue = [&](OpBuilder &ob, Value iv, function_ref<Value(Value)> tiles) {
      for (LoadSharedOp load : loads) {
        IRMapping map;
        map.map(loop.getInductionVar(), iv);
        for (Operation *op : slices[load])
          ob.clone(*op, map);
        LoadSharedOp::create(ob, load.getLoc(), load.getSrc(), load.getBatch(), load.getHead(),
                             map.lookupOrDefault(load.getRow()), load.getBound(),
                             tiles(load.getDst()), load.getTensorMap(), /*async=*/true);
      }
    };
    auto ifThen = [&](OpBuilder &ob, Value cond, function_ref<void(OpBuilder &)> then) {
      auto ifOp = scf::IfOp::create(ob, loc, cond, /*withElseRegion=*/false);
      OpBuilder inner = OpBuilder::atBlockBegin(ifOp.thenBlock());
      inner.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      then(inner);
    };

    // Prologue: the first iteration's loads into the first buffers.
    Value runs = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, loop.getLowerBound(),
                                       loop.getUpperBound());
    ifThen(b, runs, [&](OpBuilder &ob) { issue(ob, loop.getLowerBound(), [](Value t) { return t; }); });

    // Body: this iteration's buffers by parity; wait; start the next iteration's loads.
    OpBuilder ib = OpBuilder::atBlockBegin(body);
    Value iv = loop.getInductionVar();
    Value trip = arith::DivSIOp::create(
        ib, loc, arith::SubIOp::create(ib, loc, iv, loop.getLowerBound()), loop.getStep());
    Value two = arith::ConstantIndexOp::create(ib, loc, 2);
    Value zero = arith::ConstantIndexOp::create(ib, loc, 0);
    Value even = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::eq,
                                       arith::RemSIOp::create(ib, loc, trip, two), zero);
    llvm::DenseMap<Value, Value> current, next;
    for (auto [first, other] : second) {
      current[first] = arith::SelectOp::create(ib, loc, even, first, other);
      next[first] = arith::SelectOp::create(ib, loc, even, other, first);
    }
    for (auto [first, cur] : current)
      first.replaceUsesWithIf(cur, [&](OpOperand &use) {
        return loop->isAncestor(use.getOwner()) && use.getOwner() != cur.getDefiningOp() &&
               use.getOwner() != next[first].getDefiningOp();
      });

    OpBuilder wb(loads.front());
    WaitSharedOp::create(wb, loc);
    Value nextIv = arith::AddIOp::create(wb, loc, iv, loop.getStep());
    Value hasNext = arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, nextIv,
                                          loop.getUpperBound());
    ifThen(wb, hasNext, [&](OpBuilder &ob) {
      issue(ob, nextIv, [&](Value t) {
        // `t` is the load's (already replaced) current buffer; its first buffer is the key.
        for (auto [first, cur] : current)
          if (cur == t)
            return next[first];
        return t;
      });
    });
    for (LoadSharedOp load : loads)
      load.erase();
  }
};
} // namespace
} // namespace flashbob::bob

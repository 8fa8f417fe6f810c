// bob-pipeline-loads: with `stages = 2`, the tiles a loop loads for iteration i + 1 are copied
// while iteration i computes (double buffering), instead of every iteration waiting for its own
// copies first.
//
// For each scf.for whose body (at its top level) has bob.load_shared ops into tiles allocated
// outside the loop, with every operand but the row and the head defined outside the loop and
// those two computed from the induction variable inside the body (the head varies in the
// grouped key-major sweep, which visits several query heads), each tile loaded once and read
// only in the loop:
//   - each such tile gets a second buffer; iteration i reads buffer (i - lb) / step % 2;
//   - before the loop: if it runs at all, the first iteration's loads start (async);
//   - in the body, where the first load was: bob.wait_shared (this iteration's tiles are there,
//     and every thread is done with the previous iteration, so its buffers are free), then, if
//     there is a next iteration, its loads start into the other buffers (async);
//   - the loads themselves are gone.
// Other loops and other targets of the loads are left alone. With `stages = 1`: no change.
//
// With a `producer` spec (warp specialization) the kernel's one such loop is split by role
// instead: everything after the shared tiles' allocs (those before the loop) becomes the
// consumer region of a bob.warp_specialize, whose producer region runs the same trip count
// and, for iteration i, acquires buffer i % 2 (bob.producer_acquire) and starts its loads
// there (async). The consumers' body waits for its buffers where the first load was
// (bob.consumer_wait) and releases them at its end (bob.consumer_release): no block-wide
// barrier per iteration, and no consumer thread issues a copy. The values the producer needs
// (loop bounds, load operands) are recomputed in its region from the pure ops that gave them.
#include "compiler/passes/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBPIPELINELOADS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

// Ops of the body that `value` is computed from (in body order), if it depends only on the
// induction variable, values from outside the loop and side-effect-free ops of the body's top
// level. Not necessarily speculatable: the grouped sweep divides by the blocks per head. The
// clones run only for iterations that run (the prologue if the loop runs, the prefetch if there
// is a next iteration, the producer for each), where the originals would run too.
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
    if (!isMemoryEffectFree(op) || op->getNumRegions() != 0)
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

// The loads of one loop that can be double-buffered, with the ops computing each one's row and
// head.
struct LoopLoads {
  scf::ForOp loop;
  SmallVector<LoadSharedOp> loads;
  // The ops of the body computing any load's row or head, each once, in body order: an issue
  // clones them all and then starts the loads back to back, so that the loads share one
  // transaction (TMA batches form only over consecutive loads) and a step's division runs once,
  // not once per tile.
  SmallVector<Operation *> slice;
};

std::optional<LoopLoads> findLoopLoads(scf::ForOp loop) {
  LoopLoads found;
  found.loop = loop;
  for (Operation &op : *loop.getBody())
    if (auto load = dyn_cast<LoadSharedOp>(op))
      if (!load.getAsync())
        found.loads.push_back(load);
  if (found.loads.empty())
    return std::nullopt;
  llvm::SmallPtrSet<Value, 8> tiles;
  llvm::SetVector<Operation *> slice;
  for (LoadSharedOp load : found.loads) {
    Value tile = load.getDst();
    // One load per tile, and nothing outside the loop reads it (after the loop the last
    // iteration's data may sit in the second buffer).
    if (!tiles.insert(tile).second)
      return std::nullopt;
    for (Operation *user : tile.getUsers())
      if (!loop->isAncestor(user))
        return std::nullopt;
    if (!definedOutside(loop, tile) || !tile.getDefiningOp<AllocSharedOp>() ||
        !definedOutside(loop, load.getSrc()) || !definedOutside(loop, load.getBatch()) ||
        !definedOutside(loop, load.getBound()))
      return std::nullopt;
    auto rows = rowSlice(loop, load.getRow());
    auto heads = rowSlice(loop, load.getHead());
    if (!rows || !heads)
      return std::nullopt;
    slice.insert(rows->begin(), rows->end());
    slice.insert(heads->begin(), heads->end());
  }
  found.slice.assign(slice.begin(), slice.end());
  llvm::sort(found.slice, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return found;
}

// Second buffers, next to the first ones: first buffer -> second buffer.
llvm::DenseMap<Value, Value> addSecondBuffers(ArrayRef<LoadSharedOp> loads) {
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
  return second;
}

// In the body of `loop`: whether this iteration uses the first buffers ((iv - lb) / step even).
Value usesFirstBuffers(OpBuilder &b, Location loc, scf::ForOp loop, Value iv) {
  Value trip = arith::DivSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, iv, loop.getLowerBound()), loop.getStep());
  Value two = arith::ConstantIndexOp::create(b, loc, 2);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                               arith::RemSIOp::create(b, loc, trip, two), zero);
}

// Makes every use of a first buffer inside the loop read this iteration's buffer instead;
// returns first buffer -> this iteration's buffer (a select at the top of the body). With
// `next`, also first buffer -> the next iteration's buffer.
llvm::DenseMap<Value, Value> selectCurrentBuffers(scf::ForOp loop,
                                                  const llvm::DenseMap<Value, Value> &second,
                                                  llvm::DenseMap<Value, Value> *next = nullptr) {
  OpBuilder ib = OpBuilder::atBlockBegin(loop.getBody());
  Location loc = loop.getLoc();
  Value even = usesFirstBuffers(ib, loc, loop, loop.getInductionVar());
  llvm::DenseMap<Value, Value> current;
  llvm::SmallPtrSet<Operation *, 8> selects;
  for (auto [first, other] : second) {
    current[first] = arith::SelectOp::create(ib, loc, even, first, other);
    selects.insert(current[first].getDefiningOp());
    if (next) {
      (*next)[first] = arith::SelectOp::create(ib, loc, even, other, first);
      selects.insert((*next)[first].getDefiningOp());
    }
  }
  for (auto [first, cur] : current)
    first.replaceUsesWithIf(cur, [&](OpOperand &use) {
      return loop->isAncestor(use.getOwner()) && !selects.contains(use.getOwner());
    });
  return current;
}

// `value` as seen from a region that cannot see `hidden`'s ops: values defined inside `hidden`
// are recomputed at `b` from the pure, region-free ops that gave them (memoized in `map`).
FailureOr<Value> recompute(OpBuilder &b, Region &hidden, Value value, IRMapping &map) {
  if (Value known = map.lookupOrNull(value))
    return known;
  if (!hidden.isAncestor(value.getParentRegion()))
    return value;
  Operation *def = value.getDefiningOp();
  if (!def || !isMemoryEffectFree(def) || def->getNumRegions() != 0)
    return failure();
  for (Value operand : def->getOperands())
    if (failed(recompute(b, hidden, operand, map)))
      return failure();
  b.clone(*def, map);
  return map.lookup(value);
}

struct PipelineLoads : impl::BobPipelineLoadsBase<PipelineLoads> {
  void runOnOperation() override {
    KernelOp kernel = getOperation();
    if (kernel.getSpec().getStages() < 2)
      return;
    SmallVector<scf::ForOp> loops;
    kernel.walk([&](scf::ForOp loop) { loops.push_back(loop); });
    SmallVector<LoopLoads> found;
    for (scf::ForOp loop : loops)
      if (auto loads = findLoopLoads(loop))
        found.push_back(std::move(*loads));
    if (!kernel.getSpec().getProducer()) {
      for (LoopLoads &loads : found)
        pipeline(loads);
      return;
    }
    if (found.size() != 1 || found.front().loop->getBlock() != &kernel.getBody().front()) {
      kernel.emitOpError("producer: needs exactly one loop with loads to double-buffer, at the "
                         "kernel's top level (found ")
          << found.size() << ")";
      return signalPassFailure();
    }
    if (failed(specialize(kernel, found.front())))
      return signalPassFailure();
  }

  LogicalResult specialize(KernelOp kernel, LoopLoads &plan) {
    scf::ForOp loop = plan.loop;
    Location loc = loop.getLoc();
    llvm::DenseMap<Value, Value> second = addSecondBuffers(plan.loads);

    // Everything after the last alloc before the loop moves into the consumer region (an alloc
    // after the loop, say an epilogue's staging tile, goes along: were the split after it, the
    // loop would stay outside, its barriers waiting for a producer that never comes).
    Block *top = &kernel.getBody().front();
    Operation *lastAlloc = nullptr;
    for (Operation &op : *top) {
      if (&op == loop.getOperation())
        break;
      if (isa<AllocSharedOp>(op))
        lastAlloc = &op;
    }
    OpBuilder b(kernel.getContext());
    b.setInsertionPointAfter(lastAlloc);
    auto split = WarpSpecializeOp::create(b, loc);
    Block *producer = b.createBlock(&split.getProducer());
    Block *consumer = b.createBlock(&split.getConsumer());
    consumer->getOperations().splice(consumer->end(), top->getOperations(),
                                     std::next(split->getIterator()),
                                     top->getTerminator()->getIterator());

    // Consumers: wait where the first load was, release at the end of the body.
    selectCurrentBuffers(loop, second);
    SmallVector<Value> filled;
    for (LoadSharedOp load : plan.loads)
      filled.push_back(load.getDst()); // this iteration's buffer, after the selects
    {
      OpBuilder wb(plan.loads.front());
      ConsumerWaitOp::create(wb, loc, filled);
      wb.setInsertionPoint(loop.getBody()->getTerminator());
      ConsumerReleaseOp::create(wb, loc, filled);
    }

    // Producer: the same iterations; each acquires its buffers and starts its loads there.
    Region &hidden = split.getConsumer();
    IRMapping outer;
    OpBuilder pb = OpBuilder::atBlockEnd(producer);
    auto lb = recompute(pb, hidden, loop.getLowerBound(), outer);
    auto ub = recompute(pb, hidden, loop.getUpperBound(), outer);
    auto step = recompute(pb, hidden, loop.getStep(), outer);
    if (failed(lb) || failed(ub) || failed(step))
      return loop.emitOpError("producer: the loop bounds are not computed by pure ops");
    auto ploop = scf::ForOp::create(pb, loc, *lb, *ub, *step);
    OpBuilder inLoop(ploop.getBody()->getTerminator());
    Value piv = ploop.getInductionVar();
    Value even = usesFirstBuffers(inLoop, loc, ploop, piv);
    SmallVector<Value> targets;
    for (LoadSharedOp load : plan.loads) {
      auto select = load.getDst().getDefiningOp<arith::SelectOp>();
      targets.push_back(arith::SelectOp::create(inLoop, loc, even, select.getTrueValue(),
                                                select.getFalseValue()));
    }
    ProducerAcquireOp::create(inLoop, loc, targets);
    IRMapping map = outer;
    map.map(loop.getInductionVar(), piv);
    for (Operation *op : plan.slice) {
      for (Value operand : op->getOperands())
        if (operand.getParentBlock() != loop.getBody() &&
            failed(recompute(inLoop, hidden, operand, map)))
          return op->emitOpError("producer: a load's row or head is not computed by pure ops");
      inLoop.clone(*op, map);
    }
    // Every load's operands first (src, batch, bound, head, row), then the loads back to back:
    // one TMA batch.
    SmallVector<SmallVector<Value, 5>> operandsOf;
    for (LoadSharedOp load : plan.loads) {
      SmallVector<Value, 5> &operands = operandsOf.emplace_back();
      // Row and head: cloned with the slice when computed in the body, else from outside.
      for (Value v : {Value(load.getSrc()), Value(load.getBatch()), Value(load.getBound()),
                      map.lookupOrDefault(Value(load.getHead())),
                      map.lookupOrDefault(Value(load.getRow()))}) {
        auto recomputed = recompute(inLoop, hidden, v, map);
        if (failed(recomputed))
          return load.emitOpError("producer: the load's operands are not computed by pure ops");
        operands.push_back(*recomputed);
      }
    }
    for (auto [load, target, operands] : llvm::zip_equal(plan.loads, targets, operandsOf))
      LoadSharedOp::create(inLoop, load.getLoc(), operands[0], operands[1], operands[3],
                           operands[4], operands[2], target, load.getTensorMap(),
                           /*async=*/true);
    for (LoadSharedOp load : plan.loads)
      load.erase();
    return success();
  }

  void pipeline(LoopLoads &plan) {
    scf::ForOp loop = plan.loop;
    ArrayRef<LoadSharedOp> loads = plan.loads;
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    llvm::DenseMap<Value, Value> second = addSecondBuffers(loads);

    // Starts the loads of iteration `iv` into `tiles(first)`, rows and heads recomputed from
    // `iv`.
    auto issue = [&](OpBuilder &ob, Value iv, function_ref<Value(Value)> tiles) {
      IRMapping map;
      map.map(loop.getInductionVar(), iv);
      for (Operation *op : plan.slice)
        ob.clone(*op, map);
      for (LoadSharedOp load : loads) {
        LoadSharedOp::create(ob, load.getLoc(), load.getSrc(), load.getBatch(),
                             map.lookupOrDefault(load.getHead()),
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
    Value iv = loop.getInductionVar();
    llvm::DenseMap<Value, Value> next;
    llvm::DenseMap<Value, Value> current = selectCurrentBuffers(loop, second, &next);

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

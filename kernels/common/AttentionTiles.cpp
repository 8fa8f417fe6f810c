#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace flashbob::kernels {

Value firstKeyBlock(KernelBuilder &kb, Value row0, Value n, Value m) {
  if (kb.spec.windowLeft < 0)
    return kb.index(0);
  auto &b = kb.b;
  Value begin = arith::SubIOp::create(b, arith::AddIOp::create(b, row0, arith::SubIOp::create(b, m, n)),
                                      kb.index(kb.spec.windowLeft));
  begin = arith::MaxSIOp::create(b, begin, kb.index(0));
  return arith::DivUIOp::create(b, begin, kb.index(kb.spec.tiles.blockN));
}

Value keyBlocksToVisit(KernelBuilder &kb, Value row0, Value n, Value m) {
  auto &b = kb.b;
  Value keyEnd = m;
  if (const int64_t right = kb.spec.rightReach(); right >= 0) {
    Value end = arith::AddIOp::create(b, arith::AddIOp::create(b, row0, kb.index(kb.spec.tiles.blockM)),
                                      arith::SubIOp::create(b, m, n));
    if (right > 0)
      end = arith::AddIOp::create(b, end, kb.index(right));
    keyEnd = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, end, kb.index(0)), m);
  }
  return arith::CeilDivUIOp::create(b, keyEnd, kb.index(kb.spec.tiles.blockN));
}

Value firstQueryBlock(KernelBuilder &kb, Value key0, Value n, Value m) {
  const int64_t right = kb.spec.rightReach();
  if (right < 0)
    return kb.index(0);
  auto &b = kb.b;
  Value first = arith::SubIOp::create(b, key0, arith::SubIOp::create(b, m, n));
  if (right > 0)
    first = arith::SubIOp::create(b, first, kb.index(right));
  first = arith::MaxSIOp::create(b, first, kb.index(0));
  return arith::DivUIOp::create(b, first, kb.index(kb.spec.tiles.blockM));
}

Value queryBlocksEnd(KernelBuilder &kb, Value key0, Value n, Value m) {
  auto &b = kb.b;
  Value queryEnd = n;
  if (kb.spec.windowLeft >= 0) {
    // Query i sees key key0 + block_n - 1 (or an earlier one) iff
    // i <= key0 + block_n - 1 - (M - N) + left.
    Value end = arith::SubIOp::create(b, arith::AddIOp::create(b, key0, kb.index(kb.spec.tiles.blockN)),
                                      arith::SubIOp::create(b, m, n));
    end = arith::AddIOp::create(b, end, kb.index(kb.spec.windowLeft));
    queryEnd = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, end, kb.index(0)), n);
  }
  return arith::CeilDivUIOp::create(b, queryEnd, kb.index(kb.spec.tiles.blockM));
}

namespace {
// Whether a kernel's masks test whole tiles first (bob.mask's tile_test): most tiles then skip
// the element tests, but the branch's join costs registers. Measured on the H200 at 16 heads x
// 16K (commit ff91c74; docs/performance.md, "Tried and not kept"): the forward 9-24% faster,
// the backward 2-10%; the BoB kernels, at the register limit, 2.5-7% slower (they spill more
// with it). The forward's JVP follows the forward (one accumulator, the same masks); not timed
// on its own.
bool testsWholeTiles(bob::KernelKind kind) {
  return kind != bob::KernelKind::bob_q && kind != bob::KernelKind::bob_kv;
}
} // namespace

Tile maskedLog2Scores(KernelBuilder &kb, const Tile &scores, Value row0, Value col0) {
  Tile s = scores * kb.scaleLog2e();
  auto mask = bob::MaskOp::create(kb.b, s, row0, col0, kb.n, kb.m, kb.spec.causal,
                                  /*keysOnRows=*/kb.keyMajor());
  if (testsWholeTiles(kb.spec.kind))
    mask.setTileTest(true);
  if (kb.spec.windowLeft >= 0)
    mask.setWindowLeftAttr(kb.b.getI64IntegerAttr(kb.spec.windowLeft));
  if (kb.spec.windowRight >= 0)
    mask.setWindowRightAttr(kb.b.getI64IntegerAttr(kb.spec.windowRight));
  return {kb, mask};
}

Tile lseToLog2(const Tile &lse) {
  const double inf = std::numeric_limits<double>::infinity();
  Tile log2 = lse * kLog2e;
  return replace(log2, -inf, inf);
}

Tile probabilities(KernelBuilder &kb, const Tile &scores, const Tile &lseLog2, Value row0,
                   Value col0) {
  Tile s = maskedLog2Scores(kb, scores, row0, col0);
  return exp2(s - lseLog2);
}

Tile rowsSeeingSeveralKeys(KernelBuilder &kb) {
  auto rows = bob::MultiKeyRowsOp::create(kb.b, kb.rowvec(kb.ownRows()), kb.ownStart, kb.n, kb.m,
                                          kb.spec.causal, /*window_left=*/nullptr,
                                          /*window_right=*/nullptr);
  if (kb.spec.windowLeft >= 0)
    rows.setWindowLeftAttr(kb.b.getI64IntegerAttr(kb.spec.windowLeft));
  if (kb.spec.windowRight >= 0)
    rows.setWindowRightAttr(kb.b.getI64IntegerAttr(kb.spec.windowRight));
  return {kb, rows};
}

Tile outputDotRows(KernelBuilder &kb) {
  // dO before O: the order of bob_q's measured PTX (before this helper, bwd_q loaded O first;
  // its PTX differs from then by that order alone).
  Tile dO = kb.loadOwn(Operand::dO);
  Tile o = kb.loadOwn(Operand::o);
  return rowSum(o * dO);
}

} // namespace flashbob::kernels

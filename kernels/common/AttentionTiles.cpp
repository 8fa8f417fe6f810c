#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace flashbob::kernels {

Value keyBlocksToVisit(KernelBuilder &kb, Value row0, Value n, Value m) {
  auto &b = kb.b;
  Value keyEnd = m;
  if (kb.spec.causal) {
    Value end = arith::AddIOp::create(b, arith::AddIOp::create(b, row0, kb.index(kb.spec.tiles.blockM)),
                                      arith::SubIOp::create(b, m, n));
    keyEnd = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, end, kb.index(0)), m);
  }
  return arith::CeilDivUIOp::create(b, keyEnd, kb.index(kb.spec.tiles.blockN));
}

Value firstQueryBlock(KernelBuilder &kb, Value key0, Value n, Value m) {
  if (!kb.spec.causal)
    return kb.index(0);
  auto &b = kb.b;
  Value first = arith::SubIOp::create(b, key0, arith::SubIOp::create(b, m, n));
  first = arith::MaxSIOp::create(b, first, kb.index(0));
  return arith::DivUIOp::create(b, first, kb.index(kb.spec.tiles.blockM));
}

Tile maskedLog2Scores(KernelBuilder &kb, const Tile &scores, Value row0, Value col0) {
  Tile s = scores * kb.scaleLog2e();
  return {kb, bob::MaskOp::create(kb.b, s, row0, col0, kb.n, kb.m, kb.spec.causal,
                                  /*keysOnRows=*/kb.keyMajor())};
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

Tile outputDotRows(KernelBuilder &kb) {
  // dO before O: the order of bob_q's measured PTX (before this helper, bwd_q loaded O first;
  // its PTX differs from then by that order alone).
  Tile dO = kb.loadOwn(Operand::dO);
  Tile o = kb.loadOwn(Operand::o);
  return rowSum(o * dO);
}

} // namespace flashbob::kernels

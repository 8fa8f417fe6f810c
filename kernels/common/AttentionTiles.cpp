#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace flashbob::kernels {

namespace {
// The loop bounds below add N, M, a block's start and the window sizes (each < 2^31), which can
// pass 2^31; index arithmetic is 32-bit in the kernels (compiler/pipeline/Pipeline.cpp), so
// these few sums, once per block, are computed in i64 and clamped to [0, N] or [0, M] before
// they return to index. Wide: an index (< 2^31) or a constant as i64.
struct Wide {
  KernelBuilder &kb;
  Value of(Value index) {
    return arith::IndexCastOp::create(kb.b, kb.b.getI64Type(), index).getResult();
  }
  Value of(int64_t v) { return arith::ConstantIntOp::create(kb.b, v, 64).getResult(); }
  Value add(Value x, Value y) { return arith::AddIOp::create(kb.b, x, y).getResult(); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(kb.b, x, y).getResult(); }
  // min(max(x, 0), limit) back as an index (limit < 2^31).
  Value clamp(Value x, Value limit) {
    Value c = arith::MinSIOp::create(kb.b, arith::MaxSIOp::create(kb.b, x, of(int64_t(0))), of(limit));
    return arith::IndexCastOp::create(kb.b, kb.b.getIndexType(), c).getResult();
  }
};
} // namespace

Value firstKeyBlock(KernelBuilder &kb, Value row0, Value n, Value m) {
  if (kb.spec.windowLeft < 0)
    return kb.index(0);
  Wide w{kb};
  // row0 + (M - N) - left, at least 0 (and at most M: a block past every key visits none).
  Value begin = w.sub(w.add(w.of(row0), w.sub(w.of(m), w.of(n))), w.of(kb.spec.windowLeft));
  return arith::DivUIOp::create(kb.b, w.clamp(begin, m), kb.index(kb.spec.tiles.blockN));
}

Value keyBlocksToVisit(KernelBuilder &kb, Value row0, Value n, Value m) {
  auto &b = kb.b;
  Value keyEnd = m;
  if (const int64_t right = kb.spec.rightReach(); right >= 0) {
    Wide w{kb};
    Value end = w.add(w.add(w.of(row0), w.of(kb.spec.tiles.blockM)), w.sub(w.of(m), w.of(n)));
    if (right > 0)
      end = w.add(end, w.of(right));
    keyEnd = w.clamp(end, m);
  }
  return arith::CeilDivUIOp::create(b, keyEnd, kb.index(kb.spec.tiles.blockN));
}

Value firstQueryBlock(KernelBuilder &kb, Value key0, Value n, Value m) {
  const int64_t right = kb.spec.rightReach();
  if (right < 0)
    return kb.index(0);
  Wide w{kb};
  Value first = w.sub(w.of(key0), w.sub(w.of(m), w.of(n)));
  if (right > 0)
    first = w.sub(first, w.of(right));
  return arith::DivUIOp::create(kb.b, w.clamp(first, n), kb.index(kb.spec.tiles.blockM));
}

Value queryBlocksEnd(KernelBuilder &kb, Value key0, Value n, Value m) {
  auto &b = kb.b;
  Value queryEnd = n;
  if (kb.spec.windowLeft >= 0) {
    // Query i sees key key0 + block_n - 1 (or an earlier one) iff
    // i <= key0 + block_n - 1 - (M - N) + left.
    Wide w{kb};
    Value end = w.sub(w.add(w.of(key0), w.of(kb.spec.tiles.blockN)), w.sub(w.of(m), w.of(n)));
    end = w.add(end, w.of(kb.spec.windowLeft));
    queryEnd = w.clamp(end, n);
  }
  return arith::CeilDivUIOp::create(b, queryEnd, kb.index(kb.spec.tiles.blockM));
}

namespace {
// Whether a kernel's masks test whole tiles first (bob.mask's tile_test): most tiles then skip
// the element tests, but the branch's join costs registers. Measured on the H200 at 16 heads x
// 16K (commit ff91c74; docs/performance.md, "Tried and not kept"): the forward 9-24% faster,
// the backward 2-10%; the BoB kernels, at the register limit, 2.5-7% slower (they spill more
// with it). The forward's JVP, alone (fwd_jvp) or with the forward (fwd_dual), follows the
// forward (one or two accumulators, the same masks); not timed on its own.
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

SoftmaxStep softmaxStep(KernelBuilder &kb, const Tile &scores, Value col0, const Tile &oldMax,
                        const Tile &oldSum) {
  // S in log2 units: s log2(e) Q K^T, -inf outside the sequences and past the diagonal.
  Tile s = maskedLog2Scores(kb, scores, kb.ownStart, col0);
  Tile blockMax = rowMax(s);
  Tile newMax = max(oldMax, blockMax);
  Tile safeMax = replace(newMax, kNegInf, 0.0);
  Tile rescale = exp2(oldMax - safeMax);
  Tile p = exp2(s - safeMax);
  Tile blockSum = rowSum(p);
  Tile newSum = oldSum * rescale + blockSum;
  return {p, rescale, newMax, newSum};
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

BackwardTilesT backwardTilesT(KernelBuilder &kb, Value ks, Value vs, Value qs, Value dOs,
                              Value query0) {
  Tile lseLog2 = lseToLog2(kb.loadSweptRows(Operand::lse, query0));
  Tile dCol = kb.loadSweptRows(Operand::D, query0);
  Tile scoresT = productT(kb, ks, qs);
  Tile dPT = productT(kb, vs, dOs);
  Tile pT = probabilities(kb, scoresT, lseLog2, kb.ownStart, query0);
  return {pT, pT * (dPT - dCol)};
}

Tile outputDotRows(KernelBuilder &kb) {
  // dO before O: the order of bob_q's measured PTX (before this helper, bwd_q loaded O first;
  // its PTX differs from then by that order alone).
  Tile dO = kb.loadOwn(Operand::dO);
  Tile o = kb.loadOwn(Operand::o);
  return rowSum(o * dO);
}

} // namespace flashbob::kernels

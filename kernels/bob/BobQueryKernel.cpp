// BoB pass 1 (bob_q), query-major: a block owns block_m query rows and sweeps the key blocks.
// With G = s (uQ K^T + Q uK^T) and W = dO uV^T it accumulates the row scalars
//   c = rowsum(G o P),   b = rowsum(G o dS) + rowsum(P o W) - c o D
// and four accumulators that do not depend on c, b (docs/bob-math.md):
//   X1 = dS uK + (G o dS + P o W) K   X2 = (P o dP) K   X3 = P K   X4 = P uV + (P o G) V
// then finishes gQ = s (X1 - c o X2 - b o X3), gdO = X4 - c o O in the same sweep.
// X2 is accumulated here (the oracle's X2Source::Accumulate) rather than formed from a saved dQ,
// so the result does not inherit dQ's rounding to bf16/fp16.
//
// Arguments: Q, K, V, O, dO, L, uQ, uK, uV | gQ, gdO, D, c, b.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::kernels {

void buildBobQuery(KernelBuilder &kb) {
  auto &b = kb.b;
  const compiler::KernelSpec &s = kb.spec;
  const int64_t bm = s.blockM, bn = s.blockN, d = s.headDim;
  Type t = kb.tensorType(), r = kb.rowsType();
  ValueRange args = kb.beginKernel({t, t, t, t, t, r, t, t, t, t, t, r, r, r});
  Value q = args[0], k = args[1], v = args[2], o = args[3], dO = args[4], lse = args[5],
        uQ = args[6], uK = args[7], uV = args[8], gQ = args[9], gdO = args[10], dOut = args[11],
        cOut = args[12], bOut = args[13];
  Value n = kb.dim(q, 2), m = kb.dim(k, 2);
  auto [batch, head] = kb.batchAndHead(q);
  Value row0 = kb.blockStart(bm);
  auto rows = kb.rowvec(bm);

  // D = rowsum(dO o O) (also written: pass 2 reads it).
  Value dRow = bob::ReduceOp::create(
      b, rows,
      bob::MulOp::create(b, bob::LoadTileOp::create(b, kb.rtile(bm, d), o, batch, head, row0, n),
                         bob::LoadTileOp::create(b, kb.rtile(bm, d), dO, batch, head, row0, n)),
      bob::ReduceKind::sum);
  bob::StoreVecOp::create(b, dRow, dOut, batch, head, row0, n);
  Value lseLog2 = lseToLog2(kb, bob::LoadVecOp::create(b, rows, lse, batch, head, row0, n,
                                                       b.getF32FloatAttr(0)));

  auto queryTiles = kb.allocShared(3, bm), keyTiles = kb.allocShared(4, bn);
  Value qs = queryTiles[0], dOs = queryTiles[1], uQs = queryTiles[2];
  Value ks = keyTiles[0], vs = keyTiles[1], uKs = keyTiles[2], uVs = keyTiles[3];
  kb.loadShared({q, dO, uQ}, queryTiles, batch, head, row0, n);

  Value zeroAcc = bob::SplatOp::create(b, kb.rtile(bm, d), b.getF32FloatAttr(0));
  Value zeroRow = bob::SplatOp::create(b, rows, b.getF32FloatAttr(0));
  auto loop = scf::ForOp::create(b, kb.index(0), keyBlocksToVisit(kb, row0, n, m), kb.index(1),
                                 ValueRange{zeroAcc, zeroAcc, zeroAcc, zeroAcc, zeroRow, zeroRow});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value x1 = loop.getRegionIterArg(0), x2 = loop.getRegionIterArg(1),
          x3 = loop.getRegionIterArg(2), x4 = loop.getRegionIterArg(3),
          cAcc = loop.getRegionIterArg(4), bAcc = loop.getRegionIterArg(5);
    Value col0 = arith::MulIOp::create(b, loop.getInductionVar(), kb.index(bn));
    kb.loadShared({k, v, uK, uV}, keyTiles, batch, head, col0, m);

    // The independent score products first (bob-lower-tiles keeps them in flight together),
    // then G's second product into G's accumulator: G = s (uQ K^T + Q uK^T), W = dO uV^T.
    Value scores = product(kb, qs, ks, /*transposeB=*/true, bm, bn);
    Value dP = product(kb, dOs, vs, /*transposeB=*/true, bm, bn);
    Value g = product(kb, uQs, ks, /*transposeB=*/true, bm, bn);
    Value w = product(kb, dOs, uVs, /*transposeB=*/true, bm, bn);
    g = bob::MmaOp::create(b, qs, uKs, g, false, true);
    g = bob::MulOp::create(b, g, kb.f32(s.effectiveScale()));
    Value p = probabilities(kb, scores, lseLog2, row0, col0, n, m);
    Value dS = bob::MulOp::create(b, p, bob::SubOp::create(b, dP, dRow));

    Value gP = bob::MulOp::create(b, g, p);
    Value gdSPlusPW = bob::AddOp::create(b, bob::MulOp::create(b, g, dS), bob::MulOp::create(b, p, w));
    // Row sums of this block's terms, each column group over its own columns: the groups'
    // parts are combined once, after the loop.
    auto rowSum = [&](Value terms) -> Value {
      return bob::ReduceOp::create(b, rows, terms, bob::ReduceKind::sum, /*within_group=*/true);
    };
    Value cNew = bob::AddOp::create(b, cAcc, rowSum(gP));
    Value bNew = bob::AddOp::create(b, bAcc, rowSum(gdSPlusPW));

    // Every A operand first (bob-stage-operands stores them in one run), then the products:
    // four independent ones, then the second halves of X1 and X4.
    Value pdP = bob::MulOp::create(b, p, dP);
    x1 = accumulate(kb, x1, dS, uKs);
    x2 = accumulate(kb, x2, pdP, ks);
    x3 = accumulate(kb, x3, p, ks);
    x4 = accumulate(kb, x4, p, uVs);
    x1 = accumulate(kb, x1, gdSPlusPW, ks);
    x4 = accumulate(kb, x4, gP, vs);
    scf::YieldOp::create(b, ValueRange{x1, x2, x3, x4, cNew, bNew});
  }
  Value x1 = loop.getResult(0), x2 = loop.getResult(1), x3 = loop.getResult(2),
        x4 = loop.getResult(3);
  Value c = bob::CombineGroupsOp::create(b, rows, loop.getResult(4), bob::ReduceKind::sum);
  Value bSum = bob::CombineGroupsOp::create(b, rows, loop.getResult(5), bob::ReduceKind::sum);
  Value bRow = bob::SubOp::create(b, bSum, bob::MulOp::create(b, c, dRow));

  // gQ = s (X1 - c o X2 - b o X3);  gdO = X4 - c o O.
  Value gq = bob::SubOp::create(b, x1, bob::MulOp::create(b, x2, c));
  gq = bob::SubOp::create(b, gq, bob::MulOp::create(b, x3, bRow));
  gq = bob::MulOp::create(b, gq, kb.f32(s.effectiveScale()));
  bob::StoreTileOp::create(b, gq, gQ, batch, head, row0, n);
  Value oTile = bob::LoadTileOp::create(b, kb.rtile(bm, d), o, batch, head, row0, n);
  Value gdo = bob::SubOp::create(b, x4, bob::MulOp::create(b, oTile, c));
  bob::StoreTileOp::create(b, gdo, gdO, batch, head, row0, n);
  bob::StoreVecOp::create(b, c, cOut, batch, head, row0, n);
  bob::StoreVecOp::create(b, bRow, bOut, batch, head, row0, n);
}

} // namespace flashbob::kernels

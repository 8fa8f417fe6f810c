// BoB pass 2 (bob_kv), key-major: a block owns block_n key rows and sweeps the query blocks,
// reloading the row scalars L, D, c, b of pass 1, and accumulates (docs/bob-math.md)
//   gK = s (dS^T uQ + Sbar^T Q)          gV = dPbar^T dO
// with dPbar = P o (G - c) and Sbar = G o dS + P o W - c o (P o dP) - b o P, all formed
// transposed (keys on rows) so the two accumulators stay in registers.
//
// Arguments: Q, K, V, dO, L, D, c, b, uQ, uK, uV | gK, gV.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::kernels {

void buildBobKeyValue(KernelBuilder &kb) {
  auto &b = kb.b;
  const compiler::KernelSpec &s = kb.spec;
  const int64_t bm = s.blockM, bn = s.blockN, d = s.headDim;
  Type t = kb.tensorType(), r = kb.rowsType();
  ValueRange args = kb.beginKernel({t, t, t, t, r, r, r, r, t, t, t, t, t});
  Value q = args[0], k = args[1], v = args[2], dO = args[3], lse = args[4], dRows = args[5],
        cRows = args[6], bRows = args[7], uQ = args[8], uK = args[9], uV = args[10],
        gK = args[11], gV = args[12];
  Value n = kb.dim(q, 2), m = kb.dim(k, 2);
  auto [batch, head] = kb.batchAndHead(q);
  Value key0 = kb.blockStart(bn);

  auto keyTiles = kb.allocShared(4, bn), queryTiles = kb.allocShared(3, bm);
  Value ks = keyTiles[0], vs = keyTiles[1], uKs = keyTiles[2], uVs = keyTiles[3];
  Value qs = queryTiles[0], dOs = queryTiles[1], uQs = queryTiles[2];
  kb.loadShared({k, v, uK, uV}, keyTiles, batch, head, key0, m);

  Value zero = bob::SplatOp::create(b, kb.rtile(bn, d), b.getF32FloatAttr(0));
  Value blocks = arith::CeilDivUIOp::create(b, n, kb.index(bm));
  auto loop = scf::ForOp::create(b, firstQueryBlock(kb, key0, n, m), blocks, kb.index(1),
                                 ValueRange{zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value query0 = arith::MulIOp::create(b, loop.getInductionVar(), kb.index(bm));
    kb.loadShared({q, dO, uQ}, queryTiles, batch, head, query0, n);
    auto column = [&](Value rowsTensor) {
      return bob::LoadVecOp::create(b, kb.colvec(bm), rowsTensor, batch, head, query0, n,
                                    b.getF32FloatAttr(0))
          .getResult();
    };
    Value lseLog2 = lseToLog2(kb, column(lse));
    Value dCol = column(dRows), cCol = column(cRows), bCol = column(bRows);

    // The independent products first (kept in flight together), then G^T's second one:
    // G^T = s (K uQ^T + uK Q^T), W^T = uV dO^T.
    Value scoresT = product(kb, ks, qs, /*transposeB=*/true, bn, bm);
    Value dPT = product(kb, vs, dOs, /*transposeB=*/true, bn, bm);
    Value gT = product(kb, ks, uQs, /*transposeB=*/true, bn, bm);
    Value wT = product(kb, uVs, dOs, /*transposeB=*/true, bn, bm);
    gT = bob::MmaOp::create(b, uKs, qs, gT, false, true);
    gT = bob::MulOp::create(b, gT, kb.f32(s.effectiveScale()));
    Value pT = probabilitiesT(kb, scoresT, lseLog2, key0, query0, n, m);
    Value dST = bob::MulOp::create(b, pT, bob::SubOp::create(b, dPT, dCol));

    Value dPbarT = bob::MulOp::create(b, pT, bob::SubOp::create(b, gT, cCol));
    Value sbarT = bob::AddOp::create(b, bob::MulOp::create(b, gT, dST), bob::MulOp::create(b, pT, wT));
    sbarT = bob::SubOp::create(b, sbarT, bob::MulOp::create(b, bob::MulOp::create(b, pT, dPT), cCol));
    sbarT = bob::SubOp::create(b, sbarT, bob::MulOp::create(b, pT, bCol));

    Value gk = accumulate(kb, loop.getRegionIterArg(0), dST, uQs);
    Value gv = accumulate(kb, loop.getRegionIterArg(1), dPbarT, dOs);
    gk = accumulate(kb, gk, sbarT, qs);
    scf::YieldOp::create(b, ValueRange{gk, gv});
  }
  Value gk = bob::MulOp::create(b, loop.getResult(0), kb.f32(s.effectiveScale()));
  bob::StoreTileOp::create(b, gk, gK, batch, head, key0, m);
  bob::StoreTileOp::create(b, loop.getResult(1), gV, batch, head, key0, m);
}

} // namespace flashbob::kernels

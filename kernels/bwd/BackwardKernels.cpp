// First backward, FlashAttention-2 style but deterministic: no atomics. Two kernels recompute P:
//   bwd_q  (query-major): D = rowsum(dO o O), then dQ = s dS K over the key blocks;
//   bwd_kv (key-major):   dV = P^T dO and dK = s dS^T Q over the query blocks, reading D.
// dS = P o (dP - D), dP = dO V^T. bwd_q runs first (it writes D).
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace flashbob::kernels {

// Arguments: Q, K, V, O, dO, L | dQ, D.
void buildBackwardQuery(KernelBuilder &kb) {
  auto &b = kb.b;
  const compiler::KernelSpec &s = kb.spec;
  const int64_t bm = s.blockM, bn = s.blockN, d = s.headDim;
  Type t = kb.tensorType();
  ValueRange args = kb.beginKernel({t, t, t, t, t, kb.rowsType(), t, kb.rowsType()});
  Value q = args[0], k = args[1], v = args[2], o = args[3], dO = args[4], lse = args[5],
        dQ = args[6], dOut = args[7];
  Value n = kb.dim(q, 2), m = kb.dim(k, 2);
  auto [batch, head] = kb.batchAndHead(q);
  Value row0 = kb.blockStart(bm);

  // D = rowsum(dO o O), in f32 from the stored outputs.
  Value oTile = bob::LoadTileOp::create(b, kb.rtile(bm, d), o, batch, head, row0, n);
  Value dOTile = bob::LoadTileOp::create(b, kb.rtile(bm, d), dO, batch, head, row0, n);
  Value dRow = bob::ReduceOp::create(b, kb.rowvec(bm), bob::MulOp::create(b, oTile, dOTile),
                                     bob::ReduceKind::sum);
  bob::StoreVecOp::create(b, dRow, dOut, batch, head, row0, n);
  Value lseLog2 = lseToLog2(kb, bob::LoadVecOp::create(b, kb.rowvec(bm), lse, batch, head, row0, n,
                                                       b.getF32FloatAttr(0)));

  auto queryTiles = kb.allocShared(2, bm), keyTiles = kb.allocShared(2, bn);
  Value qs = queryTiles[0], dOs = queryTiles[1], ks = keyTiles[0], vs = keyTiles[1];
  kb.loadShared({q, dO}, queryTiles, batch, head, row0, n);

  Value acc0 = bob::SplatOp::create(b, kb.rtile(bm, d), b.getF32FloatAttr(0));
  auto loop = scf::ForOp::create(b, kb.index(0), keyBlocksToVisit(kb, row0, n, m), kb.index(1),
                                 ValueRange{acc0});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value col0 = arith::MulIOp::create(b, loop.getInductionVar(), kb.index(bn));
    kb.loadShared({k, v}, keyTiles, batch, head, col0, m);
    // Both products first: bob-lower-tiles keeps independent adjacent products in flight.
    Value scores = product(kb, qs, ks, /*transposeB=*/true, bm, bn);
    Value dP = product(kb, dOs, vs, /*transposeB=*/true, bm, bn);
    Value p = probabilities(kb, scores, lseLog2, row0, col0, n, m);
    Value dS = bob::MulOp::create(b, p, bob::SubOp::create(b, dP, dRow));
    scf::YieldOp::create(b, accumulate(kb, loop.getRegionIterArg(0), dS, ks));
  }
  Value dq = bob::MulOp::create(b, loop.getResult(0), kb.f32(s.effectiveScale()));
  bob::StoreTileOp::create(b, dq, dQ, batch, head, row0, n);
}

// Arguments: Q, K, V, dO, L, D | dK, dV.
void buildBackwardKeyValue(KernelBuilder &kb) {
  auto &b = kb.b;
  const compiler::KernelSpec &s = kb.spec;
  const int64_t bm = s.blockM, bn = s.blockN, d = s.headDim;
  Type t = kb.tensorType();
  ValueRange args = kb.beginKernel({t, t, t, t, kb.rowsType(), kb.rowsType(), t, t});
  Value q = args[0], k = args[1], v = args[2], dO = args[3], lse = args[4], dRows = args[5],
        dK = args[6], dV = args[7];
  Value n = kb.dim(q, 2), m = kb.dim(k, 2);
  auto [batch, head] = kb.batchAndHead(q);
  Value key0 = kb.blockStart(bn);

  auto keyTiles = kb.allocShared(2, bn), queryTiles = kb.allocShared(2, bm);
  Value ks = keyTiles[0], vs = keyTiles[1], qs = queryTiles[0], dOs = queryTiles[1];
  kb.loadShared({k, v}, keyTiles, batch, head, key0, m);

  Value zero = bob::SplatOp::create(b, kb.rtile(bn, d), b.getF32FloatAttr(0));
  Value blocks = arith::CeilDivUIOp::create(b, n, kb.index(bm));
  auto loop = scf::ForOp::create(b, firstQueryBlock(kb, key0, n, m), blocks, kb.index(1),
                                 ValueRange{zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value query0 = arith::MulIOp::create(b, loop.getInductionVar(), kb.index(bm));
    kb.loadShared({q, dO}, queryTiles, batch, head, query0, n);
    Value lseLog2 = lseToLog2(kb, bob::LoadVecOp::create(b, kb.colvec(bm), lse, batch, head, query0,
                                                         n, b.getF32FloatAttr(0)));
    Value dCol = bob::LoadVecOp::create(b, kb.colvec(bm), dRows, batch, head, query0, n,
                                        b.getF32FloatAttr(0));
    Value scoresT = product(kb, ks, qs, /*transposeB=*/true, bn, bm);
    Value dPT = product(kb, vs, dOs, /*transposeB=*/true, bn, bm);
    Value pT = probabilitiesT(kb, scoresT, lseLog2, key0, query0, n, m);
    Value dST = bob::MulOp::create(b, pT, bob::SubOp::create(b, dPT, dCol));
    Value dv = accumulate(kb, loop.getRegionIterArg(1), pT, dOs);
    Value dk = accumulate(kb, loop.getRegionIterArg(0), dST, qs);
    scf::YieldOp::create(b, ValueRange{dk, dv});
  }
  Value dk = bob::MulOp::create(b, loop.getResult(0), kb.f32(s.effectiveScale()));
  bob::StoreTileOp::create(b, dk, dK, batch, head, key0, m);
  bob::StoreTileOp::create(b, loop.getResult(1), dV, batch, head, key0, m);
}

} // namespace flashbob::kernels

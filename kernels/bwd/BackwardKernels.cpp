// First backward, FlashAttention-2 style but deterministic: no atomics. Two kernels recompute P:
//   bwd_q  (query-major): D = rowsum(dO o O), then dQ = s dS K over the key blocks;
//   bwd_kv (key-major):   dV = P^T dO and dK = s dS^T Q over the query blocks, reading D.
// dS = P o (dP - D), dP = dO V^T. bwd_q runs first (it writes D).
// In the long-sweep kernels every accumulator flushes into a reserve every kFlushBlocks blocks
// (KernelBuilder::flush), so that a sweep over a million rows does not drift (docs/numerics.md).
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

using namespace mlir;

namespace flashbob::kernels {

void buildBackwardQuery(KernelBuilder &kb) {
  const int64_t bm = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  Tile dRow = outputDotRows(kb);
  kb.storeOwnRows(dRow, Operand::D);
  Tile lseLog2 = lseToLog2(kb.loadOwnRows(Operand::lse));

  kb.stage({Operand::q, Operand::dO}, {Operand::k, Operand::v});
  Value qs = kb.shared(Operand::q), dOs = kb.shared(Operand::dO);
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v);

  Tile acc0 = kb.splat(kb.rtile(bm, d), 0);
  Value dQReserve = kb.reserve(acc0);
  auto final = tiles(kb, kb.sweep({acc0}, [&](Value col0, ValueRange carried) {
    Tile acc = tiles(kb, carried)[0];
    // Both products first: bob-lower-tiles keeps independent adjacent products in flight.
    Tile scores = productT(kb, qs, ks);
    Tile dP = productT(kb, dOs, vs);
    Tile p = probabilities(kb, scores, lseLog2, kb.ownStart, col0);
    Tile dS = p * (dP - dRow);
    acc = accumulate(acc, dS, ks);
    return values({kb.flush(acc, dQReserve)});
  }));
  Tile dQ = kb.withReserve(final[0], dQReserve);
  // Q's tile is free now: dQ leaves through it (on sm_90a by TMA, each warp its own rows).
  kb.storeOwn(dQ * kb.scale(), Operand::dQ, /*through=*/Operand::q);
}

void buildBackwardKeyValue(KernelBuilder &kb) {
  const int64_t bn = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  kb.stage({Operand::k, Operand::v}, {Operand::q, Operand::dO});
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v);
  Value qs = kb.shared(Operand::q), dOs = kb.shared(Operand::dO);

  Tile zero = kb.splat(kb.rtile(bn, d), 0);
  Value dKReserve = kb.reserve(zero), dVReserve = kb.reserve(zero);
  auto final = tiles(kb, kb.sweep({zero, zero}, [&](Value query0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile dK = in[0], dV = in[1];
    auto [pT, dST] = backwardTilesT(kb, ks, vs, qs, dOs, query0);
    dV = accumulate(dV, pT, dOs);
    dK = accumulate(dK, dST, qs);
    dK = kb.flush(dK, dKReserve);
    dV = kb.flush(dV, dVReserve);
    return values({dK, dV});
  }));
  Tile dK = kb.withReserve(final[0], dKReserve);
  Tile dV = kb.withReserve(final[1], dVReserve);
  // K's and V's tiles are free now: dK and dV leave through them.
  kb.storeOwn(dK * kb.scale(), Operand::dK, /*through=*/Operand::k);
  kb.storeOwn(dV, Operand::dV, /*through=*/Operand::v);
}

} // namespace flashbob::kernels

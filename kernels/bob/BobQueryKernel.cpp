// BoB pass 1 (bob_q), query-major: a block owns block_m query rows and sweeps the key blocks.
// With G = s (uQ K^T + Q uK^T) and W = dO uV^T it accumulates the row scalars
//   c = rowsum(G o P),   b = rowsum(G o dS) + rowsum(P o W) - c o D
// and four accumulators that do not depend on c, b (docs/bob-math.md):
//   X1 = dS uK + (G o dS + P o W) K   X2 = (P o dP) K   X3 = P K   X4 = P uV + (P o G) V
// then finishes gQ = s (X1 - c o X2 - b o X3), gdO = X4 - c o O in the same sweep (gQ exactly
// zero in rows that see one key).
// X2 is accumulated here (the oracle's X2Source::Accumulate) rather than formed from a saved dQ,
// so the result does not inherit dQ's rounding to bf16/fp16.
// In the long-sweep kernels X1 and X4 flush into reserves every kFlushBlocks blocks (KernelBuilder::flush):
// their truncation drift over a million keys is what raises gQ and gdO there; X2 and X3 do not
// move them (docs/numerics.md).
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

using namespace mlir;

namespace flashbob::kernels {

void buildBobQuery(KernelBuilder &kb) {
  const int64_t bm = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  // D = rowsum(dO o O) (also written: pass 2 reads it).
  Tile D = outputDotRows(kb);
  kb.storeOwnRows(D, Operand::D);
  Tile lseLog2 = lseToLog2(kb.loadOwnRows(Operand::lse));

  kb.stage({Operand::q, Operand::dO, Operand::uQ},
           {Operand::k, Operand::v, Operand::uK, Operand::uV});
  Value qs = kb.shared(Operand::q), dOs = kb.shared(Operand::dO), uQs = kb.shared(Operand::uQ);
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v), uKs = kb.shared(Operand::uK),
        uVs = kb.shared(Operand::uV);

  Tile zeroAcc = kb.splat(kb.rtile(bm, d), 0);
  Tile zeroRow = kb.splat(kb.rowvec(bm), 0);
  Value x1Reserve = kb.reserve(zeroAcc), x4Reserve = kb.reserve(zeroAcc);
  auto initial = values({zeroAcc, zeroAcc, zeroAcc, zeroAcc, zeroRow, zeroRow});
  auto final = tiles(kb, kb.sweep(initial, [&](Value col0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile x1 = in[0], x2 = in[1], x3 = in[2], x4 = in[3], c = in[4], b = in[5];
    // The independent score products first (bob-lower-tiles keeps them in flight together),
    // then G's second product into G's accumulator.
    Tile scores = productT(kb, qs, ks);  // Q K^T
    Tile dP = productT(kb, dOs, vs);     // dO V^T
    Tile g = productT(kb, uQs, ks);      // uQ K^T
    Tile w = productT(kb, dOs, uVs);     // W = dO uV^T
    g = productT(qs, uKs, g);            // + Q uK^T
    g = g * kb.scale();                  // G
    Tile p = probabilities(kb, scores, lseLog2, kb.ownStart, col0);
    Tile dS = p * (dP - D);

    Tile gP = g * p;
    Tile pW = p * w;
    Tile gdS = g * dS;
    Tile sbarPart = gdS + pW; // G o dS + P o W
    // Row sums of this block's terms, each column group over its own columns: the groups'
    // parts are combined once, after the sweep.
    c = c + rowSumInGroup(gP);
    b = b + rowSumInGroup(sbarPart);

    // Every A operand first (bob-stage-operands stores them in one run), then the products:
    // four independent ones, then the second halves of X1 and X4.
    Tile pdP = p * dP;
    x1 = accumulate(x1, dS, uKs);
    x2 = accumulate(x2, pdP, ks);
    x3 = accumulate(x3, p, ks);
    x4 = accumulate(x4, p, uVs);
    x1 = accumulate(x1, sbarPart, ks);
    x4 = accumulate(x4, gP, vs);
    x1 = kb.flush(x1, x1Reserve);
    x4 = kb.flush(x4, x4Reserve);
    return values({x1, x2, x3, x4, c, b});
  }));
  Tile x1 = kb.withReserve(final[0], x1Reserve);
  Tile x2 = final[1], x3 = final[2];
  Tile x4 = kb.withReserve(final[3], x4Reserve);
  Tile c = combineGroups(final[4]);
  Tile bSum = combineGroups(final[5]);
  if (kb.spec.partial) {
    // One step of a ring: every accumulator and row sum is a partial sum over this key shard;
    // the ring adds them over the steps and finishes as below (docs/context-parallel.md).
    kb.storeOwn(x1, Operand::X1);
    kb.storeOwn(x2, Operand::X2);
    kb.storeOwn(x3, Operand::X3);
    kb.storeOwn(x4, Operand::X4);
    kb.storeOwnRows(c, Operand::c);
    kb.storeOwnRows(bSum, Operand::beta);
    return;
  }
  Tile b = bSum - c * D;

  // gQ = s (X1 - c o X2 - b o X3);  gdO = X4 - c o O.
  // In a row that sees a single key the three terms cancel exactly (P = 1 whatever the query),
  // but each was rounded on its own: the residue would be of the size of the terms, so such
  // rows take their exact value, zero (docs/numerics.md, "Rows with one key").
  Tile gQ = x1 - x2 * c;
  gQ = gQ - x3 * b;
  gQ = gQ * (rowsSeeingSeveralKeys(kb) * kb.scale());
  kb.storeOwn(gQ, Operand::gQ);
  Tile o = kb.loadOwn(Operand::o);
  Tile gdO = x4 - o * c;
  kb.storeOwn(gdO, Operand::gdO);
  kb.storeOwnRows(c, Operand::c);
  kb.storeOwnRows(b, Operand::b);
}

} // namespace flashbob::kernels

// BoB pass 2 (bob_kv), key-major: a block owns block_n key rows and sweeps the query blocks,
// reloading the row scalars L, D, c, b of pass 1, and accumulates (docs/bob-math.md)
//   gK = s (dS^T uQ + Sbar^T Q)          gV = dPbar^T dO
// with dPbar = P o (G - c) and Sbar = G o dS + P o W - c o (P o dP) - b o P, all formed
// transposed (keys on rows) so the two accumulators stay in registers. In the long-sweep kernels
// they flush into reserves every kFlushBlocks blocks (KernelBuilder::flush): a sweep over a million
// queries drifts otherwise.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

using namespace mlir;

namespace flashbob::kernels {

void buildBobKeyValue(KernelBuilder &kb) {
  const int64_t bn = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  kb.stage({Operand::k, Operand::v, Operand::uK, Operand::uV},
           {Operand::q, Operand::dO, Operand::uQ});
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v), uKs = kb.shared(Operand::uK),
        uVs = kb.shared(Operand::uV);
  Value qs = kb.shared(Operand::q), dOs = kb.shared(Operand::dO), uQs = kb.shared(Operand::uQ);

  Tile zero = kb.splat(kb.rtile(bn, d), 0);
  Value gKReserve = kb.reserve(zero), gVReserve = kb.reserve(zero);
  auto final = tiles(kb, kb.sweep({zero, zero}, [&](Value query0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile gK = in[0], gV = in[1];
    Tile lseLog2 = lseToLog2(kb.loadSweptRows(Operand::lse, query0));
    Tile D = kb.loadSweptRows(Operand::D, query0);
    Tile c = kb.loadSweptRows(Operand::c, query0);
    Tile b = kb.loadSweptRows(Operand::b, query0);

    // The independent products first (kept in flight together), then G^T's second one.
    Tile scoresT = productT(kb, ks, qs); // K Q^T
    Tile dPT = productT(kb, vs, dOs);    // V dO^T
    Tile gT = productT(kb, ks, uQs);     // K uQ^T
    Tile wT = productT(kb, uVs, dOs);    // W^T = uV dO^T
    gT = productT(uKs, qs, gT);          // + uK Q^T
    gT = gT * kb.scale();                // G^T
    Tile pT = probabilities(kb, scoresT, lseLog2, kb.ownStart, query0);
    Tile dST = pT * (dPT - D);

    Tile dPbarT = pT * (gT - c);
    Tile pWT = pT * wT;
    Tile gdST = gT * dST;
    Tile sbarT = gdST + pWT;
    Tile pdPT = pT * dPT;
    sbarT = sbarT - pdPT * c;
    sbarT = sbarT - pT * b;

    gK = accumulate(gK, dST, uQs);
    gV = accumulate(gV, dPbarT, dOs);
    gK = accumulate(gK, sbarT, qs);
    gK = kb.flush(gK, gKReserve);
    gV = kb.flush(gV, gVReserve);
    return values({gK, gV});
  }));
  Tile gK = kb.withReserve(final[0], gKReserve);
  Tile gV = kb.withReserve(final[1], gVReserve);
  kb.storeOwn(gK * kb.scale(), Operand::gK);
  kb.storeOwn(gV, Operand::gV);
}

} // namespace flashbob::kernels

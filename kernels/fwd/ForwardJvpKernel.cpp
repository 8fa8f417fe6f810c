// The forward's JVP (fwd_jvp), query-major: the change of O along tangents (tQ, tK, tV) of
// (q, k, v). It is BoB's gdO at cotangent u = t (docs/bob-math.md, "The forward's JVP"): with
// G = s (tQ K^T + Q tK^T),
//   c = rowsum(G o P),   tO = P tV + (P o G) V - c o O,
// the part of BoB pass 1 that does not involve dO: three score products and two accumulations
// per key block instead of eleven, one accumulator, and no second pass.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

using namespace mlir;

namespace flashbob::kernels {

void buildForwardJvp(KernelBuilder &kb) {
  const int64_t bm = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  Tile lseLog2 = lseToLog2(kb.loadOwnRows(Operand::lse));
  kb.stage({Operand::q, Operand::tQ}, {Operand::k, Operand::v, Operand::tK, Operand::tV});
  Value qs = kb.shared(Operand::q), tQs = kb.shared(Operand::tQ);
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v), tKs = kb.shared(Operand::tK),
        tVs = kb.shared(Operand::tV);

  Tile zeroAcc = kb.splat(kb.rtile(bm, d), 0);
  Tile zeroRow = kb.splat(kb.rowvec(bm), 0);
  auto final = tiles(kb, kb.sweep(values({zeroAcc, zeroRow}), [&](Value col0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile x = in[0], c = in[1];
    Tile scores = productT(kb, qs, ks); // Q K^T
    Tile g = productT(kb, tQs, ks);     // tQ K^T
    g = productT(qs, tKs, g);           // + Q tK^T
    g = g * kb.scale();                 // G
    Tile p = probabilities(kb, scores, lseLog2, kb.ownStart, col0);
    Tile gP = g * p;
    c = c + rowSumInGroup(gP);
    x = accumulate(x, p, tVs);  // P tV
    x = accumulate(x, gP, vs);  // + (P o G) V
    return values({x, c});
  }));
  Tile c = combineGroups(final[1]);
  Tile o = kb.loadOwn(Operand::o);
  Tile tO = final[0] - o * c;
  kb.storeOwn(tO, Operand::tO);
}

} // namespace flashbob::kernels

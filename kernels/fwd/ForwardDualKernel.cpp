// The forward and its JVP in one sweep (fwd_dual), query-major: O, L and tO, the change of O
// along tangents (tQ, tK, tV) of (q, k, v), without fwd_jvp's second sweep over the keys
// (docs/bob-math.md, "The forward and its JVP in one sweep"). With G = s (tQ K^T + Q tK^T),
//   c = rowsum(G o P),   tO = P tV + (P o G) V - c o O,
// and P = P~ / l, where P~ = exp2(S - m) is the forward's unnormalized probability at the row's
// running max m and l = rowsum(P~): every term is P's, so the online softmax of the forward
// (kernels/fwd/ForwardKernel.cpp, FlashAttention-2 in log2 units) carries them all unnormalized
// and rescales them by the same r = exp2(old max - new max) at each key block:
//   accO = accO r + P~ V
//   accT = accT r + P~ tV + (P~ o G) V
//   l    = l r + rowsum(P~),   cg = cg r + rowsum(P~ o G)
// and the epilogue divides by l once: O = accO / l, c = cg / l, tO = accT / l - c o O, from the
// f32 accumulators (O unrounded: fwd_jvp reads the stored bf16 O instead), L = ln 2 (m +
// log2 l). A row that sees no key keeps l = 0, accO = accT = 0, cg = 0: O = 0, tO = 0 and
// L = -inf, as the forward and the oracle define it. Per key block: three score products (Q K^T,
// tQ K^T, Q tK^T) and three accumulations (P~ V, P~ tV, (P~ o G) V), two accumulators.
//
// With wgmma (sm_90a) the sweep is rotated as the forward's is (FlashAttention-3): the step at
// key block j issues S(j), G(j) and the three accumulations of block j - 1 (V and tV lag K and
// tK by one block, KernelBuilder::sweepLagging), then runs the softmax of S(j) while they are
// in flight, and only then waits for them to rescale. The A operands of the lagging products,
// P~(j-1) and (P~ o G)(j-1), reach step j through shared tiles the step before stored them in,
// or, with #bob.spec register_a, in registers (carried rounded to the input type). The extra
// first step multiplies zero tiles; the extra last step scores the block past the sweep, which
// the mask hides (P~ = 0 there, so P~ o G = 0: G itself is finite, K and tK being zero or
// another sequence's rows). mma.sync products are synchronous, so tiles that wgmma cannot take
// (and sm_80) keep the plain sweep.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "compiler/passes/WarpRoles.h"
#include "compiler/passes/WgmmaRules.h"

using namespace mlir;

namespace flashbob::kernels {

void buildForwardDual(KernelBuilder &kb) {
  const int64_t bm = kb.ownRows(), bn = kb.sweptRows(), d = kb.headDim();
  const bob::SpecAttr attr = kb.spec.toAttr(kb.b.getContext());
  const bool rotated = bob::wgmma::accumulatorFits(kb.rtile(bm, d), attr);
  const bool inRegisters = rotated && bob::wgmma::registerAccumulatorFits(kb.rtile(bm, d), attr);
  kb.beginKernel();
  // P~ and P~ o G of the previous step (rotated sweep, unless they stay in registers),
  // allocated with the other shared tiles: a producer kernel's roles split after the last of
  // them (bob-pipeline-loads).
  Value previousP, previousGP;
  if (rotated && !inRegisters) {
    previousP = kb.scratch(bm, bn);
    previousGP = kb.scratch(bm, bn);
  }
  kb.stage({Operand::q, Operand::tQ}, {Operand::k, Operand::v, Operand::tK, Operand::tV});
  Value qs = kb.shared(Operand::q), tQs = kb.shared(Operand::tQ);
  Value ks = kb.shared(Operand::k), vs = kb.shared(Operand::v), tKs = kb.shared(Operand::tK),
        tVs = kb.shared(Operand::tV);

  // Carried: accO, accT, the running max m and sum l, and cg (with column groups each group's
  // part of it: every group rescales by the same r, so the parts add up after the sweep).
  Tile zeroAcc = kb.splat(kb.rtile(bm, d), 0);
  Tile max0 = kb.splat(kb.rowvec(bm), kNegInf);
  Tile zeroRow = kb.splat(kb.rowvec(bm), 0);
  llvm::SmallVector<Tile> final;
  if (!rotated) {
    final = tiles(kb, kb.sweep(values({zeroAcc, zeroAcc, max0, zeroRow, zeroRow}),
                               [&](Value col0, ValueRange carried) {
      auto in = tiles(kb, carried);
      Tile accO = in[0], accT = in[1], oldMax = in[2], oldSum = in[3], oldCg = in[4];
      Tile scores = productT(kb, qs, ks); // Q K^T
      Tile g = productT(kb, tQs, ks);     // tQ K^T
      g = productT(qs, tKs, g);           // + Q tK^T
      g = g * kb.scale();                 // G
      SoftmaxStep step = softmaxStep(kb, scores, col0, oldMax, oldSum);
      Tile gP = g * step.p;               // P~ o G (0 where masked: P~ is)
      Tile cgScaled = oldCg * step.rescale;
      Tile cg = cgScaled + rowSumInGroup(gP);
      Tile p = toOperand(step.p);         // P~ rounded once, for both of its products
      Tile scaledO = accO * step.rescale;
      Tile newO = accumulate(scaledO, p, vs);    // P~ V
      Tile scaledT = accT * step.rescale;
      Tile newT = accumulate(scaledT, p, tVs);   // P~ tV
      newT = accumulate(newT, gP, vs);           // + (P~ o G) V
      return values({newO, newT, step.newMax, step.newSum, cg});
    }));
  } else {
    // Zero before the first step.
    llvm::SmallVector<Tile> initial = {zeroAcc, zeroAcc, max0, zeroRow, zeroRow};
    Tile zeroP = kb.splat(kb.rtile(bm, bn), 0);
    if (inRegisters) {
      Tile zeroOperand = toOperand(zeroP);
      initial.append({zeroOperand, zeroOperand});
    } else {
      kb.storeInto(zeroP, previousP);
      kb.storeInto(zeroP, previousGP);
    }
    final = tiles(kb, kb.sweepLagging(values(initial), {Operand::v, Operand::tV},
                                      [&](Value col0, ValueRange carried) {
      auto in = tiles(kb, carried);
      Tile accO = in[0], accT = in[1], oldMax = in[2], oldSum = in[3], oldCg = in[4];
      // S(j) and G(j) of K(j), tK(j), and the accumulations of block j - 1 (V, tV lag), all in
      // flight. A product into another's result waits for it (bob-lower-tiles waits at a
      // product's first reader), so each chain's second product comes after an independent one:
      // Q tK^T waits for tQ K^T only, (P~ o G) V for P~ tV only, the others stay in flight.
      Tile scores = productT(kb, qs, ks); // S(j) = Q K(j)^T
      Tile g = productT(kb, tQs, ks);     // tQ K(j)^T
      Tile sumT = inRegisters ? accumulate(accT, in[5], tVs) : accumulate(accT, previousP, tVs);
      Tile sumO = inRegisters ? accumulate(accO, in[5], vs) : accumulate(accO, previousP, vs);
      g = productT(qs, tKs, g);           // + Q tK(j)^T
      sumT = inRegisters ? accumulate(sumT, in[6], vs) : accumulate(sumT, previousGP, vs);
      SoftmaxStep step = softmaxStep(kb, scores, col0, oldMax, oldSum); // waits for S(j) only
      g = g * kb.scale();                 // G(j)
      Tile gP = g * step.p;               // P~ o G of block j
      Tile cgScaled = oldCg * step.rescale;
      Tile cg = cgScaled + rowSumInGroup(gP);
      Tile newO = sumO * step.rescale;    // waits for the products of block j - 1
      Tile newT = sumT * step.rescale;
      if (inRegisters)
        return values({newO, newT, step.newMax, step.newSum, cg, toOperand(step.p),
                       toOperand(gP)});
      kb.storeInto(step.p, previousP);
      kb.storeInto(gP, previousGP);
      return values({newO, newT, step.newMax, step.newSum, cg});
    }));
  }
  Tile accO = final[0], accT = final[1], rowMaxLog2 = final[2], rowSumExp = final[3];
  Tile cg = combineGroups(final[4]);

  // Fully masked rows: l = 0 and everything else 0 -> O = 0, c = 0, tO = 0 by dividing by 1.
  Tile safeSum = replace(rowSumExp, 0.0, 1.0);
  Tile o = accO / safeSum;
  Tile c = cg / safeSum;
  Tile t = accT / safeSum;
  Tile co = o * c;   // c o O, from the unrounded O
  Tile tO = t - co;
  // The own rows' shared tiles are free now: with row warpgroups O and tO go out through Q's
  // and tQ's by TMA, as the forward's O does through Q's (ForwardKernel.cpp says why only there).
  if (bob::hasRowWarpgroups(attr)) {
    kb.storeOwn(o, Operand::o, /*through=*/Operand::q);
    kb.storeOwn(tO, Operand::tO, /*through=*/Operand::tQ);
  } else {
    kb.storeOwn(o, Operand::o);
    kb.storeOwn(tO, Operand::tO);
  }
  // L = ln 2 (max + log2 l): -inf for fully masked rows, as in the oracle.
  Tile log2Sum = log2(rowSumExp);
  Tile lseLog2 = rowMaxLog2 + log2Sum;
  kb.storeOwnRows(lseLog2 * kLn2, Operand::lse);
}

} // namespace flashbob::kernels

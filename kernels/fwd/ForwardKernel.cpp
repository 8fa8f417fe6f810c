// Forward attention, FlashAttention-2 style: a block owns block_m query rows, keeps Q in shared
// memory, sweeps key blocks with an online softmax in the log2 domain, and writes O and the
// natural log-sum-exp L. Exactly kernels/oracle/TiledModel.cpp's tiled::forward, up to where
// the rescale of the accumulator is rounded (below).
//
// With wgmma (sm_90a) the sweep is rotated as in FlashAttention-3, so that a warpgroup's
// softmax runs while its own previous product P V is in flight: the step at key block j issues
// S(j) = Q K(j)^T, then acc + P(j-1) V(j-1) (P(j-1) staged by the step before), then computes
// the softmax of S(j) (waiting for S(j) only: bob-lower-tiles waits at a product's first
// reader), and only then waits for P V to rescale: acc = (acc + P(j-1) V(j-1)) r(j). V lags K
// by one block (KernelBuilder::sweepLagging), and the sweep runs one step more: the first
// multiplies a zero P, the last scores the block past the sweep, which the mask hides
// entirely. P(j-1) reaches step j through a shared tile the step before stored it in, or, with
// #bob.spec register_a where wgmma can read it from registers (WgmmaRules.h), in registers:
// the loop carries it rounded to the input type, FlashAttention-3's register-A P V. mma.sync
// products are synchronous, so tiles that wgmma cannot take (and sm_80) keep the plain sweep.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "compiler/passes/WarpRoles.h"
#include "compiler/passes/WgmmaRules.h"

using namespace mlir;

namespace flashbob::kernels {

void buildForward(KernelBuilder &kb) {
  const int64_t bm = kb.ownRows(), bn = kb.sweptRows(), d = kb.headDim();
  const bob::SpecAttr attr = kb.spec.toAttr(kb.b.getContext());
  const bool rotated = bob::wgmma::accumulatorFits(kb.rtile(bm, d), attr);
  const bool pInRegisters = rotated && bob::wgmma::registerAccumulatorFits(kb.rtile(bm, d), attr);
  kb.beginKernel();
  // P of the previous step (rotated sweep, unless it stays in registers), allocated with the
  // other shared tiles: a producer kernel's roles split after the last of them
  // (bob-pipeline-loads).
  Value previousP = rotated && !pInRegisters ? kb.scratch(bm, bn) : Value();
  kb.stage({Operand::q}, {Operand::k, Operand::v});
  Value qs = kb.shared(Operand::q), ks = kb.shared(Operand::k), vs = kb.shared(Operand::v);

  Tile acc0 = kb.splat(kb.rtile(bm, d), 0);
  Tile max0 = kb.splat(kb.rowvec(bm), kNegInf);
  Tile sum0 = kb.splat(kb.rowvec(bm), 0);
  llvm::SmallVector<Tile> final;
  if (!rotated) {
    final = tiles(kb, kb.sweep({acc0, max0, sum0}, [&](Value col0, ValueRange carried) {
      auto in = tiles(kb, carried);
      Tile acc = in[0], oldMax = in[1], oldSum = in[2];
      Tile scores = productT(kb, qs, ks);
      SoftmaxStep step = softmaxStep(kb, scores, col0, oldMax, oldSum);
      Tile scaled = acc * step.rescale;
      Tile newAcc = accumulate(scaled, step.p, vs);
      return values({newAcc, step.newMax, step.newSum});
    }));
  } else {
    // Zero before the first step.
    llvm::SmallVector<Tile> initial = {acc0, max0, sum0};
    Tile zeroP = kb.splat(kb.rtile(bm, bn), 0);
    if (pInRegisters)
      initial.push_back(toOperand(zeroP));
    else
      kb.storeInto(zeroP, previousP);
    final = tiles(kb, kb.sweepLagging(values(initial), {Operand::v},
                                      [&](Value col0, ValueRange carried) {
      auto in = tiles(kb, carried);
      Tile acc = in[0], oldMax = in[1], oldSum = in[2];
      Tile scores = productT(kb, qs, ks); // S(j), K(j)
      // acc + P(j-1) V(j-1), in flight
      Tile summed = pInRegisters ? accumulate(acc, in[3], vs) : accumulate(acc, previousP, vs);
      SoftmaxStep step = softmaxStep(kb, scores, col0, oldMax, oldSum);
      Tile newAcc = summed * step.rescale;
      if (pInRegisters)
        return values({newAcc, step.newMax, step.newSum, toOperand(step.p)});
      kb.storeInto(step.p, previousP);
      return values({newAcc, step.newMax, step.newSum});
    }));
  }
  Tile acc = final[0], rowMaxLog2 = final[1], rowSumExp = final[2];

  // O = acc / l (fully masked rows: l = 0, acc = 0 -> O = 0 by dividing by 1).
  Tile safeSum = replace(rowSumExp, 0.0, 1.0);
  // Q's tile is free now: with row warpgroups O goes out through it by TMA (each warp its own
  // rows); one warpgroup keeps the direct stores, which measured 1-2% faster there without a
  // mask (bench/results/2026-12-04-h200-staged-epilogue.md).
  Tile o = acc / safeSum;
  if (bob::hasRowWarpgroups(kb.spec.toAttr(kb.b.getContext())))
    kb.storeOwn(o, Operand::o, /*through=*/Operand::q);
  else
    kb.storeOwn(o, Operand::o);
  // L = ln 2 (max + log2 l): -inf for fully masked rows, as in the oracle.
  Tile log2Sum = log2(rowSumExp);
  Tile lseLog2 = rowMaxLog2 + log2Sum;
  kb.storeOwnRows(lseLog2 * kLn2, Operand::lse);
}

} // namespace flashbob::kernels

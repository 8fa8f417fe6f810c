// Forward attention, FlashAttention-2 style: a block owns block_m query rows, keeps Q in shared
// memory, sweeps key blocks with an online softmax in the log2 domain, and writes O and the
// natural log-sum-exp L. Exactly kernels/oracle/TiledModel.cpp's tiled::forward.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include <limits>

using namespace mlir;

namespace flashbob::kernels {

void buildForward(KernelBuilder &kb) {
  const double negInf = -std::numeric_limits<double>::infinity();
  const int64_t bm = kb.ownRows(), d = kb.headDim();
  kb.beginKernel();
  kb.stage({Operand::q}, {Operand::k, Operand::v});
  Value qs = kb.shared(Operand::q), ks = kb.shared(Operand::k), vs = kb.shared(Operand::v);

  Tile acc0 = kb.splat(kb.rtile(bm, d), 0);
  Tile max0 = kb.splat(kb.rowvec(bm), negInf);
  Tile sum0 = kb.splat(kb.rowvec(bm), 0);
  auto final = tiles(kb, kb.sweep({acc0, max0, sum0}, [&](Value col0, ValueRange carried) {
    auto in = tiles(kb, carried);
    Tile acc = in[0], oldMax = in[1], oldSum = in[2];
    // S in log2 units: s log2(e) Q K^T, -inf outside the sequences and past the diagonal.
    Tile scores = productT(kb, qs, ks);
    Tile s = maskedLog2Scores(kb, scores, kb.ownStart, col0);
    // Online softmax. A row with no visible key so far keeps max = -inf; subtracting 0 instead
    // keeps exp2(-inf - 0) = 0 rather than NaN.
    Tile blockMax = rowMax(s);
    Tile newMax = max(oldMax, blockMax);
    Tile safeMax = replace(newMax, negInf, 0.0);
    Tile rescale = exp2(oldMax - safeMax);
    Tile p = exp2(s - safeMax);
    Tile blockSum = rowSum(p);
    Tile newSum = oldSum * rescale + blockSum;
    Tile scaled = acc * rescale;
    Tile newAcc = accumulate(scaled, p, vs);
    return values({newAcc, newMax, newSum});
  }));
  Tile acc = final[0], rowMaxLog2 = final[1], rowSumExp = final[2];

  // O = acc / l (fully masked rows: l = 0, acc = 0 -> O = 0 by dividing by 1).
  Tile safeSum = replace(rowSumExp, 0.0, 1.0);
  kb.storeOwn(acc / safeSum, Operand::o);
  // L = ln 2 (max + log2 l): -inf for fully masked rows, as in the oracle.
  Tile log2Sum = log2(rowSumExp);
  Tile lseLog2 = rowMaxLog2 + log2Sum;
  kb.storeOwnRows(lseLog2 * kLn2, Operand::lse);
}

} // namespace flashbob::kernels

// Forward attention, FlashAttention-2 style: a block owns block_m query rows, keeps Q in shared
// memory, sweeps key blocks with an online softmax in the log2 domain, and writes O and the
// natural log-sum-exp L. Exactly kernels/oracle/TiledModel.cpp's tiled::forward.
#include "kernels/Kernels.h"
#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace flashbob::kernels {

void buildForward(KernelBuilder &kb) {
  auto &b = kb.b;
  const compiler::KernelSpec &s = kb.spec;
  const int64_t bm = s.blockM, bn = s.blockN, d = s.headDim;
  Type t = kb.tensorType();
  ValueRange args = kb.beginKernel({t, t, t, t, kb.rowsType()});
  Value q = args[0], k = args[1], v = args[2], o = args[3], lse = args[4];

  Value n = kb.dim(q, 2), m = kb.dim(k, 2);
  auto [batch, head] = kb.batchAndHead(q);
  Value row0 = kb.blockStart(bm);

  Value qs = kb.allocShared(1, bm)[0];
  auto keyTiles = kb.allocShared(2, bn);
  Value ks = keyTiles[0], vs = keyTiles[1];
  kb.loadShared({q}, {qs}, batch, head, row0, n);

  const double negInf = -std::numeric_limits<double>::infinity();
  auto oType = kb.rtile(bm, d), sType = kb.rtile(bm, bn);
  auto rows = kb.rowvec(bm);
  Value o0 = bob::SplatOp::create(b, oType, b.getF32FloatAttr(0));
  Value max0 = bob::SplatOp::create(b, rows, b.getF32FloatAttr(negInf));
  Value sum0 = bob::SplatOp::create(b, rows, b.getF32FloatAttr(0));

  Value blocks = keyBlocksToVisit(kb, row0, n, m);
  auto loop = scf::ForOp::create(b, kb.index(0), blocks, kb.index(1), ValueRange{o0, max0, sum0});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value acc = loop.getRegionIterArg(0), rowMax = loop.getRegionIterArg(1),
          rowSum = loop.getRegionIterArg(2);
    Value col0 = arith::MulIOp::create(b, loop.getInductionVar(), kb.index(bn));
    kb.loadShared({k, v}, keyTiles, batch, head, col0, m);

    // S in log2 units: s * log2(e) * Q K^T, masked (-inf) outside the sequences and the diagonal.
    Value zero = bob::SplatOp::create(b, sType, b.getF32FloatAttr(0));
    Value scores = bob::MmaOp::create(b, qs, ks, zero, false, true);
    scores = bob::MulOp::create(b, scores, kb.f32(s.effectiveScale() * kLog2e));
    scores = bob::MaskOp::create(b, scores, row0, col0, n, m, s.causal, /*keysOnRows=*/false);

    // Online softmax. A row with no visible key so far keeps max = -inf; subtracting 0 instead
    // keeps exp2(-inf - 0) = 0 rather than NaN.
    Value newMax = bob::MaxOp::create(b, rowMax,
                                      bob::ReduceOp::create(b, rows, scores, bob::ReduceKind::max));
    Value safeMax = bob::ReplaceOp::create(b, newMax, negInf, 0.0);
    Value rescale = bob::Exp2Op::create(b, bob::SubOp::create(b, rowMax, safeMax));
    Value p = bob::Exp2Op::create(b, bob::SubOp::create(b, scores, safeMax));
    Value newSum = bob::AddOp::create(b, bob::MulOp::create(b, rowSum, rescale),
                                      bob::ReduceOp::create(b, rows, p, bob::ReduceKind::sum));
    Value scaled = bob::MulOp::create(b, acc, rescale);
    Value pOperand = bob::ConvertOp::create(b, kb.operandTile(bm, bn), p);
    Value newAcc = bob::MmaOp::create(b, pOperand, vs, scaled, false, false);
    scf::YieldOp::create(b, ValueRange{newAcc, newMax, newSum});
  }
  Value acc = loop.getResult(0), rowMax = loop.getResult(1), rowSum = loop.getResult(2);

  // O = acc / l (fully masked rows: l = 0, acc = 0 -> O = 0 by dividing by 1).
  Value safeSum = bob::ReplaceOp::create(b, rowSum, 0.0, 1.0);
  bob::StoreTileOp::create(b, bob::DivOp::create(b, acc, safeSum), o, batch, head, row0, n);
  // L = ln 2 * (max + log2 l): -inf for fully masked rows, as in the oracle.
  Value log2Sum = bob::Log2Op::create(b, rowSum);
  Value lseLog2 = bob::AddOp::create(b, rowMax, log2Sum);
  bob::StoreVecOp::create(b, bob::MulOp::create(b, lseLog2, kb.f32(kLn2)), lse, batch, head, row0, n);
}

} // namespace flashbob::kernels

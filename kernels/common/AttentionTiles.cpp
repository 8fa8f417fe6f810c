#include "kernels/common/AttentionTiles.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace flashbob::kernels {

Value keyBlocksToVisit(KernelBuilder &kb, Value row0, Value n, Value m) {
  auto &b = kb.b;
  Value keyEnd = m;
  if (kb.spec.causal) {
    Value end = arith::AddIOp::create(b, arith::AddIOp::create(b, row0, kb.index(kb.spec.blockM)),
                                      arith::SubIOp::create(b, m, n));
    keyEnd = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, end, kb.index(0)), m);
  }
  return arith::CeilDivUIOp::create(b, keyEnd, kb.index(kb.spec.blockN));
}

Value firstQueryBlock(KernelBuilder &kb, Value key0, Value n, Value m) {
  if (!kb.spec.causal)
    return kb.index(0);
  auto &b = kb.b;
  Value first = arith::SubIOp::create(b, key0, arith::SubIOp::create(b, m, n));
  first = arith::MaxSIOp::create(b, first, kb.index(0));
  return arith::DivUIOp::create(b, first, kb.index(kb.spec.blockM));
}

Value lseToLog2(KernelBuilder &kb, Value lse) {
  const double inf = std::numeric_limits<double>::infinity();
  Value log2 = bob::MulOp::create(kb.b, lse, kb.f32(kLog2e));
  return bob::ReplaceOp::create(kb.b, log2, -inf, inf);
}

Value product(KernelBuilder &kb, Value a, Value b, bool transposeB, int64_t rows, int64_t cols) {
  Value zero = bob::SplatOp::create(kb.b, kb.rtile(rows, cols), kb.b.getF32FloatAttr(0));
  return bob::MmaOp::create(kb.b, a, b, zero, false, transposeB);
}

Value accumulate(KernelBuilder &kb, Value acc, Value a, Value bShared) {
  auto tile = cast<bob::RegTileType>(a.getType());
  Value operand = bob::ConvertOp::create(kb.b, kb.operandTile(tile.getRows(), tile.getCols()), a);
  return bob::MmaOp::create(kb.b, operand, bShared, acc, false, false);
}

Value probabilities(KernelBuilder &kb, Value scores, Value lseLog2, Value row0, Value col0,
                    Value n, Value m) {
  auto &b = kb.b;
  Value s = bob::MulOp::create(b, scores, kb.f32(kb.spec.effectiveScale() * kLog2e));
  s = bob::MaskOp::create(b, s, row0, col0, n, m, kb.spec.causal, /*keysOnRows=*/false);
  return bob::Exp2Op::create(b, bob::SubOp::create(b, s, lseLog2));
}

Value probabilitiesT(KernelBuilder &kb, Value scoresT, Value lseLog2, Value key0, Value query0,
                     Value n, Value m) {
  auto &b = kb.b;
  Value s = bob::MulOp::create(b, scoresT, kb.f32(kb.spec.effectiveScale() * kLog2e));
  s = bob::MaskOp::create(b, s, key0, query0, n, m, kb.spec.causal, /*keysOnRows=*/true);
  return bob::Exp2Op::create(b, bob::SubOp::create(b, s, lseLog2));
}

} // namespace flashbob::kernels

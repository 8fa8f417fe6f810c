#include "kernels/common/Tile.h"

using namespace mlir;

namespace flashbob::kernels {

int64_t Tile::rows() const {
  Type t = value_.getType();
  if (auto tile = dyn_cast<bob::RegTileType>(t))
    return tile.getRows();
  if (auto row = dyn_cast<bob::RowVecType>(t))
    return row.getSize();
  return cast<bob::ColVecType>(t).getSize();
}

int64_t Tile::cols() const { return cast<bob::RegTileType>(value_.getType()).getCols(); }

namespace {
template <typename Op> Tile binary(const Tile &a, Value b) {
  return {a.kb(), Op::create(a.kb().b, a.value(), b)};
}
Tile reduce(const Tile &a, bob::ReduceKind kind, bool withinGroup) {
  KernelBuilder &kb = a.kb();
  return {kb, bob::ReduceOp::create(kb.b, kb.rowvec(a.rows()), a, kind, withinGroup)};
}
} // namespace

Tile operator+(const Tile &a, const Tile &b) { return binary<bob::AddOp>(a, b); }
Tile operator-(const Tile &a, const Tile &b) { return binary<bob::SubOp>(a, b); }
Tile operator*(const Tile &a, const Tile &b) { return binary<bob::MulOp>(a, b); }
Tile operator/(const Tile &a, const Tile &b) { return binary<bob::DivOp>(a, b); }
Tile operator*(const Tile &a, double s) { return binary<bob::MulOp>(a, a.kb().f32(s)); }
Tile operator*(const Tile &a, Value f32) { return binary<bob::MulOp>(a, f32); }
Tile max(const Tile &a, const Tile &b) { return binary<bob::MaxOp>(a, b); }
Tile exp2(const Tile &a) { return {a.kb(), bob::Exp2Op::create(a.kb().b, a)}; }
Tile log2(const Tile &a) { return {a.kb(), bob::Log2Op::create(a.kb().b, a)}; }
Tile replace(const Tile &a, double from, double to) {
  return {a.kb(), bob::ReplaceOp::create(a.kb().b, a, from, to)};
}
Tile toOperand(const Tile &a) {
  KernelBuilder &kb = a.kb();
  return {kb, bob::ConvertOp::create(kb.b, kb.operandTile(a.rows(), a.cols()), a)};
}

Tile rowSum(const Tile &a) { return reduce(a, bob::ReduceKind::sum, false); }
Tile rowMax(const Tile &a) { return reduce(a, bob::ReduceKind::max, false); }
Tile rowSumInGroup(const Tile &a) { return reduce(a, bob::ReduceKind::sum, true); }
Tile combineGroups(const Tile &partialSums) {
  KernelBuilder &kb = partialSums.kb();
  return {kb, bob::CombineGroupsOp::create(kb.b, kb.rowvec(partialSums.rows()), partialSums,
                                           bob::ReduceKind::sum)};
}

Tile productT(KernelBuilder &kb, Value a, Value b) {
  auto rows = cast<bob::SharedTileType>(a.getType()).getRows();
  auto cols = cast<bob::SharedTileType>(b.getType()).getRows();
  Value zero = kb.splat(kb.rtile(rows, cols), 0.0);
  return {kb, bob::MmaOp::create(kb.b, a, b, zero, false, /*transposeB=*/true)};
}

Tile transposedProduct(KernelBuilder &kb, Value a, Value b) {
  auto rows = cast<bob::SharedTileType>(a.getType()).getCols();
  auto cols = cast<bob::SharedTileType>(b.getType()).getCols();
  Value zero = kb.splat(kb.rtile(rows, cols), 0.0);
  return {kb, bob::MmaOp::create(kb.b, a, b, zero, /*transposeA=*/true, false)};
}

Tile productT(Value a, Value b, const Tile &acc) {
  return {acc.kb(), bob::MmaOp::create(acc.kb().b, a, b, acc, false, /*transposeB=*/true)};
}

Tile accumulate(const Tile &acc, const Tile &a, Value b) {
  const bool converted = !cast<bob::RegTileType>(a.value().getType()).getElementType().isF32();
  Tile operand = converted ? a : toOperand(a);
  return {acc.kb(), bob::MmaOp::create(acc.kb().b, operand, b, acc, false, false)};
}

Tile accumulate(const Tile &acc, Value aShared, Value b) {
  return {acc.kb(), bob::MmaOp::create(acc.kb().b, aShared, b, acc, false, false)};
}

llvm::SmallVector<Tile> tiles(KernelBuilder &kb, ValueRange values) {
  llvm::SmallVector<Tile> out;
  for (Value v : values)
    out.push_back({kb, v});
  return out;
}

llvm::SmallVector<Value> values(llvm::ArrayRef<Tile> tiles) {
  llvm::SmallVector<Value> out;
  for (const Tile &t : tiles)
    out.push_back(t);
  return out;
}

} // namespace flashbob::kernels

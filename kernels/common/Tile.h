// Tile arithmetic for kernel builders: a register tile or vector as a value with operators, so
// that a kernel is written as its equations (`Tile dS = p * (dP - D);`). Each operator creates
// one bob op at the builder's insertion point. C++ leaves the order in which the two sides of a
// binary operator are evaluated unspecified, so a line combines at most one new sub-expression
// with values that already exist: the IR (and the PTX) then come out in the order written.
#pragma once

#include "kernels/common/KernelBuilder.h"

namespace flashbob::kernels {

class Tile {
public:
  Tile(KernelBuilder &kb, mlir::Value value) : kb_(&kb), value_(value) {}
  operator mlir::Value() const { return value_; }
  mlir::Value value() const { return value_; }
  KernelBuilder &kb() const { return *kb_; }
  // Rows of a register tile or the size of a vector.
  int64_t rows() const;
  int64_t cols() const; // register tiles

private:
  KernelBuilder *kb_;
  mlir::Value value_;
};

// Element-wise; a row vector (column vector) operand broadcasts along the tile's rows (columns).
Tile operator+(const Tile &a, const Tile &b);
Tile operator-(const Tile &a, const Tile &b);
Tile operator*(const Tile &a, const Tile &b);
Tile operator/(const Tile &a, const Tile &b);
Tile operator*(const Tile &a, double s);
Tile operator*(const Tile &a, mlir::Value f32); // an f32 scalar, e.g. a kernel argument
Tile max(const Tile &a, const Tile &b);
Tile exp2(const Tile &a); // exp2(-inf) = 0
Tile log2(const Tile &a); // log2(0) = -inf
// Every element equal to `from` (e.g. -inf) replaced by `to`.
Tile replace(const Tile &a, double from, double to);
// The tile in the kernel's input type: the A operand of a product.
Tile toOperand(const Tile &a);

// Row reductions into a row vector. With column groups (#bob.spec warp_cols) a group's warps
// hold only some columns: rowSum/rowMax combine the groups, rowSumInGroup does not (its result
// is completed once by combineGroups, e.g. after a loop of partial sums).
Tile rowSum(const Tile &a);
Tile rowMax(const Tile &a);
Tile rowSumInGroup(const Tile &a);
Tile combineGroups(const Tile &partialSums);

// Products on the tensor cores, B taken from shared memory:
//   productT(a, b)         a b^T of two shared tiles, into a new f32 tile
//   productT(a, b, acc)    acc + a b^T
//   transposedProduct(a, b)  a^T b of two shared tiles, into a new f32 tile (dS K from the
//                          dS^T a key-major kernel stored)
//   accumulate(acc, a, b)  acc + a b, `a` a register tile rounded to the input type (here,
//                          unless toOperand did it already), or a shared tile (one the
//                          kernel stored itself, KernelBuilder::storeInto)
Tile productT(KernelBuilder &kb, mlir::Value a, mlir::Value b);
Tile productT(mlir::Value a, mlir::Value b, const Tile &acc);
Tile transposedProduct(KernelBuilder &kb, mlir::Value a, mlir::Value b);
Tile accumulate(const Tile &acc, const Tile &a, mlir::Value b);
Tile accumulate(const Tile &acc, mlir::Value aShared, mlir::Value b);

// The values a sweep carries, as tiles.
llvm::SmallVector<Tile> tiles(KernelBuilder &kb, mlir::ValueRange values);
llvm::SmallVector<mlir::Value> values(llvm::ArrayRef<Tile> tiles);

} // namespace flashbob::kernels

// Tile-level pieces every attention kernel repeats: loop bounds under the causal mask, the
// probabilities P (query-major) or P^T (key-major) recomputed from the saved log-sum-exp, and
// D = rowsum(dO o O). Written once here so every kernel family recomputes exactly the same P.
#pragma once

#include "kernels/common/KernelBuilder.h"

namespace flashbob::kernels {

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

// Key blocks a query block starting at row0 must visit: all, or with a causal mask those before
// the bottom-right aligned diagonal (keys < row0 + block_m + M - N).
mlir::Value keyBlocksToVisit(KernelBuilder &kb, mlir::Value row0, mlir::Value n, mlir::Value m);
// First query block a key block starting at key0 must visit: 0, or with a causal mask the block
// holding query key0 - (M - N) (earlier queries see none of these keys).
mlir::Value firstQueryBlock(KernelBuilder &kb, mlir::Value key0, mlir::Value n, mlir::Value m);

// L (natural log-sum-exp, as stored by the forward) in log2 units, with -inf (a fully masked
// row) replaced by +inf so that exp2(S - L) is exactly 0 there instead of NaN. Works on row and
// column vectors.
mlir::Value lseToLog2(KernelBuilder &kb, mlir::Value lse);

// P = softmax(s Q K^T) recomputed for a (query block, key block) from the raw scores Q K^T
// (rows queries, cols keys; the caller issues that product, next to its other products).
// `lseLog2` is a row vector from lseToLog2.
mlir::Value probabilities(KernelBuilder &kb, mlir::Value scores, mlir::Value lseLog2,
                          mlir::Value row0, mlir::Value col0, mlir::Value n, mlir::Value m);
// P^T for a (key block, query block) from K Q^T: rows keys, cols queries; `lseLog2` a column
// vector.
mlir::Value probabilitiesT(KernelBuilder &kb, mlir::Value scoresT, mlir::Value lseLog2,
                           mlir::Value key0, mlir::Value query0, mlir::Value n, mlir::Value m);

// a * b^T or a * b of shared tiles into a fresh f32 tile.
mlir::Value product(KernelBuilder &kb, mlir::Value a, mlir::Value b, bool transposeB,
                    int64_t rows, int64_t cols);
// acc + convert(a) * b: a register f32 tile rounded to the input type, b a shared tile.
mlir::Value accumulate(KernelBuilder &kb, mlir::Value acc, mlir::Value a, mlir::Value bShared);

} // namespace flashbob::kernels

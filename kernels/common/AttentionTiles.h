// Tile-level pieces every attention kernel repeats: loop bounds under the causal mask, the
// probabilities P (query-major) or P^T (key-major) recomputed from the saved log-sum-exp, and
// D = rowsum(dO o O). Written once here so every kernel family recomputes exactly the same P.
#pragma once

#include "kernels/common/KernelBuilder.h"
#include "kernels/common/Tile.h"

#include <limits>

namespace flashbob::kernels {

constexpr double kLn2 = 0.6931471805599453;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Loop bounds: the blocks the mask leaves something visible in (all, or with a causal mask or a
// sliding window those around the bottom-right aligned diagonal; kernels/oracle's
// visibleKeyBegin/End and visibleQueryBegin/End, in blocks).
// Key blocks a query block starting at row0 visits: [firstKeyBlock, keyBlocksToVisit), i.e.
// keys >= row0 + M - N - window_left and < row0 + block_m + M - N + right reach.
mlir::Value firstKeyBlock(KernelBuilder &kb, mlir::Value row0, mlir::Value n, mlir::Value m);
mlir::Value keyBlocksToVisit(KernelBuilder &kb, mlir::Value row0, mlir::Value n, mlir::Value m);
// Query blocks a key block starting at key0 visits: [firstQueryBlock, queryBlocksEnd), from the
// block holding query key0 - (M - N) - right reach (earlier queries see none of these keys) to
// the one holding query key0 + block_n - 1 - (M - N) + window_left.
mlir::Value firstQueryBlock(KernelBuilder &kb, mlir::Value key0, mlir::Value n, mlir::Value m);
mlir::Value queryBlocksEnd(KernelBuilder &kb, mlir::Value key0, mlir::Value n, mlir::Value m);

// The scores s Q K^T in log2 units (scaled by s log2(e)), -inf where the mask hides a key:
// outside the sequences, past the causal diagonal or outside the sliding window. `scores` holds the raw products of a
// (query block, key block), or their transpose in key-major kernels (keys on rows).
Tile maskedLog2Scores(KernelBuilder &kb, const Tile &scores, mlir::Value row0, mlir::Value col0);

// L (natural log-sum-exp, as stored by the forward) in log2 units, with -inf (a fully masked
// row) replaced by +inf so that exp2(S - L) is exactly 0 there instead of NaN. Works on row and
// column vectors.
Tile lseToLog2(const Tile &lse);

// P = softmax(s Q K^T) recomputed for a (query block, key block) from the raw scores Q K^T
// (rows queries, cols keys; the caller issues that product, next to its other products), or in
// key-major kernels P^T from K Q^T (rows keys, cols queries; `lseLog2` a column vector).
// `row0`, `col0`: the first row and column of the scores.
Tile probabilities(KernelBuilder &kb, const Tile &scores, const Tile &lseLog2, mlir::Value row0,
                   mlir::Value col0);

// The first backward's tiles of a key block and the swept query block at `query0` (key-major:
// keys on rows; bwd_kv and the fused backward): P^T and dS^T = P^T o (dP^T - D), from the swept
// rows' L and D, with the raw products S^T = K Q^T and dP^T = V dO^T issued together.
struct BackwardTilesT {
  Tile pT, dST;
};
BackwardTilesT backwardTilesT(KernelBuilder &kb, mlir::Value ks, mlir::Value vs, mlir::Value qs,
                              mlir::Value dOs, mlir::Value query0);

// One block of the forward's online softmax (FlashAttention-2, in log2 units; fwd and fwd_dual):
// P = exp2(S - new max) with S the masked scores s log2(e) Q K^T of the block's own rows and
// the key block at `col0`, the running row max and sum carried over, and
// r = exp2(old max - new max) for the accumulators. A row with no visible key so far keeps
// max = -inf; subtracting 0 instead keeps exp2(-inf - 0) = 0 rather than NaN.
struct SoftmaxStep {
  Tile p, rescale, newMax, newSum;
};
SoftmaxStep softmaxStep(KernelBuilder &kb, const Tile &scores, mlir::Value col0,
                        const Tile &oldMax, const Tile &oldSum);

// 1.0 for each of the block's own query rows that sees at least two keys under the mask, 0.0
// for one that sees one or none: its softmax is constant there, so every derivative with respect
// to its query is exactly zero (bob.multi_key_rows).
Tile rowsSeeingSeveralKeys(KernelBuilder &kb);

// D = rowsum(dO o O) of the block's own query rows, from the stored outputs, in f32.
Tile outputDotRows(KernelBuilder &kb);

} // namespace flashbob::kernels

// Float64 CPU oracle for FlashBoB: softmax attention forward, first backward, and
// backward-over-backward (BoB), exactly as defined in docs/bob-math.md.
//
// Two independent implementations of the same math:
//   dense::  materializes every N x M matrix; short and obviously-correct, the reference.
//   tiled::  the two-pass tiled schedule the GPU kernels follow (online-softmax forward,
//            FlashAttention-2 style backward, BoB pass 1 query-major + pass 2 key-major),
//            O(N) extra memory, per-tile scratch only. It is the executable spec.
// The tests check dense against finite differences and tiled against dense.
//
// Pure C++17 + standard library. Errors in the arguments throw std::invalid_argument with a
// message that starts with "oracle: " and names the offending argument.
#pragma once

#include <cstdint>
#include <vector>

namespace flashbob::oracle {

// Signed on purpose: callers (PyTorch-style shapes) use int64, and a negative size must be
// reported as such instead of wrapping to a huge unsigned value.
using Index = std::int64_t;

// Row-major dense matrix.
struct Matrix {
  Index rows = 0;
  Index cols = 0;
  std::vector<double> data;  // rows * cols values, row i at data[i * cols]

  Matrix() = default;
  // Throws std::invalid_argument on negative sizes.
  Matrix(Index rows, Index cols, double fill = 0.0);

  double& operator()(Index i, Index j) { return data[static_cast<std::size_t>(i * cols + j)]; }
  double operator()(Index i, Index j) const { return data[static_cast<std::size_t>(i * cols + j)]; }
  double* row(Index i) { return data.data() + i * cols; }
  const double* row(Index i) const { return data.data() + i * cols; }
};

// One attention head. Q, uQ are N x d and K, uK are M x d (the scores' side); V, uV are M x dv
// and dO is N x dv (the values' side), dv being d unless set (multi-head latent attention: d =
// 192, dv = 128). The outputs take their operand's width: O, tO, gdO N x dv; dV, gV M x dv.
struct Problem {
  Index N = 0;          // queries
  Index M = 0;          // keys
  Index d = 0;          // head dimension of Q and K (the scale's default is 1 / sqrt(d))
  Index dv = 0;         // head dimension of V, dO and O; 0 means d (see valueDim())
  bool causal = false;  // bottom-right aligned causal mask
  double scale = 0.0;   // s in S = s Q K^T; see defaultScale()
  // Sliding window (flash-attn's window_size): query i sees key j only if
  // i + (M - N) - windowLeft <= j <= i + (M - N) + windowRight; -1 leaves that side unbounded.
  // causal is the window (-1, 0); with causal set, windowRight is not used.
  Index windowLeft = -1;
  Index windowRight = -1;

  // The diagonal: query i's own key is i + (M - N) (bottom-right alignment). With M < N and a
  // causal mask the first N - M query rows see no key at all ("fully masked"), and so can rows
  // a window leaves empty: by definition P = 0, O = 0, L = -inf there, and those rows
  // contribute nothing to any gradient (their D, c, b, dQ, gQ, gdO are 0).
  Index causalOffset() const { return M - N; }
  // The values' head dimension: dv, or d when dv is 0.
  Index valueDim() const { return dv > 0 ? dv : d; }
  // Keys past the diagonal a query sees (-1: all).
  Index rightReach() const { return causal ? 0 : windowRight; }
  bool masked(Index i, Index j) const {
    const Index diagonal = i + causalOffset();
    const Index right = rightReach();
    return (right >= 0 && j > diagonal + right) || (windowLeft >= 0 && j < diagonal - windowLeft);
  }
};

double defaultScale(Index d);  // 1 / sqrt(d)
Problem makeProblem(Index N, Index M, Index d, bool causal);  // scale = defaultScale(d)
// ... with V of head dimension dv (the scale is still defaultScale(d)).
Problem makeProblem(Index N, Index M, Index d, Index dv, bool causal);

// Loop bounds for skipping tiles the mask hides entirely (what the GPU kernels use too).
// Keys [visibleKeyBegin(p, i0), visibleKeyEnd(p, i1)) contain every key visible to any query
// row in [i0, i1); key blocks outside are entirely masked for that query block.
Index visibleKeyBegin(const Problem& p, Index queryBegin);
Index visibleKeyEnd(const Problem& p, Index queryEnd);
// Rows [visibleQueryBegin(p, j0), visibleQueryEnd(p, j1)) contain every query that sees any key
// in [j0, j1); query blocks outside can be skipped.
Index visibleQueryBegin(const Problem& p, Index keyBegin);
Index visibleQueryEnd(const Problem& p, Index keyEnd);

// ---- Argument checking -----------------------------------------------------------------
// N, M, d > 0, dv >= 0 (0: d) and scale finite.
void validate(const Problem& p);
// `m` must be rows x cols with rows * cols elements; the message names `name`, and
// `rowsName` / `colsName` (e.g. "M", "d") say which problem size was expected.
void validateMatrix(const Matrix& m, const char* name, Index rows, const char* rowsName,
                    Index cols, const char* colsName);
void validateVector(const std::vector<double>& v, const char* name, Index n, const char* nName);
// The saved first-backward dQ that X2Source::FromDQ reads (rows x d; `rowsName` as above) and
// the nonzero scale it divides by (X2 = dQ / s + D o X3).
void validateSavedDQ(const Matrix& dQ, const Problem& p, Index rows, const char* rowsName);

// ---- Results ------------------------------------------------------------------------------
struct ForwardResult {
  Matrix O;               // N x dv
  std::vector<double> L;  // N, log-sum-exp of the unmasked row of S (-inf if none)
};

// The forward and its JVP together (tiled::forwardDual).
struct ForwardDualResult {
  ForwardResult fwd;
  Matrix tO;  // N x dv, the change of O along the tangents
};

struct BackwardResult {
  Matrix dQ, dK, dV;      // N x d, M x d, M x dv
  std::vector<double> D;  // N, rowsum(dO o O) (a sum over dv)
};

struct BobResult {
  Matrix gQ, gK, gV, gdO;       // gradients of <uQ,dQ>+<uK,dK>+<uV,dV> wrt Q, K, V, dO
                                // (N x d, M x d, M x dv, N x dv)
  std::vector<double> c, b;     // N each: c = rowsum(G o P), b = rowsum(G o dS)+rowsum(P o W)-c o D
};

// ---- Dense reference (materializes N x M) -------------------------------------------------
namespace dense {

ForwardResult forward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V);
// Recomputes the forward.
BackwardResult backward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                        const Matrix& dO);
// Uses the saved forward outputs (P from L, D from O), as a FlashAttention backward does.
BackwardResult backward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                        const Matrix& dO, const Matrix& O, const std::vector<double>& L);
BobResult bob(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
              const Matrix& dO, const Matrix& uQ, const Matrix& uK, const Matrix& uV);
// The forward's JVP: tO (N x dv), the derivative of O along tangents (tQ, tK, tV) of (Q, K, V)
// (tV is M x dv), written as the chain rule through S and the softmax (not through BoB's c, as
// the kernel is).
Matrix forwardJvp(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                  const Matrix& tQ, const Matrix& tK, const Matrix& tV);

}  // namespace dense

// ---- Multi-head / batch (dense) -------------------------------------------------------------
// Contiguous (batch, heads, rows, cols) tensor; head (b, h) is a row-major rows x cols block.
// Per-row vectors (L, D, c, b) use cols = 1; the values' side (V, dO, uV; O, dV, gV, gdO) has
// cols = the problem's valueDim().
struct HeadTensor {
  Index batch = 0, heads = 0, rows = 0, cols = 0;
  std::vector<double> data;

  HeadTensor() = default;
  HeadTensor(Index batch, Index heads, Index rows, Index cols, double fill = 0.0);
  Matrix head(Index b, Index h) const;
  void setHead(Index b, Index h, const Matrix& m);
  void setHead(Index b, Index h, const std::vector<double>& v);  // cols must be 1
  void addHead(Index b, Index h, const Matrix& m);                // head (b, h) += m
};

struct BatchedForwardResult { HeadTensor O, L; };
struct BatchedBackwardResult { HeadTensor dQ, dK, dV, D; };
struct BatchedBobResult { HeadTensor gQ, gK, gV, gdO, c, b; };

namespace dense {

// `head` describes every (batch, head) pair; all tensors share the batch. The key side (K, V,
// uK, uV and the results dK, dV, gK, gV) has K's head count, which must divide Q's: grouped-
// query attention (MQA with one), where query head h reads key/value head h / (heads / K.heads)
// and each key-side gradient is the sum over the query heads that read it. The query side
// (Q, dO, uQ; O, L, dQ, D, gQ, gdO, c, b) has Q's.
BatchedForwardResult forwardBatched(const Problem& head, const HeadTensor& Q, const HeadTensor& K,
                                    const HeadTensor& V);
BatchedBackwardResult backwardBatched(const Problem& head, const HeadTensor& Q,
                                      const HeadTensor& K, const HeadTensor& V,
                                      const HeadTensor& dO);
BatchedBobResult bobBatched(const Problem& head, const HeadTensor& Q, const HeadTensor& K,
                            const HeadTensor& V, const HeadTensor& dO, const HeadTensor& uQ,
                            const HeadTensor& uK, const HeadTensor& uV);

}  // namespace dense

// ---- Variable-length batches (dense) -----------------------------------------------------------
// flash-attn's varlen layout: the sequences of a batch packed along the rows of one head tensor,
// (1, heads, total, cols), sequence s holding query rows [cuQ[s], cuQ[s + 1]) and key rows
// [cuK[s], cuK[s + 1]). Each sequence attends only to itself, as its own problem with
// N = its query rows and M = its key rows (the mask, causal bottom-right and the window, per
// sequence); `head` gives d, dv, causal, the scale and the window (its N and M are not used). A
// sequence with no query rows contributes nothing; one with no key rows gives O = 0, L = -inf
// and zero gradients, as a fully masked row does. The key side may have fewer heads (GQA).
// cuQ and cuK: batch + 1 offsets each, from 0, non-decreasing, ending at the tensors' rows.
struct Packing {
  std::vector<Index> cuQ, cuK;
  Index sequences() const { return static_cast<Index>(cuQ.size()) - 1; }
};
void validate(const Packing& packing, Index totalQ, Index totalK);

namespace dense {

BatchedForwardResult forwardVarlen(const Problem& head, const Packing& packing, const HeadTensor& Q,
                                   const HeadTensor& K, const HeadTensor& V);
BatchedBackwardResult backwardVarlen(const Problem& head, const Packing& packing,
                                     const HeadTensor& Q, const HeadTensor& K, const HeadTensor& V,
                                     const HeadTensor& dO);
BatchedBobResult bobVarlen(const Problem& head, const Packing& packing, const HeadTensor& Q,
                           const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO,
                           const HeadTensor& uQ, const HeadTensor& uK, const HeadTensor& uV);

}  // namespace dense

// ---- Generated inputs ------------------------------------------------------------------------
// Element `index` of input tensor number `tensor` of the problems `flashbob run/bench/demo`
// generate (tools/flashbob/ProblemBuffers.cpp) for `seed`: uniform on [-sqrt 3, sqrt 3) (unit
// variance), a counter-based hash so any element is known without the others (the CLI's
// --check-rows and bench/numerics' emulation rebuild just the rows they need).
float generatedInput(std::uint64_t seed, unsigned tensor, std::uint64_t index);

// ---- Tiled two-pass model (O(N) extra memory) ---------------------------------------------
struct Tiling {
  Index block_m = 64;  // query rows per tile; any positive value, need not divide N
  Index block_n = 64;  // key rows per tile; any positive value, need not divide M
};
void validate(const Tiling& t);

// Counts (query block, key block) tiles actually computed, to check causal block skipping.
struct TileStats {
  Index tiles = 0;
};

// How BoB pass 1 obtains X2 = (P o dP) K.
enum class X2Source {
  FromDQ,      // X2 = dQ / s + D o X3 from the saved first-backward dQ (saves a product; s != 0)
  Accumulate,  // X2 accumulated tile by tile like X1, X3, X4 (no dQ needed)
};

namespace tiled {

// Query-major, online softmax.
ForwardResult forward(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                      const Matrix& V, TileStats* stats = nullptr);
// FlashAttention-2 style: D from rowsum(dO o O), then key-major sweep for dK, dV with dQ
// accumulated into global memory (atomics on a GPU). Uses fwd.O and fwd.L.
BackwardResult backward(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                        const Matrix& V, const Matrix& dO, const ForwardResult& fwd,
                        TileStats* stats = nullptr);
// Two-pass BoB from saved state: fwd.O, fwd.L, bwd.D, and bwd.dQ when x2 == FromDQ
// (bwd.dK, bwd.dV are not read). Pass 1 query-major -> gQ, gdO, c, b; pass 2 key-major -> gK, gV.
BobResult bob(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
              const Matrix& V, const Matrix& dO, const Matrix& uQ, const Matrix& uK,
              const Matrix& uV, const ForwardResult& fwd, const BackwardResult& bwd,
              X2Source x2 = X2Source::FromDQ, TileStats* stats = nullptr);
// Convenience: runs tiled forward and backward first, then the two BoB passes.
BobResult bob(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
              const Matrix& V, const Matrix& dO, const Matrix& uQ, const Matrix& uK,
              const Matrix& uV, X2Source x2 = X2Source::FromDQ);

// The forward and its JVP along (tQ, tK, tV) in one query-major sweep (the fwd_dual kernel,
// docs/bob-math.md, "The forward and its JVP in one sweep"): the forward's online softmax
// carries, beside exp(S - m) V and its row sums, exp(S - m) tV + (exp(S - m) o G) V and
// rowsum(exp(S - m) o G), all rescaled when the row max m grows; the epilogue divides by the
// row sum once. The forward's O and L, and tO = dense::forwardJvp's.
ForwardDualResult forwardDual(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                              const Matrix& V, const Matrix& tQ, const Matrix& tK,
                              const Matrix& tV, TileStats* stats = nullptr);

}  // namespace tiled
}  // namespace flashbob::oracle

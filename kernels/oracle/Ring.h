// Context-parallel (ring) attention in float64, for one head: R simulated ranks, each holding a
// shard of the query rows and the same shard of the key rows (N = M), the step functions a
// distributed implementation would call on one (query shard, key shard) pair, and ring drivers
// that run R steps as a ring does and combine the partial results in a fixed order. The math,
// what travels the ring and why zigzag shards: docs/context-parallel.md. Checked against the dense
// reference by test/unit/RingOracleTest.cpp.
//
// Every step function masks with the global Problem at the shard rows' global positions
// (Problem::masked), so a shard of any layout is masked as the whole sequence is. V is as wide
// as Q and K (a Problem with another dv is refused, as the API refuses such ring steps). Errors
// in the arguments throw std::invalid_argument("oracle: ...") naming the argument.
#pragma once

#include "kernels/oracle/Oracle.h"

#include <vector>

namespace flashbob::oracle::ring {

// ---- Shards and the schedule ----------------------------------------------------------------
enum class Layout {
  Contiguous,  // rank r holds rows [r N / R, (r + 1) N / R) (rounded down)
  Zigzag,      // the rows cut into 2R chunks; rank r holds chunks r and 2R - 1 - r (causal balance)
};

struct Ring {
  Index ranks = 1;
  Layout layout = Layout::Contiguous;
};
// ranks >= 1 and every chunk of the layout holds a row: n >= ranks (contiguous), n >= 2 ranks
// (zigzag).
void validate(const Ring& ring, Index n);

struct Range {
  Index begin = 0, end = 0;  // rows [begin, end)
};
// The contiguous pieces of a sequence of n rows that rank `rank` holds, ascending: one for
// Contiguous, chunks rank and 2R - 1 - rank of 2R for Zigzag (chunk c is [c n / 2R, (c+1) n / 2R)).
std::vector<Range> shardChunks(const Ring& ring, Index n, Index rank);
// Their rows, ascending: the global positions of the rank's query rows and of its key rows.
std::vector<Index> shardRows(const Ring& ring, Index n, Index rank);

// The schedule, one home for it. At step t (0 .. R-1) of a query-major pass (forward, BoB pass 1)
// rank r holds its own query shard and key shard (r - t) mod R: key shards move to the next rank
// each step. Of a key-major pass (backward, BoB pass 2) it holds its own key shard and query
// shard (r + t) mod R: query shards move to the previous rank each step. Step 0 is the rank's own
// shard in both.
Index keyShardAt(const Ring& ring, Index rank, Index step);
Index queryShardAt(const Ring& ring, Index rank, Index step);

// Rows `rows` of A (of v).
Matrix gatherRows(const Matrix& A, const std::vector<Index>& rows);
std::vector<double> gatherRows(const std::vector<double>& v, const std::vector<Index>& rows);

// ---- What a rank holds ------------------------------------------------------------------------
// The query side of one shard: what travels in the key-major passes. Each step function says
// which fields it reads; the others may be empty.
struct QueryShard {
  std::vector<Index> rows;         // global positions, one per row below
  Matrix Q, dO, uQ;                // rows x d
  std::vector<double> L, D, c, b;  // per row: the forward's global L, D = rowsum(dO o O), BoB's c, b
};

// The key side of one shard: what travels in the query-major passes.
struct KeyShard {
  std::vector<Index> rows;  // global positions
  Matrix K, V, uK, uV;      // rows x d
};

// ---- Step functions: one (query shard, key shard) pair on one rank ------------------------------
// Forward. Reads q.Q, k.K, k.V. O and L of q's rows as if k's keys were the only keys: L the
// log-sum-exp of the visible scores (-inf where the row sees none of k's keys, O = 0 there).
ForwardResult forwardStep(const Problem& p, const QueryShard& q, const KeyShard& k);
// total <- the forward over total's keys and part's keys (same query rows), by log-sum-exp:
// L = log(e^La + e^Lb), O = e^(La - L) Oa + e^(Lb - L) Ob.
void mergeForward(ForwardResult& total, const ForwardResult& part);

// First backward, given the global L and D (q.L, q.D): P = exp(S - L) and dS = P o (dP - D) are
// then the global P and dS restricted to the pair, so the three outputs are partial sums.
// Reads q.Q, q.dO, q.L, q.D, k.K, k.V.
struct BackwardPartial {
  Matrix dQ;      // q's rows: s dS K over k's keys; summed over key shards
  Matrix dK, dV;  // k's rows: s dS^T Q, P^T dO over q's queries; summed over query shards
};
BackwardPartial backwardStep(const Problem& p, const QueryShard& q, const KeyShard& k);

// BoB pass 1 (query-major), given the global L and D: the four accumulators and the two row sums
// of docs/bob-math.md over k's keys. All six are sums over key shards; c and b are finished from
// the totals (finishPass1). Reads q.Q, q.dO, q.uQ, q.L, q.D and all of k.
struct Pass1Partial {
  Matrix X1, X2, X3, X4;     // q's rows x d; X2 only with X2Source::Accumulate (else empty)
  std::vector<double> c;     // rowsum(G o P)
  std::vector<double> beta;  // rowsum(G o dS + P o W): b before its - c o D
};
Pass1Partial bobPass1Step(const Problem& p, const QueryShard& q, const KeyShard& k,
                          X2Source x2 = X2Source::Accumulate);
void addPass1(Pass1Partial& total, const Pass1Partial& part);  // every field summed
// The query rows' BoB outputs from the totals over all key shards:
//   c = sum c_t,  b = sum beta_t - c o D,  gQ = s (X1 - c o X2 - b o X3),  gdO = X4 - c o O.
// O is the query rows' forward output; dQ their complete first-backward dQ, read only with
// X2Source::FromDQ (X2 = dQ / s + D o X3). Reads q.D.
struct Pass1Rows {
  Matrix gQ, gdO;
  std::vector<double> c, b;
};
Pass1Rows finishPass1(const Problem& p, const QueryShard& q, const Pass1Partial& total, const Matrix& O,
                      const Matrix& dQ, X2Source x2 = X2Source::Accumulate);

// BoB pass 2 (key-major) on k, given q's complete row scalars L, D, c, b (so the query shard
// travels to the key's rank with them). Reads all of q and of k.
struct Pass2Partial {
  Matrix gK, gV;  // k's rows: s (dS^T uQ + Sbar^T Q), dPbar^T dO over q's queries
};
Pass2Partial bobPass2Step(const Problem& p, const QueryShard& q, const KeyShard& k);

// ---- Ring drivers: shard, run R steps, gather (N = M) -----------------------------------------
// Each combines a rank's partials in step order (t = 0 .. R-1), so the result is deterministic.
// Forward: query-major, key shards (K, V) travel.
ForwardResult forward(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K,
                      const Matrix& V);
// Backward: key-major, query shards (Q, dO, L, D) travel with their dQ accumulator; dK, dV stay
// on the key's rank. Uses fwd.O (for D) and fwd.L.
BackwardResult backward(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K,
                        const Matrix& V, const Matrix& dO, const ForwardResult& fwd);
// BoB: pass 1 query-major (K, V, uK, uV travel), finished on each query rank; pass 2 key-major
// (Q, dO, uQ, L, D, c, b travel). Uses fwd.O, fwd.L, bwd.D, and bwd.dQ with X2Source::FromDQ.
BobResult bob(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K, const Matrix& V,
              const Matrix& dO, const Matrix& uQ, const Matrix& uK, const Matrix& uV,
              const ForwardResult& fwd, const BackwardResult& bwd, X2Source x2 = X2Source::Accumulate);

// ---- Work per rank and step -------------------------------------------------------------------
// Visible (query, key) pairs between the rows qRows and kRows: the work of one step.
Index visiblePairs(const Problem& p, const std::vector<Index>& qRows, const std::vector<Index>& kRows);
enum class Sweep { QueryMajor, KeyMajor };
// work[t][r]: the visible pairs rank r computes at step t of a pass of that sweep (N = M).
std::vector<std::vector<Index>> stepWork(const Problem& p, const Ring& ring, Sweep sweep);

}  // namespace flashbob::oracle::ring

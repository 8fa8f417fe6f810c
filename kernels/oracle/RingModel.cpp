// Float64 model of context-parallel (ring) attention (Ring.h, docs/context-parallel.md).
//
// A step computes one (query shard, key shard) block densely, with the dense reference's helpers
// (DenseOps.h) and the global mask at the shards' positions: a shard is at most N/R x N/R, and
// dense blocks keep each step a few lines that read like docs/bob-math.md. What this file adds is
// the decomposition: which quantities of one block are partial sums, how they combine, and the
// order a ring visits the blocks in.
#include "kernels/oracle/DenseOps.h"
#include "kernels/oracle/Ring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace flashbob::oracle::ring {

using namespace detail;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline std::size_t at(Index i) { return static_cast<std::size_t>(i); }
inline Index size(const std::vector<Index>& rows) { return static_cast<Index>(rows.size()); }

// Which fields of a shard a step reads (Ring.h says which, per step).
enum Needs : unsigned {
  kQ = 1, kDO = 2, kUQ = 4, kL = 8, kD = 16, kCB = 32,  // query side
  kKV = 64, kUKV = 128,                                 // key side
};

void validateRows(const std::vector<Index>& rows, const char* name, Index n, const char* nName) {
  if (rows.empty()) fail(std::string(name) + " is empty");
  for (Index r : rows)
    if (r < 0 || r >= n)
      fail(std::string(name) + " holds row " + std::to_string(r) + ", outside [0, " + nName + " = " +
           std::to_string(n) + ")");
}

void validateStep(const Problem& p, const QueryShard& q, const KeyShard& k, unsigned needs) {
  validate(p);
  requireOneWidth(p, "the ring model");
  validateRows(q.rows, "query shard rows", p.N, "N");
  validateRows(k.rows, "key shard rows", p.M, "M");
  const Index n = size(q.rows), m = size(k.rows);
  if (needs & kQ) validateMatrix(q.Q, "Q", n, "query shard rows", p.d, "d");
  if (needs & kDO) validateMatrix(q.dO, "dO", n, "query shard rows", p.d, "d");
  if (needs & kUQ) validateMatrix(q.uQ, "uQ", n, "query shard rows", p.d, "d");
  if (needs & kL) validateVector(q.L, "L", n, "query shard rows");
  if (needs & kD) validateVector(q.D, "D", n, "query shard rows");
  if (needs & kCB) {
    validateVector(q.c, "c", n, "query shard rows");
    validateVector(q.b, "b", n, "query shard rows");
  }
  if (needs & kKV) {
    validateMatrix(k.K, "K", m, "key shard rows", p.d, "d");
    validateMatrix(k.V, "V", m, "key shard rows", p.d, "d");
  }
  if (needs & kUKV) {
    validateMatrix(k.uK, "uK", m, "key shard rows", p.d, "d");
    validateMatrix(k.uV, "uV", m, "key shard rows", p.d, "d");
  }
}

// The tiles of docs/bob-math.md for one block, from the global L and D: P = exp(S - L),
// dP = dO V^T, dS = P o (dP - D), and for BoB G = s (uQ K^T + Q uK^T), W = dO uV^T. Masked
// entries of P and dS are 0; those of dP, G, W are left as they are (only ever multiplied by P or dS).
struct Tiles {
  Matrix P, dP, dS, G, W;
};

Tiles blockTiles(const Problem& p, const QueryShard& q, const KeyShard& k, bool bob) {
  Tiles t;
  t.P = probabilities(p, q.Q, q.rows, k.K, k.rows, q.L);
  t.dP = mulABt(q.dO, k.V);
  t.dS = Matrix(t.P.rows, t.P.cols);
  for (Index i = 0; i < t.P.rows; ++i)
    for (Index j = 0; j < t.P.cols; ++j) t.dS(i, j) = t.P(i, j) * (t.dP(i, j) - q.D[at(i)]);
  if (bob) {
    t.G = add(mulABt(q.uQ, k.K), mulABt(q.Q, k.uK));
    scaleInPlace(t.G, p.scale);
    t.W = mulABt(q.dO, k.uV);
  }
  return t;
}

void addTo(Matrix& total, const Matrix& part) { total = add(total, part); }
void addTo(std::vector<double>& total, const std::vector<double>& part) {
  for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
}

// Writes `part`, the rows `rows`, into the global `out`.
void scatterRows(Matrix& out, const std::vector<Index>& rows, const Matrix& part) {
  for (Index r = 0; r < size(rows); ++r)
    std::copy(part.row(r), part.row(r) + part.cols, out.row(rows[at(r)]));
}
void scatterRows(std::vector<double>& out, const std::vector<Index>& rows, const std::vector<double>& part) {
  for (Index r = 0; r < size(rows); ++r) out[at(rows[at(r)])] = part[at(r)];
}

void validateDriver(const Problem& p, const Ring& ring) {
  validate(p);
  requireOneWidth(p, "the ring model");
  if (p.N != p.M)
    fail("the ring model shards queries and keys alike and needs N = M, got N = " + std::to_string(p.N) +
         ", M = " + std::to_string(p.M));
  validate(ring, p.N);
}

// Every rank's shard of the key side (uK, uV may be empty).
std::vector<KeyShard> keyShards(const Ring& ring, Index n, const Matrix& K, const Matrix& V,
                                const Matrix& uK, const Matrix& uV) {
  std::vector<KeyShard> shards(at(ring.ranks));
  for (Index r = 0; r < ring.ranks; ++r) {
    KeyShard& k = shards[at(r)];
    k.rows = shardRows(ring, n, r);
    k.K = gatherRows(K, k.rows);
    k.V = gatherRows(V, k.rows);
    if (!uK.data.empty()) k.uK = gatherRows(uK, k.rows);
    if (!uV.data.empty()) k.uV = gatherRows(uV, k.rows);
  }
  return shards;
}

// Every rank's shard of the query side; with O, D = rowsum(dO o O) of its own rows (no
// communication: O and dO are both the rank's).
std::vector<QueryShard> queryShards(const Ring& ring, Index n, const Matrix& Q, const Matrix& dO,
                                    const Matrix& uQ, const ForwardResult* fwd) {
  std::vector<QueryShard> shards(at(ring.ranks));
  for (Index r = 0; r < ring.ranks; ++r) {
    QueryShard& q = shards[at(r)];
    q.rows = shardRows(ring, n, r);
    q.Q = gatherRows(Q, q.rows);
    if (!dO.data.empty()) q.dO = gatherRows(dO, q.rows);
    if (!uQ.data.empty()) q.uQ = gatherRows(uQ, q.rows);
    if (fwd) {
      q.L = gatherRows(fwd->L, q.rows);
      q.D = rowSum(hadamard(q.dO, gatherRows(fwd->O, q.rows)));
    }
  }
  return shards;
}

}  // namespace

// ---- Shards and the schedule ----------------------------------------------------------------

void validate(const Ring& ring, Index n) {
  if (ring.ranks < 1) fail("ranks must be positive, got " + std::to_string(ring.ranks));
  const Index chunks = ring.layout == Layout::Zigzag ? 2 * ring.ranks : ring.ranks;
  if (n < chunks)
    fail("ranks = " + std::to_string(ring.ranks) + " cuts the sequence into " + std::to_string(chunks) +
         " chunks, more than its N = " + std::to_string(n) + " rows");
}

std::vector<Range> shardChunks(const Ring& ring, Index n, Index rank) {
  validate(ring, n);
  if (rank < 0 || rank >= ring.ranks)
    fail("rank " + std::to_string(rank) + " is outside [0, ranks = " + std::to_string(ring.ranks) + ")");
  // Chunk c of `chunks` equal cuts (sizes differ by at most one row when they do not divide n).
  auto chunk = [n](Index c, Index chunks) { return Range{c * n / chunks, (c + 1) * n / chunks}; };
  if (ring.layout == Layout::Contiguous) return {chunk(rank, ring.ranks)};
  // Early rows see few keys under a causal mask, late rows many: pairing chunk r with chunk
  // 2R - 1 - r gives every rank the same number of visible pairs.
  return {chunk(rank, 2 * ring.ranks), chunk(2 * ring.ranks - 1 - rank, 2 * ring.ranks)};
}

std::vector<Index> shardRows(const Ring& ring, Index n, Index rank) {
  std::vector<Index> rows;
  for (const Range& c : shardChunks(ring, n, rank))
    for (Index i = c.begin; i < c.end; ++i) rows.push_back(i);
  return rows;
}

Index keyShardAt(const Ring& ring, Index rank, Index step) {
  return ((rank - step) % ring.ranks + ring.ranks) % ring.ranks;
}

Index queryShardAt(const Ring& ring, Index rank, Index step) { return (rank + step) % ring.ranks; }

Matrix gatherRows(const Matrix& A, const std::vector<Index>& rows) {
  Matrix out(size(rows), A.cols);
  for (Index r = 0; r < size(rows); ++r) {
    const Index i = rows[at(r)];
    if (i < 0 || i >= A.rows)
      fail("gatherRows: row " + std::to_string(i) + " is outside the matrix's " + std::to_string(A.rows));
    std::copy(A.row(i), A.row(i) + A.cols, out.row(r));
  }
  return out;
}

std::vector<double> gatherRows(const std::vector<double>& v, const std::vector<Index>& rows) {
  std::vector<double> out;
  for (Index i : rows) {
    if (i < 0 || i >= static_cast<Index>(v.size()))
      fail("gatherRows: row " + std::to_string(i) + " is outside the vector's " + std::to_string(v.size()));
    out.push_back(v[at(i)]);
  }
  return out;
}

// ---- Step functions ---------------------------------------------------------------------------

ForwardResult forwardStep(const Problem& p, const QueryShard& q, const KeyShard& k) {
  validateStep(p, q, k, kQ | kKV);
  Matrix S = mulABt(q.Q, k.K);
  scaleInPlace(S, p.scale);
  ForwardResult r;
  r.L = maskedLogSumExp(p, S, q.rows, k.rows);  // over k's keys only
  r.O = mulAB(probabilities(p, q.Q, q.rows, k.K, k.rows, r.L), k.V);
  return r;
}

void mergeForward(ForwardResult& total, const ForwardResult& part) {
  if (part.O.rows != total.O.rows || part.O.cols != total.O.cols || part.L.size() != total.L.size() ||
      total.L.size() != at(total.O.rows))
    fail("mergeForward: part has " + std::to_string(part.O.rows) + " x " + std::to_string(part.O.cols) +
         " O, expected total's " + std::to_string(total.O.rows) + " x " + std::to_string(total.O.cols) +
         " and one L per row");
  for (Index i = 0; i < total.O.rows; ++i) {
    const double La = total.L[at(i)], Lb = part.L[at(i)];
    if (Lb == kNegInf) continue;  // part's keys are all masked for this row: nothing to add
    // Shift by the larger L so neither exponential overflows; with La = -inf, wa = 0 and the
    // row becomes part's.
    const double m = std::max(La, Lb);
    const double L = m + std::log(std::exp(La - m) + std::exp(Lb - m));
    const double wa = std::exp(La - L), wb = std::exp(Lb - L);
    for (Index c = 0; c < total.O.cols; ++c) total.O(i, c) = wa * total.O(i, c) + wb * part.O(i, c);
    total.L[at(i)] = L;
  }
}

BackwardPartial backwardStep(const Problem& p, const QueryShard& q, const KeyShard& k) {
  validateStep(p, q, k, kQ | kDO | kL | kD | kKV);
  const Tiles t = blockTiles(p, q, k, false);
  BackwardPartial r;
  r.dQ = mulAB(t.dS, k.K);    // s dS K
  scaleInPlace(r.dQ, p.scale);
  r.dK = mulAtB(t.dS, q.Q);   // s dS^T Q
  scaleInPlace(r.dK, p.scale);
  r.dV = mulAtB(t.P, q.dO);   // P^T dO
  return r;
}

Pass1Partial bobPass1Step(const Problem& p, const QueryShard& q, const KeyShard& k, X2Source x2) {
  validateStep(p, q, k, kQ | kDO | kUQ | kL | kD | kKV | kUKV);
  const Tiles t = blockTiles(p, q, k, true);
  const Matrix GdSPW = add(hadamard(t.G, t.dS), hadamard(t.P, t.W));  // G o dS + P o W
  Pass1Partial r;
  r.c = rowSum(hadamard(t.G, t.P));
  r.beta = rowSum(GdSPW);
  r.X1 = add(mulAB(t.dS, k.uK), mulAB(GdSPW, k.K));               // dS uK + (G o dS + P o W) K
  if (x2 == X2Source::Accumulate) r.X2 = mulAB(hadamard(t.P, t.dP), k.K);  // (P o dP) K
  r.X3 = mulAB(t.P, k.K);                                          // P K
  r.X4 = add(mulAB(t.P, k.uV), mulAB(hadamard(t.P, t.G), k.V));   // P uV + (P o G) V
  return r;
}

void addPass1(Pass1Partial& total, const Pass1Partial& part) {
  auto same = [](const Matrix& a, const Matrix& b) { return a.rows == b.rows && a.cols == b.cols; };
  if (!same(total.X1, part.X1) || !same(total.X2, part.X2) || !same(total.X3, part.X3) ||
      !same(total.X4, part.X4) || total.c.size() != part.c.size() || total.beta.size() != part.beta.size())
    fail("addPass1: part's accumulators do not have total's shapes (one query shard, one X2Source)");
  addTo(total.X1, part.X1);
  addTo(total.X2, part.X2);
  addTo(total.X3, part.X3);
  addTo(total.X4, part.X4);
  addTo(total.c, part.c);
  addTo(total.beta, part.beta);
}

Pass1Rows finishPass1(const Problem& p, const QueryShard& q, const Pass1Partial& total, const Matrix& O,
                      const Matrix& dQ, X2Source x2) {
  validate(p);
  requireOneWidth(p, "the ring model");
  const Index n = size(q.rows);
  validateVector(q.D, "D", n, "query shard rows");
  validateMatrix(O, "O", n, "query shard rows", p.d, "d");
  validateMatrix(total.X1, "X1", n, "query shard rows", p.d, "d");
  validateMatrix(total.X3, "X3", n, "query shard rows", p.d, "d");
  validateMatrix(total.X4, "X4", n, "query shard rows", p.d, "d");
  validateVector(total.c, "c", n, "query shard rows");
  validateVector(total.beta, "beta", n, "query shard rows");
  Matrix X2 = total.X2;
  if (x2 == X2Source::FromDQ) {
    validateSavedDQ(dQ, p, n, "query shard rows");
    X2 = Matrix(n, p.d);
    for (Index i = 0; i < n; ++i)
      for (Index c = 0; c < p.d; ++c) X2(i, c) = dQ(i, c) / p.scale + q.D[at(i)] * total.X3(i, c);
  } else {
    validateMatrix(X2, "X2", n, "query shard rows", p.d, "d");
  }
  Pass1Rows r{Matrix(n, p.d), Matrix(n, p.d), total.c, total.beta};
  for (Index i = 0; i < n; ++i) {
    // b's - c o D: c is complete only now, and D is the global one, so the product is taken once.
    r.b[at(i)] -= r.c[at(i)] * q.D[at(i)];
    const double c = r.c[at(i)], b = r.b[at(i)];
    for (Index k = 0; k < p.d; ++k) {
      r.gQ(i, k) = p.scale * (total.X1(i, k) - c * X2(i, k) - b * total.X3(i, k));
      r.gdO(i, k) = total.X4(i, k) - c * O(i, k);
    }
  }
  return r;
}

Pass2Partial bobPass2Step(const Problem& p, const QueryShard& q, const KeyShard& k) {
  validateStep(p, q, k, kQ | kDO | kUQ | kL | kD | kCB | kKV | kUKV);
  const Tiles t = blockTiles(p, q, k, true);
  // dPbar = P o (G - c), Sbar = G o dS + P o W - c o (P o dP) - b o P: q's c and b are complete.
  Matrix dPbar(t.P.rows, t.P.cols), Sbar(t.P.rows, t.P.cols);
  for (Index i = 0; i < t.P.rows; ++i) {
    const double c = q.c[at(i)], b = q.b[at(i)];
    for (Index j = 0; j < t.P.cols; ++j) {
      const double P = t.P(i, j);
      dPbar(i, j) = P * (t.G(i, j) - c);
      Sbar(i, j) = t.G(i, j) * t.dS(i, j) + P * t.W(i, j) - c * P * t.dP(i, j) - b * P;
    }
  }
  Pass2Partial r;
  r.gK = add(mulAtB(t.dS, q.uQ), mulAtB(Sbar, q.Q));  // s (dS^T uQ + Sbar^T Q)
  scaleInPlace(r.gK, p.scale);
  r.gV = mulAtB(dPbar, q.dO);                         // dPbar^T dO
  return r;
}

// ---- Ring drivers -----------------------------------------------------------------------------

ForwardResult forward(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K,
                      const Matrix& V) {
  validateDriver(p, ring);
  validateMatrix(Q, "Q", p.N, "N", p.d, "d");
  validateMatrix(K, "K", p.M, "M", p.d, "d");
  validateMatrix(V, "V", p.M, "M", p.d, "d");
  const std::vector<QueryShard> qs = queryShards(ring, p.N, Q, Matrix(), Matrix(), nullptr);
  const std::vector<KeyShard> ks = keyShards(ring, p.M, K, V, Matrix(), Matrix());
  std::vector<ForwardResult> acc(at(ring.ranks));
  for (Index t = 0; t < ring.ranks; ++t)
    for (Index r = 0; r < ring.ranks; ++r) {
      ForwardResult part = forwardStep(p, qs[at(r)], ks[at(keyShardAt(ring, r, t))]);
      if (t == 0) acc[at(r)] = std::move(part);
      else mergeForward(acc[at(r)], part);
    }
  ForwardResult out{Matrix(p.N, p.d), std::vector<double>(at(p.N))};
  for (Index r = 0; r < ring.ranks; ++r) {
    scatterRows(out.O, qs[at(r)].rows, acc[at(r)].O);
    scatterRows(out.L, qs[at(r)].rows, acc[at(r)].L);
  }
  return out;
}

BackwardResult backward(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K,
                        const Matrix& V, const Matrix& dO, const ForwardResult& fwd) {
  validateDriver(p, ring);
  validateMatrix(Q, "Q", p.N, "N", p.d, "d");
  validateMatrix(K, "K", p.M, "M", p.d, "d");
  validateMatrix(V, "V", p.M, "M", p.d, "d");
  validateMatrix(dO, "dO", p.N, "N", p.d, "d");
  validateMatrix(fwd.O, "O", p.N, "N", p.d, "d");
  validateVector(fwd.L, "L", p.N, "N");
  const std::vector<QueryShard> qs = queryShards(ring, p.N, Q, dO, Matrix(), &fwd);
  const std::vector<KeyShard> ks = keyShards(ring, p.M, K, V, Matrix(), Matrix());
  // dQ[q] travels with query shard q (added to by each rank it visits, in step order); dK[r],
  // dV[r] stay on rank r, which owns key shard r.
  std::vector<Matrix> dQ(at(ring.ranks)), dK(at(ring.ranks)), dV(at(ring.ranks));
  for (Index t = 0; t < ring.ranks; ++t)
    for (Index r = 0; r < ring.ranks; ++r) {
      const Index q = queryShardAt(ring, r, t);
      BackwardPartial part = backwardStep(p, qs[at(q)], ks[at(r)]);
      if (t == 0) {  // step 0: rank r holds query shard r, so every accumulator starts here
        dQ[at(q)] = std::move(part.dQ);
        dK[at(r)] = std::move(part.dK);
        dV[at(r)] = std::move(part.dV);
      } else {
        addTo(dQ[at(q)], part.dQ);
        addTo(dK[at(r)], part.dK);
        addTo(dV[at(r)], part.dV);
      }
    }
  BackwardResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, p.d), std::vector<double>(at(p.N))};
  for (Index r = 0; r < ring.ranks; ++r) {
    scatterRows(out.dQ, qs[at(r)].rows, dQ[at(r)]);
    scatterRows(out.D, qs[at(r)].rows, qs[at(r)].D);
    scatterRows(out.dK, ks[at(r)].rows, dK[at(r)]);
    scatterRows(out.dV, ks[at(r)].rows, dV[at(r)]);
  }
  return out;
}

BobResult bob(const Problem& p, const Ring& ring, const Matrix& Q, const Matrix& K, const Matrix& V,
              const Matrix& dO, const Matrix& uQ, const Matrix& uK, const Matrix& uV,
              const ForwardResult& fwd, const BackwardResult& bwd, X2Source x2) {
  validateDriver(p, ring);
  validateMatrix(Q, "Q", p.N, "N", p.d, "d");
  validateMatrix(K, "K", p.M, "M", p.d, "d");
  validateMatrix(V, "V", p.M, "M", p.d, "d");
  validateMatrix(dO, "dO", p.N, "N", p.d, "d");
  validateMatrix(uQ, "uQ", p.N, "N", p.d, "d");
  validateMatrix(uK, "uK", p.M, "M", p.d, "d");
  validateMatrix(uV, "uV", p.M, "M", p.d, "d");
  validateMatrix(fwd.O, "O", p.N, "N", p.d, "d");
  validateVector(fwd.L, "L", p.N, "N");
  validateVector(bwd.D, "D", p.N, "N");
  if (x2 == X2Source::FromDQ) validateSavedDQ(bwd.dQ, p, p.N, "N");
  std::vector<QueryShard> qs = queryShards(ring, p.N, Q, dO, uQ, &fwd);
  const std::vector<KeyShard> ks = keyShards(ring, p.M, K, V, uK, uV);
  // The backward's D is the same rowsum(dO o O); use the one it saved, as the kernels do.
  for (QueryShard& q : qs) q.D = gatherRows(bwd.D, q.rows);

  BobResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, p.d), Matrix(p.N, p.d),
                std::vector<double>(at(p.N)), std::vector<double>(at(p.N))};
  // Pass 1, query-major: rank r sums its query shard's partials over the key shards that pass by,
  // then finishes gQ, gdO, c, b of its rows; nothing of pass 1 leaves the rank.
  std::vector<Pass1Partial> acc(at(ring.ranks));
  for (Index t = 0; t < ring.ranks; ++t)
    for (Index r = 0; r < ring.ranks; ++r) {
      Pass1Partial part = bobPass1Step(p, qs[at(r)], ks[at(keyShardAt(ring, r, t))], x2);
      if (t == 0) acc[at(r)] = std::move(part);
      else addPass1(acc[at(r)], part);
    }
  for (Index r = 0; r < ring.ranks; ++r) {
    QueryShard& q = qs[at(r)];
    const Matrix dQ = x2 == X2Source::FromDQ ? gatherRows(bwd.dQ, q.rows) : Matrix();
    const Pass1Rows rows = finishPass1(p, q, acc[at(r)], gatherRows(fwd.O, q.rows), dQ, x2);
    q.c = rows.c;  // the query shard now carries its c and b into pass 2
    q.b = rows.b;
    scatterRows(out.gQ, q.rows, rows.gQ);
    scatterRows(out.gdO, q.rows, rows.gdO);
    scatterRows(out.c, q.rows, rows.c);
    scatterRows(out.b, q.rows, rows.b);
  }
  // Pass 2, key-major: query shards (with L, D, c, b) pass by rank r, which sums gK, gV of its keys.
  std::vector<Pass2Partial> gKV(at(ring.ranks));
  for (Index t = 0; t < ring.ranks; ++t)
    for (Index r = 0; r < ring.ranks; ++r) {
      Pass2Partial part = bobPass2Step(p, qs[at(queryShardAt(ring, r, t))], ks[at(r)]);
      if (t == 0) {
        gKV[at(r)] = std::move(part);
      } else {
        addTo(gKV[at(r)].gK, part.gK);
        addTo(gKV[at(r)].gV, part.gV);
      }
    }
  for (Index r = 0; r < ring.ranks; ++r) {
    scatterRows(out.gK, ks[at(r)].rows, gKV[at(r)].gK);
    scatterRows(out.gV, ks[at(r)].rows, gKV[at(r)].gV);
  }
  return out;
}

// ---- Work ------------------------------------------------------------------------------------

Index visiblePairs(const Problem& p, const std::vector<Index>& qRows, const std::vector<Index>& kRows) {
  Index pairs = 0;
  for (Index i : qRows)
    for (Index j : kRows) pairs += !p.masked(i, j);
  return pairs;
}

std::vector<std::vector<Index>> stepWork(const Problem& p, const Ring& ring, Sweep sweep) {
  validateDriver(p, ring);
  std::vector<std::vector<Index>> work(at(ring.ranks), std::vector<Index>(at(ring.ranks)));
  for (Index t = 0; t < ring.ranks; ++t)
    for (Index r = 0; r < ring.ranks; ++r) {
      const Index q = sweep == Sweep::QueryMajor ? r : queryShardAt(ring, r, t);
      const Index k = sweep == Sweep::QueryMajor ? keyShardAt(ring, r, t) : r;
      work[at(t)][at(r)] = visiblePairs(p, shardRows(ring, p.N, q), shardRows(ring, p.M, k));
    }
  return work;
}

}  // namespace flashbob::oracle::ring

// Dense float64 reference: every N x M matrix of docs/bob-math.md is materialized, and each line
// below is one line of that document. Also holds the shared helpers of Oracle.h (Matrix,
// Problem, argument checking, causal loop bounds) and the multi-head loop.
#include "kernels/oracle/Oracle.h"
#include "kernels/oracle/DenseOps.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashbob::oracle {

using detail::fail;
using detail::validateValues;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::size_t checkedSize(Index rows, Index cols, const char* what) {
  if (rows < 0 || cols < 0) {
    std::ostringstream os;
    os << what << " has negative size " << rows << " x " << cols;
    fail(os.str());
  }
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
}

// Calls fn(begin, end) over row ranges covering [0, rows), on several threads when the product
// is large: a GPU test's oracle over 2^20 rows takes minutes on one core. Each output element is
// still computed by one thread in the same order, so results do not depend on the split.
template <class Fn>
void forRowRanges(Index rows, Index workPerRow, Fn fn) {
  constexpr double kWorkPerThread = 1 << 22;  // multiply-adds: below this a thread costs more
  const double work = static_cast<double>(rows) * static_cast<double>(workPerRow);
  const Index threads = std::min<Index>(
      {static_cast<Index>(std::max(1u, llvm::parallel::strategy.compute_thread_count())), rows,
       static_cast<Index>(work / kWorkPerThread) + 1});
  if (threads <= 1) {
    fn(Index{0}, rows);
    return;
  }
  llvm::parallelFor(0, static_cast<std::size_t>(threads), [&](std::size_t t) {
    const Index i = static_cast<Index>(t);
    fn(rows * i / threads, rows * (i + 1) / threads);
  });
}

}  // namespace

// ---- Shared helpers -------------------------------------------------------------------------

Matrix::Matrix(Index r, Index c, double fill)
    : rows(r), cols(c), data(checkedSize(r, c, "Matrix"), fill) {}

double defaultScale(Index d) {
  if (d <= 0) fail("d must be positive for defaultScale, got " + std::to_string(d));
  return 1.0 / std::sqrt(static_cast<double>(d));
}

Problem makeProblem(Index N, Index M, Index d, bool causal) {
  Problem p;
  p.N = N;
  p.M = M;
  p.d = d;
  p.causal = causal;
  p.scale = d > 0 ? defaultScale(d) : 0.0;  // validate() reports a bad d later
  return p;
}

Problem makeProblem(Index N, Index M, Index d, Index dv, bool causal) {
  Problem p = makeProblem(N, M, d, causal);
  p.dv = dv;
  return p;
}

Index visibleKeyBegin(const Problem& p, Index queryBegin) {
  if (p.windowLeft < 0) return 0;
  // The first row of the block, queryBegin, sees keys >= queryBegin + (M - N) - left.
  return std::clamp<Index>(queryBegin + p.causalOffset() - p.windowLeft, 0, p.M);
}

Index visibleKeyEnd(const Problem& p, Index queryEnd) {
  if (p.rightReach() < 0) return p.M;
  // The last row of the block, queryEnd - 1, sees keys <= queryEnd - 1 + (M - N) + right.
  return std::clamp<Index>(queryEnd + p.causalOffset() + p.rightReach(), 0, p.M);
}

Index visibleQueryBegin(const Problem& p, Index keyBegin) {
  if (p.rightReach() < 0) return 0;
  // Query i sees key keyBegin (or a later one) iff i >= keyBegin - (M - N) - right.
  return std::clamp<Index>(keyBegin - p.causalOffset() - p.rightReach(), 0, p.N);
}

Index visibleQueryEnd(const Problem& p, Index keyEnd) {
  if (p.windowLeft < 0) return p.N;
  // Query i sees key keyEnd - 1 (or an earlier one) iff i <= keyEnd - 1 - (M - N) + left.
  return std::clamp<Index>(keyEnd - p.causalOffset() + p.windowLeft, 0, p.N);
}

void validate(const Problem& p) {
  auto positive = [](Index v, const char* name) {
    if (v <= 0) fail(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(p.N, "N");
  positive(p.M, "M");
  positive(p.d, "d");
  if (p.dv < 0)
    fail("dv must be positive (or 0 for d), got " + std::to_string(p.dv));
  if (!std::isfinite(p.scale)) {
    std::ostringstream os;
    os << "scale must be finite, got " << p.scale;
    fail(os.str());
  }
  if (p.windowLeft < -1 || p.windowRight < -1)
    fail("window sizes must be -1 (unbounded) or >= 0, got (" + std::to_string(p.windowLeft) +
         ", " + std::to_string(p.windowRight) + ")");
}

void validateMatrix(const Matrix& m, const char* name, Index rows, const char* rowsName,
                    Index cols, const char* colsName) {
  std::ostringstream os;
  os << name;
  if (m.rows != rows) {
    os << " has " << m.rows << " rows, expected " << rowsName << " = " << rows;
    fail(os.str());
  }
  if (m.cols != cols) {
    os << " has " << m.cols << " cols, expected " << colsName << " = " << cols;
    fail(os.str());
  }
  // rows and cols already match the (positive) problem sizes, so the product is safe.
  if (m.data.size() != static_cast<std::size_t>(rows * cols)) {
    os << " has " << m.data.size() << " elements, expected rows * cols = " << rows * cols;
    fail(os.str());
  }
}

void validateSavedDQ(const Matrix& dQ, const Problem& p, Index rows, const char* rowsName) {
  validateMatrix(dQ, "dQ", rows, rowsName, p.d, "d");
  if (p.scale == 0.0)
    fail("scale must be nonzero with X2Source::FromDQ (X2 = dQ / s + D o X3)");
}

void validateVector(const std::vector<double>& v, const char* name, Index n, const char* nName) {
  if (v.size() != static_cast<std::size_t>(n)) {
    std::ostringstream os;
    os << name << " has " << v.size() << " elements, expected " << nName << " = " << n;
    fail(os.str());
  }
}

// ---- Dense reference --------------------------------------------------------------------------

namespace {

void validateQKV(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V) {
  validate(p);
  validateMatrix(Q, "Q", p.N, "N", p.d, "d");
  validateMatrix(K, "K", p.M, "M", p.d, "d");
  validateValues(V, "V", p, p.M, "M");
}

}  // namespace

// ---- Dense matrix helpers (DenseOps.h) ----------------------------------------------------------

namespace detail {

void fail(const std::string& msg) { throw std::invalid_argument("oracle: " + msg); }

void validateValues(const Matrix& m, const char* name, const Problem& p, Index rows,
                    const char* rowsName) {
  // Named "dv" only where it differs from d: a problem of one width keeps its messages.
  validateMatrix(m, name, rows, rowsName, p.valueDim(), p.valueDim() == p.d ? "d" : "dv");
}

void requireOneWidth(const Problem& p, const char* model) {
  if (p.valueDim() != p.d)
    fail("V must be as wide as Q and K in " + std::string(model) + " (dv = d), got d = " +
         std::to_string(p.d) + ", dv = " + std::to_string(p.dv));
}

// C = A B^T  (A: n x d, B: m x d)
Matrix mulABt(const Matrix& A, const Matrix& B) {
  Matrix C(A.rows, B.rows);
  forRowRanges(A.rows, B.rows * A.cols, [&](Index begin, Index end) {
    for (Index i = begin; i < end; ++i)
      for (Index j = 0; j < B.rows; ++j) {
        double acc = 0;
        for (Index k = 0; k < A.cols; ++k) acc += A(i, k) * B(j, k);
        C(i, j) = acc;
      }
  });
  return C;
}

// C = A B  (A: n x m, B: m x d)
Matrix mulAB(const Matrix& A, const Matrix& B) {
  Matrix C(A.rows, B.cols);
  forRowRanges(A.rows, A.cols * B.cols, [&](Index begin, Index end) {
    for (Index i = begin; i < end; ++i)
      for (Index k = 0; k < A.cols; ++k) {
        const double a = A(i, k);
        for (Index j = 0; j < B.cols; ++j) C(i, j) += a * B(k, j);
      }
  });
  return C;
}

// C = A^T B  (A: n x m, B: n x d)
Matrix mulAtB(const Matrix& A, const Matrix& B) {
  Matrix C(A.cols, B.cols);
  // Split over C's rows; each keeps the sum over k in ascending order.
  forRowRanges(A.cols, A.rows * B.cols, [&](Index begin, Index end) {
    for (Index k = 0; k < A.rows; ++k)
      for (Index i = begin; i < end; ++i) {
        const double a = A(k, i);
        for (Index j = 0; j < B.cols; ++j) C(i, j) += a * B(k, j);
      }
  });
  return C;
}

Matrix add(const Matrix& A, const Matrix& B, double beta) {
  Matrix C = A;
  for (std::size_t k = 0; k < C.data.size(); ++k) C.data[k] += beta * B.data[k];
  return C;
}

void scaleInPlace(Matrix& A, double s) {
  for (double& x : A.data) x *= s;
}

Matrix hadamard(const Matrix& A, const Matrix& B) {
  Matrix C = A;
  for (std::size_t k = 0; k < C.data.size(); ++k) C.data[k] *= B.data[k];
  return C;
}

std::vector<double> rowSum(const Matrix& A) {
  std::vector<double> r(static_cast<std::size_t>(A.rows), 0.0);
  for (Index i = 0; i < A.rows; ++i)
    for (Index j = 0; j < A.cols; ++j) r[static_cast<std::size_t>(i)] += A(i, j);
  return r;
}

std::vector<Index> allRows(Index n) {
  std::vector<Index> rows(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = i;
  return rows;
}

std::vector<double> maskedLogSumExp(const Problem& p, const Matrix& S, const std::vector<Index>& qRows,
                                    const std::vector<Index>& kRows) {
  std::vector<double> L(static_cast<std::size_t>(S.rows), kNegInf);
  // Each exp counted as a few multiply-adds of work.
  forRowRanges(S.rows, 8 * S.cols, [&](Index begin, Index end) {
    for (Index i = begin; i < end; ++i) {
      const Index qi = qRows[static_cast<std::size_t>(i)];
      double mx = kNegInf;  // max over unmasked keys, for a stable log-sum-exp
      for (Index j = 0; j < S.cols; ++j)
        if (!p.masked(qi, kRows[static_cast<std::size_t>(j)])) mx = std::max(mx, S(i, j));
      if (mx == kNegInf) continue;  // no visible key: L = -inf, P = 0
      double sum = 0;
      for (Index j = 0; j < S.cols; ++j)
        if (!p.masked(qi, kRows[static_cast<std::size_t>(j)])) sum += std::exp(S(i, j) - mx);
      L[static_cast<std::size_t>(i)] = mx + std::log(sum);
    }
  });
  return L;
}

Matrix probabilities(const Problem& p, const Matrix& Q, const std::vector<Index>& qRows, const Matrix& K,
                     const std::vector<Index>& kRows, const std::vector<double>& L) {
  Matrix S = mulABt(Q, K);
  Matrix P(Q.rows, K.rows);
  forRowRanges(Q.rows, 8 * K.rows, [&](Index begin, Index end) {
    for (Index i = begin; i < end; ++i)
      for (Index j = 0; j < K.rows; ++j)
        if (!p.masked(qRows[static_cast<std::size_t>(i)], kRows[static_cast<std::size_t>(j)]))
          P(i, j) = std::exp(p.scale * S(i, j) - L[static_cast<std::size_t>(i)]);
  });
  return P;
}

}  // namespace detail

using namespace detail;

namespace {

// The whole problem's P: every row at its own position.
Matrix probabilities(const Problem& p, const Matrix& Q, const Matrix& K, const std::vector<double>& L) {
  return detail::probabilities(p, Q, allRows(p.N), K, allRows(p.M), L);
}

}  // namespace

namespace dense {

ForwardResult forward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V) {
  validateQKV(p, Q, K, V);
  Matrix S = mulABt(Q, K);
  scaleInPlace(S, p.scale);
  ForwardResult r;
  r.L = maskedLogSumExp(p, S, allRows(p.N), allRows(p.M));
  r.O = mulAB(probabilities(p, Q, K, r.L), V);
  return r;
}

BackwardResult backward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                        const Matrix& dO, const Matrix& O, const std::vector<double>& L) {
  validateQKV(p, Q, K, V);
  validateValues(dO, "dO", p, p.N, "N");
  validateValues(O, "O", p, p.N, "N");
  validateVector(L, "L", p.N, "N");
  const Matrix P = probabilities(p, Q, K, L);
  const Matrix dP = mulABt(dO, V);                // dP = dO V^T
  BackwardResult r;
  r.D = rowSum(hadamard(dO, O));                  // D = rowsum(dO o O) = rowsum(P o dP)
  Matrix dS(p.N, p.M);                            // dS = P o (dP - D)
  for (Index i = 0; i < p.N; ++i)
    for (Index j = 0; j < p.M; ++j)
      dS(i, j) = P(i, j) * (dP(i, j) - r.D[static_cast<std::size_t>(i)]);
  r.dQ = mulAB(dS, K);                            // dQ = s dS K
  scaleInPlace(r.dQ, p.scale);
  r.dK = mulAtB(dS, Q);                           // dK = s dS^T Q
  scaleInPlace(r.dK, p.scale);
  r.dV = mulAtB(P, dO);                           // dV = P^T dO
  return r;
}

BackwardResult backward(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                        const Matrix& dO) {
  validateQKV(p, Q, K, V);
  validateValues(dO, "dO", p, p.N, "N");  // before the forward, for a clear message
  const ForwardResult f = forward(p, Q, K, V);
  return backward(p, Q, K, V, dO, f.O, f.L);
}

BobResult bob(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
              const Matrix& dO, const Matrix& uQ, const Matrix& uK, const Matrix& uV) {
  validateQKV(p, Q, K, V);
  validateValues(dO, "dO", p, p.N, "N");
  validateMatrix(uQ, "uQ", p.N, "N", p.d, "d");
  validateMatrix(uK, "uK", p.M, "M", p.d, "d");
  validateValues(uV, "uV", p, p.M, "M");
  const double s = p.scale;
  const ForwardResult f = forward(p, Q, K, V);
  const Matrix P = probabilities(p, Q, K, f.L);
  const Matrix dP = mulABt(dO, V);
  const std::vector<double> D = rowSum(hadamard(P, dP));
  Matrix dS(p.N, p.M);
  for (Index i = 0; i < p.N; ++i)
    for (Index j = 0; j < p.M; ++j) dS(i, j) = P(i, j) * (dP(i, j) - D[static_cast<std::size_t>(i)]);

  // G = s (uQ K^T + Q uK^T),  W = dO uV^T. Masked entries of G, W are harmless: every use
  // below multiplies them by P or dS, which are 0 there.
  Matrix G = add(mulABt(uQ, K), mulABt(Q, uK));
  scaleInPlace(G, s);
  const Matrix W = mulABt(dO, uV);

  const Matrix GP = hadamard(G, P);
  const Matrix GdS = hadamard(G, dS);
  const Matrix PW = hadamard(P, W);
  const Matrix PdP = hadamard(P, dP);
  BobResult r;
  r.c = rowSum(GP);                                 // c = rowsum(G o P)
  r.b = rowSum(add(GdS, PW));                       // b = rowsum(G o dS) + rowsum(P o W) - c o D
  for (std::size_t i = 0; i < r.b.size(); ++i) r.b[i] -= r.c[i] * D[i];

  Matrix dPbar(p.N, p.M);                           // dPbar = P o (G - c)
  Matrix Sbar(p.N, p.M);                            // Sbar = G o dS + P o W - c o (P o dP) - b o P
  for (Index i = 0; i < p.N; ++i) {
    const double ci = r.c[static_cast<std::size_t>(i)], bi = r.b[static_cast<std::size_t>(i)];
    for (Index j = 0; j < p.M; ++j) {
      dPbar(i, j) = P(i, j) * (G(i, j) - ci);
      Sbar(i, j) = GdS(i, j) + PW(i, j) - ci * PdP(i, j) - bi * P(i, j);
    }
  }
  r.gQ = add(mulAB(dS, uK), mulAB(Sbar, K));        // gQ = s (dS uK + Sbar K)
  scaleInPlace(r.gQ, s);
  r.gK = add(mulAtB(dS, uQ), mulAtB(Sbar, Q));      // gK = s (dS^T uQ + Sbar^T Q)
  scaleInPlace(r.gK, s);
  r.gV = mulAtB(dPbar, dO);                         // gV = dPbar^T dO
  r.gdO = add(mulAB(P, uV), mulAB(dPbar, V));       // gdO = P uV + dPbar V
  return r;
}

Matrix forwardJvp(const Problem& p, const Matrix& Q, const Matrix& K, const Matrix& V,
                  const Matrix& tQ, const Matrix& tK, const Matrix& tV) {
  validateQKV(p, Q, K, V);
  validateMatrix(tQ, "tQ", p.N, "N", p.d, "d");
  validateMatrix(tK, "tK", p.M, "M", p.d, "d");
  validateValues(tV, "tV", p, p.M, "M");
  const Matrix P = probabilities(p, Q, K, forward(p, Q, K, V).L);
  Matrix tS = add(mulABt(tQ, K), mulABt(Q, tK));    // tS = s (tQ K^T + Q tK^T)
  scaleInPlace(tS, p.scale);
  // The softmax's JVP: tP = P o (tS - rowsum(P o tS)) (0 where masked, as P is).
  const std::vector<double> mean = rowSum(hadamard(P, tS));
  Matrix tP(p.N, p.M);
  for (Index i = 0; i < p.N; ++i)
    for (Index j = 0; j < p.M; ++j)
      tP(i, j) = P(i, j) * (tS(i, j) - mean[static_cast<std::size_t>(i)]);
  return add(mulAB(tP, V), mulAB(P, tV));           // tO = tP V + P tV
}

}  // namespace dense

float generatedInput(std::uint64_t seed, unsigned tensor, std::uint64_t index) {
  // SplitMix64's finalizer over (seed, tensor, index).
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + (static_cast<std::uint64_t>(tensor) << 58) + index;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const double u = static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>((2.0 * u - 1.0) * 1.7320508075688772);
}

// ---- Multi-head / batch -------------------------------------------------------------------------

HeadTensor::HeadTensor(Index b, Index h, Index r, Index c, double fill)
    : batch(b), heads(h), rows(r), cols(c),
      data(checkedSize(b, h, "HeadTensor") * checkedSize(r, c, "HeadTensor"), fill) {}

Matrix HeadTensor::head(Index b, Index h) const {
  Matrix m(rows, cols);
  const auto begin = data.begin() + (b * heads + h) * rows * cols;
  std::copy(begin, begin + rows * cols, m.data.begin());
  return m;
}

void HeadTensor::setHead(Index b, Index h, const Matrix& m) {
  if (m.rows != rows || m.cols != cols) fail("HeadTensor::setHead: matrix shape does not match the tensor");
  std::copy(m.data.begin(), m.data.end(), data.begin() + (b * heads + h) * rows * cols);
}

void HeadTensor::addHead(Index b, Index h, const Matrix& m) {
  if (m.rows != rows || m.cols != cols) fail("HeadTensor::addHead: matrix shape does not match the tensor");
  auto out = data.begin() + (b * heads + h) * rows * cols;
  for (std::size_t i = 0; i < m.data.size(); ++i) out[static_cast<std::ptrdiff_t>(i)] += m.data[i];
}

void HeadTensor::setHead(Index b, Index h, const std::vector<double>& v) {
  if (cols != 1 || v.size() != static_cast<std::size_t>(rows))
    fail("HeadTensor::setHead: vector needs cols = 1 and rows elements");
  std::copy(v.begin(), v.end(), data.begin() + (b * heads + h) * rows * cols);
}

namespace {

// Checks one (batch, heads, rows, cols) tensor against the reference batch and head counts
// (taken from Q) and the per-head problem sizes.
void validateHeads(const HeadTensor& t, const char* name, Index batch, Index heads, Index rows,
                   const char* rowsName, Index cols, const char* colsName = "d") {
  std::ostringstream os;
  os << name;
  if (t.batch != batch || t.heads != heads) {
    os << " has batch x heads = " << t.batch << " x " << t.heads << ", expected " << batch
       << " x " << heads << " (from Q)";
    fail(os.str());
  }
  if (t.rows != rows) {
    os << " has " << t.rows << " rows per head, expected " << rowsName << " = " << rows;
    fail(os.str());
  }
  if (t.cols != cols) {
    os << " has " << t.cols << " cols per head, expected " << colsName << " = " << cols;
    fail(os.str());
  }
  if (t.data.size() != checkedSize(batch, heads, name) * checkedSize(rows, cols, name)) {
    os << " has " << t.data.size() << " elements, expected batch * heads * rows * cols";
    fail(os.str());
  }
}

// validateHeads for a tensor of the values' side (V, dO, uV): p.valueDim() columns.
void validateValueHeads(const HeadTensor& t, const char* name, const Problem& p, Index batch,
                        Index heads, Index rows, const char* rowsName) {
  validateHeads(t, name, batch, heads, rows, rowsName, p.valueDim(),
                p.valueDim() == p.d ? "d" : "dv");
}

void validateBatch(const Problem& p, const HeadTensor& Q) {
  validate(p);
  if (Q.batch <= 0) fail("Q batch must be positive, got " + std::to_string(Q.batch));
  if (Q.heads <= 0) fail("Q heads must be positive, got " + std::to_string(Q.heads));
}

// The key/value heads: K's count, which must divide Q's (grouped-query attention).
Index keyValueHeads(const HeadTensor& Q, const HeadTensor& K) {
  if (K.heads <= 0 || Q.heads % K.heads != 0) {
    std::ostringstream os;
    os << "K has " << K.heads << " heads, which does not divide Q's " << Q.heads
       << " (query heads = group x key/value heads)";
    fail(os.str());
  }
  return K.heads;
}

// fn(b, h, kvHead) for every query head h of every batch b, with the key/value head it reads.
template <class Fn>
void forEachHead(const HeadTensor& Q, Index kvHeads, Fn fn) {
  const Index group = Q.heads / kvHeads;
  for (Index b = 0; b < Q.batch; ++b)
    for (Index h = 0; h < Q.heads; ++h) fn(b, h, h / group);
}

}  // namespace

namespace dense {

BatchedForwardResult forwardBatched(const Problem& p, const HeadTensor& Q, const HeadTensor& K,
                                    const HeadTensor& V) {
  validateBatch(p, Q);
  validateHeads(Q, "Q", Q.batch, Q.heads, p.N, "N", p.d);
  const Index kv = keyValueHeads(Q, K);
  validateHeads(K, "K", Q.batch, kv, p.M, "M", p.d);
  validateValueHeads(V, "V", p, Q.batch, kv, p.M, "M");
  BatchedForwardResult r{HeadTensor(Q.batch, Q.heads, p.N, p.valueDim()),
                         HeadTensor(Q.batch, Q.heads, p.N, 1)};
  forEachHead(Q, kv, [&](Index b, Index h, Index g) {
    ForwardResult f = forward(p, Q.head(b, h), K.head(b, g), V.head(b, g));
    r.O.setHead(b, h, f.O);
    r.L.setHead(b, h, f.L);
  });
  return r;
}

BatchedBackwardResult backwardBatched(const Problem& p, const HeadTensor& Q, const HeadTensor& K,
                                      const HeadTensor& V, const HeadTensor& dO) {
  validateBatch(p, Q);
  validateHeads(Q, "Q", Q.batch, Q.heads, p.N, "N", p.d);
  const Index kv = keyValueHeads(Q, K);
  validateHeads(K, "K", Q.batch, kv, p.M, "M", p.d);
  validateValueHeads(V, "V", p, Q.batch, kv, p.M, "M");
  validateValueHeads(dO, "dO", p, Q.batch, Q.heads, p.N, "N");
  BatchedBackwardResult r{HeadTensor(Q.batch, Q.heads, p.N, p.d), HeadTensor(Q.batch, kv, p.M, p.d),
                          HeadTensor(Q.batch, kv, p.M, p.valueDim()),
                          HeadTensor(Q.batch, Q.heads, p.N, 1)};
  forEachHead(Q, kv, [&](Index b, Index h, Index kh) {
    BackwardResult g = backward(p, Q.head(b, h), K.head(b, kh), V.head(b, kh), dO.head(b, h));
    r.dQ.setHead(b, h, g.dQ);
    r.dK.addHead(b, kh, g.dK); // summed over the group's query heads
    r.dV.addHead(b, kh, g.dV);
    r.D.setHead(b, h, g.D);
  });
  return r;
}

BatchedBobResult bobBatched(const Problem& p, const HeadTensor& Q, const HeadTensor& K,
                            const HeadTensor& V, const HeadTensor& dO, const HeadTensor& uQ,
                            const HeadTensor& uK, const HeadTensor& uV) {
  validateBatch(p, Q);
  validateHeads(Q, "Q", Q.batch, Q.heads, p.N, "N", p.d);
  const Index kv = keyValueHeads(Q, K);
  validateHeads(K, "K", Q.batch, kv, p.M, "M", p.d);
  validateValueHeads(V, "V", p, Q.batch, kv, p.M, "M");
  validateValueHeads(dO, "dO", p, Q.batch, Q.heads, p.N, "N");
  validateHeads(uQ, "uQ", Q.batch, Q.heads, p.N, "N", p.d);
  validateHeads(uK, "uK", Q.batch, kv, p.M, "M", p.d);
  validateValueHeads(uV, "uV", p, Q.batch, kv, p.M, "M");
  const Index B = Q.batch, H = Q.heads, dv = p.valueDim();
  BatchedBobResult r{HeadTensor(B, H, p.N, p.d),  HeadTensor(B, kv, p.M, p.d),
                     HeadTensor(B, kv, p.M, dv),  HeadTensor(B, H, p.N, dv),
                     HeadTensor(B, H, p.N, 1),    HeadTensor(B, H, p.N, 1)};
  forEachHead(Q, kv, [&](Index b, Index h, Index kh) {
    BobResult g = bob(p, Q.head(b, h), K.head(b, kh), V.head(b, kh), dO.head(b, h), uQ.head(b, h),
                      uK.head(b, kh), uV.head(b, kh));
    r.gQ.setHead(b, h, g.gQ);
    r.gK.addHead(b, kh, g.gK); // summed over the group's query heads
    r.gV.addHead(b, kh, g.gV);
    r.gdO.setHead(b, h, g.gdO);
    r.c.setHead(b, h, g.c);
    r.b.setHead(b, h, g.b);
  });
  return r;
}

}  // namespace dense

// ---- Variable-length batches ---------------------------------------------------------------------

void validate(const Packing& packing, Index totalQ, Index totalK) {
  auto check = [](const std::vector<Index>& cu, const char* name, Index total, const char* rows) {
    std::ostringstream os;
    os << name;
    if (cu.size() < 2) {
      os << " needs batch + 1 >= 2 offsets, got " << cu.size();
      fail(os.str());
    }
    if (cu.front() != 0) {
      os << "[0] must be 0, got " << cu.front();
      fail(os.str());
    }
    for (std::size_t s = 1; s < cu.size(); ++s)
      if (cu[s] < cu[s - 1]) {
        os << " must not decrease: [" << s - 1 << "] = " << cu[s - 1] << ", [" << s << "] = " << cu[s];
        fail(os.str());
      }
    if (cu.back() != total) {
      os << " ends at " << cu.back() << ", but the " << rows << " tensors hold " << total << " rows";
      fail(os.str());
    }
  };
  check(packing.cuQ, "cu_seqlens_q", totalQ, "query-side");
  check(packing.cuK, "cu_seqlens_k", totalK, "key-side");
  if (packing.cuQ.size() != packing.cuK.size())
    fail("cu_seqlens_q and cu_seqlens_k differ in length (" + std::to_string(packing.cuQ.size()) +
         " and " + std::to_string(packing.cuK.size()) + "): one offset per sequence boundary each");
}

namespace {

// Rows [begin, begin + count) of every head of a packed (1, heads, total, cols) tensor.
HeadTensor packedRows(const HeadTensor& t, Index begin, Index count) {
  HeadTensor out(1, t.heads, count, t.cols);
  for (Index h = 0; h < t.heads; ++h) {
    const auto from = t.data.begin() + (h * t.rows + begin) * t.cols;
    std::copy(from, from + count * t.cols, out.data.begin() + h * count * t.cols);
  }
  return out;
}

// The inverse: `part`'s rows written to rows [begin, ...) of every head of `t`.
void setPackedRows(HeadTensor& t, Index begin, const HeadTensor& part) {
  for (Index h = 0; h < t.heads; ++h)
    std::copy(part.data.begin() + h * part.rows * part.cols,
              part.data.begin() + (h + 1) * part.rows * part.cols,
              t.data.begin() + (h * t.rows + begin) * t.cols);
}

// One packed input besides Q and K, and whether it is of the values' side (dv wide) or the
// scores' (d wide).
struct PackedInput {
  const HeadTensor* tensor;
  const char* name;
  bool values;
};

// Q and K give the two sides' totals and head counts; `querySide` and `keySide` are the other
// packed inputs of each side, which must match them (slicing trusts these shapes).
void validatePacked(const Problem& head, const Packing& packing, const HeadTensor& Q,
                    const HeadTensor& K, std::initializer_list<PackedInput> querySide,
                    std::initializer_list<PackedInput> keySide) {
  Problem p = head;
  p.N = p.M = 1; // the sizes come per sequence
  validate(p);
  if (Q.batch != 1 || K.batch != 1)
    fail("packed tensors are (1, heads, total, d): Q and K have batch " + std::to_string(Q.batch) +
         " and " + std::to_string(K.batch));
  validate(packing, Q.rows, K.rows);
  validateHeads(Q, "Q", 1, Q.heads, Q.rows, "cu_seqlens_q's total", p.d);
  validateHeads(K, "K", 1, K.heads, K.rows, "cu_seqlens_k's total", p.d);
  for (auto [t, name, values] : querySide) {
    if (values) validateValueHeads(*t, name, p, 1, Q.heads, Q.rows, "cu_seqlens_q's total");
    else validateHeads(*t, name, 1, Q.heads, Q.rows, "cu_seqlens_q's total", p.d);
  }
  for (auto [t, name, values] : keySide) {
    if (values) validateValueHeads(*t, name, p, 1, K.heads, K.rows, "cu_seqlens_k's total");
    else validateHeads(*t, name, 1, K.heads, K.rows, "cu_seqlens_k's total", p.d);
  }
}

// fn(s, sequence problem, query rows begin, key rows begin) for every sequence with query rows
// and keys; the results of the others stay as initialized (zero, L = -inf).
template <class Fn>
void forEachSequence(const Problem& head, const Packing& packing, Fn fn) {
  for (Index s = 0; s < packing.sequences(); ++s) {
    Problem p = head;
    p.N = packing.cuQ[s + 1] - packing.cuQ[s];
    p.M = packing.cuK[s + 1] - packing.cuK[s];
    if (p.N > 0 && p.M > 0) fn(p, packing.cuQ[s], packing.cuK[s]);
  }
}

}  // namespace

namespace dense {

BatchedForwardResult forwardVarlen(const Problem& head, const Packing& packing, const HeadTensor& Q,
                                   const HeadTensor& K, const HeadTensor& V) {
  validatePacked(head, packing, Q, K, {}, {{&V, "V", true}});
  BatchedForwardResult r{HeadTensor(1, Q.heads, Q.rows, V.cols),
                         HeadTensor(1, Q.heads, Q.rows, 1, -std::numeric_limits<double>::infinity())};
  forEachSequence(head, packing, [&](const Problem& p, Index q0, Index k0) {
    BatchedForwardResult f = forwardBatched(p, packedRows(Q, q0, p.N), packedRows(K, k0, p.M),
                                            packedRows(V, k0, p.M));
    setPackedRows(r.O, q0, f.O);
    setPackedRows(r.L, q0, f.L);
  });
  return r;
}

BatchedBackwardResult backwardVarlen(const Problem& head, const Packing& packing,
                                     const HeadTensor& Q, const HeadTensor& K, const HeadTensor& V,
                                     const HeadTensor& dO) {
  validatePacked(head, packing, Q, K, {{&dO, "dO", true}}, {{&V, "V", true}});
  BatchedBackwardResult r{HeadTensor(1, Q.heads, Q.rows, Q.cols), HeadTensor(1, K.heads, K.rows, K.cols),
                          HeadTensor(1, K.heads, K.rows, V.cols), HeadTensor(1, Q.heads, Q.rows, 1)};
  forEachSequence(head, packing, [&](const Problem& p, Index q0, Index k0) {
    BatchedBackwardResult g = backwardBatched(p, packedRows(Q, q0, p.N), packedRows(K, k0, p.M),
                                              packedRows(V, k0, p.M), packedRows(dO, q0, p.N));
    setPackedRows(r.dQ, q0, g.dQ);
    setPackedRows(r.dK, k0, g.dK);
    setPackedRows(r.dV, k0, g.dV);
    setPackedRows(r.D, q0, g.D);
  });
  return r;
}

BatchedBobResult bobVarlen(const Problem& head, const Packing& packing, const HeadTensor& Q,
                           const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO,
                           const HeadTensor& uQ, const HeadTensor& uK, const HeadTensor& uV) {
  validatePacked(head, packing, Q, K, {{&dO, "dO", true}, {&uQ, "uQ", false}},
                 {{&V, "V", true}, {&uK, "uK", false}, {&uV, "uV", true}});
  const Index H = Q.heads, kv = K.heads;
  BatchedBobResult r{HeadTensor(1, H, Q.rows, Q.cols),  HeadTensor(1, kv, K.rows, K.cols),
                     HeadTensor(1, kv, K.rows, V.cols), HeadTensor(1, H, Q.rows, V.cols),
                     HeadTensor(1, H, Q.rows, 1),       HeadTensor(1, H, Q.rows, 1)};
  forEachSequence(head, packing, [&](const Problem& p, Index q0, Index k0) {
    BatchedBobResult g = bobBatched(p, packedRows(Q, q0, p.N), packedRows(K, k0, p.M),
                                    packedRows(V, k0, p.M), packedRows(dO, q0, p.N),
                                    packedRows(uQ, q0, p.N), packedRows(uK, k0, p.M),
                                    packedRows(uV, k0, p.M));
    setPackedRows(r.gQ, q0, g.gQ);
    setPackedRows(r.gK, k0, g.gK);
    setPackedRows(r.gV, k0, g.gV);
    setPackedRows(r.gdO, q0, g.gdO);
    setPackedRows(r.c, q0, g.c);
    setPackedRows(r.b, q0, g.b);
  });
  return r;
}

}  // namespace dense
}  // namespace flashbob::oracle

// The GPU kernels' arithmetic on the CPU: see BobEmulation.h. Each block function below follows
// one kernel of kernels/ line by line (the kernel named in its comment), in the same order of
// operations; `ew` marks a float32 rounding of an elementwise result, `op` a bf16 rounding of a
// product operand, `mma` a tensor-core product.
#include "bench/numerics/BobEmulation.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace flashbob::numerics {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

inline std::size_t at(Index i) { return static_cast<std::size_t>(i); }

inline int64_t biasedExponent(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<int64_t>((bits >> 52) & 0x7ff);
}
inline double powerOfTwo(int64_t biased) {  // 2^(biased - 1023), 1 <= biased <= 2046
  uint64_t bits = static_cast<uint64_t>(biased) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// Runs body(b) for every block b in [0, count): on LLVM's thread pool (as many threads as
// llvm::parallel::strategy says: bob_numerics sets it from --threads) when threads > 1.
template <typename Body>
void parallelBlocks(Index count, int threads, Body body) {
  if (threads <= 1 || count <= 1) {
    for (Index b = 0; b < count; ++b) body(b);
    return;
  }
  llvm::parallelFor(0, static_cast<std::size_t>(count),
                    [&](std::size_t b) { body(static_cast<Index>(b)); });
}

void mmaOperands(const Model& m, double* C, Index ldc, const double* A, Index lda,
                 const double* B, Index ldb, Index rows, Index kd, Index n);

// C (rows x n, ldc) += A (rows x kd, lda) B (kd x n, ldb), accumulated as `m.acc` says, its
// operands as `m.operands` says.
void mma(const Model& m, double* C, Index ldc, const double* A, Index lda, const double* B,
         Index ldb, Index rows, Index kd, Index n) {
  if (m.operands == Operands::Bf16) {
    mmaOperands(m, C, ldc, A, lda, B, ldb, rows, kd, n);
    return;
  }
  // The operands as the tensor cores take them, dense (lda = kd, ldb = n).
  auto rounded = [&](const double* X, Index ld, Index r, Index c, double (*f)(double)) {
    std::vector<double> out(at(r * c));
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < c; ++j) out[at(i * c + j)] = f(X[i * ld + j]);
    return out;
  };
  if (m.operands == Operands::CastBf16 || m.operands == Operands::Tf32) {
    double (*f)(double) = m.operands == Operands::Tf32 ? toTf32 : toBf16;
    const std::vector<double> a = rounded(A, lda, rows, kd, f), b = rounded(B, ldb, kd, n, f);
    mmaOperands(m, C, ldc, a.data(), kd, b.data(), n, rows, kd, n);
    return;
  }
  double (*piece)(double) = m.operands == Operands::Tf32x3 ? toTf32 : toBf16;
  const std::vector<double> aHi = rounded(A, lda, rows, kd, piece),
                            bHi = rounded(B, ldb, kd, n, piece);
  // lo = piece(x - hi), the float32 remainder rounded like hi.
  auto low = [&](const double* X, Index ld, Index r, Index c, const std::vector<double>& hi) {
    std::vector<double> out(hi.size());
    for (Index i = 0; i < r; ++i)
      for (Index j = 0; j < c; ++j)
        out[at(i * c + j)] = piece(toF32(X[i * ld + j] - hi[at(i * c + j)]));
    return out;
  };
  const std::vector<double> aLo = low(A, lda, rows, kd, aHi), bLo = low(B, ldb, kd, n, bHi);
  // The small terms first, as 3xTF32 and split-bf16 GEMMs order them.
  mmaOperands(m, C, ldc, aLo.data(), kd, bHi.data(), n, rows, kd, n);
  mmaOperands(m, C, ldc, aHi.data(), kd, bLo.data(), n, rows, kd, n);
  mmaOperands(m, C, ldc, aHi.data(), kd, bHi.data(), n, rows, kd, n);
}

// mma with the operands as given.
void mmaOperands(const Model& m, double* C, Index ldc, const double* A, Index lda,
                 const double* B, Index ldb, Index rows, Index kd, Index n) {
  if (m.acc == Acc::Exact) {
    for (Index r = 0; r < rows; ++r) {
      double* c = C + r * ldc;
      for (Index k = 0; k < kd; ++k) {
        const double a = A[r * lda + k];
        if (a == 0) continue;
        const double* b = B + k * ldb;
        for (Index j = 0; j < n; ++j) c[j] += a * b[j];
      }
    }
    return;
  }
  std::vector<double> sum(at(n)), mx(at(n)), q(at(n)), inv(at(n));
  const Index group = m.tcGroup;
  for (Index r = 0; r < rows; ++r) {
    double* c = C + r * ldc;
    const double* a = A + r * lda;
    for (Index k0 = 0; k0 < kd; k0 += group) {
      const Index k1 = std::min(k0 + group, kd);
      bool any = false;
      for (Index k = k0; k < k1; ++k) any |= a[k] != 0;
      if (!any) continue;
      if (m.acc == Acc::Float32) {
        for (Index j = 0; j < n; ++j) sum[at(j)] = c[j];
        for (Index k = k0; k < k1; ++k) {
          const double ak = a[k];
          const double* b = B + k * ldb;
          for (Index j = 0; j < n; ++j) sum[at(j)] += ak * b[j];
        }
        for (Index j = 0; j < n; ++j) c[j] = toF32(sum[at(j)]);
        continue;
      }
      // Tensor core: align every addend to the largest, keep tcBits bits, truncate the sum.
      for (Index j = 0; j < n; ++j) mx[at(j)] = std::fabs(c[j]);
      for (Index k = k0; k < k1; ++k) {
        const double ak = a[k];
        const double* b = B + k * ldb;
        for (Index j = 0; j < n; ++j) mx[at(j)] = std::max(mx[at(j)], std::fabs(ak * b[j]));
      }
      for (Index j = 0; j < n; ++j) {
        int64_t e = biasedExponent(mx[at(j)]) - (m.tcBits - 1);
        e = std::clamp<int64_t>(e, 1, 2045);
        q[at(j)] = powerOfTwo(e);
        inv[at(j)] = powerOfTwo(2046 - e);
        sum[at(j)] = std::trunc(c[j] * inv[at(j)]);
      }
      for (Index k = k0; k < k1; ++k) {
        const double ak = a[k];
        const double* b = B + k * ldb;
        for (Index j = 0; j < n; ++j) sum[at(j)] += std::trunc(ak * b[j] * inv[at(j)]);
      }
      for (Index j = 0; j < n; ++j) c[j] = truncF32(sum[at(j)] * q[at(j)]);
    }
  }
}

// out (cols x d) = rows [j0, j0 + cols) of X, transposed to d x cols.
void transposeRows(const Matrix& X, Index j0, Index cols, std::vector<double>& out) {
  const Index d = X.cols;
  out.assign(at(d * cols), 0.0);
  for (Index c = 0; c < cols; ++c)
    for (Index k = 0; k < d; ++k) out[at(k * cols + c)] = X(j0 + c, k);
}

struct Context {
  const Problem& p;
  const Inputs& in;
  const Model& m;
  const Tiles& t;
  // Rounding of an elementwise float32 result, and of a product operand.
  double ew(double x) const { return m.ew32 ? toF32(x) : x; }
  // With Model::operands other than Bf16 the product rounds (or splits) every operand itself.
  double op(bool round, double x) const {
    if (m.operands != Operands::Bf16) return ew(x);
    return round ? toBf16(x) : x;
  }
  double out(double x) const { return m.out16 ? toBf16(x) : ew(x); }
  // The kernels' constants are float32.
  double constant(double x) const { return ew(x); }
  bool visible(Index i, Index j) const { return !p.masked(i, j); }
};

// A product of two staged tiles, A[a0 : a0 + rows] B[b0 : b0 + cols]^T (inner dimension d), into
// a zeroed or running tile: the score-like products S, dP, G, W.
void productT(const Context& x, std::vector<double>& T, bool zero, const Matrix& A, Index a0,
              Index rows, const Matrix& B, Index b0, Index cols, std::vector<double>& scratch) {
  if (zero) T.assign(at(rows * cols), 0.0);
  transposeRows(B, b0, cols, scratch);
  mma(x.m, T.data(), cols, A.row(a0), A.cols, scratch.data(), cols, rows, A.cols, cols);
}

// acc (rows x d) += T (rows x kd) X[x0 : x0 + kd]: the accumulating products.
void accumulate(const Context& x, std::vector<double>& acc, const std::vector<double>& T, Index kd,
                const Matrix& X, Index x0, Index rows) {
  mma(x.m, acc.data(), X.cols, T.data(), kd, X.row(x0), X.cols, rows, kd, X.cols);
}

// An accumulator of the kernels: `reg` the tensor cores' registers; with Model::flushEvery,
// `master` a float32 copy (shared memory on a GPU) that `reg` is added to, rounded to nearest,
// every flushEvery blocks, `reg` starting again from zero.
struct Accum {
  std::vector<double> reg, master;
  unsigned bit = ~0u;  // its bit in Model::flushMask
  explicit Accum(std::size_t n, unsigned bit) : reg(n, 0.0), master(n, 0.0), bit(bit) {}
  void flush(const Context& x) {
    for (std::size_t e = 0; e < reg.size(); ++e) {
      master[e] = x.ew(master[e] + reg[e]);
      reg[e] = 0;
    }
  }
  void maybeFlush(const Context& x, Index block) {
    if (x.m.flushEvery > 0 && (x.m.flushMask & bit) && (block + 1) % x.m.flushEvery == 0)
      flush(x);
  }
  double value(const Context& x, std::size_t e) const {
    return x.m.flushEvery > 0 ? x.ew(master[e] + reg[e]) : reg[e];
  }
};

// ---- kernels/fwd/ForwardKernel.cpp -----------------------------------------------------------
void forwardBlock(const Context& x, Index i0, Outputs& out) {
  const Problem& p = x.p;
  const Index d = p.d, i1 = std::min(i0 + x.t.fwdM, p.N), rows = i1 - i0;
  Accum acc(at(rows * d), 32), pk(at(rows * d), 32);  // pk: P K (Fix::X3FromForward)
  const bool withPK = x.m.fix == Fix::X3FromForward;
  std::vector<Accum*> rescaled{&acc};
  if (withPK)
    rescaled.push_back(&pk);
  std::vector<double> mx(at(rows), -kInf), l(at(rows), 0.0);
  std::vector<double> S, P, scratch;
  const double sl2 = x.constant(p.scale * kLog2e);
  const Index keyEnd = oracle::visibleKeyEnd(p, i1);
  for (Index j0 = 0, blk = 0; j0 < keyEnd; j0 += x.t.fwdN, ++blk) {
    const Index cols = std::min(x.t.fwdN, p.M - j0);
    productT(x, S, true, x.in.Q, i0, rows, x.in.K, j0, cols, scratch);
    P.assign(at(rows * cols), 0.0);
    for (Index r = 0; r < rows; ++r) {
      double tileMax = -kInf;
      for (Index c = 0; c < cols; ++c) {
        double& s = S[at(r * cols + c)];
        s = x.visible(i0 + r, j0 + c) ? x.ew(s * sl2) : -kInf;
        tileMax = std::max(tileMax, s);
      }
      const double newMax = std::max(mx[at(r)], tileMax);
      const double safeMax = newMax == -kInf ? 0.0 : newMax;
      const double rescale = x.ew(std::exp2(x.ew(mx[at(r)] - safeMax)));
      double blockSum = 0;
      for (Index c = 0; c < cols; ++c) {
        const double e = x.ew(std::exp2(x.ew(S[at(r * cols + c)] - safeMax)));
        blockSum = x.ew(blockSum + e);
        P[at(r * cols + c)] = x.op(x.m.fwdP, e);
      }
      l[at(r)] = x.ew(x.ew(l[at(r)] * rescale) + blockSum);
      for (Accum* a : rescaled) {
        for (Index k = 0; k < d; ++k) {
          a->reg[at(r * d + k)] = x.ew(a->reg[at(r * d + k)] * rescale);
          a->master[at(r * d + k)] = x.ew(a->master[at(r * d + k)] * rescale);
        }
      }
      mx[at(r)] = newMax;
    }
    accumulate(x, acc.reg, P, cols, x.in.V, j0, rows);
    acc.maybeFlush(x, blk);
    if (withPK) {
      accumulate(x, pk.reg, P, cols, x.in.K, j0, rows);
      pk.maybeFlush(x, blk);
    }
  }
  const double ln2 = x.constant(kLn2);
  for (Index r = 0; r < rows; ++r) {
    const double sum = l[at(r)] == 0 ? 1.0 : l[at(r)];
    for (Index k = 0; k < d; ++k) {
      const double o = x.ew(acc.value(x, at(r * d + k)) / sum);
      out.O(i0 + r, k) = x.m.storeO16 ? toBf16(o) : o;
      if (withPK)
        out.x3Forward(i0 + r, k) = x.ew(pk.value(x, at(r * d + k)) / sum);
    }
    out.L[at(i0 + r)] = l[at(r)] == 0 ? -kInf : x.ew(x.ew(mx[at(r)] + x.ew(std::log2(l[at(r)]))) * ln2);
  }
}

// Row scalars both backward kinds read: D = rowsum(dO o O) (outputDotRows) and L in log2 units
// (lseToLog2), both float32.
void rowInputs(const Context& x, const Matrix& O, const std::vector<double>& L,
               std::vector<double>& D, std::vector<double>& lse2) {
  const Problem& p = x.p;
  D.assign(at(p.N), 0.0);
  lse2.assign(at(p.N), 0.0);
  const double log2e = x.constant(kLog2e);
  for (Index i = 0; i < p.N; ++i) {
    double s = 0;
    for (Index k = 0; k < p.d; ++k) s = x.ew(s + x.ew(O(i, k) * x.in.dO(i, k)));
    D[at(i)] = s;
    lse2[at(i)] = L[at(i)] == -kInf ? kInf : x.ew(L[at(i)] * log2e);
  }
}

// P (probabilities) of a tile from raw scores, as AttentionTiles.cpp's probabilities():
// query-major (rows queries) or key-major (rows keys, `keyMajor`).
void probabilities(const Context& x, std::vector<double>& S, Index rows, Index cols, Index row0,
                   Index col0, const std::vector<double>& lse2, bool keyMajor) {
  const double sl2 = x.constant(x.p.scale * kLog2e);
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) {
      const Index i = keyMajor ? col0 + c : row0 + r, j = keyMajor ? row0 + r : col0 + c;
      double& s = S[at(r * cols + c)];
      s = x.visible(i, j) ? x.ew(std::exp2(x.ew(x.ew(s * sl2) - lse2[at(i)]))) : 0.0;
    }
}

// ---- kernels/bwd/BackwardKernels.cpp, bwd_q --------------------------------------------------
void backwardQueryBlock(const Context& x, Index i0, const std::vector<double>& D,
                        const std::vector<double>& lse2, Outputs& out) {
  const Problem& p = x.p;
  const Index d = p.d, i1 = std::min(i0 + x.t.bwdQM, p.N), rows = i1 - i0;
  Accum acc(at(rows * d), 64);
  std::vector<double> S, dP, scratch;
  const Index keyEnd = oracle::visibleKeyEnd(p, i1);
  for (Index j0 = 0, blk = 0; j0 < keyEnd; j0 += x.t.bwdQN, ++blk) {
    const Index cols = std::min(x.t.bwdQN, p.M - j0);
    productT(x, S, true, x.in.Q, i0, rows, x.in.K, j0, cols, scratch);
    productT(x, dP, true, x.in.dO, i0, rows, x.in.V, j0, cols, scratch);
    probabilities(x, S, rows, cols, i0, j0, lse2, false);
    for (Index r = 0; r < rows; ++r)
      for (Index c = 0; c < cols; ++c) {
        const std::size_t e = at(r * cols + c);
        S[e] = x.op(x.m.bwdDS, x.ew(S[e] * x.ew(dP[e] - D[at(i0 + r)])));  // dS
      }
    accumulate(x, acc.reg, S, cols, x.in.K, j0, rows);
    acc.maybeFlush(x, blk);
  }
  const double s = x.constant(p.scale);
  for (Index r = 0; r < rows; ++r)
    for (Index k = 0; k < d; ++k) {
      const double dq = x.ew(acc.value(x, at(r * d + k)) * s);
      out.dQ(i0 + r, k) = x.out(dq);
      if (x.m.fix == Fix::X3FromForward)
        out.dQ32(i0 + r, k) = dq;
    }
}

// ---- bwd_kv ------------------------------------------------------------------------------------
void backwardKeyBlock(const Context& x, Index j0, const std::vector<double>& D,
                      const std::vector<double>& lse2, Outputs& out) {
  const Problem& p = x.p;
  const Index d = p.d, j1 = std::min(j0 + x.t.bwdKVN, p.M), rows = j1 - j0;
  Accum dK(at(rows * d), 128), dV(at(rows * d), 128);
  std::vector<double> S, dP, scratch;
  const Index qBegin = oracle::visibleQueryBegin(p, j0);
  Index blk = 0;
  for (Index i0 = qBegin - qBegin % x.t.bwdKVM; i0 < p.N; i0 += x.t.bwdKVM, ++blk) {
    const Index cols = std::min(x.t.bwdKVM, p.N - i0);
    productT(x, S, true, x.in.K, j0, rows, x.in.Q, i0, cols, scratch);   // K Q^T
    productT(x, dP, true, x.in.V, j0, rows, x.in.dO, i0, cols, scratch); // V dO^T
    probabilities(x, S, rows, cols, j0, i0, lse2, true);
    std::vector<double> pOp(S.size());
    for (Index r = 0; r < rows; ++r)
      for (Index c = 0; c < cols; ++c) {
        const std::size_t e = at(r * cols + c);
        pOp[e] = x.op(x.m.bwdP, S[e]);
        dP[e] = x.op(x.m.bwdDS, x.ew(S[e] * x.ew(dP[e] - D[at(i0 + c)])));  // dS^T
      }
    accumulate(x, dV.reg, pOp, cols, x.in.dO, i0, rows);
    accumulate(x, dK.reg, dP, cols, x.in.Q, i0, rows);
    dV.maybeFlush(x, blk);
    dK.maybeFlush(x, blk);
  }
  const double s = x.constant(p.scale);
  for (Index r = 0; r < rows; ++r)
    for (Index k = 0; k < d; ++k) {
      out.dK(j0 + r, k) = x.out(x.ew(dK.value(x, at(r * d + k)) * s));
      out.dV(j0 + r, k) = x.out(dV.value(x, at(r * d + k)));
    }
}

// ---- kernels/bob/BobQueryKernel.cpp (pass 1) ---------------------------------------------------
struct UpdateCounts {
  long long rowSteps = 0, rowUpdates = 0, warpSteps = 0, warpUpdates = 0;
};

void bobQueryBlock(const Context& x, Index i0, const Matrix& O, const std::vector<double>& D,
                   const std::vector<double>& lse2, Outputs& out, UpdateCounts& counts,
                   const Outputs* known) {
  const Problem& p = x.p;
  const Model& m = x.m;
  const Index d = p.d, i1 = std::min(i0 + x.t.bobQM, p.N), rows = i1 - i0;
  Accum x1(at(rows * d), 1), x2(at(rows * d), 2), x3(at(rows * d), 4), x4(at(rows * d), 8);
  Accum y(at(rows * d), 8);  // Model::centerGP: P V
  std::vector<double> c(at(rows), 0.0), b(at(rows), 0.0);
  // Fix::Center*: probability mass seen, estimates in use, mass at their last update.
  std::vector<double> mass(at(rows), 0.0), cHat(at(rows), 0.0), bHat(at(rows), 0.0),
      massAtUpdate(at(rows), 0.0);
  const bool center =
      m.fix == Fix::Center || m.fix == Fix::CenterLazy || m.fix == Fix::CenterKnown;
  if (m.fix == Fix::CenterKnown)
    for (Index r = 0; r < rows; ++r) {
      cHat[at(r)] = known->c[at(i0 + r)];
      bHat[at(r)] = known->b[at(i0 + r)];
    }
  std::vector<double> S, dP, G, W, scratch, dS, gP, t1, pdP, pOp, lo;
  const double scale = x.constant(p.scale);
  const Index keyEnd = oracle::visibleKeyEnd(p, i1);
  for (Index j0 = 0, blk = 0; j0 < keyEnd; j0 += x.t.bobQN, ++blk) {
    const Index cols = std::min(x.t.bobQN, p.M - j0);
    const std::size_t n = at(rows * cols);
    productT(x, S, true, x.in.Q, i0, rows, x.in.K, j0, cols, scratch);    // Q K^T
    productT(x, dP, true, x.in.dO, i0, rows, x.in.V, j0, cols, scratch);  // dO V^T
    productT(x, G, true, x.in.uQ, i0, rows, x.in.K, j0, cols, scratch);   // uQ K^T
    productT(x, W, true, x.in.dO, i0, rows, x.in.uV, j0, cols, scratch);  // W
    productT(x, G, false, x.in.Q, i0, rows, x.in.uK, j0, cols, scratch);  // + Q uK^T
    probabilities(x, S, rows, cols, i0, j0, lse2, false);                 // P (in S)
    dS.resize(n), gP.resize(n), t1.resize(n), pdP.resize(n), pOp.resize(n);
    for (Index r = 0; r < rows; ++r) {
      double cTile = 0, bTile = 0, mTile = 0;
      for (Index col = 0; col < cols; ++col) {
        const std::size_t e = at(r * cols + col);
        const double pe = S[e], g = x.ew(G[e] * scale);
        dS[e] = x.ew(pe * x.ew(dP[e] - D[at(i0 + r)]));
        gP[e] = x.ew(g * pe);
        t1[e] = x.ew(x.ew(g * dS[e]) + x.ew(pe * W[e]));  // G o dS + P o W
        pdP[e] = x.ew(pe * dP[e]);
        cTile = x.ew(cTile + gP[e]);
        bTile = x.ew(bTile + t1[e]);
        mTile = x.ew(mTile + pe);
      }
      c[at(r)] = x.ew(c[at(r)] + cTile);
      b[at(r)] = x.ew(b[at(r)] + bTile);
      mass[at(r)] = x.ew(mass[at(r)] + mTile);
    }
    if (center && m.fix != Fix::CenterKnown) {
      // Estimates of c and b from the keys seen so far (this block included): c^ = c_seen /
      // mass, b^ = b_seen / mass - c^ D. X1 holds sum (T1 - c^ T2 - b^ P) K for the estimates
      // in use, so a change of estimate moves X1 by the change times X2 and X3 (as the online
      // softmax rescales its accumulator when the max changes).
      bool warpUpdated = false;
      for (Index r = 0; r < rows; ++r) {
        if (r % 16 == 0) {
          counts.warpUpdates += warpUpdated;
          ++counts.warpSteps;
          warpUpdated = false;
        }
        ++counts.rowSteps;
        const double ms = mass[at(r)];
        if (ms == 0) continue;
        if (m.fix == Fix::CenterLazy && ms < m.lazyFactor * massAtUpdate[at(r)]) continue;
        ++counts.rowUpdates;
        warpUpdated = true;
        const double cNew = x.ew(c[at(r)] / ms);
        const double bNew = x.ew(x.ew(b[at(r)] / ms) - x.ew(cNew * D[at(i0 + r)]));
        const double dc = x.ew(cHat[at(r)] - cNew), db = x.ew(bHat[at(r)] - bNew);
        // Registers from registers, and (when flushing) the float32 copies from theirs.
        for (Index k = 0; k < d; ++k) {
          const std::size_t e = at(r * d + k);
          x1.reg[e] = x.ew(x.ew(x1.reg[e] + dc * x2.reg[e]) + db * x3.reg[e]);
          if (m.flushEvery > 0)
            x1.master[e] = x.ew(x.ew(x1.master[e] + dc * x2.master[e]) + db * x3.master[e]);
          if (m.centerGP) {  // X4 = P uV + sum ((G - c^) o P) V moves with c^ by the change x P V
            x4.reg[e] = x.ew(x4.reg[e] + dc * y.reg[e]);
            if (m.flushEvery > 0) x4.master[e] = x.ew(x4.master[e] + dc * y.master[e]);
          }
        }
        cHat[at(r)] = cNew;
        bHat[at(r)] = bNew;
        massAtUpdate[at(r)] = ms;
      }
      counts.warpUpdates += warpUpdated;
    }
    if (center) {
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < cols; ++col) {
          const std::size_t e = at(r * cols + col);
          t1[e] = x.ew(x.ew(t1[e] - x.ew(cHat[at(r)] * pdP[e])) - x.ew(bHat[at(r)] * S[e]));
          if (m.centerGP) gP[e] = x.ew(gP[e] - cHat[at(r)] * S[e]);  // (G - c^) o P
        }
    }
    if (m.fix == Fix::SplitT1) {
      lo.resize(n);
      for (std::size_t e = 0; e < n; ++e) {
        const double hi = toBf16(t1[e]);
        lo[e] = toBf16(x.ew(t1[e] - hi));
        t1[e] = hi;
      }
    } else {
      for (std::size_t e = 0; e < n; ++e) t1[e] = x.op(m.qT1, t1[e]);
    }
    for (std::size_t e = 0; e < n; ++e) {
      dS[e] = x.op(m.qDS, dS[e]);
      pdP[e] = x.op(m.qPdP, pdP[e]);
      pOp[e] = x.op(m.qP, S[e]);
      gP[e] = x.op(m.qGP, gP[e]);
    }
    const bool twoAccumulators = m.fix == Fix::X3FromForward;  // no X2, X3 in pass 1
    accumulate(x, x1.reg, dS, cols, x.in.uK, j0, rows);
    if (!twoAccumulators) {
      accumulate(x, x2.reg, pdP, cols, x.in.K, j0, rows);
      accumulate(x, x3.reg, pOp, cols, x.in.K, j0, rows);
    }
    accumulate(x, x4.reg, pOp, cols, x.in.uV, j0, rows);
    accumulate(x, x1.reg, t1, cols, x.in.K, j0, rows);
    if (m.fix == Fix::SplitT1) accumulate(x, x1.reg, lo, cols, x.in.K, j0, rows);
    accumulate(x, x4.reg, gP, cols, x.in.V, j0, rows);
    if (m.centerGP) accumulate(x, y.reg, pOp, cols, x.in.V, j0, rows);
    for (Accum* a : {&x1, &x2, &x3, &x4, &y}) a->maybeFlush(x, blk);
  }
  for (Index r = 0; r < rows; ++r) {
    const Index i = i0 + r;
    const double ci = c[at(r)], bi = x.ew(b[at(r)] - x.ew(ci * D[at(i)]));
    // With centering X1 already holds -c^ X2 - b^ X3: only the rest of c, b is left.
    const double cx = center ? x.ew(ci - cHat[at(r)]) : ci;
    const double bx = center ? x.ew(bi - bHat[at(r)]) : bi;
    // Fix::X3FromForward: gQ = s X1 - c o dQ - (s b') o X3, b' = b + c D the raw row sum.
    const double sb = x.ew(b[at(r)] * scale);
    for (Index k = 0; k < d; ++k) {
      const std::size_t e = at(r * d + k);
      if (m.fix == Fix::X3FromForward) {
        double g = x.ew(x.ew(x1.value(x, e) * scale) - x.ew(ci * out.dQ32(i, k)));
        out.gQ(i, k) = x.out(x.ew(g - x.ew(sb * out.x3Forward(i, k))));
      } else {
        double g = x.ew(x1.value(x, e) - x2.value(x, e) * cx);
        g = x.ew(g - x3.value(x, e) * bx);
        out.gQ(i, k) = x.out(x.ew(g * scale));
      }
      // gdO = X4 - c O, or with centerGP X4 - (c - c^) P V from the accumulated P V.
      out.gdO(i, k) = m.centerGP ? x.out(x.ew(x4.value(x, e) - y.value(x, e) * cx))
                                 : x.out(x.ew(x4.value(x, e) - O(i, k) * ci));
    }
    out.c[at(i)] = ci;
    out.b[at(i)] = bi;
  }
}

// ---- kernels/bob/BobKeyKernel.cpp (pass 2) -----------------------------------------------------
void bobKeyBlock(const Context& x, Index j0, const std::vector<double>& D,
                 const std::vector<double>& lse2, const Outputs& rowsOut, Outputs& out) {
  const Problem& p = x.p;
  const Model& m = x.m;
  const Index d = p.d, j1 = std::min(j0 + x.t.bobKVN, p.M), rows = j1 - j0;
  Accum gK(at(rows * d), 16), gV(at(rows * d), 16);
  std::vector<double> S, dP, G, W, scratch, dS, dPbar, sbar;
  const double scale = x.constant(p.scale);
  const Index qBegin = oracle::visibleQueryBegin(p, j0);
  Index blk = 0;
  for (Index i0 = qBegin - qBegin % x.t.bobKVM; i0 < p.N; i0 += x.t.bobKVM, ++blk) {
    const Index cols = std::min(x.t.bobKVM, p.N - i0);
    const std::size_t n = at(rows * cols);
    productT(x, S, true, x.in.K, j0, rows, x.in.Q, i0, cols, scratch);    // K Q^T
    productT(x, dP, true, x.in.V, j0, rows, x.in.dO, i0, cols, scratch);  // V dO^T
    productT(x, G, true, x.in.K, j0, rows, x.in.uQ, i0, cols, scratch);   // K uQ^T
    productT(x, W, true, x.in.uV, j0, rows, x.in.dO, i0, cols, scratch);  // uV dO^T
    productT(x, G, false, x.in.uK, j0, rows, x.in.Q, i0, cols, scratch);  // + uK Q^T
    probabilities(x, S, rows, cols, j0, i0, lse2, true);
    dS.resize(n), dPbar.resize(n), sbar.resize(n);
    for (Index r = 0; r < rows; ++r)
      for (Index col = 0; col < cols; ++col) {
        const std::size_t e = at(r * cols + col);
        const Index i = i0 + col;
        const double pe = S[e], g = x.ew(G[e] * scale);
        const double ci = rowsOut.c[at(i)], bi = rowsOut.b[at(i)];
        const double ds = x.ew(pe * x.ew(dP[e] - D[at(i)]));
        dPbar[e] = x.op(m.kvDPbar, x.ew(pe * x.ew(g - ci)));
        double sb = x.ew(x.ew(g * ds) + x.ew(pe * W[e]));
        sb = x.ew(sb - x.ew(pe * dP[e]) * ci);
        sb = x.ew(sb - pe * bi);
        sbar[e] = x.op(m.kvSbar, sb);
        dS[e] = x.op(m.kvDS, ds);
      }
    accumulate(x, gK.reg, dS, cols, x.in.uQ, i0, rows);
    accumulate(x, gV.reg, dPbar, cols, x.in.dO, i0, rows);
    accumulate(x, gK.reg, sbar, cols, x.in.Q, i0, rows);
    gK.maybeFlush(x, blk);
    gV.maybeFlush(x, blk);
  }
  for (Index r = 0; r < rows; ++r)
    for (Index k = 0; k < d; ++k) {
      out.gK(j0 + r, k) = x.out(x.ew(gK.value(x, at(r * d + k)) * scale));
      out.gV(j0 + r, k) = x.out(gV.value(x, at(r * d + k)));
    }
}

double dot(const double* a, const double* b, Index n) {
  double s = 0;
  for (Index k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}
void axpy(double alpha, const double* x, double* y, Index n) {
  for (Index k = 0; k < n; ++k) y[k] += alpha * x[k];
}

}  // namespace

double toF32(double x) { return static_cast<double>(static_cast<float>(x)); }

double truncF32(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

namespace {
// x rounded to nearest even with `bits` significant bits (float32's exponent range is not
// modelled: the emulated values stay far inside it).
double roundSignificand(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);  // |x| = m 2^e, 1/2 <= m < 1: keep `bits` bits of m
  const double q = std::ldexp(1.0, e - bits);
  return std::nearbyint(x / q) * q;
}
}  // namespace

double toBf16(double x) { return roundSignificand(x, 8); }
double toTf32(double x) { return roundSignificand(x, 11); }

double mmaStep(const Model& m, double C, const double* a, const double* b, int n) {
  double c = C;
  mma(m, &c, 1, a, n, b, 1, 1, n, 1);
  return c;
}

Tiles Tiles::forHeadDim(Index d) {
  Tiles t;
  if (d > 64) {  // kernels/TileTable.cpp, sm_90a, d = 128
    t.fwdN = 64;
    t.bwdQN = 64;
    t.bobQN = 64;
  }
  return t;
}

Outputs emulate(const Problem& p, const Inputs& in, const Model& m, const Tiles& t,
                bool keyMajor, int threads) {
  oracle::validate(p);
  const Context x{p, in, m, t};
  Outputs out;
  out.O = Matrix(p.N, p.d);
  out.L.assign(at(p.N), 0.0);
  if (m.fix == Fix::X3FromForward) {
    out.x3Forward = Matrix(p.N, p.d);
    out.dQ32 = Matrix(p.N, p.d);
  }
  parallelBlocks((p.N + t.fwdM - 1) / t.fwdM, threads,
                 [&](Index blk) { forwardBlock(x, blk * t.fwdM, out); });
  Matrix O = out.O;
  std::vector<double> L = out.L;
  if (m.exactFwd) {
    Outputs exact = exactRows(p, in, false, nullptr, nullptr, threads);
    O = exact.O;
    L = exact.L;
  }
  std::vector<double> lse2;
  rowInputs(x, O, L, out.D, lse2);
  out.Oread = O;
  out.Lread = L;

  out.dQ = Matrix(p.N, p.d);
  parallelBlocks((p.N + t.bwdQM - 1) / t.bwdQM, threads,
                 [&](Index blk) { backwardQueryBlock(x, blk * t.bwdQM, out.D, lse2, out); });
  out.gQ = Matrix(p.N, p.d);
  out.gdO = Matrix(p.N, p.d);
  out.c.assign(at(p.N), 0.0);
  out.b.assign(at(p.N), 0.0);
  const Index qBlocks = (p.N + t.bobQM - 1) / t.bobQM;
  std::vector<UpdateCounts> counts(at(qBlocks));
  Outputs known;
  if (m.fix == Fix::CenterKnown) {  // the final c, b of the kernel as it is, then centered by them
    Model plain = m;
    plain.fix = Fix::None;
    const Context xp{p, in, plain, t};
    known = out;
    parallelBlocks(qBlocks, threads, [&](Index blk) {
      bobQueryBlock(xp, blk * t.bobQM, O, out.D, lse2, known, counts[at(blk)], nullptr);
    });
  }
  parallelBlocks(qBlocks, threads, [&](Index blk) {
    bobQueryBlock(x, blk * t.bobQM, O, out.D, lse2, out, counts[at(blk)], &known);
  });
  for (const UpdateCounts& c : counts) {
    out.rowSteps += c.rowSteps;
    out.rowUpdates += c.rowUpdates;
    out.warpSteps += c.warpSteps;
    out.warpUpdates += c.warpUpdates;
  }
  if (keyMajor) {
    out.dK = Matrix(p.M, p.d);
    out.dV = Matrix(p.M, p.d);
    parallelBlocks((p.M + t.bwdKVN - 1) / t.bwdKVN, threads,
                   [&](Index blk) { backwardKeyBlock(x, blk * t.bwdKVN, out.D, lse2, out); });
    out.gK = Matrix(p.M, p.d);
    out.gV = Matrix(p.M, p.d);
    parallelBlocks((p.M + t.bobKVN - 1) / t.bobKVN, threads, [&](Index blk) {
      bobKeyBlock(x, blk * t.bobKVN, out.D, lse2, out, out);
    });
  }
  return out;
}

Outputs exactRows(const Problem& p, const Inputs& in, bool keyMajor, const Matrix* Ogiven,
                  const std::vector<double>* Lgiven, int threads) {
  oracle::validate(p);
  const Index N = p.N, M = p.M, d = p.d;
  const double s = p.scale;
  Outputs out;
  out.O = Matrix(N, d);
  out.L.assign(at(N), -kInf);
  out.dQ = Matrix(N, d);
  out.D.assign(at(N), 0.0);
  out.gQ = Matrix(N, d);
  out.gdO = Matrix(N, d);
  out.c.assign(at(N), 0.0);
  out.b.assign(at(N), 0.0);
  out.pmax.assign(at(N), 0.0);
  const int nt = keyMajor ? std::max(1, threads) : threads;
  // Key-major outputs: one partial sum per thread, added at the end.
  std::vector<Matrix> dK, dV, gK, gV;
  if (keyMajor)
    for (int t = 0; t < nt; ++t) {
      dK.emplace_back(M, d);
      dV.emplace_back(M, d);
      gK.emplace_back(M, d);
      gV.emplace_back(M, d);
    }
  // Rows tid, tid + nt, ...: a fixed split, so the key-major partial sums are the same every run.
  auto worker = [&](int tid) {
    std::vector<double> S(at(M)), P(at(M)), dP(at(M)), G(at(M)), W(at(M));
    std::vector<double> tmp(at(d));
    for (Index i = tid; i < N; i += nt) {
      const double* q = in.Q.row(i);
      const double* dOi = in.dO.row(i);
      const double* uQi = in.uQ.row(i);
      double mx = -kInf;
      for (Index j = 0; j < M; ++j) {
        S[at(j)] = p.masked(i, j) ? -kInf : s * dot(q, in.K.row(j), d);
        mx = std::max(mx, S[at(j)]);
      }
      if (mx == -kInf && !Lgiven) continue;  // fully masked row: everything 0
      double Li;
      if (Lgiven) {
        Li = (*Lgiven)[at(i)];
      } else {
        double l = 0;
        for (Index j = 0; j < M; ++j) l += S[at(j)] == -kInf ? 0.0 : std::exp(S[at(j)] - mx);
        Li = mx + std::log(l);
      }
      out.L[at(i)] = Li;
      double pmax = 0;
      for (Index j = 0; j < M; ++j) {
        P[at(j)] = S[at(j)] == -kInf || Li == -kInf ? 0.0 : std::exp(S[at(j)] - Li);
        pmax = std::max(pmax, P[at(j)]);
      }
      out.pmax[at(i)] = pmax;
      double* Oi = out.O.row(i);
      if (Ogiven) {
        for (Index k = 0; k < d; ++k) Oi[k] = (*Ogiven)(i, k);
      } else {
        for (Index j = 0; j < M; ++j)
          if (P[at(j)] != 0) axpy(P[at(j)], in.V.row(j), Oi, d);
      }
      const double D = dot(dOi, Oi, d);
      out.D[at(i)] = D;
      double c = 0, bSum = 0;
      for (Index j = 0; j < M; ++j) {
        dP[at(j)] = dot(dOi, in.V.row(j), d);
        G[at(j)] = s * (dot(uQi, in.K.row(j), d) + dot(q, in.uK.row(j), d));
        W[at(j)] = dot(dOi, in.uV.row(j), d);
        const double dS = P[at(j)] * (dP[at(j)] - D);
        c += G[at(j)] * P[at(j)];
        bSum += G[at(j)] * dS + P[at(j)] * W[at(j)];
      }
      const double b = bSum - c * D;
      out.c[at(i)] = c;
      out.b[at(i)] = b;
      double* dQi = out.dQ.row(i);
      double* gQi = out.gQ.row(i);
      double* gdOi = out.gdO.row(i);
      for (Index j = 0; j < M; ++j) {
        const double Pj = P[at(j)];
        if (Pj == 0) continue;
        const double dS = Pj * (dP[at(j)] - D);
        const double dPbar = Pj * (G[at(j)] - c);
        const double Sbar = G[at(j)] * dS + Pj * W[at(j)] - c * Pj * dP[at(j)] - b * Pj;
        axpy(s * dS, in.K.row(j), dQi, d);
        axpy(s * dS, in.uK.row(j), gQi, d);
        axpy(s * Sbar, in.K.row(j), gQi, d);
        axpy(Pj, in.uV.row(j), gdOi, d);
        axpy(dPbar, in.V.row(j), gdOi, d);
        if (keyMajor) {
          axpy(s * dS, q, dK[at(tid)].row(j), d);
          axpy(Pj, dOi, dV[at(tid)].row(j), d);
          axpy(s * dS, uQi, gK[at(tid)].row(j), d);
          axpy(s * Sbar, q, gK[at(tid)].row(j), d);
          axpy(dPbar, dOi, gV[at(tid)].row(j), d);
        }
      }
    }
  };
  if (nt <= 1) {
    worker(0);
  } else {
    llvm::parallelFor(0, static_cast<std::size_t>(nt),
                      [&](std::size_t t) { worker(static_cast<int>(t)); });
  }
  if (keyMajor) {
    out.dK = dK[0];
    out.dV = dV[0];
    out.gK = gK[0];
    out.gV = gV[0];
    for (int t = 1; t < nt; ++t)
      for (std::size_t e = 0; e < out.dK.data.size(); ++e) {
        out.dK.data[e] += dK[at(t)].data[e];
        out.dV.data[e] += dV[at(t)].data[e];
        out.gK.data[e] += gK[at(t)].data[e];
        out.gV.data[e] += gV[at(t)].data[e];
      }
  }
  return out;
}

bool isFloat32Dist(const std::string& dist) {
  return dist.size() > 2 && dist.compare(dist.size() - 2, 2, "32") == 0;
}

Inputs makeInputs(const Problem& p, const std::string& distName, unsigned long long seed,
                  Index firstRow) {
  const bool f32 = isFloat32Dist(distName);
  const std::string dist = f32 ? distName.substr(0, distName.size() - 2) : distName;
  Inputs in;
  Matrix* queryMajor[] = {&in.Q, nullptr, nullptr, &in.dO, &in.uQ, nullptr, nullptr};
  Matrix* all[] = {&in.Q, &in.K, &in.V, &in.dO, &in.uQ, &in.uK, &in.uV};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  if (dist != "uniform" && dist != "normal")
    throw std::invalid_argument("numerics: --dist must be uniform or normal (bf16), or "
                                "uniform32 or normal32 (float32), got " + distName);
  if (dist == "normal" && firstRow != 0)
    throw std::invalid_argument("numerics: a sub-problem (--rows) needs --dist uniform");
  for (unsigned t = 0; t < 7; ++t) {
    const bool qRows = queryMajor[t] != nullptr;
    Matrix& X = *all[t];
    X = Matrix(qRows ? p.N : p.M, p.d);
    for (Index r = 0; r < X.rows; ++r)
      for (Index k = 0; k < p.d; ++k) {
        const Index row = qRows ? firstRow + r : r;
        const double v = dist == "uniform"
                             ? oracle::generatedInput(seed, t, static_cast<uint64_t>(row * p.d + k))
                             : static_cast<double>(static_cast<float>(normal(rng)));
        X(r, k) = f32 ? toF32(v) : toBf16(toF32(v));
      }
  }
  return in;
}

}  // namespace flashbob::numerics

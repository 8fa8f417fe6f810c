// Tiled float64 model of the FlashBoB schedule (docs/bob-math.md, "The two-pass schedule").
//
// This is the executable spec for the GPU kernels: every loop here is a loop a kernel runs,
// "one query block" is one thread block of a query-major kernel, "one key block" is one
// thread block of a key-major kernel. Memory rules the kernels must obey, obeyed here too:
//   * no N x M matrix is ever allocated; tiles (block_m x block_n) are recomputed on the fly
//     into a fixed scratch (registers / shared memory on a GPU);
//   * per-block accumulators are block x d, or block x dv for those shaped like V (registers on a
//     GPU);
//   * the only extra global state is O(N) per-row scalars: L (forward), D (backward), c, b (BoB).
// Causal and sliding windows: tiles the mask hides entirely are skipped by loop bounds
// (visibleKeyBegin/End, visibleQueryBegin/End), and the remaining tiles are masked per element.
#include "kernels/oracle/DenseOps.h"
#include "kernels/oracle/Oracle.h"
#include "kernels/oracle/TileOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace flashbob::oracle {

using namespace detail::tiles;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// P = exp(s Q K^T - L) from the saved log-sum-exp, 0 on masked entries. exp is never taken on
// a masked entry, so a fully masked row (L = -inf) yields 0 instead of exp(-inf + inf) = NaN.
void recomputeP(const Problem& p, const Tile& t, const Matrix& Q, const Matrix& K,
                const std::vector<double>& L, TileBuf& P) {
  tileABt(t, Q, K, p.scale, P);  // S, overwritten in place by P
  for (Index r = 0; r < t.rows(); ++r)
    for (Index c = 0; c < t.cols(); ++c)
      P(r, c) = p.masked(t.i0 + r, t.j0 + c) ? 0.0 : std::exp(P(r, c) - L[at(t.i0 + r)]);
}

// The five tiles both BoB passes recompute from (Q, K, V, dO, uQ, uK, uV, L, D).
struct BobTiles {
  TileBuf P, dP, dS, G, W;
  TileBuf tmp;  // scratch for a product of two tiles before it is fed to an MMA
  BobTiles(const Problem& p, const Tiling& t) : P(p, t), dP(p, t), dS(p, t), G(p, t), W(p, t), tmp(p, t) {}
};

struct BobInputs {
  const Matrix &Q, &K, &V, &dO, &uQ, &uK, &uV;
};

void computeBobTiles(const Problem& p, const Tile& t, const BobInputs& in,
                     const std::vector<double>& L, const std::vector<double>& D, BobTiles& T) {
  recomputeP(p, t, in.Q, in.K, L, T.P);               // P  = exp(S - L)
  tileABt(t, in.dO, in.V, 1.0, T.dP);                  // dP = dO V^T
  tileABt(t, in.dO, in.uV, 1.0, T.W);                  // W  = dO uV^T
  tileABt(t, in.uQ, in.K, p.scale, T.G);               // G  = s uQ K^T ...
  tileABt(t, in.Q, in.uK, p.scale, T.tmp);             //    + s Q uK^T (one MMA with inner 2d on a GPU)
  for (Index r = 0; r < t.rows(); ++r) {
    const double Di = D[at(t.i0 + r)];
    for (Index c = 0; c < t.cols(); ++c) {
      T.G(r, c) += T.tmp(r, c);
      T.dS(r, c) = T.P(r, c) * (T.dP(r, c) - Di);      // dS = P o (dP - D); 0 where masked
    }
  }
  // Masked entries of dP, G, W are not zeroed: every use multiplies them by P or dS (both 0).
}

void validateInputs(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                    const Matrix& V) {
  validate(p);
  validate(t);
  validateMatrix(Q, "Q", p.N, "N", p.d, "d");
  validateMatrix(K, "K", p.M, "M", p.d, "d");
  detail::validateValues(V, "V", p, p.M, "M");
}

}  // namespace

void validate(const Tiling& t) {
  if (t.block_m <= 0)
    detail::fail("block_m must be positive, got " + std::to_string(t.block_m));
  if (t.block_n <= 0)
    detail::fail("block_n must be positive, got " + std::to_string(t.block_n));
}

namespace tiled {

// ---- Forward: query-major, online softmax ---------------------------------------------------
ForwardResult forward(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                      const Matrix& V, TileStats* stats) {
  validateInputs(p, t, Q, K, V);
  const Index dv = p.valueDim();
  ForwardResult out{Matrix(p.N, dv), std::vector<double>(at(p.N), kNegInf)};
  TileBuf S(p, t);

  for (Index i0 = 0; i0 < p.N; i0 += t.block_m) {  // one thread block per query block
    const Index i1 = std::min(i0 + t.block_m, p.N);
    const Index rows = i1 - i0;
    std::vector<double> m(at(rows), kNegInf);  // running row max of S
    std::vector<double> l(at(rows), 0.0);      // running sum of exp(S - m)
    Matrix acc = zeroAcc(rows, dv);            // running sum of exp(S - m) V

    // Key blocks outside [keyBegin, keyEnd) are fully masked (causal, window): skipped.
    const Index keyBegin = visibleKeyBegin(p, i0), keyEnd = visibleKeyEnd(p, i1);
    for (Index j0 = keyBegin - keyBegin % t.block_n; j0 < keyEnd; j0 += t.block_n) {
      const Tile tile{i0, i1, j0, std::min(j0 + t.block_n, p.M)};
      count(stats);
      tileABt(tile, Q, K, p.scale, S);
      for (Index r = 0; r < rows; ++r) {
        double tileMax = kNegInf;
        for (Index c = 0; c < tile.cols(); ++c)
          if (!p.masked(i0 + r, j0 + c)) tileMax = std::max(tileMax, S(r, c));
        const double mNew = std::max(m[at(r)], tileMax);
        // Row masked in every tile so far: nothing to add, and exp(-inf - -inf) would be NaN.
        if (mNew == kNegInf) continue;
        // Rescale what was accumulated against the old max (alpha = 0 when m was -inf).
        const double alpha = std::exp(m[at(r)] - mNew);
        double rowSum = 0;
        double* a = acc.row(r);
        for (Index k = 0; k < dv; ++k) a[k] *= alpha;
        for (Index c = 0; c < tile.cols(); ++c) {
          if (p.masked(i0 + r, j0 + c)) continue;
          const double e = std::exp(S(r, c) - mNew);
          rowSum += e;
          const double* v = V.row(j0 + c);
          for (Index k = 0; k < dv; ++k) a[k] += e * v[k];
        }
        l[at(r)] = alpha * l[at(r)] + rowSum;
        m[at(r)] = mNew;
      }
    }
    // Epilogue: normalize and save the log-sum-exp, the only per-row state the backward needs.
    for (Index r = 0; r < rows; ++r) {
      if (l[at(r)] == 0.0) continue;  // fully masked row: O = 0, L = -inf by definition
      for (Index k = 0; k < dv; ++k) out.O(i0 + r, k) = acc(r, k) / l[at(r)];
      out.L[at(i0 + r)] = m[at(r)] + std::log(l[at(r)]);
    }
  }
  return out;
}

// ---- The forward and its JVP in one sweep: query-major, online softmax ---------------------
ForwardDualResult forwardDual(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                              const Matrix& V, const Matrix& tQ, const Matrix& tK,
                              const Matrix& tV, TileStats* stats) {
  validateInputs(p, t, Q, K, V);
  validateMatrix(tQ, "tQ", p.N, "N", p.d, "d");
  validateMatrix(tK, "tK", p.M, "M", p.d, "d");
  detail::validateValues(tV, "tV", p, p.M, "M");
  const Index dv = p.valueDim();
  ForwardDualResult out{{Matrix(p.N, dv), std::vector<double>(at(p.N), kNegInf)},
                        Matrix(p.N, dv)};
  TileBuf S(p, t), G(p, t), tmp(p, t);

  for (Index i0 = 0; i0 < p.N; i0 += t.block_m) {  // one thread block per query block
    const Index i1 = std::min(i0 + t.block_m, p.N);
    const Index rows = i1 - i0;
    std::vector<double> m(at(rows), kNegInf);  // running row max of S
    std::vector<double> l(at(rows), 0.0);      // running sum of exp(S - m)
    std::vector<double> cg(at(rows), 0.0);     // running sum of exp(S - m) o G
    Matrix accO = zeroAcc(rows, dv);           // running sum of exp(S - m) V
    Matrix accT = zeroAcc(rows, dv);           // ... of exp(S - m) tV + (exp(S - m) o G) V

    const Index keyBegin = visibleKeyBegin(p, i0), keyEnd = visibleKeyEnd(p, i1);
    for (Index j0 = keyBegin - keyBegin % t.block_n; j0 < keyEnd; j0 += t.block_n) {
      const Tile tile{i0, i1, j0, std::min(j0 + t.block_n, p.M)};
      count(stats);
      tileABt(tile, Q, K, p.scale, S);     // S = s Q K^T
      tileABt(tile, tQ, K, p.scale, G);    // G = s tQ K^T ...
      tileABt(tile, Q, tK, p.scale, tmp);  //     + s Q tK^T
      for (Index r = 0; r < rows; ++r) {
        double tileMax = kNegInf;
        for (Index c = 0; c < tile.cols(); ++c)
          if (!p.masked(i0 + r, j0 + c)) tileMax = std::max(tileMax, S(r, c));
        const double mNew = std::max(m[at(r)], tileMax);
        if (mNew == kNegInf) continue;  // masked in every tile so far: nothing to add
        const double alpha = std::exp(m[at(r)] - mNew);
        double rowSum = 0, rowSumG = 0;
        double *o = accO.row(r), *tt = accT.row(r);
        for (Index k = 0; k < dv; ++k) {
          o[k] *= alpha;
          tt[k] *= alpha;
        }
        for (Index c = 0; c < tile.cols(); ++c) {
          if (p.masked(i0 + r, j0 + c)) continue;
          const double e = std::exp(S(r, c) - mNew);
          const double eg = e * (G(r, c) + tmp(r, c));
          rowSum += e;
          rowSumG += eg;
          const double *v = V.row(j0 + c), *tv = tV.row(j0 + c);
          for (Index k = 0; k < dv; ++k) {
            o[k] += e * v[k];
            tt[k] += e * tv[k] + eg * v[k];
          }
        }
        l[at(r)] = alpha * l[at(r)] + rowSum;
        cg[at(r)] = alpha * cg[at(r)] + rowSumG;
        m[at(r)] = mNew;
      }
    }
    // Epilogue: O = accO / l, c = cg / l, tO = accT / l - c o O, L = m + log l.
    for (Index r = 0; r < rows; ++r) {
      if (l[at(r)] == 0.0) continue;  // fully masked row: O = 0, tO = 0, L = -inf by definition
      const double c = cg[at(r)] / l[at(r)];
      for (Index k = 0; k < dv; ++k) {
        out.fwd.O(i0 + r, k) = accO(r, k) / l[at(r)];
        out.tO(i0 + r, k) = accT(r, k) / l[at(r)] - c * out.fwd.O(i0 + r, k);
      }
      out.fwd.L[at(i0 + r)] = m[at(r)] + std::log(l[at(r)]);
    }
  }
  return out;
}

// ---- First backward: FlashAttention-2 style -------------------------------------------------
BackwardResult backward(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
                        const Matrix& V, const Matrix& dO, const ForwardResult& fwd,
                        TileStats* stats) {
  validateInputs(p, t, Q, K, V);
  detail::validateValues(dO, "dO", p, p.N, "N");
  detail::validateValues(fwd.O, "O", p, p.N, "N");
  validateVector(fwd.L, "L", p.N, "N");

  const Index dv = p.valueDim();
  BackwardResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, dv),
                     std::vector<double>(at(p.N), 0.0)};
  // Preprocess (its own small kernel): D = rowsum(dO o O), O(N dv) work. It replaces
  // rowsum(P o dP), which would need a full sweep over keys before dS could be formed.
  for (Index i = 0; i < p.N; ++i)
    for (Index k = 0; k < dv; ++k) out.D[at(i)] += dO(i, k) * fwd.O(i, k);

  TileBuf P(p, t), dP(p, t), dS(p, t);
  // Key-major: a thread block owns a key block, keeps dK, dV in registers and sweeps the
  // query blocks; dQ contributions go straight to global memory (atomic adds on a GPU).
  for (Index j0 = 0; j0 < p.M; j0 += t.block_n) {
    const Index j1 = std::min(j0 + t.block_n, p.M);
    Matrix dKacc = zeroAcc(j1 - j0, p.d), dVacc = zeroAcc(j1 - j0, dv);
    // Query rows outside [visibleQueryBegin, visibleQueryEnd) see none of these keys: start at
    // the block holding the first, stop after the block holding the last.
    const Index qBegin = visibleQueryBegin(p, j0), qEnd = visibleQueryEnd(p, j1);
    for (Index i0 = qBegin - qBegin % t.block_m; i0 < qEnd; i0 += t.block_m) {
      const Tile tile{i0, std::min(i0 + t.block_m, p.N), j0, j1};
      count(stats);
      recomputeP(p, tile, Q, K, fwd.L, P);             // P  = exp(S - L)
      tileABt(tile, dO, V, 1.0, dP);                   // dP = dO V^T
      for (Index r = 0; r < tile.rows(); ++r)
        for (Index c = 0; c < tile.cols(); ++c)        // dS = P o (dP - D)
          dS(r, c) = P(r, c) * (dP(r, c) - out.D[at(i0 + r)]);
      accTtA(tile, P, dO, 1.0, dVacc);                 // dV += P^T dO
      accTtA(tile, dS, Q, p.scale, dKacc);             // dK += s dS^T Q
      Matrix dQpart = zeroAcc(tile.rows(), p.d);       // dQ += s dS K  (atomic on a GPU)
      accTB(tile, dS, K, p.scale, dQpart);
      for (Index r = 0; r < tile.rows(); ++r)
        for (Index k = 0; k < p.d; ++k) out.dQ(i0 + r, k) += dQpart(r, k);
    }
    for (Index c = 0; c < j1 - j0; ++c) {
      for (Index k = 0; k < p.d; ++k) out.dK(j0 + c, k) = dKacc(c, k);
      for (Index k = 0; k < dv; ++k) out.dV(j0 + c, k) = dVacc(c, k);
    }
  }
  return out;
}

// ---- BoB: two passes ------------------------------------------------------------------------
BobResult bob(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
              const Matrix& V, const Matrix& dO, const Matrix& uQ, const Matrix& uK,
              const Matrix& uV, const ForwardResult& fwd, const BackwardResult& bwd, X2Source x2,
              TileStats* stats) {
  validateInputs(p, t, Q, K, V);
  detail::validateValues(dO, "dO", p, p.N, "N");
  validateMatrix(uQ, "uQ", p.N, "N", p.d, "d");
  validateMatrix(uK, "uK", p.M, "M", p.d, "d");
  detail::validateValues(uV, "uV", p, p.M, "M");
  detail::validateValues(fwd.O, "O", p, p.N, "N");
  validateVector(fwd.L, "L", p.N, "N");
  validateVector(bwd.D, "D", p.N, "N");
  if (x2 == X2Source::FromDQ)
    validateSavedDQ(bwd.dQ, p, p.N, "N");

  const BobInputs in{Q, K, V, dO, uQ, uK, uV};
  const double s = p.scale;
  const std::vector<double>& L = fwd.L;
  const std::vector<double>& D = bwd.D;
  const Index dv = p.valueDim();
  BobResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, dv), Matrix(p.N, dv),
                std::vector<double>(at(p.N), 0.0), std::vector<double>(at(p.N), 0.0)};
  BobTiles T(p, t);

  // Pass 1, query-major. gQ and gdO are affine in the row scalars c, b, which are only known
  // after the whole key sweep; so the sweep accumulates four c,b-free accumulators, block x d
  // but X4 block x dv (a sum of rows of uV and V)
  //   X1 = dS uK + (G o dS + P o W) K     X2 = (P o dP) K
  //   X3 = P K                            X4 = P uV + (P o G) V
  // together with c, b as tile row sums, and the epilogue finishes
  //   gQ = s (X1 - c o X2 - b o X3),  gdO = X4 - c o O.
  for (Index i0 = 0; i0 < p.N; i0 += t.block_m) {
    const Index i1 = std::min(i0 + t.block_m, p.N);
    const Index rows = i1 - i0;
    Matrix X1 = zeroAcc(rows, p.d), X2 = zeroAcc(rows, p.d), X3 = zeroAcc(rows, p.d),
           X4 = zeroAcc(rows, dv);
    std::vector<double> c(at(rows), 0.0), b(at(rows), 0.0);

    const Index keyBegin = visibleKeyBegin(p, i0), keyEnd = visibleKeyEnd(p, i1);
    for (Index j0 = keyBegin - keyBegin % t.block_n; j0 < keyEnd; j0 += t.block_n) {
      const Tile tile{i0, i1, j0, std::min(j0 + t.block_n, p.M)};
      count(stats);
      computeBobTiles(p, tile, in, L, D, T);
      // Row sums: c += rowsum(G o P), b += rowsum(G o dS + P o W). tmp = G o dS + P o W is
      // also the tile X1 multiplies by K, so it is formed once.
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < tile.cols(); ++col) {
          T.tmp(r, col) = T.G(r, col) * T.dS(r, col) + T.P(r, col) * T.W(r, col);
          c[at(r)] += T.G(r, col) * T.P(r, col);
          b[at(r)] += T.tmp(r, col);
        }
      accTB(tile, T.dS, uK, 1.0, X1);    // X1 += dS uK
      accTB(tile, T.tmp, K, 1.0, X1);    // X1 += (G o dS + P o W) K
      accTB(tile, T.P, K, 1.0, X3);      // X3 += P K
      accTB(tile, T.P, uV, 1.0, X4);     // X4 += P uV
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < tile.cols(); ++col) T.tmp(r, col) = T.P(r, col) * T.G(r, col);
      accTB(tile, T.tmp, V, 1.0, X4);    // X4 += (P o G) V
      if (x2 == X2Source::Accumulate) {  // X2 += (P o dP) K: one more MMA per tile
        for (Index r = 0; r < rows; ++r)
          for (Index col = 0; col < tile.cols(); ++col) T.tmp(r, col) = T.P(r, col) * T.dP(r, col);
        accTB(tile, T.tmp, K, 1.0, X2);
      }
    }

    // Epilogue. The D-term of b needs the complete c, so it is subtracted here, once per row.
    for (Index r = 0; r < rows; ++r) {
      const Index i = i0 + r;
      b[at(r)] -= c[at(r)] * D[at(i)];
      // X2 = (P o dP) K = (dS + D o P) K = dQ / s + D o X3: reuses the first backward's dQ
      // instead of a fifth accumulator and its MMA.
      if (x2 == X2Source::FromDQ)
        for (Index k = 0; k < p.d; ++k) X2(r, k) = bwd.dQ(i, k) / s + D[at(i)] * X3(r, k);
      for (Index k = 0; k < p.d; ++k)
        out.gQ(i, k) = s * (X1(r, k) - c[at(r)] * X2(r, k) - b[at(r)] * X3(r, k));
      for (Index k = 0; k < dv; ++k)
        out.gdO(i, k) = X4(r, k) - c[at(r)] * fwd.O(i, k);
      out.c[at(i)] = c[at(r)];  // c, b go to global memory (2 floats per row) for pass 2
      out.b[at(i)] = b[at(r)];
    }
  }

  // Pass 2, key-major, like a FlashAttention backward: reload L, D, c, b per query row,
  // recompute the same tiles, form the two cotangent tiles
  //   dPbar = P o (G - c),   Sbar = G o dS + P o W - c o (P o dP) - b o P
  // and accumulate gK = s (dS^T uQ + Sbar^T Q), gV = dPbar^T dO in two accumulators (block x d,
  // block x dv).
  TileBuf dPbar(p, t), Sbar(p, t);
  for (Index j0 = 0; j0 < p.M; j0 += t.block_n) {
    const Index j1 = std::min(j0 + t.block_n, p.M);
    Matrix gKacc = zeroAcc(j1 - j0, p.d), gVacc = zeroAcc(j1 - j0, dv);
    const Index qBegin = visibleQueryBegin(p, j0), qEnd = visibleQueryEnd(p, j1);
    for (Index i0 = qBegin - qBegin % t.block_m; i0 < qEnd; i0 += t.block_m) {
      const Tile tile{i0, std::min(i0 + t.block_m, p.N), j0, j1};
      count(stats);
      computeBobTiles(p, tile, in, L, D, T);
      for (Index r = 0; r < tile.rows(); ++r) {
        const double ci = out.c[at(i0 + r)], bi = out.b[at(i0 + r)];
        for (Index col = 0; col < tile.cols(); ++col) {
          const double P = T.P(r, col);
          dPbar(r, col) = P * (T.G(r, col) - ci);
          Sbar(r, col) = T.G(r, col) * T.dS(r, col) + P * T.W(r, col) -
                         ci * P * T.dP(r, col) - bi * P;
        }
      }
      accTtA(tile, T.dS, uQ, s, gKacc);   // gK += s dS^T uQ
      accTtA(tile, Sbar, Q, s, gKacc);    // gK += s Sbar^T Q
      accTtA(tile, dPbar, dO, 1.0, gVacc);  // gV += dPbar^T dO
    }
    for (Index col = 0; col < j1 - j0; ++col) {
      for (Index k = 0; k < p.d; ++k) out.gK(j0 + col, k) = gKacc(col, k);
      for (Index k = 0; k < dv; ++k) out.gV(j0 + col, k) = gVacc(col, k);
    }
  }
  return out;
}

BobResult bob(const Problem& p, const Tiling& t, const Matrix& Q, const Matrix& K,
              const Matrix& V, const Matrix& dO, const Matrix& uQ, const Matrix& uK,
              const Matrix& uV, X2Source x2) {
  const ForwardResult fwd = forward(p, t, Q, K, V);
  const BackwardResult bwd = backward(p, t, Q, K, V, dO, fwd);
  return bob(p, t, Q, K, V, dO, uQ, uK, uV, fwd, bwd, x2);
}

}  // namespace tiled
}  // namespace flashbob::oracle

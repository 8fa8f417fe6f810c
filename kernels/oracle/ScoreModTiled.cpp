// Tiled float64 model of the two-pass schedule with a score modification (docs/bob-math.md,
// "Score modifications", "The schedule, per tile"): the loops of TiledModel.cpp with the
// per-tile changes that section lists and nothing else. The same memory rules hold: no N x M
// matrix, block x d accumulators, and the saved row state is L (the sink inside it), D, c, b.
// Its point is the claim that the schedule carries over: gQ, gdO stay affine in c, b with the
// accumulators X1..X4 redefined elementwise, and every parameter gradient is a reduction of
// tiles a pass already forms. Tiles are skipped by the Problem's loop bounds and, with an
// explicit mask, when the mask hides all of the tile (what a block mask gives a kernel).
#include "kernels/oracle/DenseOps.h"
#include "kernels/oracle/ScoreMod.h"
#include "kernels/oracle/ScoreModOps.h"
#include "kernels/oracle/TileOps.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashbob::oracle {

using namespace detail;
using namespace detail::tiles;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Whether a tile has a visible pair: with an explicit mask, a tile the mask hides entirely is
// skipped like a tile outside the causal bounds.
bool anyVisible(const HeadMod& hm, const Tile& t) {
  for (Index i = t.i0; i < t.i1; ++i)
    for (Index j = t.j0; j < t.j1; ++j)
      if (hm.visible(i, j)) return true;
  return false;
}

// The first key block of the query block at i0, and so on: the Problem's bounds, block-aligned.
Index firstKeyBlock(const Problem& p, const Tiling& t, Index i0) {
  const Index begin = visibleKeyBegin(p, i0);
  return begin - begin % t.block_n;
}
Index firstQueryBlock(const Problem& p, const Tiling& t, Index j0) {
  const Index begin = visibleQueryBegin(p, j0);
  return begin - begin % t.block_m;
}

// The per-pair tiles of the modification: T = s Q K^T, S = f(T) (-inf where masked),
// F1 = f'(T), F2 = f''(T) (0 where masked).
struct ScoreTiles {
  TileBuf T, S, F1, F2;
  ScoreTiles(const Problem& p, const Tiling& t) : T(p, t), S(p, t), F1(p, t), F2(p, t) {}
};

void scoreTiles(const HeadMod& hm, const Tile& t, const Matrix& Q, const Matrix& K, ScoreTiles& X) {
  tileABt(t, Q, K, hm.p.scale, X.T);
  for (Index r = 0; r < t.rows(); ++r)
    for (Index c = 0; c < t.cols(); ++c) {
      if (!hm.visible(t.i0 + r, t.j0 + c)) {
        X.S(r, c) = kNegInf;
        X.F1(r, c) = X.F2(r, c) = 0.0;
        continue;
      }
      const ModScore f = hm.score(t.i0 + r, t.j0 + c, X.T(r, c));
      X.S(r, c) = f.S;
      X.F1(r, c) = f.F1;
      X.F2(r, c) = f.F2;
    }
}

// P = exp(S - L), 0 where masked (exp never taken there).
void probabilityTile(const Tile& t, const ScoreTiles& X, const std::vector<double>& L, TileBuf& P) {
  for (Index r = 0; r < t.rows(); ++r)
    for (Index c = 0; c < t.cols(); ++c)
      P(r, c) = X.S(r, c) == kNegInf ? 0.0 : std::exp(X.S(r, c) - L[at(t.i0 + r)]);
}

// ---- Forward: online softmax, the sink as the starting state ---------------------------------
ForwardResult forwardHead(const HeadMod& hm, const Tiling& t, const Matrix& Q, const Matrix& K,
                          const Matrix& V, TileStats* stats) {
  const Problem& p = hm.p;
  ForwardResult out{Matrix(p.N, p.d), std::vector<double>(at(p.N), kNegInf)};
  ScoreTiles X(p, t);
  const double z = hm.sink();
  for (Index i0 = 0; i0 < p.N; i0 += t.block_m) {
    const Index i1 = std::min(i0 + t.block_m, p.N), rows = i1 - i0;
    // The sink is a logit already seen: running max z, running sum exp(z - z) = 1, nothing in
    // the accumulator (no value row). Without one, (-inf, 0) as in the plain forward.
    std::vector<double> m(at(rows), z), l(at(rows), z == kNegInf ? 0.0 : 1.0);
    Matrix acc = zeroAcc(rows, p.d);
    for (Index j0 = firstKeyBlock(p, t, i0); j0 < visibleKeyEnd(p, i1); j0 += t.block_n) {
      const Tile tile{i0, i1, j0, std::min(j0 + t.block_n, p.M)};
      if (!anyVisible(hm, tile)) continue;
      count(stats);
      scoreTiles(hm, tile, Q, K, X);
      for (Index r = 0; r < rows; ++r) {
        double tileMax = kNegInf;
        for (Index c = 0; c < tile.cols(); ++c) tileMax = std::max(tileMax, X.S(r, c));
        const double mNew = std::max(m[at(r)], tileMax);
        if (mNew == kNegInf) continue;  // nothing seen yet: exp(-inf - -inf) would be NaN
        const double alpha = std::exp(m[at(r)] - mNew);
        double* a = acc.row(r);
        for (Index k = 0; k < p.d; ++k) a[k] *= alpha;
        double rowSum = 0;
        for (Index c = 0; c < tile.cols(); ++c) {
          if (X.S(r, c) == kNegInf) continue;
          const double e = std::exp(X.S(r, c) - mNew);
          rowSum += e;
          const double* v = V.row(j0 + c);
          for (Index k = 0; k < p.d; ++k) a[k] += e * v[k];
        }
        l[at(r)] = alpha * l[at(r)] + rowSum;
        m[at(r)] = mNew;
      }
    }
    for (Index r = 0; r < rows; ++r) {
      if (l[at(r)] == 0.0) continue;  // no key and no sink: O = 0, L = -inf
      for (Index k = 0; k < p.d; ++k) out.O(i0 + r, k) = acc(r, k) / l[at(r)];
      out.L[at(i0 + r)] = m[at(r)] + std::log(l[at(r)]);
    }
  }
  return out;
}

// ---- First backward: key-major, dQ accumulated globally; parameter gradients from dS --------
BackwardResult backwardHead(const HeadMod& hm, const Tiling& t, const Matrix& Q, const Matrix& K,
                            const Matrix& V, const Matrix& dO, const Matrix& O,
                            const std::vector<double>& L, ScoreModGrads& grads, TileStats* stats) {
  const Problem& p = hm.p;
  BackwardResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, p.d), std::vector<double>(at(p.N), 0.0)};
  for (Index i = 0; i < p.N; ++i)  // D = rowsum(dO o O): the sink has no value row
    for (Index k = 0; k < p.d; ++k) out.D[at(i)] += dO(i, k) * O(i, k);
  ScoreTiles X(p, t);
  TileBuf P(p, t), dP(p, t), dS(p, t), dT(p, t);
  for (Index j0 = 0; j0 < p.M; j0 += t.block_n) {
    const Index j1 = std::min(j0 + t.block_n, p.M);
    Matrix dKacc = zeroAcc(j1 - j0, p.d), dVacc = zeroAcc(j1 - j0, p.d);
    for (Index i0 = firstQueryBlock(p, t, j0); i0 < visibleQueryEnd(p, j1); i0 += t.block_m) {
      const Tile tile{i0, std::min(i0 + t.block_m, p.N), j0, j1};
      if (!anyVisible(hm, tile)) continue;
      count(stats);
      scoreTiles(hm, tile, Q, K, X);
      probabilityTile(tile, X, L, P);                   // P  = exp(S - L)
      tileABt(tile, dO, V, 1.0, dP);                    // dP = dO V^T
      for (Index r = 0; r < tile.rows(); ++r)
        for (Index c = 0; c < tile.cols(); ++c) {
          dS(r, c) = P(r, c) * (dP(r, c) - out.D[at(i0 + r)]);  // dS = P o (dP - D)
          dT(r, c) = X.F1(r, c) * dS(r, c);             // dT = f'(T) o dS
          if (X.S(r, c) != kNegInf)                     // dtheta += <df/dtheta, dS>
            hm.addPairGrads(i0 + r, j0 + c, X.T(r, c), dS(r, c), 0.0, 0.0, grads);
        }
      accTtA(tile, P, dO, 1.0, dVacc);                  // dV += P^T dO
      accTtA(tile, dT, Q, p.scale, dKacc);              // dK += s dT^T Q
      Matrix dQpart = zeroAcc(tile.rows(), p.d);        // dQ += s dT K (atomic on a GPU)
      accTB(tile, dT, K, p.scale, dQpart);
      for (Index r = 0; r < tile.rows(); ++r)
        for (Index k = 0; k < p.d; ++k) out.dQ(i0 + r, k) += dQpart(r, k);
    }
    for (Index c = 0; c < j1 - j0; ++c)
      for (Index k = 0; k < p.d; ++k) {
        out.dK(j0 + c, k) = dKacc(c, k);
        out.dV(j0 + c, k) = dVacc(c, k);
      }
  }
  hm.addSinkGrad(L, out.D, grads);                      // dz = -sum_i p_sink,i D_i: O(N)
  return out;
}

// ---- BoB ---------------------------------------------------------------------------------------
struct BobInputs {
  const Matrix &Q, &K, &V, &dO, &uQ, &uK, &uV;
};

// The tiles both passes rebuild: the score tiles, P, dP, dS, dT, G, W, the cotangent of dS
// G' = f'(T) o G + U, and U's slope in T, UT (U, UT: 0 without cotangents of the parameters).
struct ModBobTiles {
  ScoreTiles X;
  TileBuf P, dP, dS, dT, G, W, Gf, UT, tmp;
  ModBobTiles(const Problem& p, const Tiling& t)
      : X(p, t), P(p, t), dP(p, t), dS(p, t), dT(p, t), G(p, t), W(p, t), Gf(p, t), UT(p, t), tmp(p, t) {}
};

void bobTiles(const HeadMod& hm, const Tile& t, const BobInputs& in, const std::vector<double>& L,
              const std::vector<double>& D, const ScoreModGrads* u, ModBobTiles& B) {
  scoreTiles(hm, t, in.Q, in.K, B.X);
  probabilityTile(t, B.X, L, B.P);                      // P  = exp(S - L)
  tileABt(t, in.dO, in.V, 1.0, B.dP);                   // dP = dO V^T
  tileABt(t, in.dO, in.uV, 1.0, B.W);                   // W  = dO uV^T
  tileABt(t, in.uQ, in.K, hm.p.scale, B.G);             // G  = s (uQ K^T + Q uK^T)
  tileABt(t, in.Q, in.uK, hm.p.scale, B.tmp);
  for (Index r = 0; r < t.rows(); ++r)
    for (Index c = 0; c < t.cols(); ++c) {
      B.G(r, c) += B.tmp(r, c);
      B.dS(r, c) = B.P(r, c) * (B.dP(r, c) - D[at(t.i0 + r)]);  // dS = P o (dP - D)
      B.dT(r, c) = B.X.F1(r, c) * B.dS(r, c);           // dT = f'(T) o dS
      B.Gf(r, c) = B.X.F1(r, c) * B.G(r, c);            // G' = f'(T) o G (+ U)
      B.UT(r, c) = 0.0;
      if (u && B.X.S(r, c) != kNegInf) {
        B.Gf(r, c) += hm.direction(t.i0 + r, t.j0 + c, B.X.T(r, c), *u);
        B.UT(r, c) = hm.directionSlope(B.X.T(r, c), *u);
      }
    }
}

BobResult bobHead(const HeadMod& hm, const Tiling& t, const BobInputs& in, const Matrix& O,
                  const std::vector<double>& L, const std::vector<double>& D, const Matrix& dQ,
                  X2Source x2, const ScoreModGrads* u, ScoreModGrads& grads, TileStats* stats) {
  const Problem& p = hm.p;
  const double s = p.scale;
  // e = -u_z p_sink per row, from L alone (0 without a sink's cotangent): its terms in c and b
  // are row constants the epilogue applies.
  std::vector<double> e(at(p.N), 0.0);
  if (u && hm.hasSink())
    for (Index i = 0; i < p.N; ++i) e[at(i)] = -u->sinks[at(hm.h)] * hm.sinkProbability(L[at(i)]);
  BobResult out{Matrix(p.N, p.d), Matrix(p.M, p.d), Matrix(p.M, p.d), Matrix(p.N, p.d),
                std::vector<double>(at(p.N), 0.0), std::vector<double>(at(p.N), 0.0)};
  ModBobTiles B(p, t);
  const ScoreTiles& X = B.X;

  // Pass 1, query-major: the plain accumulators with G' for G and the f'-, f''-weighted tiles
  //   X1 = dT uK + (F1 o (G' o dS + P o W) + (F2 o G + UT) o dS) K     X2 = (F1 o P o dP) K
  //   X3 = (F1 o P) K                                          X4 = P uV + (P o G') V
  // and the epilogue gQ = s (X1 - c o X2 - b o X3), gdO = X4 - c o O, as without a modification.
  for (Index i0 = 0; i0 < p.N; i0 += t.block_m) {
    const Index i1 = std::min(i0 + t.block_m, p.N), rows = i1 - i0;
    Matrix X1 = zeroAcc(rows, p.d), X2 = zeroAcc(rows, p.d), X3 = zeroAcc(rows, p.d), X4 = zeroAcc(rows, p.d);
    std::vector<double> c(at(rows), 0.0), b(at(rows), 0.0);
    for (Index j0 = firstKeyBlock(p, t, i0); j0 < visibleKeyEnd(p, i1); j0 += t.block_n) {
      const Tile tile{i0, i1, j0, std::min(j0 + t.block_n, p.M)};
      if (!anyVisible(hm, tile)) continue;
      count(stats);
      bobTiles(hm, tile, in, L, D, u, B);
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < tile.cols(); ++col) {
          const double GfdSPW = B.Gf(r, col) * B.dS(r, col) + B.P(r, col) * B.W(r, col);
          c[at(r)] += B.Gf(r, col) * B.P(r, col);          // c += rowsum(G' o P)
          b[at(r)] += GfdSPW;                              // b += rowsum(G' o dS + P o W)
          B.tmp(r, col) = X.F1(r, col) * GfdSPW + (X.F2(r, col) * B.G(r, col) + B.UT(r, col)) * B.dS(r, col);
        }
      accTB(tile, B.dT, in.uK, 1.0, X1);   // X1 += dT uK
      accTB(tile, B.tmp, in.K, 1.0, X1);   // X1 += (F1 o (G' o dS + P o W) + (F2 o G + UT) o dS) K
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < tile.cols(); ++col) B.tmp(r, col) = X.F1(r, col) * B.P(r, col);
      accTB(tile, B.tmp, in.K, 1.0, X3);   // X3 += (F1 o P) K
      accTB(tile, B.P, in.uV, 1.0, X4);    // X4 += P uV
      for (Index r = 0; r < rows; ++r)
        for (Index col = 0; col < tile.cols(); ++col) B.tmp(r, col) = B.P(r, col) * B.Gf(r, col);
      accTB(tile, B.tmp, in.V, 1.0, X4);   // X4 += (P o G') V
      if (x2 == X2Source::Accumulate) {
        for (Index r = 0; r < rows; ++r)
          for (Index col = 0; col < tile.cols(); ++col)
            B.tmp(r, col) = X.F1(r, col) * B.P(r, col) * B.dP(r, col);
        accTB(tile, B.tmp, in.K, 1.0, X2); // X2 += (F1 o P o dP) K
      }
    }
    for (Index r = 0; r < rows; ++r) {
      const Index i = i0 + r;
      c[at(r)] -= e[at(i)];                             // c = rowsum(G' o P) - e
      b[at(r)] += (e[at(i)] - c[at(r)]) * D[at(i)];     // b = rowsum(G' o dS + P o W) - c o D + e o D
      // F1 o P o dP = dT + D o (F1 o P), so X2 = dQ / s + D o X3 still.
      if (x2 == X2Source::FromDQ)
        for (Index k = 0; k < p.d; ++k) X2(r, k) = dQ(i, k) / s + D[at(i)] * X3(r, k);
      for (Index k = 0; k < p.d; ++k) {
        out.gQ(i, k) = s * (X1(r, k) - c[at(r)] * X2(r, k) - b[at(r)] * X3(r, k));
        out.gdO(i, k) = X4(r, k) - c[at(r)] * O(i, k);  // P V = O, with a sink too
      }
      out.c[at(i)] = c[at(r)];
      out.b[at(i)] = b[at(r)];
    }
  }

  // Pass 2, key-major: dPbar = P o (G' - c), Sbar = G' o dS + P o W - c o (P o dP) - b o P,
  // Tbar = F1 o Sbar + (F2 o G + UT) o dS; gK = s (dT^T uQ + Tbar^T Q), gV = dPbar^T dO, and
  // F's parameter gradients <df/dtheta, Sbar> + <df'/dtheta, G o dS> + u_c <d(df/dc)/dtheta, dS>
  // from the same tiles.
  const double uc = u ? u->softcap : 0.0;
  TileBuf dPbar(p, t), Tbar(p, t);
  for (Index j0 = 0; j0 < p.M; j0 += t.block_n) {
    const Index j1 = std::min(j0 + t.block_n, p.M);
    Matrix gKacc = zeroAcc(j1 - j0, p.d), gVacc = zeroAcc(j1 - j0, p.d);
    for (Index i0 = firstQueryBlock(p, t, j0); i0 < visibleQueryEnd(p, j1); i0 += t.block_m) {
      const Tile tile{i0, std::min(i0 + t.block_m, p.N), j0, j1};
      if (!anyVisible(hm, tile)) continue;
      count(stats);
      bobTiles(hm, tile, in, L, D, u, B);
      for (Index r = 0; r < tile.rows(); ++r) {
        const double ci = out.c[at(i0 + r)], bi = out.b[at(i0 + r)];
        for (Index col = 0; col < tile.cols(); ++col) {
          const double P = B.P(r, col), GdS = B.G(r, col) * B.dS(r, col);
          dPbar(r, col) = P * (B.Gf(r, col) - ci);
          const double Sbar = B.Gf(r, col) * B.dS(r, col) + P * B.W(r, col) - ci * P * B.dP(r, col) - bi * P;
          Tbar(r, col) = X.F1(r, col) * Sbar + X.F2(r, col) * GdS + B.UT(r, col) * B.dS(r, col);
          if (X.S(r, col) != kNegInf)
            hm.addPairGrads(i0 + r, j0 + col, X.T(r, col), Sbar, GdS, uc * B.dS(r, col), grads);
        }
      }
      accTtA(tile, B.dT, in.uQ, s, gKacc);   // gK += s dT^T uQ
      accTtA(tile, Tbar, in.Q, s, gKacc);    // gK += s Tbar^T Q
      accTtA(tile, dPbar, in.dO, 1.0, gVacc);  // gV += dPbar^T dO
    }
    for (Index col = 0; col < j1 - j0; ++col)
      for (Index k = 0; k < p.d; ++k) {
        out.gK(j0 + col, k) = gKacc(col, k);
        out.gV(j0 + col, k) = gVacc(col, k);
      }
  }
  // gz = sum_i (-p_sink,i beta_i + e_i D_i (1 - p_sink,i)), beta = b - e o D: O(N), per row.
  if (hm.hasSink())
    for (Index i = 0; i < p.N; ++i) {
      const double ps = hm.sinkProbability(L[at(i)]), beta = out.b[at(i)] - e[at(i)] * D[at(i)];
      grads.sinks[at(hm.h)] += -ps * beta + e[at(i)] * D[at(i)] * (1.0 - ps);
    }
  return out;
}

}  // namespace

namespace tiled {

BatchedForwardResult forwardMod(const Problem& p, const Tiling& t, const ScoreMod& mod, const HeadTensor& Q,
                                const HeadTensor& K, const HeadTensor& V, TileStats* stats) {
  validate(t);
  const Index kv = validateModInputs(p, mod, Q, K, {}, {{&V, "V"}});
  BatchedForwardResult r{HeadTensor(Q.batch, Q.heads, p.N, p.d), HeadTensor(Q.batch, Q.heads, p.N, 1)};
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const ForwardResult f = forwardHead(hm, t, Q.head(b, h), K.head(b, g), V.head(b, g), stats);
    r.O.setHead(b, h, f.O);
    r.L.setHead(b, h, f.L);
  });
  return r;
}

ModBackwardResult backwardMod(const Problem& p, const Tiling& t, const ScoreMod& mod, const HeadTensor& Q,
                              const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO,
                              const BatchedForwardResult& fwd, TileStats* stats) {
  validate(t);
  const Index kv = validateModInputs(p, mod, Q, K, {{&dO, "dO"}}, {{&V, "V"}});
  ModBackwardResult r{{HeadTensor(Q.batch, Q.heads, p.N, p.d), HeadTensor(Q.batch, kv, p.M, p.d),
                       HeadTensor(Q.batch, kv, p.M, p.d), HeadTensor(Q.batch, Q.heads, p.N, 1)},
                      zeroGrads(mod)};
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const BackwardResult x = backwardHead(hm, t, Q.head(b, h), K.head(b, g), V.head(b, g), dO.head(b, h),
                                          fwd.O.head(b, h), fwd.L.head(b, h).data, r.params, stats);
    r.x.dQ.setHead(b, h, x.dQ);
    r.x.dK.addHead(b, g, x.dK);
    r.x.dV.addHead(b, g, x.dV);
    r.x.D.setHead(b, h, x.D);
  });
  return r;
}

ModBobResult bobMod(const Problem& p, const Tiling& t, const ScoreMod& mod, const HeadTensor& Q,
                    const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO, const HeadTensor& uQ,
                    const HeadTensor& uK, const HeadTensor& uV, const BatchedForwardResult& fwd,
                    const ModBackwardResult& bwd, X2Source x2, const ScoreModGrads* uParams,
                    TileStats* stats) {
  validate(t);
  const Index kv = validateModInputs(p, mod, Q, K, {{&dO, "dO"}, {&uQ, "uQ"}}, {{&V, "V"}, {&uK, "uK"}, {&uV, "uV"}});
  if (uParams) validateCotangents(*uParams, mod);
  ModBobResult r = zeroBobResult(p, mod, Q, kv);
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const Matrix q = Q.head(b, h), k = K.head(b, g), v = V.head(b, g), dO_ = dO.head(b, h),
                 uq = uQ.head(b, h), uk = uK.head(b, g), uv = uV.head(b, g);
    const BobInputs in{q, k, v, dO_, uq, uk, uv};
    const BobResult x = bobHead(hm, t, in, fwd.O.head(b, h), fwd.L.head(b, h).data,
                                bwd.x.D.head(b, h).data, bwd.x.dQ.head(b, h), x2, uParams, r.params, stats);
    r.x.gQ.setHead(b, h, x.gQ);
    r.x.gK.addHead(b, g, x.gK);
    r.x.gV.addHead(b, g, x.gV);
    r.x.gdO.setHead(b, h, x.gdO);
    r.x.c.setHead(b, h, x.c);
    r.x.b.setHead(b, h, x.b);
  });
  return r;
}

}  // namespace tiled
}  // namespace flashbob::oracle

// Dense float64 reference for score modifications (ScoreMod.h): each line below is one line of
// docs/bob-math.md, "Score modifications". One (batch, query head) pair at a time, every N x M
// matrix materialized; the elementwise factors f'(T), f''(T) and the parameters' partial
// derivatives are written out in closed form.
#include "kernels/oracle/ScoreMod.h"
#include "kernels/oracle/DenseOps.h"
#include "kernels/oracle/ScoreModOps.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>

namespace flashbob::oracle {

using namespace detail;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A (batch or 1, heads or 1, N, M) tensor: bias or mask.
void validatePairTensor(const HeadTensor& t, const char* name, const Problem& p, Index batch,
                        Index heads) {
  if (!present(t)) return;
  std::ostringstream os;
  os << name;
  if ((t.batch != 1 && t.batch != batch) || (t.heads != 1 && t.heads != heads)) {
    os << " has batch x heads = " << t.batch << " x " << t.heads << ", expected (1 or " << batch
       << ") x (1 or " << heads << ")";
    fail(os.str());
  }
  if (t.rows != p.N || t.cols != p.M ||
      t.data.size() != static_cast<std::size_t>(t.batch * t.heads * p.N * p.M)) {
    os << " must be N x M = " << p.N << " x " << p.M << " per head, got " << t.rows << " x "
       << t.cols << " with " << t.data.size() << " elements";
    fail(os.str());
  }
}

void validateHeadVector(const std::vector<double>& v, const char* name, Index heads) {
  if (!v.empty()) validateVector(v, name, heads, "query heads");
}

// The forward's per-head state: T, f'(T), f''(T) (0 where masked), P and L.
struct Scores {
  Matrix T, F1, F2, P;
  std::vector<double> L;
};

Scores scores(const HeadMod& hm, const Matrix& Q, const Matrix& K) {
  const Problem& p = hm.p;
  Scores sc;
  sc.T = mulABt(Q, K);
  scaleInPlace(sc.T, p.scale);                            // T = s Q K^T
  Matrix S(p.N, p.M, kNegInf);                            // S = f(T), -inf where masked
  sc.F1 = Matrix(p.N, p.M);
  sc.F2 = Matrix(p.N, p.M);
  for (Index i = 0; i < p.N; ++i)
    for (Index j = 0; j < p.M; ++j)
      if (hm.visible(i, j)) {
        const ModScore f = hm.score(i, j, sc.T(i, j));
        S(i, j) = f.S;
        sc.F1(i, j) = f.F1;
        sc.F2(i, j) = f.F2;
      }
  // L = log(sum_j exp S_ij + exp z), the max taken over the sink too for stability.
  const double z = hm.sink();
  sc.L.assign(static_cast<std::size_t>(p.N), kNegInf);
  sc.P = Matrix(p.N, p.M);
  for (Index i = 0; i < p.N; ++i) {
    const std::size_t r = static_cast<std::size_t>(i);
    double mx = z;
    for (Index j = 0; j < p.M; ++j) mx = std::max(mx, S(i, j));
    if (mx == kNegInf) continue;  // nothing visible and no (finite) sink: P = 0, L = -inf
    double sum = z == kNegInf ? 0.0 : std::exp(z - mx);
    for (Index j = 0; j < p.M; ++j)
      if (S(i, j) != kNegInf) sum += std::exp(S(i, j) - mx);
    sc.L[r] = mx + std::log(sum);
    for (Index j = 0; j < p.M; ++j)
      if (S(i, j) != kNegInf) sc.P(i, j) = std::exp(S(i, j) - sc.L[r]);
  }
  return sc;
}

// Adds the parameters' gradients of a scalar whose cotangent of S is X (and that reads f' and
// df/dtheta nowhere else): <df/dtheta, X>.
void addParamGrads(const HeadMod& hm, const Scores& sc, const Matrix& X, ScoreModGrads& g) {
  for (Index i = 0; i < hm.p.N; ++i)
    for (Index j = 0; j < hm.p.M; ++j)
      if (hm.visible(i, j)) hm.addPairGrads(i, j, sc.T(i, j), X(i, j), 0.0, 0.0, g);
}

void validateSide(const HeadTensor& t, const char* name, Index batch, Index heads, Index rows, Index d) {
  if (t.batch != batch || t.heads != heads || t.rows != rows || t.cols != d ||
      t.data.size() != static_cast<std::size_t>(batch * heads * rows * d)) {
    std::ostringstream os;
    os << name << " is " << t.batch << " x " << t.heads << " x " << t.rows << " x " << t.cols
       << ", expected " << batch << " x " << heads << " x " << rows << " x " << d;
    fail(os.str());
  }
}

}  // namespace

namespace detail {

ModBobResult zeroBobResult(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                           Index kvHeads) {
  const Index B = Q.batch, H = Q.heads;
  return {{HeadTensor(B, H, p.N, p.d), HeadTensor(B, kvHeads, p.M, p.d),
           HeadTensor(B, kvHeads, p.M, p.d), HeadTensor(B, H, p.N, p.d), HeadTensor(B, H, p.N, 1),
           HeadTensor(B, H, p.N, 1)},
          zeroGrads(mod)};
}

ScoreModGrads zeroGrads(const ScoreMod& mod) {
  ScoreModGrads g;
  if (present(mod.bias)) g.bias = HeadTensor(mod.bias.batch, mod.bias.heads, mod.bias.rows, mod.bias.cols);
  g.table.assign(mod.table.size(), 0.0);
  g.alibiSlopes.assign(mod.alibiSlopes.size(), 0.0);
  g.sinks.assign(mod.sinks.size(), 0.0);
  return g;
}

Index validateModInputs(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                        const HeadTensor& K, NamedHeads querySide, NamedHeads keySide) {
  validate(p);
  requireOneWidth(p, "the score-modification models");
  if (Q.batch <= 0 || Q.heads <= 0) fail("Q needs positive batch and heads");
  if (K.heads <= 0 || Q.heads % K.heads != 0)
    fail("K has " + std::to_string(K.heads) + " heads, which does not divide Q's " + std::to_string(Q.heads));
  validateSide(Q, "Q", Q.batch, Q.heads, p.N, p.d);
  validateSide(K, "K", Q.batch, K.heads, p.M, p.d);
  for (auto [t, name] : querySide) validateSide(*t, name, Q.batch, Q.heads, p.N, p.d);
  for (auto [t, name] : keySide) validateSide(*t, name, Q.batch, K.heads, p.M, p.d);
  validate(mod, p, Q.batch, Q.heads);
  return K.heads;
}

}  // namespace detail

Index relativeBucket(const Bucketing& bk, Index r) {
  // t5's _relative_position_bucket with relative_position = r (key minus query).
  Index buckets = bk.buckets, bucket = 0;
  Index n = -r;
  if (bk.bidirectional) {
    buckets /= 2;
    if (n < 0) bucket += buckets;
    n = std::abs(n);
  } else {
    n = std::max<Index>(n, 0);
  }
  const Index maxExact = buckets / 2;
  if (n < maxExact) return bucket + n;
  // float32 in t5; float64 here (the bucket boundaries may differ where the log lands on an
  // integer, which a test of the oracle cannot see: any bucketing is a valid table lookup).
  const Index large = maxExact + static_cast<Index>(std::log(static_cast<double>(n) / maxExact) /
                                                    std::log(static_cast<double>(bk.maxDistance) / maxExact) *
                                                    static_cast<double>(buckets - maxExact));
  return bucket + std::min(large, buckets - 1);
}

void validate(const ScoreMod& mod, const Problem& p, Index batch, Index heads) {
  if (!(mod.softcap >= 0.0) || !std::isfinite(mod.softcap)) {
    std::ostringstream os;
    os << "softcap must be 0 (none) or positive and finite, got " << mod.softcap;
    fail(os.str());
  }
  validateHeadVector(mod.alibiSlopes, "alibiSlopes", heads);
  validateHeadVector(mod.sinks, "sinks", heads);
  validatePairTensor(mod.bias, "bias", p, batch, heads);
  validatePairTensor(mod.mask, "mask", p, batch, heads);
  if (!mod.table.empty()) {
    const Bucketing& bk = mod.bucketing;
    const Index exactMin = bk.bidirectional ? 4 : 2;  // at least one exact bucket per side
    if (bk.buckets < exactMin || bk.maxDistance <= bk.buckets / (bk.bidirectional ? 4 : 2))
      fail("bucketing needs buckets >= " + std::to_string(exactMin) +
           " and maxDistance above the exact buckets");
    validateVector(mod.table, "table", heads * bk.buckets, "query heads x buckets");
  }
}

void validateCotangents(const ScoreModGrads& u, const ScoreMod& mod, const char* name) {
  const std::string n = name;
  if (present(mod.bias) != present(u.bias) ||
      (present(mod.bias) && (u.bias.batch != mod.bias.batch || u.bias.heads != mod.bias.heads ||
                             u.bias.rows != mod.bias.rows || u.bias.cols != mod.bias.cols ||
                             u.bias.data.size() != mod.bias.data.size())))
    fail(n + ".bias must have the bias's shape (or both be empty)");
  validateVector(u.table, (n + ".table").c_str(), static_cast<Index>(mod.table.size()), "table size");
  validateVector(u.alibiSlopes, (n + ".alibiSlopes").c_str(), static_cast<Index>(mod.alibiSlopes.size()),
                 "alibiSlopes size");
  validateVector(u.sinks, (n + ".sinks").c_str(), static_cast<Index>(mod.sinks.size()), "sinks size");
  if (!std::isfinite(u.softcap) || (mod.softcap == 0.0 && u.softcap != 0.0))
    fail(n + ".softcap must be finite, and 0 without a softcap");
}

namespace dense {

BatchedForwardResult forwardMod(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                                const HeadTensor& K, const HeadTensor& V) {
  const Index kv = validateModInputs(p, mod, Q, K, {}, {{&V, "V"}});
  BatchedForwardResult r{HeadTensor(Q.batch, Q.heads, p.N, p.d), HeadTensor(Q.batch, Q.heads, p.N, 1)};
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const Scores sc = scores(hm, Q.head(b, h), K.head(b, g));
    r.O.setHead(b, h, mulAB(sc.P, V.head(b, g)));        // O = P V
    r.L.setHead(b, h, sc.L);
  });
  return r;
}

ModBackwardResult backwardMod(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                              const HeadTensor& K, const HeadTensor& V, const HeadTensor& dO) {
  const Index kv = validateModInputs(p, mod, Q, K, {{&dO, "dO"}}, {{&V, "V"}});
  ModBackwardResult r{{HeadTensor(Q.batch, Q.heads, p.N, p.d), HeadTensor(Q.batch, kv, p.M, p.d),
                       HeadTensor(Q.batch, kv, p.M, p.d), HeadTensor(Q.batch, Q.heads, p.N, 1)},
                      zeroGrads(mod)};
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const Matrix q = Q.head(b, h), k = K.head(b, g), v = V.head(b, g), dO_ = dO.head(b, h);
    const Scores sc = scores(hm, q, k);
    const Matrix O = mulAB(sc.P, v);
    const Matrix dP = mulABt(dO_, v);                     // dP = dO V^T
    const std::vector<double> D = rowSum(hadamard(dO_, O));  // D = rowsum(dO o O) (no sink value row)
    Matrix dS(p.N, p.M);                                  // dS = P o (dP - D)
    for (Index i = 0; i < p.N; ++i)
      for (Index j = 0; j < p.M; ++j) dS(i, j) = sc.P(i, j) * (dP(i, j) - D[static_cast<std::size_t>(i)]);
    const Matrix dT = hadamard(sc.F1, dS);                // dT = f'(T) o dS
    Matrix dQ = mulAB(dT, k), dK = mulAtB(dT, q);         // dQ = s dT K, dK = s dT^T Q
    scaleInPlace(dQ, p.scale);
    scaleInPlace(dK, p.scale);
    r.x.dQ.setHead(b, h, dQ);
    r.x.dK.addHead(b, g, dK);                             // summed over the group's query heads
    r.x.dV.addHead(b, g, mulAtB(sc.P, dO_));              // dV = P^T dO
    r.x.D.setHead(b, h, D);
    addParamGrads(hm, sc, dS, r.params);                  // dtheta = <df/dtheta, dS>
    hm.addSinkGrad(sc.L, D, r.params);                     // dz = -sum_i p_sink,i D_i
  });
  return r;
}

ModBobResult bobMod(const Problem& p, const ScoreMod& mod, const HeadTensor& Q, const HeadTensor& K,
                    const HeadTensor& V, const HeadTensor& dO, const HeadTensor& uQ,
                    const HeadTensor& uK, const HeadTensor& uV, const ScoreModGrads* uParams) {
  const Index kv = validateModInputs(p, mod, Q, K, {{&dO, "dO"}, {&uQ, "uQ"}}, {{&V, "V"}, {&uK, "uK"}, {&uV, "uV"}});
  if (uParams) validateCotangents(*uParams, mod);
  ModBobResult r = zeroBobResult(p, mod, Q, kv);
  const double s = p.scale;
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index bi, Index h, Index g) {
    const Matrix q = Q.head(bi, h), k = K.head(bi, g), v = V.head(bi, g), dO_ = dO.head(bi, h),
                 uq = uQ.head(bi, h), uk = uK.head(bi, g), uv = uV.head(bi, g);
    const Scores sc = scores(hm, q, k);
    const Matrix& P = sc.P;
    const Matrix dP = mulABt(dO_, v);
    const std::vector<double> D = rowSum(hadamard(P, dP));
    Matrix dS(p.N, p.M);
    for (Index i = 0; i < p.N; ++i)
      for (Index j = 0; j < p.M; ++j) dS(i, j) = P(i, j) * (dP(i, j) - D[static_cast<std::size_t>(i)]);
    const Matrix dT = hadamard(sc.F1, dS);                // dT = f'(T) o dS

    Matrix G = add(mulABt(uq, k), mulABt(q, uk));         // G = s (uQ K^T + Q uK^T)
    scaleInPlace(G, s);
    const Matrix W = mulABt(dO_, uv);                     // W = dO uV^T
    // The cotangent of dS: G' = f'(T) o G, plus U = sum_theta u_theta df/dtheta with uParams
    // (<u_theta, dtheta> = <U, dS>); U's slope in T is UT (the cap's df/dc depends on T).
    Matrix Gf = hadamard(sc.F1, G), UT(p.N, p.M);
    // e = -u_z p_sink: <u_z, dz> = sum_i e_i D_i.
    std::vector<double> e(static_cast<std::size_t>(p.N), 0.0);
    if (uParams) {
      for (Index i = 0; i < p.N; ++i)
        for (Index j = 0; j < p.M; ++j)
          if (hm.visible(i, j)) {
            Gf(i, j) += hm.direction(i, j, sc.T(i, j), *uParams);
            UT(i, j) = hm.directionSlope(sc.T(i, j), *uParams);
          }
      if (hm.hasSink())
        for (Index i = 0; i < p.N; ++i)
          e[static_cast<std::size_t>(i)] = -uParams->sinks[static_cast<std::size_t>(h)] * hm.sinkProbability(sc.L[static_cast<std::size_t>(i)]);
    }
    const Matrix GdS = hadamard(G, dS);                   // G o dS, the cotangent of f'(T)
    const Matrix GfdS = hadamard(Gf, dS);
    const Matrix PW = hadamard(P, W);
    std::vector<double> c = rowSum(hadamard(Gf, P));      // c = rowsum(G' o P) - e
    std::vector<double> beta = rowSum(add(GfdS, PW));     // beta = rowsum(G' o dS + P o W) - c o D
    std::vector<double> b(beta.size());                   // b = beta + e o D
    for (std::size_t i = 0; i < b.size(); ++i) {
      c[i] -= e[i];
      beta[i] -= c[i] * D[i];
      b[i] = beta[i] + e[i] * D[i];
    }

    Matrix dPbar(p.N, p.M);                               // dPbar = P o (G' - c)
    Matrix Sbar(p.N, p.M);                                // Sbar = G' o dS + P o W - c o (P o dP) - b o P
    Matrix Tbar(p.N, p.M);                                // Tbar = f'(T) o Sbar + (f''(T) o G + UT) o dS
    for (Index i = 0; i < p.N; ++i) {
      const double ci = c[static_cast<std::size_t>(i)], bi_ = b[static_cast<std::size_t>(i)];
      for (Index j = 0; j < p.M; ++j) {
        dPbar(i, j) = P(i, j) * (Gf(i, j) - ci);
        Sbar(i, j) = GfdS(i, j) + PW(i, j) - ci * P(i, j) * dP(i, j) - bi_ * P(i, j);
        Tbar(i, j) = sc.F1(i, j) * Sbar(i, j) + (sc.F2(i, j) * G(i, j) + UT(i, j)) * dS(i, j);
      }
    }
    Matrix gQ = add(mulAB(dT, uk), mulAB(Tbar, k));       // gQ = s (dT uK + Tbar K)
    scaleInPlace(gQ, s);
    Matrix gK = add(mulAtB(dT, uq), mulAtB(Tbar, q));     // gK = s (dT^T uQ + Tbar^T Q)
    scaleInPlace(gK, s);
    r.x.gQ.setHead(bi, h, gQ);
    r.x.gK.addHead(bi, g, gK);
    r.x.gV.addHead(bi, g, mulAtB(dPbar, dO_));            // gV = dPbar^T dO
    r.x.gdO.setHead(bi, h, add(mulAB(P, uv), mulAB(dPbar, v)));  // gdO = P uV + dPbar V
    r.x.c.setHead(bi, h, c);
    r.x.b.setHead(bi, h, b);
    // gtheta = <df/dtheta, Sbar> + <df'/dtheta, G o dS> + u_c <d(df/dc)/dtheta, dS>
    const double uc = uParams ? uParams->softcap : 0.0;
    for (Index i = 0; i < p.N; ++i)
      for (Index j = 0; j < p.M; ++j)
        if (hm.visible(i, j)) hm.addPairGrads(i, j, sc.T(i, j), Sbar(i, j), GdS(i, j), uc * dS(i, j), r.params);
    // gz = sum_i (-p_sink,i beta_i + e_i D_i (1 - p_sink,i)): z moves P through L (beta is
    // rowsum(P o Pbar)) and e directly (de/dz = e (1 - p_sink)).
    if (hm.hasSink())
      for (std::size_t i = 0; i < b.size(); ++i) {
        const double ps = hm.sinkProbability(sc.L[i]);
        r.params.sinks[static_cast<std::size_t>(h)] += -ps * beta[i] + e[i] * D[i] * (1.0 - ps);
      }
  });
  return r;
}

HeadTensor forwardJvpMod(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                         const HeadTensor& K, const HeadTensor& V, const HeadTensor& tQ,
                         const HeadTensor& tK, const HeadTensor& tV, const ScoreModGrads* tParams) {
  const Index kv = validateModInputs(p, mod, Q, K, {{&tQ, "tQ"}}, {{&V, "V"}, {&tK, "tK"}, {&tV, "tV"}});
  if (tParams) validateCotangents(*tParams, mod, "tParams");
  HeadTensor tO(Q.batch, Q.heads, p.N, p.d);
  forEachModHead(p, mod, Q, kv, [&](const HeadMod& hm, Index b, Index h, Index g) {
    const Matrix q = Q.head(b, h), k = K.head(b, g);
    const Scores sc = scores(hm, q, k);
    Matrix tT = add(mulABt(tQ.head(b, h), k), mulABt(q, tK.head(b, g)));  // tT = s (tQ K^T + Q tK^T)
    scaleInPlace(tT, p.scale);
    Matrix tS = hadamard(sc.F1, tT);                      // tS = f'(T) o tT + sum t_theta df/dtheta
    if (tParams)                                          // (0 where masked)
      for (Index i = 0; i < p.N; ++i)
        for (Index j = 0; j < p.M; ++j)
          if (hm.visible(i, j)) tS(i, j) += hm.direction(i, j, sc.T(i, j), *tParams);
    // The softmax's JVP over the row and the sink's logit z: its tangent t_z enters the row
    // mean with weight p_sink.
    std::vector<double> mean = rowSum(hadamard(sc.P, tS));
    if (tParams && hm.hasSink())
      for (Index i = 0; i < p.N; ++i)
        mean[static_cast<std::size_t>(i)] +=
            hm.sinkProbability(sc.L[static_cast<std::size_t>(i)]) * tParams->sinks[static_cast<std::size_t>(h)];
    Matrix tP(p.N, p.M);                                  // tP = P o (tS - rowsum(P o tS) - p_sink t_z)
    for (Index i = 0; i < p.N; ++i)
      for (Index j = 0; j < p.M; ++j) tP(i, j) = sc.P(i, j) * (tS(i, j) - mean[static_cast<std::size_t>(i)]);
    tO.setHead(b, h, add(mulAB(tP, V.head(b, g)), mulAB(sc.P, tV.head(b, g))));  // tO = tP V + P tV
  });
  return tO;
}

}  // namespace dense
}  // namespace flashbob::oracle

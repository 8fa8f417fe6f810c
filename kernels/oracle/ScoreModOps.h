// The per-pair math of a score modification (ScoreMod.h), shared by the dense reference
// (ScoreModReference.cpp) and the tiled model (ScoreModTiled.cpp), so both evaluate f, f', f''
// and the parameters' partial derivatives with the same code and differ only in the order of
// their sums. Internal to the oracle.
#pragma once

#include "kernels/oracle/ScoreMod.h"

#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <utility>

namespace flashbob::oracle::detail {

inline bool present(const HeadTensor& t) { return !t.data.empty(); }

// Entry (i, j) of head (b, h) of a bias or mask that may broadcast over batch and heads.
inline std::size_t pairIndex(const HeadTensor& t, Index b, Index h, Index i, Index j) {
  const Index bb = t.batch == 1 ? 0 : b, hb = t.heads == 1 ? 0 : h;
  return static_cast<std::size_t>(((bb * t.heads + hb) * t.rows + i) * t.cols + j);
}

// The softcap cap(T) = c tanh(T / c), its derivatives in T and its partial derivatives in c.
// u = T / c, th = tanh u, sech2 = 1 - th^2:
//   cap   = c th            cap'  = sech2          cap'' = -2 th sech2 / c
//   d cap / dc = th - u sech2                      d cap' / dc = 2 u th sech2 / c
//   d^2 cap / dc^2 = -2 u^2 th sech2 / c
struct Cap {
  double value, d1, d2, dValueDc, dD1Dc, d2ValueDc2;
};
inline Cap softcap(double c, double T) {
  if (c == 0.0) return {T, 1.0, 0.0, 0.0, 0.0, 0.0};
  const double u = T / c, th = std::tanh(u), sech2 = 1.0 - th * th;
  return {c * th, sech2, -2.0 * th * sech2 / c, th - u * sech2, 2.0 * u * th * sech2 / c,
          -2.0 * u * u * th * sech2 / c};
}

// S = f(T) at one visible pair, with F1 = f'(T) and F2 = f''(T).
struct ModScore {
  double S, F1, F2;
};

// The modification of one (batch b, query head h) pair.
struct HeadMod {
  const Problem& p;
  const ScoreMod& mod;
  Index b, h;

  Index relative(Index i, Index j) const { return j - (i + p.causalOffset()); }
  bool visible(Index i, Index j) const {
    if (p.masked(i, j)) return false;
    return !present(mod.mask) || mod.mask.data[pairIndex(mod.mask, b, h, i, j)] != 0.0;
  }
  // d alibi / d slope at relative position r.
  double alibiPartial(Index r) const {
    return mod.alibiForm == AlibiForm::Symmetric ? -static_cast<double>(std::abs(r))
                                                 : static_cast<double>(r);
  }
  std::size_t tableIndex(Index r) const {
    return static_cast<std::size_t>(h * mod.bucketing.buckets + relativeBucket(mod.bucketing, r));
  }
  // f(T) = cap(T) + B + table + alibi at a visible pair.
  ModScore score(Index i, Index j, double T) const {
    const Cap cap = softcap(mod.softcap, T);
    const Index r = relative(i, j);
    double S = cap.value;
    if (present(mod.bias)) S += mod.bias.data[pairIndex(mod.bias, b, h, i, j)];
    if (!mod.table.empty()) S += mod.table[tableIndex(r)];
    if (!mod.alibiSlopes.empty()) S += mod.alibiSlopes[static_cast<std::size_t>(h)] * alibiPartial(r);
    return {S, cap.d1, cap.d2};
  }
  // U = sum over theta of u_theta df/dtheta at a visible pair: the direction in which the
  // cotangents u of the parameter gradients move S (<u, dtheta> = <U, dS>).
  double direction(Index i, Index j, double T, const ScoreModGrads& u) const {
    const Index r = relative(i, j);
    double U = 0.0;
    if (present(mod.bias)) U += u.bias.data[pairIndex(mod.bias, b, h, i, j)];
    if (!mod.table.empty()) U += u.table[tableIndex(r)];
    if (!mod.alibiSlopes.empty()) U += u.alibiSlopes[static_cast<std::size_t>(h)] * alibiPartial(r);
    if (mod.softcap != 0.0) U += u.softcap * softcap(mod.softcap, T).dValueDc;
    return U;
  }
  // dU/dT: only the cap's df/dc depends on T, and d(df/dc)/dT = d(f')/dc.
  double directionSlope(double T, const ScoreModGrads& u) const {
    return mod.softcap != 0.0 ? u.softcap * softcap(mod.softcap, T).dD1Dc : 0.0;
  }
  // Adds x df/dtheta + y d(f')/dtheta + w d(df/dc)/dtheta at a visible pair (x: the cotangent
  // of S, y: that of f', w: that of U's cap term divided by u_c, i.e. dS u_c).
  void addPairGrads(Index i, Index j, double T, double x, double y, double w, ScoreModGrads& g) const {
    const Index r = relative(i, j);
    if (present(mod.bias)) g.bias.data[pairIndex(mod.bias, b, h, i, j)] += x;
    if (!mod.table.empty()) g.table[tableIndex(r)] += x;
    if (!mod.alibiSlopes.empty()) g.alibiSlopes[static_cast<std::size_t>(h)] += x * alibiPartial(r);
    if (mod.softcap != 0.0) {
      const Cap cap = softcap(mod.softcap, T);
      g.softcap += x * cap.dValueDc + y * cap.dD1Dc + w * cap.d2ValueDc2;
    }
  }
  bool hasSink() const { return !mod.sinks.empty(); }
  double sink() const {
    return hasSink() ? mod.sinks[static_cast<std::size_t>(h)] : -std::numeric_limits<double>::infinity();
  }
  // p_sink = exp(z - L) of a row (0 without a sink or where both are -inf).
  double sinkProbability(double L) const {
    const double z = sink();
    return z == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(z - L);
  }
  // Adds the sink's gradient: z moves every row's L, so P_ij by -P_ij p_sink,i, and a scalar
  // with P-cotangent Pbar gains -sum_i p_sink,i rowsum(P o Pbar)_i; `rowScalar` is that row
  // sum (D for the first backward's <dO, O>; BoB writes its own, with the sink's cotangent).
  void addSinkGrad(const std::vector<double>& L, const std::vector<double>& rowScalar,
                   ScoreModGrads& g) const {
    if (!hasSink()) return;
    for (std::size_t i = 0; i < rowScalar.size(); ++i)
      g.sinks[static_cast<std::size_t>(h)] -= sinkProbability(L[i]) * rowScalar[i];
  }
};

// Gradients shaped like `mod`'s parameters, all 0.
ScoreModGrads zeroGrads(const ScoreMod& mod);

// BoB's outputs for `kvHeads` key/value heads, all 0: what the dense and the tiled BoB fill.
ModBobResult zeroBobResult(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                           Index kvHeads);

using NamedHeads = std::initializer_list<std::pair<const HeadTensor*, const char*>>;
// Checks the problem, the ScoreMod and the tensors (the query side has Q's heads, the key
// side K's, which must divide them); returns the key/value head count.
Index validateModInputs(const Problem& p, const ScoreMod& mod, const HeadTensor& Q,
                        const HeadTensor& K, NamedHeads querySide, NamedHeads keySide);

// fn(HeadMod, b, h, kvHead) for every query head of every batch.
template <class Fn>
void forEachModHead(const Problem& p, const ScoreMod& mod, const HeadTensor& Q, Index kvHeads, Fn fn) {
  const Index group = Q.heads / kvHeads;
  for (Index b = 0; b < Q.batch; ++b)
    for (Index h = 0; h < Q.heads; ++h) fn(HeadMod{p, mod, b, h}, b, h, h / group);
}

}  // namespace flashbob::oracle::detail

// Inputs shared by the score-modification tests (ScoreModTest.cpp, ScoreModTiledTest.cpp):
// grouped-query problems and one ScoreMod per kind of modification, with random parameters.
#pragma once

#include "kernels/oracle/ScoreMod.h"

#include <optional>
#include <random>
#include <vector>

namespace flashbob::oracle::testing::scoremod {

inline HeadTensor randomTensor(Index B, Index H, Index rows, Index cols, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  HeadTensor t(B, H, rows, cols);
  for (double& x : t.data) x = u(rng);
  return t;
}

// One problem with grouped-query heads (H query heads read KV key/value heads).
struct Case {
  Problem p;
  ScoreMod mod;
  HeadTensor Q, K, V, dO, uQ, uK, uV;
  std::optional<ScoreModGrads> uParams;  // cotangents of the parameter gradients, if any
};

inline constexpr Index kBatch = 2, kHeads = 4, kKvHeads = 2;

inline Case makeCase(const Problem& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  c.p = p;
  c.Q = randomTensor(kBatch, kHeads, p.N, p.d, rng);
  c.K = randomTensor(kBatch, kKvHeads, p.M, p.d, rng);
  c.V = randomTensor(kBatch, kKvHeads, p.M, p.d, rng);
  c.dO = randomTensor(kBatch, kHeads, p.N, p.d, rng);
  c.uQ = randomTensor(kBatch, kHeads, p.N, p.d, rng);
  c.uK = randomTensor(kBatch, kKvHeads, p.M, p.d, rng);
  c.uV = randomTensor(kBatch, kKvHeads, p.M, p.d, rng);
  return c;
}

// The modifications under test, each alone and all together; `rng` draws their parameters.
enum class Kind { Softcap, AlibiSymmetric, AlibiLinear, Bias, BiasBroadcast, Table, TableCausal, Sinks, Mask, All };
inline const Kind kKinds[] = {Kind::Softcap, Kind::AlibiSymmetric, Kind::AlibiLinear, Kind::Bias, Kind::BiasBroadcast,
                       Kind::Table, Kind::TableCausal, Kind::Sinks, Kind::Mask, Kind::All};
inline const char* name(Kind k) {
  switch (k) {
    case Kind::Softcap: return "softcap";
    case Kind::AlibiSymmetric: return "alibi symmetric";
    case Kind::AlibiLinear: return "alibi linear";
    case Kind::Bias: return "bias (B, H, N, M)";
    case Kind::BiasBroadcast: return "bias (1, H, N, M)";
    case Kind::Table: return "relative table, bidirectional";
    case Kind::TableCausal: return "relative table, unidirectional";
    case Kind::Sinks: return "sinks";
    case Kind::Mask: return "mask";
    case Kind::All: return "all together";
  }
  return "?";
}

inline std::vector<double> randomVector(std::size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

inline ScoreMod makeMod(Kind kind, const Problem& p, std::mt19937_64& rng) {
  ScoreMod m;
  const bool all = kind == Kind::All;
  // A cap small enough that tanh is far from linear on scores of size ~1.
  if (kind == Kind::Softcap || all) m.softcap = 0.8;
  if (kind == Kind::AlibiSymmetric || kind == Kind::AlibiLinear || all) {
    m.alibiSlopes = randomVector(kHeads, 0.1, 0.6, rng);
    m.alibiForm = kind == Kind::AlibiLinear ? AlibiForm::Linear : AlibiForm::Symmetric;
  }
  if (kind == Kind::Bias || kind == Kind::BiasBroadcast || all) {
    m.bias = kind == Kind::BiasBroadcast ? randomTensor(1, kHeads, p.N, p.M, rng)
                                         : randomTensor(kBatch, kHeads, p.N, p.M, rng);
  }
  if (kind == Kind::Table || kind == Kind::TableCausal || all) {
    // Few buckets and a short max distance, so the test's distances (up to 6) reach the
    // logarithmic buckets and the last one.
    m.bucketing = {kind == Kind::TableCausal ? 4 : 8, 3, kind != Kind::TableCausal};
    m.table = randomVector(static_cast<std::size_t>(kHeads * m.bucketing.buckets), -1.0, 1.0, rng);
  }
  if (kind == Kind::Sinks || all) m.sinks = randomVector(kHeads, -0.5, 1.0, rng);
  if (kind == Kind::Mask || all) {
    // A document-style mask, different per batch and head, hiding whole row 1 of head (0, 0).
    m.mask = HeadTensor(kBatch, kHeads, p.N, p.M);
    std::bernoulli_distribution keep(0.7);
    for (double& x : m.mask.data) x = keep(rng) ? 1.0 : 0.0;
    for (Index j = 0; j < p.M; ++j) m.mask.data[static_cast<std::size_t>(p.M + j)] = 0.0;
  }
  return m;
}

// Random cotangents for the first backward's parameter gradients, shaped like `mod`'s
// parameters (for BoB's <uParams, dParams> term).
inline ScoreModGrads randomCotangents(const ScoreMod& mod, std::mt19937_64& rng) {
  ScoreModGrads u;
  if (!mod.bias.data.empty()) {
    u.bias = randomTensor(mod.bias.batch, mod.bias.heads, mod.bias.rows, mod.bias.cols, rng);
  }
  u.table = randomVector(mod.table.size(), -1.0, 1.0, rng);
  u.alibiSlopes = randomVector(mod.alibiSlopes.size(), -1.0, 1.0, rng);
  u.sinks = randomVector(mod.sinks.size(), -1.0, 1.0, rng);
  if (mod.softcap != 0.0) u.softcap = randomVector(1, -1.0, 1.0, rng)[0];
  return u;
}

// Causal and not, N < M and N > M (causal N > M leaves the first rows with no key).
inline std::vector<Problem> problems() {
  return {makeProblem(4, 6, 3, false), makeProblem(4, 6, 3, true), makeProblem(5, 3, 3, false),
          makeProblem(5, 3, 3, true)};
}

}  // namespace flashbob::oracle::testing::scoremod

// Tests of the score-modification oracle (kernels/oracle/ScoreMod.h) against independent
// oracles: finite differences of its own float64 forward (for the backward, the parameters'
// gradients and the JVP) and of its own first backward (for BoB, as the derivative of
// F = <uQ,dQ> + <uK,dK> + <uV,dV> (+ <uParams, dParams>)), and the identity cases where a
// modification is a no-op and the plain oracle (Oracle.h, tested on its own in
// OracleTest.cpp) must be reproduced.
//
// Tolerances. Every derivative is a central difference with Richardson extrapolation,
// (8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / 12h with h = 1e-3: truncation error O(h^4) ~ 1e-12
// times the fifth derivative (O(1..100) here: unit inputs, softcap c >= 0.8), rounding error
// ~ eps |f| / h ~ 1e-13. Measured worst errors are below 1e-10 relative (normwise); the bound
// 1e-8 leaves two orders of margin, while dropping any one term of the math (the f'' term of
// BoB, the f' in G' or in the JVP, the d f'/dc term of the cap's gradient, the sign of the
// sink's gradient) fails these checks by orders of magnitude (tried).
// The identity cases compare two float64 computations of the same math in a different order
// (the cap c tanh(T/c) at c = 1e8 differs from T by T^3 / 3c^2 ~ 1e-16): measured below 1e-14,
// bound 1e-12.
#include "kernels/oracle/ScoreMod.h"
#include "test/unit/OracleTestUtil.h"
#include "test/unit/ScoreModTestUtil.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace flashbob::oracle;
using namespace flashbob::oracle::testing;
using namespace flashbob::oracle::testing::scoremod;

namespace {

constexpr double kFdTol = 1e-8;        // see the header comment
constexpr double kIdentityTol = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

double derivative(const std::function<double(double)>& f, double h = 1e-3) {
  return (8.0 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12.0 * h);
}

// <dO, O>: the scalar whose gradient the first backward is.
double forwardPairing(const Case& c) {
  return dot(c.dO.data, dense::forwardMod(c.p, c.mod, c.Q, c.K, c.V).O.data);
}

// F = <uQ,dQ> + <uK,dK> + <uV,dV> (+ <uParams, dParams>): the scalar whose gradient BoB is.
double backwardPairing(const Case& c) {
  const ModBackwardResult g = dense::backwardMod(c.p, c.mod, c.Q, c.K, c.V, c.dO);
  double F = dot(c.uQ.data, g.x.dQ.data) + dot(c.uK.data, g.x.dK.data) + dot(c.uV.data, g.x.dV.data);
  if (c.uParams) {
    const ScoreModGrads& u = *c.uParams;
    F += dot(u.bias.data, g.params.bias.data) + dot(u.table, g.params.table) +
         dot(u.alibiSlopes, g.params.alibiSlopes) + dot(u.sinks, g.params.sinks) + u.softcap * g.params.softcap;
  }
  return F;
}

// The finite-difference gradient of `objective` with respect to every entry of the vector
// `select` picks out of (a copy of) `c`.
template <class Select>
std::vector<double> fdGradient(const Case& c0, Select select, double (*objective)(const Case&)) {
  Case c = c0;
  std::vector<double>& x = select(c);
  std::vector<double> g(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double x0 = x[k];
    g[k] = derivative([&](double h) {
      x[k] = x0 + h;
      const double v = objective(c);
      x[k] = x0;
      return v;
    });
  }
  return g;
}

double fdSoftcap(const Case& c0, double (*objective)(const Case&)) {
  Case c = c0;
  const double c0cap = c.mod.softcap;
  return derivative([&](double h) {
    c.mod.softcap = c0cap + h;
    return objective(c);
  });
}

// Every parameter gradient of `objective` by finite differences against `got`.
void checkParams(const Case& c, const ScoreModGrads& got, double (*objective)(const Case&), const char* what) {
  INFO(what);
  if (!c.mod.bias.data.empty())
    CHECK(relErr(got.bias.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.mod.bias.data; }, objective)) < kFdTol);
  if (!c.mod.table.empty())
    CHECK(relErr(got.table, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.mod.table; }, objective)) < kFdTol);
  if (!c.mod.alibiSlopes.empty())
    CHECK(relErr(got.alibiSlopes, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.mod.alibiSlopes; }, objective)) < kFdTol);
  if (!c.mod.sinks.empty())
    CHECK(relErr(got.sinks, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.mod.sinks; }, objective)) < kFdTol);
  if (c.mod.softcap != 0.0) {
    const double fd = fdSoftcap(c, objective);
    CHECK(std::abs(got.softcap - fd) < kFdTol * std::max(1.0, std::abs(fd)));
  }
}

}  // namespace

TEST_CASE("score mods: backward and parameter gradients equal finite differences of the forward",
          "[oracle][scoremod][backward][fd]") {
  std::uint64_t seed = 1;
  for (const Kind kind : kKinds)
    for (const Problem& p : problems()) {
      INFO(name(kind) << ", " << describe(p) << ", GQA " << kHeads << "/" << kKvHeads);
      Case c = makeCase(p, seed++);
      std::mt19937_64 rng(seed++);
      c.mod = makeMod(kind, p, rng);
      const ModBackwardResult g = dense::backwardMod(c.p, c.mod, c.Q, c.K, c.V, c.dO);
      CHECK(relErr(g.x.dQ.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.Q.data; }, forwardPairing)) < kFdTol);
      CHECK(relErr(g.x.dK.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.K.data; }, forwardPairing)) < kFdTol);
      CHECK(relErr(g.x.dV.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.V.data; }, forwardPairing)) < kFdTol);
      checkParams(c, g.params, forwardPairing, "first-order parameter gradients");
    }
}

TEST_CASE("score mods: BoB and its parameter gradients equal finite differences of the first backward",
          "[oracle][scoremod][bob][fd]") {
  // F with and without the cotangents of the parameter gradients (<uParams, dParams>).
  std::uint64_t seed = 1000;
  for (const bool withParams : {false, true})
  for (const Kind kind : kKinds)
    for (const Problem& p : problems()) {
      INFO(name(kind) << ", " << describe(p) << ", GQA " << kHeads << "/" << kKvHeads
                      << (withParams ? ", with uParams" : ""));
      Case c = makeCase(p, seed++);
      std::mt19937_64 rng(seed++);
      c.mod = makeMod(kind, p, rng);
      if (withParams) c.uParams = randomCotangents(c.mod, rng);
      const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV,
                                           c.uParams ? &*c.uParams : nullptr);
      CHECK(relErr(r.x.gQ.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.Q.data; }, backwardPairing)) < kFdTol);
      CHECK(relErr(r.x.gK.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.K.data; }, backwardPairing)) < kFdTol);
      CHECK(relErr(r.x.gV.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.V.data; }, backwardPairing)) < kFdTol);
      CHECK(relErr(r.x.gdO.data, fdGradient(c, [](Case& k) -> std::vector<double>& { return k.dO.data; }, backwardPairing)) < kFdTol);
      checkParams(c, r.params, backwardPairing, "parameter gradients of F");
    }
}

TEST_CASE("score mods: the forward's JVP equals finite differences of O, and BoB's gdO at u = t",
          "[oracle][scoremod][jvp][fd]") {
  // With the parameters held fixed, and moving along random tangents of their own.
  std::uint64_t seed = 2000;
  for (const bool withParams : {false, true})
  for (const Kind kind : kKinds)
    for (const Problem& p : problems()) {
      INFO(name(kind) << ", " << describe(p) << (withParams ? ", with tParams" : ""));
      Case c = makeCase(p, seed++);
      std::mt19937_64 rng(seed++);
      c.mod = makeMod(kind, p, rng);
      std::optional<ScoreModGrads> tParams;
      if (withParams) tParams = randomCotangents(c.mod, rng);
      const ScoreModGrads* tp = tParams ? &*tParams : nullptr;
      // Tangents (tQ, tK, tV) = (uQ, uK, uV).
      const HeadTensor tO = dense::forwardJvpMod(c.p, c.mod, c.Q, c.K, c.V, c.uQ, c.uK, c.uV, tp);
      // O along the line (Q, K, V, theta) + h (tQ, tK, tV, t_theta), every entry at once.
      auto along = [](std::vector<double>& x, const std::vector<double>& t, double h) {
        for (std::size_t e = 0; e < x.size(); ++e) x[e] += h * t[e];
      };
      std::vector<double> fd(tO.data.size());
      for (std::size_t k = 0; k < fd.size(); ++k)
        fd[k] = derivative([&](double h) {
          Case m = c;
          along(m.Q.data, c.uQ.data, h);
          along(m.K.data, c.uK.data, h);
          along(m.V.data, c.uV.data, h);
          if (tp) {
            along(m.mod.bias.data, tp->bias.data, h);
            along(m.mod.table, tp->table, h);
            along(m.mod.alibiSlopes, tp->alibiSlopes, h);
            along(m.mod.sinks, tp->sinks, h);
            m.mod.softcap += h * tp->softcap;
          }
          return dense::forwardMod(m.p, m.mod, m.Q, m.K, m.V).O.data[k];
        });
      CHECK(relErr(tO.data, fd) < kFdTol);
      // gdO does not involve dO and, at u = t (uParams = tParams), is tO: G' = f'(T) o G + U = tS
      // and c = rowsum(tS o P) + p_sink t_z. Within rounding.
      const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, tp);
      CHECK(relErr(r.x.gdO.data, tO.data) < kIdentityTol);
    }
}

namespace {

// Every output of the modified oracle against the plain one (Oracle.h) on the same inputs.
void checkEqualsPlain(const Case& c, const Problem& plain) {
  const BatchedForwardResult f = dense::forwardMod(c.p, c.mod, c.Q, c.K, c.V);
  const BatchedForwardResult f0 = dense::forwardBatched(plain, c.Q, c.K, c.V);
  CHECK(relErr(f.O.data, f0.O.data) < kIdentityTol);
  CHECK(relErr(f.L.data, f0.L.data) < kIdentityTol);
  const ModBackwardResult g = dense::backwardMod(c.p, c.mod, c.Q, c.K, c.V, c.dO);
  const BatchedBackwardResult g0 = dense::backwardBatched(plain, c.Q, c.K, c.V, c.dO);
  CHECK(relErr(g.x.dQ.data, g0.dQ.data) < kIdentityTol);
  CHECK(relErr(g.x.dK.data, g0.dK.data) < kIdentityTol);
  CHECK(relErr(g.x.dV.data, g0.dV.data) < kIdentityTol);
  CHECK(relErr(g.x.D.data, g0.D.data) < kIdentityTol);
  const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
  const BatchedBobResult r0 = dense::bobBatched(plain, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
  CHECK(relErr(r.x.gQ.data, r0.gQ.data) < kIdentityTol);
  CHECK(relErr(r.x.gK.data, r0.gK.data) < kIdentityTol);
  CHECK(relErr(r.x.gV.data, r0.gV.data) < kIdentityTol);
  CHECK(relErr(r.x.gdO.data, r0.gdO.data) < kIdentityTol);
  CHECK(relErr(r.x.c.data, r0.c.data) < kIdentityTol);
  CHECK(relErr(r.x.b.data, r0.b.data) < kIdentityTol);
  const HeadTensor tO = dense::forwardJvpMod(c.p, c.mod, c.Q, c.K, c.V, c.uQ, c.uK, c.uV);
  for (Index b = 0; b < kBatch; ++b)
    for (Index h = 0; h < kHeads; ++h) {
      const Index g = h / (kHeads / kKvHeads);
      const Matrix t0 = dense::forwardJvp(plain, c.Q.head(b, h), c.K.head(b, g), c.V.head(b, g),
                                          c.uQ.head(b, h), c.uK.head(b, g), c.uV.head(b, g));
      CHECK(relErr(tO.head(b, h), t0) < kIdentityTol);
    }
}

}  // namespace

TEST_CASE("score mods: no-op modifications equal the plain oracle", "[oracle][scoremod][identity]") {
  std::uint64_t seed = 3000;
  for (const Problem& p : problems()) {
    INFO(describe(p));
    Case c = makeCase(p, seed++);
    SECTION("nothing") { checkEqualsPlain(c, p); }
    SECTION("softcap c -> infinity with a zero bias, table and slopes") {
      c.mod.softcap = 1e8;
      c.mod.bias = HeadTensor(kBatch, kHeads, p.N, p.M);
      c.mod.table.assign(static_cast<std::size_t>(kHeads * c.mod.bucketing.buckets), 0.0);
      checkEqualsPlain(c, p);
    }
    SECTION("ALiBi with slope 0, both forms") {
      c.mod.alibiSlopes.assign(kHeads, 0.0);
      checkEqualsPlain(c, p);
      c.mod.alibiForm = AlibiForm::Linear;
      checkEqualsPlain(c, p);
    }
    SECTION("sinks at -infinity") {
      c.mod.sinks.assign(kHeads, -kInf);
      checkEqualsPlain(c, p);
      // p_sink = 0, so the sink gets no gradient (and no NaN from the empty rows).
      const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
      CHECK(r.params.sinks == std::vector<double>(kHeads, 0.0));
      CHECK(dense::backwardMod(c.p, c.mod, c.Q, c.K, c.V, c.dO).params.sinks == std::vector<double>(kHeads, 0.0));
    }
    SECTION("a mask equal to the causal mask, on a problem without one") {
      Problem full = p;
      full.causal = false;
      c.p = full;
      c.mod.mask = HeadTensor(1, 1, p.N, p.M);
      const Problem causal = makeProblem(p.N, p.M, p.d, true);
      for (Index i = 0; i < p.N; ++i)
        for (Index j = 0; j < p.M; ++j) c.mod.mask.data[static_cast<std::size_t>(i * p.M + j)] = causal.masked(i, j) ? 0.0 : 1.0;
      checkEqualsPlain(c, causal);
    }
  }
}

TEST_CASE("score mods: a linear ALiBi equals the symmetric one under a causal mask", "[oracle][scoremod][alibi]") {
  // Left of the diagonal r <= 0, so slope r = -slope |r|: the two forms agree wherever a causal
  // mask lets a pair through, and must differ without one.
  for (const Problem& p : problems()) {
    INFO(describe(p));
    Case c = makeCase(p, 4000);
    std::mt19937_64 rng(4001);
    c.mod = makeMod(Kind::AlibiSymmetric, p, rng);
    const ModBobResult sym = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
    c.mod.alibiForm = AlibiForm::Linear;
    const ModBobResult lin = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
    if (p.causal) {
      CHECK(lin.x.gQ.data == sym.x.gQ.data);
      CHECK(lin.params.alibiSlopes == sym.params.alibiSlopes);
    } else {
      CHECK(relErr(lin.x.gQ.data, sym.x.gQ.data) > 1e-3);
    }
  }
}

TEST_CASE("score mods: a sink takes the rest of each row's probability; fully masked rows", "[oracle][scoremod][sinks][masked]") {
  const Problem p = makeProblem(5, 3, 3, true);  // rows 0 and 1 see no key
  Case c = makeCase(p, 5000);
  std::mt19937_64 rng(5001);
  c.mod = makeMod(Kind::Sinks, p, rng);
  const BatchedForwardResult f = dense::forwardMod(c.p, c.mod, c.Q, c.K, c.V);
  const BatchedForwardResult f0 = dense::forwardBatched(p, c.Q, c.K, c.V);
  for (Index b = 0; b < kBatch; ++b)
    for (Index h = 0; h < kHeads; ++h) {
      const double z = c.mod.sinks[static_cast<std::size_t>(h)];
      const Matrix L = f.L.head(b, h), L0 = f0.L.head(b, h), O = f.O.head(b, h), O0 = f0.O.head(b, h);
      for (Index i = 0; i < p.N; ++i) {
        // L = log(exp L0 + exp z); a row without keys has L = z and O = 0, P = 0.
        if (i < 2) {
          CHECK(L(i, 0) == z);
          for (Index k = 0; k < p.d; ++k) CHECK(O(i, k) == 0.0);
        } else {
          CHECK(std::abs(L(i, 0) - std::log(std::exp(L0(i, 0)) + std::exp(z))) < 1e-14);
          // The sink has no value row: O is the plain O scaled by the keys' share 1 - p_sink.
          const double share = std::exp(L0(i, 0) - L(i, 0));
          for (Index k = 0; k < p.d; ++k) CHECK(std::abs(O(i, k) - share * O0(i, k)) < 1e-14);
        }
      }
    }
  const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
  for (double x : r.x.gQ.data) CHECK(std::isfinite(x));
  for (double x : r.params.sinks) CHECK(std::isfinite(x));
}

TEST_CASE("score mods: t5 relative buckets", "[oracle][scoremod][bucket]") {
  // Values of t5's _relative_position_bucket(relative_position = r), worked by hand.
  const Bucketing t5{32, 128, true};  // 16 per side, 8 exact
  CHECK(relativeBucket(t5, 0) == 0);
  CHECK(relativeBucket(t5, -3) == 3);
  CHECK(relativeBucket(t5, 3) == 19);    // keys to the right: second half
  CHECK(relativeBucket(t5, -8) == 8);    // first logarithmic bucket
  CHECK(relativeBucket(t5, -20) == 10);  // 8 + floor(log(20/8) / log(128/8) * 8) = 8 + 2
  CHECK(relativeBucket(t5, -200) == 15); // beyond maxDistance: the last bucket
  CHECK(relativeBucket(t5, 200) == 31);
  const Bucketing causal{32, 128, false};  // 16 exact
  CHECK(relativeBucket(causal, 5) == 0);   // the future folds into bucket 0
  CHECK(relativeBucket(causal, -20) == 17);  // 16 + floor(log(20/16) / log(8) * 16) = 16 + 1
  CHECK(relativeBucket(causal, -1000) == 31);
}

TEST_CASE("score mods: argument checking", "[oracle][scoremod][validate]") {
  const Problem p = makeProblem(4, 6, 3, false);
  Case c = makeCase(p, 6000);
  using Catch::Matchers::Contains;
  auto run = [&](const ScoreMod& m) { dense::forwardMod(c.p, m, c.Q, c.K, c.V); };
  ScoreMod m;
  m.softcap = -1.0;
  REQUIRE_THROWS_WITH(run(m), Contains("softcap"));
  m = ScoreMod{};
  m.alibiSlopes = {0.1};
  REQUIRE_THROWS_WITH(run(m), Contains("alibiSlopes"));
  m = ScoreMod{};
  m.bias = HeadTensor(1, 3, p.N, p.M);
  REQUIRE_THROWS_WITH(run(m), Contains("bias"));
  m = ScoreMod{};
  m.mask = HeadTensor(1, 1, p.M, p.N);
  REQUIRE_THROWS_WITH(run(m), Contains("mask"));
  m = ScoreMod{};
  m.table.assign(7, 0.0);
  REQUIRE_THROWS_WITH(run(m), Contains("table"));
  m = ScoreMod{};
  m.sinks = {0.0, 0.0};
  REQUIRE_THROWS_WITH(run(m), Contains("sinks"));
  // V of another width than Q and K: not modelled with score modifications.
  Problem otherWidth = c.p;
  otherWidth.dv = 2;
  REQUIRE_THROWS_WITH(dense::forwardMod(otherWidth, ScoreMod{}, c.Q, c.K, c.V),
                      Contains("oracle: V must be as wide as Q and K in the score-modification models (dv = d)"));

  // Cotangents and tangents of the parameters must be shaped like them.
  std::mt19937_64 rng(6001);
  m = makeMod(Kind::All, p, rng);
  ScoreModGrads u = randomCotangents(m, rng);
  u.table.pop_back();
  REQUIRE_THROWS_WITH(dense::bobMod(c.p, m, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, &u), Contains("uParams.table"));
  m.softcap = 0.0;
  u = randomCotangents(m, rng);
  u.softcap = 1.0;  // a tangent of a cap that is not there
  REQUIRE_THROWS_WITH(dense::forwardJvpMod(c.p, m, c.Q, c.K, c.V, c.uQ, c.uK, c.uV, &u), Contains("tParams.softcap"));
}

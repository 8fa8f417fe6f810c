// Tests of the float64 oracle (kernels/oracle): the dense reference against finite differences,
// the tiled two-pass model against the dense reference, argument checking, and the causal edge
// cases (N != M, fully masked rows, tile skipping). Problems whose V is of another width than Q
// and K (dv != d, makeProblem's five-argument form) run through the same checks.
//
// Set FLASHBOB_ORACLE_REPORT=1 to print the worst error measured by each check.
#include "kernels/oracle/Oracle.h"
#include "test/unit/OracleTestUtil.h"
#include "support/Knobs.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace flashbob::oracle;
using namespace flashbob::oracle::testing;

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}
double dot(const Matrix& a, const Matrix& b) { return dot(a.data, b.data); }

bool allFinite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Worst error per named check, printed at exit when FLASHBOB_ORACLE_REPORT is set.
struct Report {
  std::vector<std::pair<std::string, double>> worst;
  void note(const std::string& name, double err) {
    for (auto& w : worst)
      if (w.first == name) {
        w.second = std::max(w.second, err);
        return;
      }
    worst.emplace_back(name, err);
  }
  ~Report() {
    if (!flashbob::support::getBool(flashbob::support::Knob::OracleReport)) return;
    for (auto& w : worst) std::printf("[oracle] %-44s worst %.3e\n", w.first.c_str(), w.second);
  }
};
Report report;

// Central difference with Richardson extrapolation (error O(h^4)), so h can be large enough
// that rounding stays near 1e-12 relative.
double derivative(const std::function<double(double)>& f, double h = 1e-3) {
  return (8.0 * (f(h) - f(-h)) - (f(2 * h) - f(-2 * h))) / (12.0 * h);
}

Matrix axpy(const Matrix& x, double a, const Matrix& y) {
  Matrix r = x;
  for (std::size_t k = 0; k < r.data.size(); ++k) r.data[k] += a * y.data[k];
  return r;
}

// The scalar BoB differentiates: F = <uQ,dQ> + <uK,dK> + <uV,dV> of the dense first backward.
double firstBackwardPairing(const Problem& p, const Inputs& in, const Matrix& Q, const Matrix& K,
                            const Matrix& V, const Matrix& dO) {
  const BackwardResult g = dense::backward(p, Q, K, V, dO);
  return dot(in.uQ, g.dQ) + dot(in.uK, g.dK) + dot(in.uV, g.dV);
}

// The same scalar for batched, grouped or packed tensors: the first backward's results paired
// with the cotangents uQ, uK, uV.
double backwardPairing(const BatchedBackwardResult& x, const HeadTensor& uQ, const HeadTensor& uK,
                       const HeadTensor& uV) {
  return dot(uQ.data, x.dQ.data) + dot(uK.data, x.dK.data) + dot(uV.data, x.dV.data);
}

// Per-element finite-difference gradient of `f` with respect to every entry of `x` (a Matrix or
// a HeadTensor: anything with its values in `data`); the result has x's shape.
template <class T, class F>
T fdGradient(T x, const F& f) {
  T g = x;
  for (std::size_t k = 0; k < x.data.size(); ++k) {
    const double x0 = x.data[k];
    g.data[k] = derivative([&](double h) {
      x.data[k] = x0 + h;
      const double v = f(x);
      x.data[k] = x0;
      return v;
    });
  }
  return g;
}

}  // namespace

// ---- 1. Dense BoB vs finite differences of the dense first backward --------------------------

TEST_CASE("dense BoB equals per-element finite differences of the first backward", "[oracle][dense][bob][fd]") {
  // Tiny problems so every entry of Q, K, V, dO is differentiated; N < M and N > M causal
  // (the latter has fully masked rows 0 and 1); V wider and narrower than Q and K.
  const Problem problems[] = {makeProblem(3, 4, 2, false),   makeProblem(3, 5, 2, true),
                              makeProblem(5, 3, 2, true),    makeProblem(4, 4, 3, true),
                              makeProblem(3, 4, 2, 3, false), makeProblem(5, 3, 3, 2, true)};
  std::uint64_t seed = 11;
  for (const Problem& p : problems) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, seed++);
    const BobResult r = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    const Matrix fQ = fdGradient(in.Q, [&](const Matrix& x) { return firstBackwardPairing(p, in, x, in.K, in.V, in.dO); });
    const Matrix fK = fdGradient(in.K, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, x, in.V, in.dO); });
    const Matrix fV = fdGradient(in.V, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, in.K, x, in.dO); });
    const Matrix fdO = fdGradient(in.dO, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, in.K, in.V, x); });
    const double eQ = relErr(r.gQ, fQ), eK = relErr(r.gK, fK), eV = relErr(r.gV, fV), edO = relErr(r.gdO, fdO);
    report.note("FD BoB per-element (max abs/max)", std::max({eQ, eK, eV, edO}));
    CHECK(eQ < 1e-6);
    CHECK(eK < 1e-6);
    CHECK(eV < 1e-6);
    CHECK(edO < 1e-6);
  }
}

TEST_CASE("dense BoB equals directional finite differences of the first backward", "[oracle][dense][bob][fd]") {
  const Problem problems[] = {makeProblem(7, 11, 5, true),      makeProblem(11, 7, 5, true),
                              makeProblem(9, 9, 4, true),       makeProblem(6, 13, 8, false),
                              makeProblem(12, 12, 16, false),   makeProblem(13, 6, 1, true),
                              makeProblem(7, 11, 6, 4, true),   makeProblem(11, 7, 3, 8, true),
                              makeProblem(6, 13, 12, 8, false)};
  std::uint64_t seed = 100;
  for (const Problem& p : problems) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, seed++);
    std::mt19937_64 rng(seed++);
    const Matrix eQ = randomMatrix(p.N, p.d, rng), eK = randomMatrix(p.M, p.d, rng),
                 eV = randomMatrix(p.M, p.valueDim(), rng), edO = randomMatrix(p.N, p.valueDim(), rng);
    const BobResult r = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    // Each input alone, then all four together: F(x + h e) differentiated in h.
    for (int which = 0; which < 5; ++which) {
      INFO("direction " << which << " (0 Q, 1 K, 2 V, 3 dO, 4 all)");
      const double wQ = (which == 0 || which == 4), wK = (which == 1 || which == 4),
                   wV = (which == 2 || which == 4), wdO = (which == 3 || which == 4);
      const double analytic = wQ * dot(r.gQ, eQ) + wK * dot(r.gK, eK) + wV * dot(r.gV, eV) + wdO * dot(r.gdO, edO);
      const double fd = derivative([&](double h) {
        return firstBackwardPairing(p, in, axpy(in.Q, wQ * h, eQ), axpy(in.K, wK * h, eK),
                                    axpy(in.V, wV * h, eV), axpy(in.dO, wdO * h, edO));
      });
      const double err = std::abs(fd - analytic) / std::abs(analytic);
      report.note("FD BoB directional (|fd-an|/|an|)", err);
      CHECK(err < 1e-6);
    }
  }
}

TEST_CASE("the forward's JVP equals finite differences of O, and BoB's gdO at u = t", "[oracle][dense][jvp][fd]") {
  const Problem problems[] = {makeProblem(7, 11, 5, true),    makeProblem(11, 7, 5, true),
                              makeProblem(6, 13, 8, false),   makeProblem(13, 6, 1, true),
                              makeProblem(7, 11, 6, 3, true), makeProblem(6, 13, 4, 9, false)};
  std::uint64_t seed = 300;
  for (const Problem& p : problems) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, seed++);
    // Tangents tQ, tK, tV: uQ, uK, uV. Every entry of tO against a central difference of O.
    const Matrix tO = dense::forwardJvp(p, in.Q, in.K, in.V, in.uQ, in.uK, in.uV);
    REQUIRE(tO.cols == p.valueDim());
    for (Index i = 0; i < p.N; ++i)
      for (Index c = 0; c < p.valueDim(); ++c) {
        const double fd = derivative([&](double h) {
          return dense::forward(p, axpy(in.Q, h, in.uQ), axpy(in.K, h, in.uK),
                                axpy(in.V, h, in.uV))
              .O(i, c);
        });
        const double err = std::abs(fd - tO(i, c)) / std::max(1.0, std::abs(tO(i, c)));
        report.note("FD forward JVP (|fd-an|/max(1,|an|))", err);
        CHECK(err < 1e-8);
      }
    // BoB's gdO does not depend on dO and equals J u (what the fwd_jvp kernel computes).
    const BobResult r = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    CHECK(relErr(r.gdO.data, tO.data) < 1e-12);
  }
}

// ---- 2. Dense forward and first backward -----------------------------------------------------

TEST_CASE("dense backward equals finite differences of sum(O o R)", "[oracle][dense][backward][fd]") {
  // backward(dO = R) is the gradient of <R, O(Q, K, V)>.
  const Problem problems[] = {makeProblem(3, 4, 2, false),    makeProblem(4, 6, 3, true),
                              makeProblem(6, 4, 3, true),     makeProblem(17, 23, 8, true),
                              makeProblem(4, 6, 3, 5, true),  makeProblem(6, 4, 5, 2, true)};
  std::uint64_t seed = 200;
  for (const Problem& p : problems) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, seed++);
    const Matrix& R = in.dO;
    const BackwardResult g = dense::backward(p, in.Q, in.K, in.V, R);
    auto pairing = [&](const Matrix& Q, const Matrix& K, const Matrix& V) {
      return dot(R, dense::forward(p, Q, K, V).O);
    };
    const Matrix fQ = fdGradient(in.Q, [&](const Matrix& x) { return pairing(x, in.K, in.V); });
    const Matrix fK = fdGradient(in.K, [&](const Matrix& x) { return pairing(in.Q, x, in.V); });
    const Matrix fV = fdGradient(in.V, [&](const Matrix& x) { return pairing(in.Q, in.K, x); });
    const double err = std::max({relErr(g.dQ, fQ), relErr(g.dK, fK), relErr(g.dV, fV)});
    report.note("FD first backward per-element", err);
    CHECK(err < 1e-6);

    // D = rowsum(dO o O), and the saved-state overload gives the same gradients.
    const ForwardResult f = dense::forward(p, in.Q, in.K, in.V);
    for (Index i = 0; i < p.N; ++i) {
      double Di = 0;  // over the values' width
      for (Index k = 0; k < p.valueDim(); ++k) Di += R(i, k) * f.O(i, k);
      CHECK(g.D[static_cast<std::size_t>(i)] == Approx(Di).margin(1e-14));
    }
    const BackwardResult saved = dense::backward(p, in.Q, in.K, in.V, R, f.O, f.L);
    CHECK(saved.dQ.data == g.dQ.data);
    CHECK(saved.dK.data == g.dK.data);
    CHECK(saved.dV.data == g.dV.data);
  }
}

TEST_CASE("dense forward is a masked softmax with bottom-right causal alignment", "[oracle][dense][forward]") {
  for (const Problem& p : {makeProblem(6, 9, 4, true), makeProblem(9, 6, 4, true), makeProblem(5, 7, 3, false),
                           makeProblem(9, 6, 4, 7, true), makeProblem(5, 7, 6, 2, false)}) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, 300);
    const ForwardResult f = dense::forward(p, in.Q, in.K, in.V);
    for (Index i = 0; i < p.N; ++i) {
      // Visible keys of row i, straight from the definition (j <= i + M - N).
      std::vector<Index> keys;
      for (Index j = 0; j < p.M; ++j)
        if (!p.causal || j <= i + (p.M - p.N)) keys.push_back(j);
      const double Li = f.L[static_cast<std::size_t>(i)];
      if (keys.empty()) {
        CHECK(Li == -std::numeric_limits<double>::infinity());
        for (Index k = 0; k < p.valueDim(); ++k) CHECK(f.O(i, k) == 0.0);
        continue;
      }
      // O_i = sum_j exp(S_ij - L_i) V_j with the probabilities summing to one.
      double total = 0;
      std::vector<double> Oi(static_cast<std::size_t>(p.valueDim()), 0.0);
      for (Index j : keys) {
        double S = 0;
        for (Index k = 0; k < p.d; ++k) S += in.Q(i, k) * in.K(j, k);
        const double P = std::exp(p.scale * S - Li);
        total += P;
        for (Index k = 0; k < p.valueDim(); ++k) Oi[static_cast<std::size_t>(k)] += P * in.V(j, k);
      }
      CHECK(total == Approx(1.0).epsilon(1e-13));
      REQUIRE(f.O.cols == p.valueDim());
      for (Index k = 0; k < p.valueDim(); ++k) CHECK(f.O(i, k) == Approx(Oi[static_cast<std::size_t>(k)]).margin(1e-13));
    }
  }
}

// ---- 3. Tiled model vs dense reference --------------------------------------------------------

namespace {

struct Worst {
  double fwd = 0, bwd = 0, bob = 0;
};

// The head dims of a problem: Q and K's d, V's dv (0: d).
struct Widths {
  Index d, dv;
};

// Compares every output of the tiled model with the dense reference (relErr per output).
Worst compareTiledWithDense(const Problem& p, const Tiling& t, std::uint64_t seed) {
  const Inputs in = randomInputs(p, seed);
  const ForwardResult df = dense::forward(p, in.Q, in.K, in.V);
  const BackwardResult db = dense::backward(p, in.Q, in.K, in.V, in.dO);
  const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);

  const ForwardResult tf = tiled::forward(p, t, in.Q, in.K, in.V);
  const BackwardResult tb = tiled::backward(p, t, in.Q, in.K, in.V, in.dO, tf);
  Worst w;
  w.fwd = std::max(relErr(tf.O, df.O), relErr(tf.L, df.L));
  w.bwd = std::max({relErr(tb.dQ, db.dQ), relErr(tb.dK, db.dK), relErr(tb.dV, db.dV), relErr(tb.D, db.D)});
  for (X2Source x2 : {X2Source::FromDQ, X2Source::Accumulate}) {
    const BobResult tr = tiled::bob(p, t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, tf, tb, x2);
    w.bob = std::max({w.bob, relErr(tr.gQ, dr.gQ), relErr(tr.gK, dr.gK), relErr(tr.gV, dr.gV),
                      relErr(tr.gdO, dr.gdO), relErr(tr.c, dr.c), relErr(tr.b, dr.b)});
  }
  return w;
}

}  // namespace

TEST_CASE("tiled model equals the dense reference", "[oracle][tiled]") {
  struct Shape {
    Index N, M;
  };
  // Square, N < M, N > M (fully masked rows when causal), and sizes prime to the tiles.
  const Shape shapes[] = {{64, 64}, {37, 53}, {53, 37}, {70, 70}};
  // Tiles dividing N and M, not dividing, 1 x 1, rectangular, and larger than the problem.
  const Tiling tilings[] = {{16, 16}, {13, 7}, {1, 1}, {32, 8}, {128, 96}};
  // Head dims (d, dv): one width (dv = 0 means d), then V narrower and wider than Q and K.
  const Widths widths[] = {{1, 0}, {16, 0}, {64, 0}, {128, 0}, {3, 1}, {16, 40}, {64, 24}};
  std::uint64_t seed = 400;
  Worst worst;
  for (const Widths& w : widths)
    for (const Shape& sh : shapes)
      for (bool causal : {false, true})
        for (const Tiling& t : tilings) {
          // 1 x 1 tiles only at small d: they test the same edges, just slowly.
          if (t.block_m == 1 && std::max(w.d, w.dv) > 16) continue;
          const Problem p = makeProblem(sh.N, sh.M, w.d, w.dv, causal);
          INFO(describe(p) << " block_m=" << t.block_m << " block_n=" << t.block_n);
          const Worst w = compareTiledWithDense(p, t, seed++);
          CHECK(w.fwd < 1e-12);
          CHECK(w.bwd < 1e-12);
          CHECK(w.bob < 1e-12);
          worst.fwd = std::max(worst.fwd, w.fwd);
          worst.bwd = std::max(worst.bwd, w.bwd);
          worst.bob = std::max(worst.bob, w.bob);
        }
  report.note("tiled vs dense forward (O, L)", worst.fwd);
  report.note("tiled vs dense backward (dQ, dK, dV, D)", worst.bwd);
  report.note("tiled vs dense BoB (gQ, gK, gV, gdO, c, b)", worst.bob);
}

TEST_CASE("tiled convenience BoB runs its own forward and backward", "[oracle][tiled]") {
  const Problem p = makeProblem(29, 41, 16, true);
  const Inputs in = randomInputs(p, 450);
  const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
  const BobResult tr = tiled::bob(p, Tiling{8, 16}, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
  CHECK(relErr(tr.gQ, dr.gQ) < 1e-12);
  CHECK(relErr(tr.gK, dr.gK) < 1e-12);
  CHECK(relErr(tr.gV, dr.gV) < 1e-12);
  CHECK(relErr(tr.gdO, dr.gdO) < 1e-12);
}

TEST_CASE("the tiled forward with its JVP in one sweep equals the dense forward and JVP",
          "[oracle][tiled][jvp]") {
  // fwd_dual's recurrence (docs/bob-math.md, "The forward and its JVP in one sweep"): O, L and
  // tO from accumulators rescaled at every key block, divided by the row sum once, against
  // dense::forward and dense::forwardJvp on the tiled model's shapes and tilings.
  struct Shape {
    Index N, M;
  };
  const Shape shapes[] = {{64, 64}, {37, 53}, {53, 37}, {70, 70}};
  const Tiling tilings[] = {{16, 16}, {13, 7}, {1, 1}, {32, 8}, {128, 96}};
  const Widths widths[] = {{1, 0}, {16, 0}, {64, 0}, {3, 1}, {16, 40}};
  std::uint64_t seed = 460;
  double worst = 0;
  for (const Widths& w : widths)
    for (const Shape& sh : shapes)
      for (bool causal : {false, true})
        for (const Tiling& t : tilings) {
          if (t.block_m == 1 && std::max(w.d, w.dv) > 16) continue;
          const Problem p = makeProblem(sh.N, sh.M, w.d, w.dv, causal);
          INFO(describe(p) << " block_m=" << t.block_m << " block_n=" << t.block_n);
          const Inputs in = randomInputs(p, seed++);
          const ForwardDualResult r =
              tiled::forwardDual(p, t, in.Q, in.K, in.V, in.uQ, in.uK, in.uV);
          const ForwardResult f = dense::forward(p, in.Q, in.K, in.V);
          const Matrix tO = dense::forwardJvp(p, in.Q, in.K, in.V, in.uQ, in.uK, in.uV);
          const double err =
              std::max({relErr(r.fwd.O, f.O), relErr(r.fwd.L, f.L), relErr(r.tO, tO)});
          CHECK(err < 1e-12);
          worst = std::max(worst, err);
        }
  report.note("tiled forward with JVP vs dense (O, L, tO)", worst);
}

TEST_CASE("causal and window loop bounds skip exactly the fully masked tiles", "[oracle][tiled][causal]") {
  struct Case {
    Index N, M;
    Tiling t;
  };
  const Case cases[] = {{64, 64, {16, 16}}, {37, 53, {13, 7}}, {53, 37, {13, 7}},
                        {40, 8, {8, 8}},    {8, 40, {3, 5}},   {10, 10, {64, 64}}};
  // Windows (left, right): none, one side, both, empty sides (0), wider than the problem.
  const std::pair<Index, Index> windows[] = {{-1, -1}, {3, 2}, {0, 0}, {5, -1}, {-1, 4}, {2, 0},
                                             {0, 6}, {100, 100}};
  for (const Case& cs : cases)
    for (auto [left, right] : windows)
    for (bool causal : {false, true}) {
      const Problem p = windowed(makeProblem(cs.N, cs.M, 4, causal), left, right);
      INFO(describe(p) << " block_m=" << cs.t.block_m << " block_n=" << cs.t.block_n);
      // The bounds agree with the mask: visibleKeyEnd(i1) = 1 + last key row i1 - 1 sees,
      // visibleKeyBegin(i0) = first key row i0 sees (M if none; a bound past the last visible
      // key is enough when the row sees none), visibleQueryBegin(j0) = first query row that
      // sees key j0, visibleQueryEnd(j1) = 1 + last query row that sees key j1 - 1.
      for (Index i1 = 1; i1 <= p.N; ++i1) {
        Index end = 0, begin = p.M;
        for (Index j = 0; j < p.M; ++j)
          if (!p.masked(i1 - 1, j)) end = j + 1;
        for (Index j = p.M - 1; j >= 0; --j)
          if (!p.masked(i1 - 1, j)) begin = j;
        if (p.rightReach() >= 0 || end > 0) CHECK(visibleKeyEnd(p, i1) == end);
        if (end > 0) CHECK(visibleKeyBegin(p, i1 - 1) == begin);
        CHECK(visibleKeyBegin(p, i1 - 1) <= begin);
        CHECK(visibleKeyEnd(p, i1) >= end);
      }
      for (Index j0 = 0; j0 < p.M; ++j0) {
        Index begin = p.N, end = 0;
        for (Index i = p.N - 1; i >= 0; --i)
          if (!p.masked(i, j0)) begin = i;
        for (Index i = 0; i < p.N; ++i)
          if (!p.masked(i, j0)) end = i + 1;
        if (end > 0) {
          CHECK(visibleQueryBegin(p, j0) == begin);
          CHECK(visibleQueryEnd(p, j0 + 1) == end);
        }
        CHECK(visibleQueryBegin(p, j0) <= begin);
        CHECK(visibleQueryEnd(p, j0 + 1) >= end);
      }
      // Tiles with at least one visible (query, key) pair: every pass must visit exactly these.
      Index live = 0;
      for (Index i0 = 0; i0 < p.N; i0 += cs.t.block_m)
        for (Index j0 = 0; j0 < p.M; j0 += cs.t.block_n) {
          bool any = false;
          for (Index i = i0; i < std::min(i0 + cs.t.block_m, p.N); ++i)
            for (Index j = j0; j < std::min(j0 + cs.t.block_n, p.M); ++j) any = any || !p.masked(i, j);
          live += any;
        }
      const Inputs in = randomInputs(p, 500);
      TileStats fs, bs, gs;
      const ForwardResult f = tiled::forward(p, cs.t, in.Q, in.K, in.V, &fs);
      const BackwardResult b = tiled::backward(p, cs.t, in.Q, in.K, in.V, in.dO, f, &bs);
      tiled::bob(p, cs.t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, b, X2Source::FromDQ, &gs);
      CHECK(fs.tiles == live);      // forward, query-major
      CHECK(bs.tiles == live);      // backward, key-major
      CHECK(gs.tiles == 2 * live);  // BoB pass 1 (query-major) + pass 2 (key-major)
      TileStats ds;
      const ForwardDualResult fd =
          tiled::forwardDual(p, cs.t, in.Q, in.K, in.V, in.uQ, in.uK, in.uV, &ds);
      CHECK(ds.tiles == live);  // the forward with its JVP, query-major
      if (causal && left < 0 && p.N == p.M && p.N % cs.t.block_m == 0 &&
          cs.t.block_m == cs.t.block_n) {
        const Index nb = p.N / cs.t.block_m;  // square causal: the lower triangle of blocks
        CHECK(live == nb * (nb + 1) / 2);
      }
      // The skipped tiles change nothing: the tiled model equals the dense reference.
      const ForwardResult df = dense::forward(p, in.Q, in.K, in.V);
      const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
      const BobResult tr = tiled::bob(p, cs.t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, b,
                                      X2Source::FromDQ);
      CHECK(relErr(f.O, df.O) < 1e-12);
      CHECK(relErr(fd.fwd.O, df.O) < 1e-12);
      CHECK(relErr(fd.fwd.L, df.L) < 1e-12);
      CHECK(relErr(fd.tO, dense::forwardJvp(p, in.Q, in.K, in.V, in.uQ, in.uK, in.uV)) < 1e-12);
      CHECK(relErr(b.dK, dense::backward(p, in.Q, in.K, in.V, in.dO).dK) < 1e-12);
      CHECK(relErr(tr.gQ, dr.gQ) < 1e-12);
      CHECK(relErr(tr.gK, dr.gK) < 1e-12);
      CHECK(relErr(tr.gV, dr.gV) < 1e-12);
    }
}

TEST_CASE("sliding windows: the mask as flash-attn defines it, gradients by finite differences",
          "[oracle][dense][window][fd]") {
  // Query i sees keys [i + (M - N) - left, i + (M - N) + right]; causal = (-1, 0).
  for (Index N : {6, 9})
    for (Index M : {6, 9})
      for (auto [left, right] : {std::pair<Index, Index>{2, 1}, {0, 0}, {3, -1}, {-1, 2}}) {
        const Problem p = windowed(makeProblem(N, M, 3, false), left, right);
        INFO(describe(p));
        for (Index i = 0; i < N; ++i)
          for (Index j = 0; j < M; ++j) {
            const Index diagonal = i + M - N;
            const bool visible = (left < 0 || j >= diagonal - left) && (right < 0 || j <= diagonal + right);
            CHECK(p.masked(i, j) == !visible);
          }
      }
  CHECK(windowed(makeProblem(7, 5, 2, true), -1, -1).masked(3, 2) ==
        makeProblem(7, 5, 2, true).masked(3, 2));
  // (-1, 0) is causal.
  const Problem causal = makeProblem(7, 9, 2, true), window = windowed(makeProblem(7, 9, 2, false), -1, 0);
  for (Index i = 0; i < 7; ++i)
    for (Index j = 0; j < 9; ++j) CHECK(causal.masked(i, j) == window.masked(i, j));

  // Every derivative, BoB included, by finite differences; N > M with a window that leaves the
  // first rows empty (fully masked: zero outputs, finite gradients).
  const Problem problems[] = {windowed(makeProblem(5, 6, 2, false), 1, 1),
                              windowed(makeProblem(6, 4, 2, true), 1, -1),
                              windowed(makeProblem(4, 7, 3, false), 0, 2)};
  std::uint64_t seed = 900;
  for (const Problem& p : problems) {
    INFO(describe(p));
    const Inputs in = randomInputs(p, seed++);
    const BobResult r = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    const Matrix fQ = fdGradient(in.Q, [&](const Matrix& x) { return firstBackwardPairing(p, in, x, in.K, in.V, in.dO); });
    const Matrix fK = fdGradient(in.K, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, x, in.V, in.dO); });
    const Matrix fV = fdGradient(in.V, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, in.K, x, in.dO); });
    const Matrix fdO = fdGradient(in.dO, [&](const Matrix& x) { return firstBackwardPairing(p, in, in.Q, in.K, in.V, x); });
    CHECK(relErr(r.gQ, fQ) < 1e-6);
    CHECK(relErr(r.gK, fK) < 1e-6);
    CHECK(relErr(r.gV, fV) < 1e-6);
    CHECK(relErr(r.gdO, fdO) < 1e-6);
    const BackwardResult g = dense::backward(p, in.Q, in.K, in.V, in.dO);
    auto pairing = [&](const Matrix& Q, const Matrix& K, const Matrix& V) {
      return dot(in.dO, dense::forward(p, Q, K, V).O);
    };
    CHECK(relErr(g.dQ, fdGradient(in.Q, [&](const Matrix& x) { return pairing(x, in.K, in.V); })) < 1e-6);
    CHECK(relErr(g.dK, fdGradient(in.K, [&](const Matrix& x) { return pairing(in.Q, x, in.V); })) < 1e-6);
    CHECK(relErr(g.dV, fdGradient(in.V, [&](const Matrix& x) { return pairing(in.Q, in.K, x); })) < 1e-6);
  }
  // A negative size other than -1 is refused.
  CHECK_THROWS_WITH(validate(windowed(makeProblem(4, 4, 2, false), -2, 0)),
                    Catch::Contains("window sizes must be -1"));
}

// ---- 4. Argument checking -------------------------------------------------------------------

TEST_CASE("bad arguments throw std::invalid_argument naming the argument", "[oracle][validate]") {
  const Problem p = makeProblem(5, 6, 4, true);
  const Inputs in = randomInputs(p, 600);
  const Tiling t{4, 4};
  using Catch::Contains;

  auto withN = [&](Index N) { Problem q = p; q.N = N; return q; };
  auto withM = [&](Index M) { Problem q = p; q.M = M; return q; };
  auto withD = [&](Index d) { Problem q = p; q.d = d; return q; };
  auto withScale = [&](double s) { Problem q = p; q.scale = s; return q; };

  REQUIRE_THROWS_AS(dense::forward(withN(0), in.Q, in.K, in.V), std::invalid_argument);
  REQUIRE_THROWS_WITH(dense::forward(withN(0), in.Q, in.K, in.V), Contains("N must be positive, got 0"));
  REQUIRE_THROWS_WITH(dense::forward(withM(0), in.Q, in.K, in.V), Contains("M must be positive, got 0"));
  REQUIRE_THROWS_WITH(dense::forward(withD(0), in.Q, in.K, in.V), Contains("d must be positive, got 0"));
  REQUIRE_THROWS_WITH(dense::forward(withN(-3), in.Q, in.K, in.V), Contains("N must be positive, got -3"));
  REQUIRE_THROWS_WITH(dense::forward(withScale(std::nan("")), in.Q, in.K, in.V), Contains("scale must be finite"));
  REQUIRE_THROWS_WITH(dense::forward(withScale(INFINITY), in.Q, in.K, in.V), Contains("scale must be finite"));
  REQUIRE_THROWS_WITH(defaultScale(0), Contains("d must be positive"));
  REQUIRE_THROWS_WITH(Matrix(-1, 2), Contains("negative size"));

  // Shapes that do not match the problem name the matrix and the expected size.
  std::mt19937_64 rng(1);
  const Matrix K5 = randomMatrix(5, 4, rng), Q3 = randomMatrix(5, 3, rng);
  REQUIRE_THROWS_WITH(dense::forward(p, in.Q, K5, in.V), Contains("oracle: K has 5 rows, expected M = 6"));
  REQUIRE_THROWS_WITH(dense::forward(p, Q3, in.K, in.V), Contains("Q has 3 cols, expected d = 4"));
  REQUIRE_THROWS_WITH(dense::forward(p, in.Q, in.K, K5), Contains("V has 5 rows, expected M = 6"));
  REQUIRE_THROWS_WITH(dense::backward(p, in.Q, in.K, in.V, Q3), Contains("dO has 3 cols"));
  REQUIRE_THROWS_WITH(dense::bob(p, in.Q, in.K, in.V, in.dO, Q3, in.uK, in.uV), Contains("uQ has 3 cols"));
  REQUIRE_THROWS_WITH(dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, K5, in.uV), Contains("uK has 5 rows"));
  REQUIRE_THROWS_WITH(dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, K5), Contains("uV has 5 rows"));
  Matrix ragged = in.Q;
  ragged.data.pop_back();
  REQUIRE_THROWS_WITH(dense::forward(p, ragged, in.K, in.V), Contains("Q has 19 elements, expected rows * cols = 20"));

  // Saved state and tiling.
  const ForwardResult f = dense::forward(p, in.Q, in.K, in.V);
  const BackwardResult b = dense::backward(p, in.Q, in.K, in.V, in.dO);
  std::vector<double> shortL(f.L.begin(), f.L.end() - 1);
  REQUIRE_THROWS_WITH(dense::backward(p, in.Q, in.K, in.V, in.dO, f.O, shortL), Contains("L has 4 elements, expected N = 5"));
  REQUIRE_THROWS_WITH(tiled::forward(p, Tiling{0, 4}, in.Q, in.K, in.V), Contains("block_m must be positive, got 0"));
  REQUIRE_THROWS_WITH(tiled::forward(p, Tiling{4, -2}, in.Q, in.K, in.V), Contains("block_n must be positive, got -2"));
  REQUIRE_THROWS_WITH(tiled::forward(withM(0), t, in.Q, in.K, in.V), Contains("M must be positive"));
  REQUIRE_THROWS_WITH(tiled::backward(p, t, in.Q, in.K, in.V, in.dO, ForwardResult{f.O, shortL}), Contains("L has 4 elements"));
  BackwardResult noDQ = b;
  noDQ.dQ = Matrix();
  REQUIRE_THROWS_WITH(tiled::bob(p, t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, noDQ),
                      Contains("dQ has 0 rows, expected N = 5"));
  // Without dQ, X2 is accumulated and the call is fine.
  CHECK_NOTHROW(tiled::bob(p, t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, noDQ, X2Source::Accumulate));
  BackwardResult shortD = b;
  shortD.D.pop_back();
  REQUIRE_THROWS_WITH(tiled::bob(p, t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, shortD), Contains("D has 4 elements"));
  REQUIRE_THROWS_WITH(tiled::bob(withScale(0.0), t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, b),
                      Contains("scale must be nonzero"));

  // Batched: batch/heads mismatch and per-head shape.
  const HeadTensor Qb(2, 3, p.N, p.d), Kb(2, 3, p.M, p.d), Kbad(2, 2, p.M, p.d), Vshort(2, 3, p.M - 1, p.d);
  REQUIRE_THROWS_WITH(dense::forwardBatched(p, Qb, Kbad, Kb), Contains("K has 2 heads, which does not divide Q's 3"));
  REQUIRE_THROWS_WITH(dense::forwardBatched(p, Qb, HeadTensor(1, 3, p.M, p.d), Kb),
                      Contains("K has batch x heads = 1 x 3, expected 2 x 3"));
  REQUIRE_THROWS_WITH(dense::backwardBatched(p, HeadTensor(2, 4, p.N, p.d), Kbad, Kb, HeadTensor(2, 4, p.N, p.d)),
                      Contains("V has batch x heads = 2 x 3, expected 2 x 2"));
  REQUIRE_THROWS_WITH(dense::forwardBatched(p, Qb, Kb, Vshort), Contains("V has 5 rows per head, expected M = 6"));
  REQUIRE_THROWS_WITH(dense::forwardBatched(p, HeadTensor(0, 3, p.N, p.d), Kb, Kb), Contains("Q batch must be positive"));

  // V of another width: the values' side (V, dO, O, uV, tV) is checked against dv, and says so;
  // the scores' side (uQ) against d.
  const Problem pv = makeProblem(5, 6, 4, 3, true);
  const Inputs inv = randomInputs(pv, 601);
  const ForwardResult fv = dense::forward(pv, inv.Q, inv.K, inv.V);
  REQUIRE_THROWS_WITH(dense::forward(pv, in.Q, in.K, in.V), Contains("oracle: V has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(dense::backward(pv, inv.Q, inv.K, inv.V, in.dO), Contains("dO has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(dense::backward(pv, inv.Q, inv.K, inv.V, inv.dO, f.O, fv.L), Contains("O has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(dense::bob(pv, inv.Q, inv.K, inv.V, inv.dO, inv.uQ, inv.uK, in.uV), Contains("uV has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(dense::bob(pv, inv.Q, inv.K, inv.V, inv.dO, inv.dO, inv.uK, inv.uV), Contains("uQ has 3 cols, expected d = 4"));
  REQUIRE_THROWS_WITH(dense::forwardJvp(pv, inv.Q, inv.K, inv.V, inv.uQ, inv.uK, in.uV), Contains("tV has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(tiled::forward(pv, t, inv.Q, inv.K, in.V), Contains("V has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(tiled::backward(pv, t, inv.Q, inv.K, inv.V, inv.dO, f), Contains("O has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(tiled::bob(pv, t, inv.Q, inv.K, inv.V, in.dO, inv.uQ, inv.uK, inv.uV), Contains("dO has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(tiled::forwardDual(pv, t, inv.Q, inv.K, inv.V, inv.uQ, inv.uK, in.uV), Contains("tV has 4 cols, expected dv = 3"));
  REQUIRE_THROWS_WITH(dense::forwardBatched(pv, Qb, Kb, Kb), Contains("V has 4 cols per head, expected dv = 3"));
  Problem negativeDv = pv;
  negativeDv.dv = -1;
  REQUIRE_THROWS_WITH(dense::forward(negativeDv, inv.Q, inv.K, in.V), Contains("dv must be positive (or 0 for d), got -1"));
}

// ---- 5. Fully masked rows --------------------------------------------------------------------

TEST_CASE("fully masked rows (causal, M < N) are finite, zero, and equal in dense and tiled", "[oracle][causal][masked]") {
  // Rows 0..11 see no key; V as wide as Q and K, then wider.
  for (const Problem& p : {makeProblem(20, 8, 16, true), makeProblem(20, 8, 16, 24, true)}) {
    INFO(describe(p));
    const Index masked = p.N - p.M;
    const Inputs in = randomInputs(p, 700);
    const Tiling t{8, 8};  // the first query block is entirely masked, the second partly
    const ForwardResult df = dense::forward(p, in.Q, in.K, in.V), tf = tiled::forward(p, t, in.Q, in.K, in.V);
    const BackwardResult db = dense::backward(p, in.Q, in.K, in.V, in.dO), tb = tiled::backward(p, t, in.Q, in.K, in.V, in.dO, tf);
    const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    for (X2Source x2 : {X2Source::FromDQ, X2Source::Accumulate}) {
      const BobResult tr = tiled::bob(p, t, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, tf, tb, x2);
      for (const BobResult* r : {&dr, &tr}) {
        for (const std::vector<double>* v : {&r->gQ.data, &r->gK.data, &r->gV.data, &r->gdO.data, &r->c, &r->b})
          CHECK(allFinite(*v));
        for (Index i = 0; i < masked; ++i) {
          CHECK(r->c[static_cast<std::size_t>(i)] == 0.0);
          CHECK(r->b[static_cast<std::size_t>(i)] == 0.0);
          for (Index k = 0; k < p.d; ++k) CHECK(r->gQ(i, k) == 0.0);
          for (Index k = 0; k < p.valueDim(); ++k) CHECK(r->gdO(i, k) == 0.0);
        }
      }
      CHECK(relErr(tr.gQ, dr.gQ) < 1e-12);
      CHECK(relErr(tr.gK, dr.gK) < 1e-12);
      CHECK(relErr(tr.gV, dr.gV) < 1e-12);
      CHECK(relErr(tr.gdO, dr.gdO) < 1e-12);
      CHECK(relErr(tr.c, dr.c) < 1e-12);
      CHECK(relErr(tr.b, dr.b) < 1e-12);
    }
    for (const ForwardResult* f : {&df, &tf}) {
      CHECK(allFinite(f->O.data));
      for (Index i = 0; i < p.N; ++i)
        CHECK(std::isinf(f->L[static_cast<std::size_t>(i)]) == (i < masked));
      for (Index i = 0; i < masked; ++i)
        for (Index k = 0; k < p.valueDim(); ++k) CHECK(f->O(i, k) == 0.0);
    }
    for (const BackwardResult* b : {&db, &tb}) {
      CHECK(allFinite(b->dQ.data));
      CHECK(allFinite(b->dK.data));
      CHECK(allFinite(b->dV.data));
      CHECK(allFinite(b->D));
      for (Index i = 0; i < masked; ++i) {
        CHECK(b->D[static_cast<std::size_t>(i)] == 0.0);
        for (Index k = 0; k < p.d; ++k) CHECK(b->dQ(i, k) == 0.0);
      }
    }
    CHECK(relErr(tf.O, df.O) < 1e-12);
    CHECK(relErr(tf.L, df.L) < 1e-12);
    CHECK(relErr(tb.dQ, db.dQ) < 1e-12);
    CHECK(relErr(tb.dK, db.dK) < 1e-12);
    CHECK(relErr(tb.dV, db.dV) < 1e-12);
    // The forward with its JVP in one sweep: O = 0, tO = 0 and L = -inf in the rows that see no
    // key, the others the dense forward's and JVP's.
    const ForwardDualResult fd = tiled::forwardDual(p, t, in.Q, in.K, in.V, in.uQ, in.uK, in.uV);
    const Matrix dtO = dense::forwardJvp(p, in.Q, in.K, in.V, in.uQ, in.uK, in.uV);
    CHECK(allFinite(fd.fwd.O.data));
    CHECK(allFinite(fd.tO.data));
    for (Index i = 0; i < p.N; ++i)
      CHECK(std::isinf(fd.fwd.L[static_cast<std::size_t>(i)]) == (i < masked));
    for (Index i = 0; i < masked; ++i)
      for (Index k = 0; k < p.valueDim(); ++k) {
        CHECK(fd.fwd.O(i, k) == 0.0);
        CHECK(fd.tO(i, k) == 0.0);
        CHECK(dtO(i, k) == 0.0);
      }
    CHECK(relErr(fd.fwd.O, df.O) < 1e-12);
    CHECK(relErr(fd.fwd.L, df.L) < 1e-12);
    CHECK(relErr(fd.tO, dtO) < 1e-12);
  }
}

// ---- Multi-head -------------------------------------------------------------------------------

TEST_CASE("batched dense calls equal per-head calls", "[oracle][dense][batched]") {
  // V as wide as Q and K, then narrower.
  for (const Problem& p : {makeProblem(7, 9, 4, true), makeProblem(7, 9, 4, 3, true)}) {
    INFO(describe(p));
    const Index B = 2, H = 3;
    std::mt19937_64 rng(800);
    auto randomTensor = [&](Index rows, Index cols) {
      HeadTensor t(B, H, rows, cols);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      for (double& x : t.data) x = u(rng);
      return t;
    };
    const Index d = p.d, dv = p.valueDim();
    const HeadTensor Q = randomTensor(p.N, d), K = randomTensor(p.M, d), V = randomTensor(p.M, dv),
                     dO = randomTensor(p.N, dv), uQ = randomTensor(p.N, d), uK = randomTensor(p.M, d),
                     uV = randomTensor(p.M, dv);
    const BatchedForwardResult f = dense::forwardBatched(p, Q, K, V);
    const BatchedBackwardResult g = dense::backwardBatched(p, Q, K, V, dO);
    const BatchedBobResult r = dense::bobBatched(p, Q, K, V, dO, uQ, uK, uV);
    CHECK(f.O.cols == dv);
    CHECK(g.dV.cols == dv);
    CHECK(r.gV.cols == dv);
    CHECK(r.gdO.cols == dv);
    for (Index b = 0; b < B; ++b)
      for (Index h = 0; h < H; ++h) {
        const ForwardResult f1 = dense::forward(p, Q.head(b, h), K.head(b, h), V.head(b, h));
        CHECK(f.O.head(b, h).data == f1.O.data);
        CHECK(f.L.head(b, h).data == f1.L);
        const BackwardResult g1 = dense::backward(p, Q.head(b, h), K.head(b, h), V.head(b, h), dO.head(b, h));
        CHECK(g.dQ.head(b, h).data == g1.dQ.data);
        CHECK(g.dK.head(b, h).data == g1.dK.data);
        CHECK(g.dV.head(b, h).data == g1.dV.data);
        CHECK(g.D.head(b, h).data == g1.D);
        const BobResult r1 = dense::bob(p, Q.head(b, h), K.head(b, h), V.head(b, h), dO.head(b, h),
                                        uQ.head(b, h), uK.head(b, h), uV.head(b, h));
        CHECK(r.gQ.head(b, h).data == r1.gQ.data);
        CHECK(r.gK.head(b, h).data == r1.gK.data);
        CHECK(r.gV.head(b, h).data == r1.gV.data);
        CHECK(r.gdO.head(b, h).data == r1.gdO.data);
        CHECK(r.c.head(b, h).data == r1.c);
        CHECK(r.b.head(b, h).data == r1.b);
      }
    // Heads really differ (the loop did not reuse one head).
    CHECK(r.gQ.head(0, 0).data != r.gQ.head(1, 2).data);
  }
}

TEST_CASE("grouped-query attention: shared key/value heads, their gradients summed over the group (finite differences)",
          "[oracle][dense][batched][gqa][fd]") {
  // V as wide as Q and K, then narrower.
  for (const Problem& p : {makeProblem(4, 5, 3, true), makeProblem(4, 5, 3, 2, true)}) {
    INFO(describe(p));
    const Index B = 2, H = 4, KV = 2, group = H / KV;
    std::mt19937_64 rng(900);
    auto randomTensor = [&](Index heads, Index rows, Index cols) {
      HeadTensor t(B, heads, rows, cols);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      for (double& x : t.data) x = u(rng);
      return t;
    };
    const Index d = p.d, dv = p.valueDim();
    const HeadTensor Q = randomTensor(H, p.N, d), K = randomTensor(KV, p.M, d), V = randomTensor(KV, p.M, dv),
                     dO = randomTensor(H, p.N, dv), uQ = randomTensor(H, p.N, d), uK = randomTensor(KV, p.M, d),
                     uV = randomTensor(KV, p.M, dv);
    const BatchedForwardResult f = dense::forwardBatched(p, Q, K, V);
    const BatchedBackwardResult g = dense::backwardBatched(p, Q, K, V, dO);
    const BatchedBobResult r = dense::bobBatched(p, Q, K, V, dO, uQ, uK, uV);
    REQUIRE(g.dK.heads == KV);
    REQUIRE(r.gV.heads == KV);

    // As K and V repeated to every query head, with the key-side gradients summed over a group.
    auto repeated = [&](const HeadTensor& t) {
      HeadTensor out(B, H, t.rows, t.cols);
      for (Index b = 0; b < B; ++b)
        for (Index h = 0; h < H; ++h) out.setHead(b, h, t.head(b, h / group));
      return out;
    };
    const BatchedForwardResult fr = dense::forwardBatched(p, Q, repeated(K), repeated(V));
    const BatchedBackwardResult gr = dense::backwardBatched(p, Q, repeated(K), repeated(V), dO);
    const BatchedBobResult rr = dense::bobBatched(p, Q, repeated(K), repeated(V), dO, uQ, repeated(uK), repeated(uV));
    CHECK(f.O.data == fr.O.data);
    CHECK(g.dQ.data == gr.dQ.data);
    CHECK(r.gQ.data == rr.gQ.data);
    CHECK(r.gdO.data == rr.gdO.data);
    for (Index b = 0; b < B; ++b)
      for (Index kh = 0; kh < KV; ++kh) {
        Matrix dK(p.M, d), gK(p.M, d), gV(p.M, dv);
        for (Index j = 0; j < group; ++j) {
          const Index h = kh * group + j;
          for (std::size_t k = 0; k < dK.data.size(); ++k) {
            dK.data[k] += gr.dK.head(b, h).data[k];
            gK.data[k] += rr.gK.head(b, h).data[k];
          }
          for (std::size_t k = 0; k < gV.data.size(); ++k) gV.data[k] += rr.gV.head(b, h).data[k];
        }
        CHECK(g.dK.head(b, kh).data == dK.data);
        CHECK(r.gK.head(b, kh).data == gK.data);
        CHECK(r.gV.head(b, kh).data == gV.data);
      }

    // Finite differences through the shared heads: dK of sum(O o dO) over every query head, and
    // BoB's gK, gV as derivatives of <uQ, dQ> + <uK, dK> + <uV, dV>.
    const HeadTensor fdK = fdGradient(K, [&](const HeadTensor& k) { return dot(dense::forwardBatched(p, Q, k, V).O.data, dO.data); });
    auto pairing = [&](const HeadTensor& k, const HeadTensor& v) {
      return backwardPairing(dense::backwardBatched(p, Q, k, v, dO), uQ, uK, uV);
    };
    const HeadTensor fgK = fdGradient(K, [&](const HeadTensor& k) { return pairing(k, V); });
    const HeadTensor fgV = fdGradient(V, [&](const HeadTensor& v) { return pairing(K, v); });
    const double eK = relErr(g.dK.data, fdK.data), egK = relErr(r.gK.data, fgK.data),
                 egV = relErr(r.gV.data, fgV.data);
    report.note("FD GQA dK, gK, gV (max abs/max)", std::max({eK, egK, egV}));
    CHECK(eK < 1e-6);
    CHECK(egK < 1e-6);
    CHECK(egV < 1e-6);
  }
}

TEST_CASE("variable-length batches: packed sequences attend only to themselves (finite differences)",
          "[oracle][dense][varlen][fd]") {
  const Index H = 2, KV = 1, d = 2;
  std::mt19937_64 rng(950);
  auto randomWide = [&](Index heads, Index rows, Index cols) {
    HeadTensor t(1, heads, rows, cols);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (double& x : t.data) x = u(rng);
    return t;
  };
  auto randomTensor = [&](Index heads, Index rows) { return randomWide(heads, rows, d); };

  SECTION("equal lengths are the dense batch, reshaped") {
    // V as wide as Q and K, then wider.
    for (const Index dv : {d, Index{3}}) {
      INFO("dv=" << dv);
      const Problem p = windowed(makeProblem(4, 5, d, dv, true), 2, -1);
      const Packing packing{{0, 4, 8}, {0, 5, 10}};
      const HeadTensor Q = randomTensor(H, 8), K = randomTensor(KV, 10), V = randomWide(KV, 10, dv),
                       dO = randomWide(H, 8, dv), uQ = randomTensor(H, 8), uK = randomTensor(KV, 10),
                       uV = randomWide(KV, 10, dv);
      // (1, heads, 2 x rows, d) -> (2, heads, rows, d)
      auto batched = [](const HeadTensor& t) {
        const Index rows = t.rows / 2;
        HeadTensor out(2, t.heads, rows, t.cols);
        for (Index b = 0; b < 2; ++b)
          for (Index h = 0; h < t.heads; ++h)
            for (Index i = 0; i < rows; ++i)
              for (Index c = 0; c < t.cols; ++c)
                out.data[((b * t.heads + h) * rows + i) * t.cols + c] =
                    t.data[(h * t.rows + b * rows + i) * t.cols + c];
        return out;
      };
      const BatchedBobResult r = dense::bobVarlen(p, packing, Q, K, V, dO, uQ, uK, uV);
      const BatchedBobResult rb = dense::bobBatched(p, batched(Q), batched(K), batched(V), batched(dO),
                                                    batched(uQ), batched(uK), batched(uV));
      CHECK(batched(r.gQ).data == rb.gQ.data);
      CHECK(batched(r.gK).data == rb.gK.data);
      CHECK(batched(r.gV).data == rb.gV.data);
      CHECK(batched(r.gdO).data == rb.gdO.data);
      CHECK(batched(r.b).data == rb.b.data);
      CHECK(batched(dense::forwardVarlen(p, packing, Q, K, V).O).data ==
            dense::forwardBatched(p, batched(Q), batched(K), batched(V)).O.data);
      const BatchedBackwardResult g = dense::backwardVarlen(p, packing, Q, K, V, dO),
                                  gb = dense::backwardBatched(p, batched(Q), batched(K), batched(V),
                                                              batched(dO));
      CHECK(batched(g.dK).data == gb.dK.data);
      CHECK(batched(g.dV).data == gb.dV.data);
      CHECK(g.dV.cols == dv);
    }
  }

  SECTION("mixed lengths, an empty sequence and one without keys") {
    // Sequences: 3 queries x 4 keys, 0 x 2, 4 x 0 (no key: O = 0, L = -inf), 2 x 3.
    const Problem p = makeProblem(1, 1, d, true);
    const Packing packing{{0, 3, 3, 7, 9}, {0, 4, 6, 6, 9}};
    const HeadTensor Q = randomTensor(H, 9), K = randomTensor(KV, 9), V = randomTensor(KV, 9),
                     dO = randomTensor(H, 9), uQ = randomTensor(H, 9), uK = randomTensor(KV, 9),
                     uV = randomTensor(KV, 9);
    const BatchedForwardResult f = dense::forwardVarlen(p, packing, Q, K, V);
    const BatchedBackwardResult g = dense::backwardVarlen(p, packing, Q, K, V, dO);
    const BatchedBobResult r = dense::bobVarlen(p, packing, Q, K, V, dO, uQ, uK, uV);
    for (Index h = 0; h < H; ++h)
      for (Index i = 3; i < 7; ++i) {
        CHECK(f.L.data[h * 9 + i] == -std::numeric_limits<double>::infinity());
        for (Index c = 0; c < d; ++c) {
          CHECK(f.O.data[(h * 9 + i) * d + c] == 0.0);
          CHECK(r.gQ.data[(h * 9 + i) * d + c] == 0.0);
        }
      }
    // Keys 4-5 belong to the sequence without queries: no gradient reaches them.
    for (Index j = 4; j < 6; ++j)
      for (Index c = 0; c < d; ++c) {
        CHECK(g.dK.data[j * d + c] == 0.0);
        CHECK(r.gV.data[j * d + c] == 0.0);
      }

    // Sequences do not see each other: changing the last one's keys leaves the others' outputs.
    HeadTensor K2 = K;
    for (Index j = 6; j < 9; ++j) K2.data[j * d] += 0.5;
    const BatchedForwardResult f2 = dense::forwardVarlen(p, packing, Q, K2, V);
    for (Index h = 0; h < H; ++h)
      for (Index i = 0; i < 7 * d; ++i) CHECK(f2.O.data[h * 9 * d + i] == f.O.data[h * 9 * d + i]);
    CHECK(f2.O.data != f.O.data);

    // Finite differences over the packed tensors: dK of sum(O o dO), and BoB's gQ, gK as
    // derivatives of <uQ, dQ> + <uK, dK> + <uV, dV>.
    const HeadTensor fdK = fdGradient(K, [&](const HeadTensor& k) {
      return dot(dense::forwardVarlen(p, packing, Q, k, V).O.data, dO.data);
    });
    auto pairing = [&](const HeadTensor& q, const HeadTensor& k) {
      return backwardPairing(dense::backwardVarlen(p, packing, q, k, V, dO), uQ, uK, uV);
    };
    const HeadTensor fgQ = fdGradient(Q, [&](const HeadTensor& q) { return pairing(q, K); });
    const HeadTensor fgK = fdGradient(K, [&](const HeadTensor& k) { return pairing(Q, k); });
    const double eK = relErr(g.dK.data, fdK.data), egQ = relErr(r.gQ.data, fgQ.data),
                 egK = relErr(r.gK.data, fgK.data);
    report.note("FD varlen dK, gQ, gK (max abs/max)", std::max({eK, egQ, egK}));
    CHECK(eK < 1e-6);
    CHECK(egQ < 1e-6);
    CHECK(egK < 1e-6);
  }

  SECTION("bad offsets are refused naming them") {
    const Problem p = makeProblem(1, 1, d, false);
    const HeadTensor Q = randomTensor(H, 6), K = randomTensor(KV, 6);
    auto error = [&](const Packing& packing) {
      try {
        dense::forwardVarlen(p, packing, Q, K, K);
      } catch (const std::invalid_argument& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    CHECK_THAT(error({{1, 6}, {0, 6}}), Catch::Contains("cu_seqlens_q[0] must be 0, got 1"));
    CHECK_THAT(error({{0, 4, 3, 6}, {0, 2, 4, 6}}), Catch::Contains("cu_seqlens_q must not decrease"));
    CHECK_THAT(error({{0, 6}, {0, 5}}), Catch::Contains("cu_seqlens_k ends at 5, but the key-side tensors hold 6 rows"));
    CHECK_THAT(error({{0, 3, 6}, {0, 6}}), Catch::Contains("cu_seqlens_q and cu_seqlens_k differ in length"));
    CHECK_THAT(error({{0}, {0}}), Catch::Contains("cu_seqlens_q needs batch + 1 >= 2 offsets"));
  }
}

// The error measure every check reports (tests, `flashbob run --check`, the demo).
#include "kernels/oracle/ErrorMeasure.h"

TEST_CASE("compare: relative L2, matching infinities, non-finite values", "[oracle][error]") {
  using flashbob::oracle::compare;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(compare({1, 2, 2}, {1, 2, 2}).relL2 == 0);
  CHECK(compare({3, 4}, {0, 0}).relL2 == Approx(5));          // absolute when ref is zero
  CHECK(compare({1.1, 0}, {1, 0}).relL2 == Approx(0.1));
  auto masked = compare({-inf, 1}, {-inf, 1});                // L of a fully masked row
  CHECK(masked.relL2 == 0);
  CHECK(masked.nonFinite == 0);
  auto bad = compare({std::nan(""), inf, 1}, {1, 1, 1});
  CHECK(bad.nonFinite == 2);
  CHECK(compare({-inf}, {inf}).nonFinite == 1);
}

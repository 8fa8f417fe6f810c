// The math behind head dims that are no multiple of 16 (docs/bob-math.md, "Head dims that are
// no multiple of 16"), on the float64 oracle: a problem of head dim d run at the tile width
// bob::kernelHeadDim(d), with Q, K, V, dO and the cotangents and tangents zero past column d and
// the scale of jit::paddedProblem (the problem's own, 1/sqrt(d) by default), gives every output
// of the unpadded problem in its first d columns and exact zeros in the others: O and L; dQ, dK,
// dV and D; BoB's gQ, gK, gV, gdO, c and b; the forward's JVP tO; and a ring step's partials
// (O and L, dQ, dK, dV, pass 1's X1..X4, c and beta, pass 2's gK, gV). The scale is what the
// padding must not change: with the padded width's default 1/sqrt(kernelHeadDim(d)) the
// outputs differ, and the test says so. With V of another width d_v ("v of another width"),
// both sides pad to kernelHeadDim(max(d, d_v)): the outputs shaped like Q and K are right in
// their first d columns, those shaped like V in their first d_v.
#include "compiler/dialect/Target.h"
#include "jit/HeadDims.h"
#include "kernels/oracle/Oracle.h"
#include "kernels/oracle/Ring.h"
#include "test/unit/OracleTestUtil.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace flashbob;
using namespace flashbob::oracle;
using namespace flashbob::oracle::testing;

namespace {

// `m` with zero columns appended up to `width`.
Matrix padded(const Matrix &m, Index width) {
  Matrix out(m.rows, width, 0.0);
  for (Index i = 0; i < m.rows; ++i)
    for (Index j = 0; j < m.cols; ++j)
      out(i, j) = m(i, j);
  return out;
}

// The first `d` columns of `m`, and whether every other column is exactly zero.
Matrix firstColumns(const Matrix &m, Index d, bool &restZero) {
  Matrix out(m.rows, d);
  restZero = true;
  for (Index i = 0; i < m.rows; ++i)
    for (Index j = 0; j < m.cols; ++j) {
      if (j < d)
        out(i, j) = m(i, j);
      else
        restZero = restZero && m(i, j) == 0.0;
    }
  return out;
}

// The oracle's problem as the library runs a padded call: jit::paddedProblem's head dim and
// scale (or, `wrongScale`, the padded width's default instead).
Problem paddedOracleProblem(const Problem &p, bool wrongScale) {
  AttentionProblem api;
  api.seqQ = p.N;
  api.seqK = p.M;
  api.headDim = p.d;
  api.headDimV = p.dv;
  api.causal = p.causal;
  api.windowLeft = p.windowLeft;
  api.windowRight = p.windowRight;
  const AttentionProblem kernels = jit::paddedProblem(api);
  Problem q = p;
  q.d = kernels.headDim;
  q.dv = kernels.headDimV; // one width: 0
  q.scale = wrongScale ? defaultScale(q.d) : kernels.effectiveScale();
  return q;
}

// Worst relative error of the padded problem's outputs' first columns (as many as the unpadded
// output has: d, or d_v for those shaped like V) against the unpadded problem's; every padding
// column must be exactly zero.
struct Compare {
  double worst = 0;
  void matrix(const char *name, const Matrix &paddedOut, const Matrix &want) {
    bool restZero = false;
    const Matrix got = firstColumns(paddedOut, want.cols, restZero);
    INFO(name);
    CHECK(restZero);
    worst = std::max(worst, relErr(got, want));
  }
  void rows(const char *name, const std::vector<double> &got, const std::vector<double> &want) {
    INFO(name);
    worst = std::max(worst, relErr(got, want));
  }
};

struct Case {
  Index n, m, d;
  bool causal;
  Index windowLeft = -1, windowRight = -1;
  Index dv = 0; // V's head dim (0: d)
};

// Every dense output and the forward's JVP: the padded problem's against the unpadded one's.
double denseWorst(const Case &c, bool wrongScale) {
  Problem p = makeProblem(c.n, c.m, c.d, c.dv, c.causal);
  p.windowLeft = c.windowLeft;
  p.windowRight = c.windowRight;
  const Problem q = paddedOracleProblem(p, wrongScale);
  REQUIRE(q.d == bob::kernelHeadDim(std::max(p.d, p.valueDim())));
  const Inputs in = randomInputs(p, 1000 + uint64_t(c.d));
  const Index w = q.d;
  const Matrix Q = padded(in.Q, w), K = padded(in.K, w), V = padded(in.V, w),
               dO = padded(in.dO, w), uQ = padded(in.uQ, w), uK = padded(in.uK, w),
               uV = padded(in.uV, w);
  Compare cmp;
  const ForwardResult f = dense::forward(p, in.Q, in.K, in.V), fp = dense::forward(q, Q, K, V);
  cmp.matrix("O", fp.O, f.O);
  cmp.rows("L", fp.L, f.L);
  const BackwardResult b = dense::backward(p, in.Q, in.K, in.V, in.dO),
                       bp = dense::backward(q, Q, K, V, dO);
  cmp.matrix("dQ", bp.dQ, b.dQ);
  cmp.matrix("dK", bp.dK, b.dK);
  cmp.matrix("dV", bp.dV, b.dV);
  cmp.rows("D", bp.D, b.D);
  const BobResult g = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV),
                  gp = dense::bob(q, Q, K, V, dO, uQ, uK, uV);
  cmp.matrix("gQ", gp.gQ, g.gQ);
  cmp.matrix("gK", gp.gK, g.gK);
  cmp.matrix("gV", gp.gV, g.gV);
  cmp.matrix("gdO", gp.gdO, g.gdO);
  cmp.rows("c", gp.c, g.c);
  cmp.rows("b", gp.b, g.b);
  // The JVP along tangents (uQ, uK, uV).
  cmp.matrix("tO", dense::forwardJvp(q, Q, K, V, uQ, uK, uV),
             dense::forwardJvp(p, in.Q, in.K, in.V, in.uQ, in.uK, in.uV));
  return cmp.worst;
}

// One ring step's partials (a (query shard, key shard) pair of a causal N = M problem): the
// padded problem's against the unpadded one's.
double ringStepWorst(Index d, bool wrongScale) {
  const Index n = 24;
  const Problem p = makeProblem(n, n, d, true);
  const Problem q = paddedOracleProblem(p, wrongScale);
  const Inputs in = randomInputs(p, 2000 + uint64_t(d));
  const ForwardResult whole = dense::forward(p, in.Q, in.K, in.V);
  const BackwardResult first = dense::backward(p, in.Q, in.K, in.V, in.dO);
  const BobResult second = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
  // Query rows 12..23 against key rows 4..15: a pair that straddles the diagonal.
  std::vector<Index> queryRows(12), keyRows(12);
  std::iota(queryRows.begin(), queryRows.end(), 12);
  std::iota(keyRows.begin(), keyRows.end(), 4);
  auto shards = [&](Index width, ring::QueryShard &qs, ring::KeyShard &ks) {
    qs.rows = queryRows;
    qs.Q = padded(ring::gatherRows(in.Q, queryRows), width);
    qs.dO = padded(ring::gatherRows(in.dO, queryRows), width);
    qs.uQ = padded(ring::gatherRows(in.uQ, queryRows), width);
    // The whole sequence's row scalars (the padded problem's are the same: checked above).
    qs.L = ring::gatherRows(whole.L, queryRows);
    qs.D = ring::gatherRows(first.D, queryRows);
    qs.c = ring::gatherRows(second.c, queryRows);
    qs.b = ring::gatherRows(second.b, queryRows);
    ks.rows = keyRows;
    ks.K = padded(ring::gatherRows(in.K, keyRows), width);
    ks.V = padded(ring::gatherRows(in.V, keyRows), width);
    ks.uK = padded(ring::gatherRows(in.uK, keyRows), width);
    ks.uV = padded(ring::gatherRows(in.uV, keyRows), width);
  };
  ring::QueryShard qs, qsPadded;
  ring::KeyShard ks, ksPadded;
  shards(d, qs, ks);
  shards(q.d, qsPadded, ksPadded);
  Compare cmp;
  const ForwardResult f = ring::forwardStep(p, qs, ks), fp = ring::forwardStep(q, qsPadded, ksPadded);
  cmp.matrix("step O", fp.O, f.O);
  cmp.rows("step L", fp.L, f.L);
  const ring::BackwardPartial b = ring::backwardStep(p, qs, ks),
                              bp = ring::backwardStep(q, qsPadded, ksPadded);
  cmp.matrix("step dQ", bp.dQ, b.dQ);
  cmp.matrix("step dK", bp.dK, b.dK);
  cmp.matrix("step dV", bp.dV, b.dV);
  const ring::Pass1Partial x = ring::bobPass1Step(p, qs, ks),
                           xp = ring::bobPass1Step(q, qsPadded, ksPadded);
  cmp.matrix("step X1", xp.X1, x.X1);
  cmp.matrix("step X2", xp.X2, x.X2);
  cmp.matrix("step X3", xp.X3, x.X3);
  cmp.matrix("step X4", xp.X4, x.X4);
  cmp.rows("step c", xp.c, x.c);
  cmp.rows("step beta", xp.beta, x.beta);
  const ring::Pass2Partial g = ring::bobPass2Step(p, qs, ks),
                           gp = ring::bobPass2Step(q, qsPadded, ksPadded);
  cmp.matrix("step gK", gp.gK, g.gK);
  cmp.matrix("step gV", gp.gV, g.gV);
  return cmp.worst;
}

} // namespace

TEST_CASE("zero-padded head dims: every output's first d columns are the unpadded problem's, "
          "the rest zero; not with the padded width's scale",
          "[oracle][head-dims]") {
  // Head dims of both paddings (8, 40, 72, 120: in the kernels; 100, 20, 33: copies), N != M,
  // causal, a window; the padding adds exact zeros, so float64 agrees to rounding.
  const Case cases[] = {{37, 29, 8, false},       {29, 37, 40, true},  {33, 33, 72, true, 5, -1},
                        {20, 45, 100, false, 7, 3}, {40, 24, 120, true}, {17, 17, 20, false},
                        {25, 31, 33, true}};
  for (const Case &c : cases) {
    INFO("d " << c.d << " N " << c.n << " M " << c.m << (c.causal ? " causal" : ""));
    CHECK(denseWorst(c, false) <= 1e-12);
    // The padded width's default scale is another problem: O already differs by far more.
    CHECK(denseWorst(c, true) > 1e-3);
  }
  // V of another width (d_v): multi-head latent attention's 192 and 128 (q's width is the
  // padded one), V wider than Q and K, and widths that are no multiple of 16 on both sides.
  const Case otherWidths[] = {{33, 41, 192, true, -1, -1, 128}, {29, 23, 64, false, -1, -1, 96},
                              {20, 20, 24, true, 3, -1, 72},    {17, 25, 100, false, -1, -1, 20}};
  for (const Case &c : otherWidths) {
    INFO("d " << c.d << " d_v " << c.dv << " N " << c.n << " M " << c.m
              << (c.causal ? " causal" : ""));
    CHECK(denseWorst(c, false) <= 1e-12);
    // Where the padded width is d itself, its default scale is the problem's own.
    if (bob::kernelHeadDim(std::max(c.d, c.dv)) != c.d)
      CHECK(denseWorst(c, true) > 1e-3);
  }
  for (Index d : {8, 72, 100}) {
    INFO("ring step, d " << d);
    CHECK(ringStepWorst(d, false) <= 1e-12);
    CHECK(ringStepWorst(d, true) > 1e-3);
  }
  // A head dim that is a tile width already runs as it is.
  for (Index d : {16, 64, 256}) {
    AttentionProblem api;
    api.headDim = d;
    CHECK(jit::paddedProblem(api).headDim == d);
    CHECK(jit::headDimPadding(api) == jit::HeadDimPadding::none);
  }
}

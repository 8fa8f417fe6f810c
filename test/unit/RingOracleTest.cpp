// Tests of the float64 ring (context-parallel) model (kernels/oracle/Ring.h,
// docs/context-parallel.md): the ring's forward, backward and BoB against the dense reference
// for 1 to 4 simulated ranks, contiguous and zigzag shards; that the checks fail when a partial
// is combined wrongly; the shards and the schedule; and zigzag's causal load balance.
#include "kernels/oracle/Oracle.h"
#include "kernels/oracle/Ring.h"
#include "test/unit/OracleTestUtil.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

using namespace flashbob::oracle;
using namespace flashbob::oracle::testing;
using Catch::Matchers::Contains;

namespace {

const char* name(ring::Layout layout) {
  return layout == ring::Layout::Zigzag ? "zigzag" : "contiguous";
}

// Every rank's shards of the inputs, with the global L (and D = rowsum(dO o O)) of a dense
// forward: what each rank holds once the forward ring has run.
struct Shards {
  std::vector<ring::QueryShard> q;
  std::vector<ring::KeyShard> k;
};

Shards shardInputs(const Problem& p, const ring::Ring& rg, const Inputs& in, const ForwardResult& f) {
  Shards s;
  for (Index r = 0; r < rg.ranks; ++r) {
    ring::QueryShard q;
    q.rows = ring::shardRows(rg, p.N, r);
    q.Q = ring::gatherRows(in.Q, q.rows);
    q.dO = ring::gatherRows(in.dO, q.rows);
    q.uQ = ring::gatherRows(in.uQ, q.rows);
    q.L = ring::gatherRows(f.L, q.rows);
    const Matrix O = ring::gatherRows(f.O, q.rows);
    q.D.assign(q.rows.size(), 0.0);
    for (Index i = 0; i < O.rows; ++i)
      for (Index c = 0; c < O.cols; ++c) q.D[static_cast<std::size_t>(i)] += q.dO(i, c) * O(i, c);
    s.q.push_back(q);
    ring::KeyShard k;
    k.rows = q.rows;  // N = M: a rank holds the same positions of the keys
    k.K = ring::gatherRows(in.K, k.rows);
    k.V = ring::gatherRows(in.V, k.rows);
    k.uK = ring::gatherRows(in.uK, k.rows);
    k.uV = ring::gatherRows(in.uV, k.rows);
    s.k.push_back(k);
  }
  return s;
}

double maxOf(const std::vector<Index>& v) { return static_cast<double>(*std::max_element(v.begin(), v.end())); }
double minOf(const std::vector<Index>& v) { return static_cast<double>(*std::min_element(v.begin(), v.end())); }

}  // namespace

TEST_CASE("ring shards cover every row once; zigzag pairs chunk r with chunk 2R - 1 - r", "[oracle][ring]") {
  for (Index n : {8, 37, 64})
    for (Index R = 1; R <= 4; ++R)
      for (ring::Layout layout : {ring::Layout::Contiguous, ring::Layout::Zigzag}) {
        const ring::Ring rg{R, layout};
        INFO("n=" << n << " R=" << R << " " << name(layout));
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        std::vector<Index> sizes;
        for (Index r = 0; r < R; ++r) {
          const std::vector<Index> rows = ring::shardRows(rg, n, r);
          CHECK(std::is_sorted(rows.begin(), rows.end()));
          for (Index i : rows) ++seen[static_cast<std::size_t>(i)];
          sizes.push_back(static_cast<Index>(rows.size()));
          const std::vector<ring::Range> chunks = ring::shardChunks(rg, n, r);
          if (layout == ring::Layout::Zigzag) {
            REQUIRE(chunks.size() == 2);
            CHECK(chunks[0].begin == r * n / (2 * R));
            CHECK(chunks[0].end == (r + 1) * n / (2 * R));
            CHECK(chunks[1].begin == (2 * R - 1 - r) * n / (2 * R));
            CHECK(chunks[1].end == (2 * R - r) * n / (2 * R));
          } else {
            REQUIRE(chunks.size() == 1);
          }
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        CHECK(maxOf(sizes) - minOf(sizes) <= (layout == ring::Layout::Zigzag ? 2 : 1));
        // The schedule: step 0 is the rank's own shard, every step is a permutation of the
        // shards, and a shard moves to the next rank (key shards) or the previous one (query
        // shards) from one step to the next, as a ring passes it on.
        for (Index t = 0; t < R; ++t) {
          std::vector<int> k(static_cast<std::size_t>(R), 0), q(static_cast<std::size_t>(R), 0);
          for (Index r = 0; r < R; ++r) {
            ++k[static_cast<std::size_t>(ring::keyShardAt(rg, r, t))];
            ++q[static_cast<std::size_t>(ring::queryShardAt(rg, r, t))];
            if (t == 0) CHECK((ring::keyShardAt(rg, r, 0) == r && ring::queryShardAt(rg, r, 0) == r));
            if (t + 1 < R) {
              CHECK(ring::keyShardAt(rg, (r + 1) % R, t + 1) == ring::keyShardAt(rg, r, t));
              CHECK(ring::queryShardAt(rg, (r + R - 1) % R, t + 1) == ring::queryShardAt(rg, r, t));
            }
          }
          CHECK(std::all_of(k.begin(), k.end(), [](int c) { return c == 1; }));
          CHECK(std::all_of(q.begin(), q.end(), [](int c) { return c == 1; }));
        }
      }
}

TEST_CASE("ring forward, backward and BoB equal the dense reference", "[oracle][ring]") {
  struct Shape {
    Index n, d;
    Index left, right;  // window, -1 for none
  };
  // 37 rows divide by none of R, 2R (R = 2, 3, 4); 64 by all; a window on top of both masks.
  const Shape shapes[] = {{37, 8, -1, -1}, {64, 4, -1, -1}, {37, 8, 6, 3}};
  std::uint64_t seed = 2000;
  double worstFwd = 0, worstBwd = 0, worstBob = 0;
  for (const Shape& sh : shapes)
    for (bool causal : {false, true})
      for (Index R = 1; R <= 4; ++R)
        for (ring::Layout layout : {ring::Layout::Contiguous, ring::Layout::Zigzag}) {
          const Problem p = windowed(makeProblem(sh.n, sh.n, sh.d, causal), sh.left, sh.right);
          const ring::Ring rg{R, layout};
          INFO(describe(p) << " R=" << R << " " << name(layout));
          const Inputs in = randomInputs(p, seed++);
          const ForwardResult df = dense::forward(p, in.Q, in.K, in.V);
          const BackwardResult db = dense::backward(p, in.Q, in.K, in.V, in.dO, df.O, df.L);
          const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);

          // Each pass runs on the ring's own results of the passes before it.
          const ForwardResult rf = ring::forward(p, rg, in.Q, in.K, in.V);
          const BackwardResult rb = ring::backward(p, rg, in.Q, in.K, in.V, in.dO, rf);
          const double eFwd = std::max(relErr(rf.O, df.O), relErr(rf.L, df.L));
          const double eBwd = std::max({relErr(rb.dQ, db.dQ), relErr(rb.dK, db.dK), relErr(rb.dV, db.dV),
                                        relErr(rb.D, db.D)});
          CHECK(eFwd < 1e-12);
          CHECK(eBwd < 1e-12);
          worstFwd = std::max(worstFwd, eFwd);
          worstBwd = std::max(worstBwd, eBwd);
          for (X2Source x2 : {X2Source::Accumulate, X2Source::FromDQ}) {
            INFO((x2 == X2Source::Accumulate ? "X2 accumulated" : "X2 from dQ"));
            const BobResult rr = ring::bob(p, rg, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, rf, rb, x2);
            const double e = std::max({relErr(rr.gQ, dr.gQ), relErr(rr.gK, dr.gK), relErr(rr.gV, dr.gV),
                                       relErr(rr.gdO, dr.gdO), relErr(rr.c, dr.c), relErr(rr.b, dr.b)});
            CHECK(e < 1e-12);
            worstBob = std::max(worstBob, e);
          }
        }
  WARN("ring vs dense, worst relative error: forward " << worstFwd << ", backward " << worstBwd
       << ", BoB " << worstBob);
}

TEST_CASE("ring partials are sums only with the global L and D, and b needs its - c o D", "[oracle][ring]") {
  // The same comparisons as above, made to fail: each wrong combination a distributed
  // implementation could make, shown to move the results far outside the 1e-12 bound.
  for (ring::Layout layout : {ring::Layout::Contiguous, ring::Layout::Zigzag})
    for (bool causal : {false, true}) {
      const Problem p = makeProblem(37, 37, 8, causal);
      const ring::Ring rg{3, layout};
      INFO(describe(p) << " R=3 " << name(layout));
      const Inputs in = randomInputs(p, 3000);
      const ForwardResult df = dense::forward(p, in.Q, in.K, in.V);
      const BackwardResult db = dense::backward(p, in.Q, in.K, in.V, in.dO, df.O, df.L);
      const BobResult dr = dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
      Shards s = shardInputs(p, rg, in, df);

      // Pass 1 by hand, from the step functions, rank by rank.
      Matrix dQlocalL(p.N, p.d);
      std::vector<double> beta(static_cast<std::size_t>(p.N)), bWithCD(static_cast<std::size_t>(p.N));
      for (Index r = 0; r < rg.ranks; ++r) {
        ring::QueryShard& q = s.q[static_cast<std::size_t>(r)];
        ring::Pass1Partial total;
        for (Index t = 0; t < rg.ranks; ++t) {
          const ring::KeyShard& k = s.k[static_cast<std::size_t>(ring::keyShardAt(rg, r, t))];
          const ring::Pass1Partial part = ring::bobPass1Step(p, q, k);
          if (t == 0) total = part;
          else ring::addPass1(total, part);
          // A backward step with the step's own log-sum-exp instead of the global L.
          ring::QueryShard local = q;
          local.L = ring::forwardStep(p, q, k).L;
          const Matrix dQ = ring::backwardStep(p, local, k).dQ;
          for (std::size_t i = 0; i < q.rows.size(); ++i)
            for (Index c = 0; c < p.d; ++c) dQlocalL(q.rows[i], c) += dQ(static_cast<Index>(i), c);
        }
        const ring::Pass1Rows rows = ring::finishPass1(p, q, total, ring::gatherRows(df.O, q.rows), Matrix());
        for (std::size_t i = 0; i < q.rows.size(); ++i) {
          beta[static_cast<std::size_t>(q.rows[i])] = total.beta[i];
          bWithCD[static_cast<std::size_t>(q.rows[i])] = rows.b[i];
        }
        q.c = rows.c;
        q.b = total.beta;  // b without its - c o D, carried into pass 2
      }
      CHECK(relErr(bWithCD, dr.b) < 1e-12);  // the right combination passes
      CHECK(relErr(beta, dr.b) > 1e-3);      // the sums alone are not b
      CHECK(relErr(dQlocalL, db.dQ) > 1e-3); // P needs the global L

      // Pass 2 with that b: gK is off. With b, the ring's own pass 2 matches (test above).
      Matrix gK(p.N, p.d);
      for (Index r = 0; r < rg.ranks; ++r)
        for (Index t = 0; t < rg.ranks; ++t) {
          const ring::QueryShard& q = s.q[static_cast<std::size_t>(ring::queryShardAt(rg, r, t))];
          const ring::KeyShard& k = s.k[static_cast<std::size_t>(r)];
          const Matrix part = ring::bobPass2Step(p, q, k).gK;
          for (std::size_t j = 0; j < k.rows.size(); ++j)
            for (Index c = 0; c < p.d; ++c) gK(k.rows[j], c) += part(static_cast<Index>(j), c);
        }
      CHECK(relErr(gK, dr.gK) > 1e-3);

      // Forward partials added instead of merged by log-sum-exp.
      Matrix summed(p.N, p.d);
      for (Index r = 0; r < rg.ranks; ++r) {
        const ring::QueryShard& q = s.q[static_cast<std::size_t>(r)];
        for (Index t = 0; t < rg.ranks; ++t) {
          const Matrix o = ring::forwardStep(p, q, s.k[static_cast<std::size_t>(ring::keyShardAt(rg, r, t))]).O;
          for (std::size_t i = 0; i < q.rows.size(); ++i)
            for (Index c = 0; c < p.d; ++c) summed(q.rows[i], c) += o(static_cast<Index>(i), c);
        }
      }
      CHECK(relErr(summed, df.O) > 1e-3);
    }
}

TEST_CASE("under a causal mask a chunk pair is fully visible, fully masked or the square diagonal", "[oracle][ring][causal]") {
  // So each step of the ring is, per pair of the ranks' chunks, one call of an existing kernel
  // (no mask, or the causal one) or none: no kernel needs a new kind of mask.
  for (Index n : {37, 64})
    for (Index R = 1; R <= 4; ++R)
      for (ring::Layout layout : {ring::Layout::Contiguous, ring::Layout::Zigzag}) {
        const Problem p = makeProblem(n, n, 1, true);
        const ring::Ring rg{R, layout};
        INFO("n=" << n << " R=" << R << " " << name(layout));
        for (Index a = 0; a < R; ++a)
          for (Index b = 0; b < R; ++b)
            for (const ring::Range& qc : ring::shardChunks(rg, n, a))
              for (const ring::Range& kc : ring::shardChunks(rg, n, b)) {
                std::vector<Index> qRows(static_cast<std::size_t>(qc.end - qc.begin));
                std::vector<Index> kRows(static_cast<std::size_t>(kc.end - kc.begin));
                std::iota(qRows.begin(), qRows.end(), qc.begin);
                std::iota(kRows.begin(), kRows.end(), kc.begin);
                const Index pairs = ring::visiblePairs(p, qRows, kRows);
                const Index rows = qc.end - qc.begin, cols = kc.end - kc.begin;
                if (qc.begin == kc.begin) CHECK(pairs == rows * (rows + 1) / 2);  // the diagonal
                else if (qc.begin > kc.begin) CHECK(pairs == rows * cols);       // all keys earlier
                else CHECK(pairs == 0);                                            // all keys later
              }
      }
}

TEST_CASE("zigzag shards balance causal work across ranks and steps; contiguous ones do not", "[oracle][ring][causal]") {
  // Long enough that the chunks' rounding is small: 1021 rows divide by no 2R, 1024 by all.
  for (Index n : {1021, 1024})
    for (Index R = 2; R <= 4; ++R)
      for (ring::Sweep sweep : {ring::Sweep::QueryMajor, ring::Sweep::KeyMajor}) {
        const Problem p = makeProblem(n, n, 1, true);
        INFO("n=" << n << " R=" << R << (sweep == ring::Sweep::QueryMajor ? " query-major" : " key-major"));
        // Per rank (the sum over steps) and per step (the lockstep ring waits for the slowest
        // rank at every step: its time is the sum over steps of the largest step).
        struct Balance {
          double ranks;     // max / min of the ranks' totals
          double lockstep;  // sum over steps of the largest step / (total pairs / R)
        };
        auto balance = [&](ring::Layout layout) {
          const auto work = ring::stepWork(p, ring::Ring{R, layout}, sweep);
          std::vector<Index> perRank(static_cast<std::size_t>(R), 0);
          double slowest = 0, total = 0;
          for (const auto& step : work) {
            for (Index r = 0; r < R; ++r) perRank[static_cast<std::size_t>(r)] += step[static_cast<std::size_t>(r)];
            slowest += maxOf(step);
          }
          for (Index w : perRank) total += static_cast<double>(w);
          CHECK(total == static_cast<double>(n * (n + 1) / 2));  // every visible pair, once
          return Balance{maxOf(perRank) / minOf(perRank), slowest / (total / static_cast<double>(R))};
        };
        const Balance zig = balance(ring::Layout::Zigzag), con = balance(ring::Layout::Contiguous);
        INFO("zigzag " << zig.ranks << " " << zig.lockstep << ", contiguous " << con.ranks << " " << con.lockstep);
        // Zigzag: with chunks of c rows every rank does (2R - 1) c^2 + c (c + 1) pairs, and every
        // step 2 c^2 (+ c at step 0); chunks of unequal size (1021 rows) move that a little.
        CHECK(zig.ranks < 1.02);
        CHECK(zig.lockstep < 1.02);
        // Contiguous: the last rank does about 2R - 1 times the first one's work, and the ring
        // runs about 2 - 1/R times longer than a balanced one.
        CHECK(con.ranks > 2.0 * static_cast<double>(R) - 1.5);
        CHECK(con.lockstep > 1.4);
      }
}

TEST_CASE("ring oracle: bad arguments throw std::invalid_argument naming the argument", "[oracle][ring][validate]") {
  const Problem p = makeProblem(8, 8, 4, true);
  const Inputs in = randomInputs(p, 4000);
  const ForwardResult f = dense::forward(p, in.Q, in.K, in.V);
  const BackwardResult b = dense::backward(p, in.Q, in.K, in.V, in.dO, f.O, f.L);

  REQUIRE_THROWS_WITH(ring::forward(makeProblem(8, 9, 4, false), ring::Ring{2}, in.Q, in.K, in.V),
                      Contains("oracle: the ring model shards queries and keys alike and needs N = M"));
  REQUIRE_THROWS_WITH(ring::forward(p, ring::Ring{0}, in.Q, in.K, in.V), Contains("oracle: ranks must be positive, got 0"));
  REQUIRE_THROWS_WITH(ring::forward(p, ring::Ring{5, ring::Layout::Zigzag}, in.Q, in.K, in.V),
                      Contains("ranks = 5 cuts the sequence into 10 chunks, more than its N = 8 rows"));
  REQUIRE_THROWS_WITH(ring::shardRows(ring::Ring{2}, 8, 2), Contains("rank 2 is outside [0, ranks = 2)"));
  REQUIRE_THROWS_WITH(ring::backward(p, ring::Ring{2}, in.Q, in.K, in.V, in.dO, ForwardResult{f.O, {}}),
                      Contains("L has 0 elements, expected N = 8"));
  BackwardResult noDQ = b;
  noDQ.dQ = Matrix();
  REQUIRE_THROWS_WITH(ring::bob(p, ring::Ring{2}, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, noDQ,
                                X2Source::FromDQ),
                      Contains("dQ has 0 rows, expected N = 8"));
  // X2 = dQ / s + D o X3 divides by the scale: refused before any step, as the tiled model does.
  Problem unscaled = p;
  unscaled.scale = 0.0;
  REQUIRE_THROWS_WITH(ring::bob(unscaled, ring::Ring{2}, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV, f, b,
                                X2Source::FromDQ),
                      Contains("oracle: scale must be nonzero with X2Source::FromDQ"));
  // V of another width than Q and K: not modelled here (the API refuses such ring steps).
  Problem otherWidth = p;
  otherWidth.dv = 3;
  REQUIRE_THROWS_WITH(ring::forward(otherWidth, ring::Ring{2}, in.Q, in.K, in.V),
                      Contains("oracle: V must be as wide as Q and K in the ring model (dv = d), got d = 4, dv = 3"));

  // Step functions: the shard's rows and each field the step reads.
  Shards s = shardInputs(p, ring::Ring{2}, in, f);
  ring::QueryShard q = s.q[0];
  const ring::KeyShard& k = s.k[1];
  q.rows.back() = 8;
  REQUIRE_THROWS_WITH(ring::forwardStep(p, q, k), Contains("oracle: query shard rows holds row 8, outside [0, N = 8)"));
  q = s.q[0];
  q.dO = Matrix(3, 4);
  REQUIRE_THROWS_WITH(ring::backwardStep(p, q, k), Contains("dO has 3 rows, expected query shard rows = 4"));
  q = s.q[0];
  q.D.pop_back();
  REQUIRE_THROWS_WITH(ring::bobPass1Step(p, q, k), Contains("D has 3 elements, expected query shard rows = 4"));
  q = s.q[0];
  REQUIRE_THROWS_WITH(ring::bobPass2Step(p, q, k), Contains("c has 0 elements"));  // pass 1 not finished
  ring::KeyShard noU = k;
  noU.uV = Matrix();
  REQUIRE_THROWS_WITH(ring::bobPass1Step(p, q, noU), Contains("uV has 0 rows, expected key shard rows = 4"));
  ring::Pass1Partial total = ring::bobPass1Step(p, q, k);
  REQUIRE_THROWS_WITH(ring::addPass1(total, ring::bobPass1Step(p, q, k, X2Source::FromDQ)),
                      Contains("addPass1: part's accumulators do not have total's shapes"));
  REQUIRE_THROWS_WITH(ring::finishPass1(p, q, total, Matrix(), Matrix()), Contains("O has 0 rows"));
  ForwardResult one = ring::forwardStep(p, q, k), shortL = one;
  shortL.L.pop_back();
  REQUIRE_THROWS_WITH(ring::mergeForward(one, shortL), Contains("mergeForward: part has 4 x 4 O"));
}

// The tiled model of the schedule with score modifications (tiled::*Mod in
// kernels/oracle/ScoreMod.h) against the dense reference (dense::*Mod, itself held to finite
// differences by ScoreModTest.cpp). Both compute the same sums in a different order, so every
// output, row scalar and parameter gradient agrees to rounding: 1e-12 normwise, as the plain
// tiled model is held to in OracleTest.cpp.
#include "kernels/oracle/ScoreMod.h"
#include "test/unit/OracleTestUtil.h"
#include "test/unit/ScoreModTestUtil.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace flashbob::oracle;
using namespace flashbob::oracle::testing;
using namespace flashbob::oracle::testing::scoremod;

namespace {

constexpr double kTol = 1e-12;

void checkGrads(const ScoreModGrads& got, const ScoreModGrads& want) {
  CHECK(relErr(got.bias.data, want.bias.data) < kTol);
  CHECK(relErr(got.table, want.table) < kTol);
  CHECK(relErr(got.alibiSlopes, want.alibiSlopes) < kTol);
  CHECK(relErr(got.sinks, want.sinks) < kTol);
  CHECK(std::abs(got.softcap - want.softcap) <= kTol * std::max(1.0, std::abs(want.softcap)));
}

std::string describe(const Tiling& t) {
  return "tiles " + std::to_string(t.block_m) + " x " + std::to_string(t.block_n);
}

}  // namespace

TEST_CASE("score mods: the tiled model equals the dense reference", "[oracle][scoremod][tiled]") {
  std::vector<Problem> ps = problems();
  ps.push_back(makeProblem(13, 17, 8, true));   // the mask's tiles straddle the diagonal
  ps.push_back(makeProblem(17, 13, 8, false));
  // Tiles that are 1 x 1, do not divide the problem, or exceed it.
  const Tiling tilings[] = {{1, 1}, {2, 3}, {4, 5}, {64, 64}};
  std::uint64_t seed = 7000;
  for (const Kind kind : kKinds)
    for (const Problem& p : ps) {
      Case c = makeCase(p, seed++);
      std::mt19937_64 rng(seed++);
      c.mod = makeMod(kind, p, rng);
      const BatchedForwardResult f = dense::forwardMod(c.p, c.mod, c.Q, c.K, c.V);
      const ModBackwardResult g = dense::backwardMod(c.p, c.mod, c.Q, c.K, c.V, c.dO);
      const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
      // And with cotangents of the parameter gradients (<uParams, dParams> in F).
      const ScoreModGrads u = randomCotangents(c.mod, rng);
      const ModBobResult ru = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, &u);
      for (const Tiling& t : tilings)
        for (const X2Source x2 : {X2Source::FromDQ, X2Source::Accumulate}) {
          INFO(name(kind) << ", " << describe(p) << ", " << describe(t)
                          << (x2 == X2Source::FromDQ ? ", X2 from dQ" : ", X2 accumulated"));
          const BatchedForwardResult tf = tiled::forwardMod(c.p, t, c.mod, c.Q, c.K, c.V);
          CHECK(relErr(tf.O.data, f.O.data) < kTol);
          CHECK(relErr(tf.L.data, f.L.data) < kTol);
          const ModBackwardResult tg = tiled::backwardMod(c.p, t, c.mod, c.Q, c.K, c.V, c.dO, tf);
          CHECK(relErr(tg.x.dQ.data, g.x.dQ.data) < kTol);
          CHECK(relErr(tg.x.dK.data, g.x.dK.data) < kTol);
          CHECK(relErr(tg.x.dV.data, g.x.dV.data) < kTol);
          CHECK(relErr(tg.x.D.data, g.x.D.data) < kTol);
          checkGrads(tg.params, g.params);
          const ModBobResult tr = tiled::bobMod(c.p, t, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, tf, tg, x2);
          CHECK(relErr(tr.x.gQ.data, r.x.gQ.data) < kTol);
          CHECK(relErr(tr.x.gK.data, r.x.gK.data) < kTol);
          CHECK(relErr(tr.x.gV.data, r.x.gV.data) < kTol);
          CHECK(relErr(tr.x.gdO.data, r.x.gdO.data) < kTol);
          CHECK(relErr(tr.x.c.data, r.x.c.data) < kTol);
          CHECK(relErr(tr.x.b.data, r.x.b.data) < kTol);
          checkGrads(tr.params, r.params);
          const ModBobResult tu = tiled::bobMod(c.p, t, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, tf, tg, x2, &u);
          CHECK(relErr(tu.x.gQ.data, ru.x.gQ.data) < kTol);
          CHECK(relErr(tu.x.gK.data, ru.x.gK.data) < kTol);
          CHECK(relErr(tu.x.gV.data, ru.x.gV.data) < kTol);
          CHECK(relErr(tu.x.gdO.data, ru.x.gdO.data) < kTol);
          CHECK(relErr(tu.x.c.data, ru.x.c.data) < kTol);
          CHECK(relErr(tu.x.b.data, ru.x.b.data) < kTol);
          checkGrads(tu.params, ru.params);
        }
    }
}

TEST_CASE("score mods: the tiled model skips exactly the tiles a document mask hides", "[oracle][scoremod][tiled][masked]") {
  // Two documents, rows and keys [0, 4) and [4, 8), on 4 x 4 tiles: per head, 2 of the 4 tiles
  // have a visible pair (causal: the same 2, each straddling the diagonal).
  for (const bool causal : {false, true}) {
    const Problem p = makeProblem(8, 8, 3, causal);
    INFO(describe(p));
    Case c = makeCase(p, 8000);
    std::mt19937_64 rng(8001);
    c.mod = makeMod(Kind::Sinks, p, rng);
    c.mod.mask = HeadTensor(1, 1, p.N, p.M);
    for (Index i = 0; i < p.N; ++i)
      for (Index j = 0; j < p.M; ++j) c.mod.mask.data[static_cast<std::size_t>(i * p.M + j)] = (i < 4) == (j < 4);
    const Tiling t{4, 4};
    const Index heads = kBatch * kHeads, visibleTiles = 2 * heads;
    TileStats fs, bs, bobs;
    const BatchedForwardResult tf = tiled::forwardMod(c.p, t, c.mod, c.Q, c.K, c.V, &fs);
    const ModBackwardResult tg = tiled::backwardMod(c.p, t, c.mod, c.Q, c.K, c.V, c.dO, tf, &bs);
    const ModBobResult tr = tiled::bobMod(c.p, t, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV, tf, tg,
                                          X2Source::FromDQ, nullptr, &bobs);
    CHECK(fs.tiles == visibleTiles);
    CHECK(bs.tiles == visibleTiles);
    CHECK(bobs.tiles == 2 * visibleTiles);  // two passes
    const ModBobResult r = dense::bobMod(c.p, c.mod, c.Q, c.K, c.V, c.dO, c.uQ, c.uK, c.uV);
    CHECK(relErr(tr.x.gQ.data, r.x.gQ.data) < kTol);
    CHECK(relErr(tr.x.gK.data, r.x.gK.data) < kTol);
    checkGrads(tr.params, r.params);
  }
}

// Tests of the CPU emulation of the kernels' arithmetic (bench/numerics/BobEmulation.h), which
// docs/numerics.md's figures come from: with every rounding off it must be the exact math (the
// dense oracle), each rounding model must do what it says, and with the GPU's roundings it must
// reproduce the error level the H200 measures (bench/results: 2.4e-3 for every BoB output at
// N = M = 1K, d = 64, bf16).
#include "bench/numerics/BobEmulation.h"
#include "kernels/oracle/ErrorMeasure.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <tuple>
#include <vector>

using namespace flashbob;
using namespace flashbob::numerics;

namespace {

double rel(const std::vector<double>& got, const std::vector<double>& ref) {
  oracle::ErrorStats s = oracle::compare(got, ref);
  REQUIRE(s.nonFinite == 0);
  return s.relL2;
}

Model exactModel() {
  Model m;
  m.acc = Acc::Exact;
  m.ew32 = false;
  m.fwdP = m.bwdDS = m.bwdP = m.qDS = m.qPdP = m.qP = m.qT1 = m.qGP = false;
  m.kvDS = m.kvSbar = m.kvDPbar = false;
  m.storeO16 = m.out16 = false;
  return m;
}

}  // namespace

TEST_CASE("bf16 and float32 roundings of the emulation", "[numerics]") {
  CHECK(toBf16(1.0 + std::ldexp(1.0, -8)) == 1.0);  // a tie goes to the even neighbour
  CHECK(toBf16(1.0 + 3 * std::ldexp(1.0, -8)) == 1.0 + std::ldexp(1.0, -6));  // tie, up to even
  CHECK(toBf16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)) == 1.0 + std::ldexp(1.0, -7));
  CHECK(toBf16(-3.0e-5) == -toBf16(3.0e-5));
  CHECK(truncF32(1.0 + std::ldexp(1.0, -24)) == 1.0);                     // down, not to nearest
  CHECK(truncF32(-(1.0 + 3 * std::ldexp(1.0, -25))) == -1.0);  // toward zero for negatives too
  CHECK(toF32(1.0 + 3 * std::ldexp(1.0, -25)) == 1.0 + std::ldexp(1.0, -23));
}

TEST_CASE("the MMA model truncates its fused sums and aligns to the largest addend", "[numerics]") {
  Model tc;  // tensor core: 26 bits, truncation
  Model rn;
  rn.acc = Acc::Float32;
  // 1 + 1.5 ulp: to nearest (a tie) it goes to the even 1 + 2 ulp, truncated to 1 + 1 ulp;
  // the same toward zero for a negative sum.
  const double ulp = std::ldexp(1.0, -23);
  std::vector<double> three(3, std::ldexp(1.0, -24)), ones(3, 1.0), minus(3, -std::ldexp(1.0, -24));
  CHECK(mmaStep(rn, 1.0, three.data(), ones.data(), 3) == 1.0 + 2 * ulp);
  CHECK(mmaStep(tc, 1.0, three.data(), ones.data(), 3) == 1.0 + ulp);
  CHECK(mmaStep(rn, -1.0, minus.data(), ones.data(), 3) == -1.0 - 2 * ulp);
  CHECK(mmaStep(tc, -1.0, minus.data(), ones.data(), 3) == -1.0 - ulp);
  // A positive product below the alignment window (2^-26 < 2^-25 = quantum for 26 bits at 1)
  // vanishes; 16 of them fused in one sum vanish too (each is truncated before the sum), while
  // rounding their exact sum (2^-22) to nearest keeps it.
  std::vector<double> a(16, std::ldexp(1.0, -26)), b(16, 1.0);
  CHECK(mmaStep(tc, 1.0, a.data(), b.data(), 16) == 1.0);
  CHECK(mmaStep(rn, 1.0, a.data(), b.data(), 16) == 1.0 + std::ldexp(1.0, -22));
  // With 27 bits they are kept.
  Model wide;
  wide.tcBits = 27;
  CHECK(mmaStep(wide, 1.0, a.data(), b.data(), 16) == 1.0 + std::ldexp(1.0, -22));
}

TEST_CASE("with every rounding off the emulated kernels compute the exact math", "[numerics]") {
  for (bool causal : {false, true}) {
    Problem p = oracle::makeProblem(70, 90, 16, causal);
    const Inputs in = makeInputs(p, "normal", 5);
    Tiles t;
    t.fwdM = t.bwdQM = t.bobQM = 16;
    t.fwdN = t.bwdQN = 32;
    t.bobQN = 24;
    t.bwdKVN = t.bobKVN = 40;
    t.bwdKVM = t.bobKVM = 16;
    const Outputs got = emulate(p, in, exactModel(), t, /*keyMajor=*/true);
    const oracle::BobResult bob = oracle::dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    const oracle::BackwardResult bwd = oracle::dense::backward(p, in.Q, in.K, in.V, in.dO);
    const oracle::ForwardResult fwd = oracle::dense::forward(p, in.Q, in.K, in.V);
    CHECK(rel(got.O.data, fwd.O.data) < 1e-12);
    CHECK(rel(got.dQ.data, bwd.dQ.data) < 1e-12);
    CHECK(rel(got.dK.data, bwd.dK.data) < 1e-12);
    CHECK(rel(got.dV.data, bwd.dV.data) < 1e-12);
    CHECK(rel(got.gQ.data, bob.gQ.data) < 1e-12);
    CHECK(rel(got.gK.data, bob.gK.data) < 1e-12);
    CHECK(rel(got.gV.data, bob.gV.data) < 1e-12);
    CHECK(rel(got.gdO.data, bob.gdO.data) < 1e-12);
    CHECK(rel(got.c, bob.c) < 1e-12);
    CHECK(rel(got.b, bob.b) < 1e-12);
    // Centering and flushing change no math either.
    Model centered = exactModel();
    centered.fix = Fix::CenterLazy;
    centered.lazyFactor = 1.25;
    centered.flushEvery = 2;
    const Outputs c2 = emulate(p, in, centered, t, true);
    CHECK(rel(c2.gQ.data, bob.gQ.data) < 1e-12);
    CHECK(rel(c2.gK.data, bob.gK.data) < 1e-12);
    CHECK(rel(c2.gdO.data, bob.gdO.data) < 1e-12);
    // Nor does pass 1 with two accumulators (X3 from the forward, X2 from dQ): the same gQ.
    Model twoAccumulators = exactModel();
    twoAccumulators.fix = Fix::X3FromForward;
    const Outputs x3 = emulate(p, in, twoAccumulators, t, true);
    CHECK(rel(x3.gQ.data, bob.gQ.data) < 1e-12);
    CHECK(rel(x3.x3Forward.data, oracle::dense::forward(p, in.Q, in.K, in.K).O.data) < 1e-12);
    CHECK(rel(x3.dQ32.data, bwd.dQ.data) < 1e-12);
    // The streaming reference the experiments compare with is the dense oracle too.
    const Outputs ex = exactRows(p, in, true);
    CHECK(rel(ex.gQ.data, bob.gQ.data) < 1e-12);
    CHECK(rel(ex.gK.data, bob.gK.data) < 1e-12);
    CHECK(rel(ex.gV.data, bob.gV.data) < 1e-12);
    CHECK(rel(ex.gdO.data, bob.gdO.data) < 1e-12);
    CHECK(rel(ex.dQ.data, bwd.dQ.data) < 1e-12);
    CHECK(rel(ex.c, bob.c) < 1e-12);
    CHECK(rel(ex.b, bob.b) < 1e-12);
  }
}

TEST_CASE("the emulated GPU arithmetic reproduces the H200's bf16 error", "[numerics]") {
  // bench/results/2026-12-04-h200-perf-table.md: BoB at N = 1024, d = 64 checks at 2.4e-3
  // against float64 (`flashbob bench --check`, every row of head (0,0)); every output at
  // N = 256 lands there too. Storing
  // the outputs in bf16 alone costs 1.66e-3: the rest is the operand roundings.
  Problem p = oracle::makeProblem(256, 256, 64, false);
  const Inputs in = makeInputs(p, "uniform", 1);
  const Outputs ref = exactRows(p, in, true);
  const Outputs got = emulate(p, in, Model{}, Tiles::forHeadDim(64), true);
  for (const auto& [name, g, r] :
       {std::tuple{"gQ", &got.gQ, &ref.gQ}, std::tuple{"gK", &got.gK, &ref.gK},
        std::tuple{"gV", &got.gV, &ref.gV}, std::tuple{"gdO", &got.gdO, &ref.gdO},
        std::tuple{"dQ", &got.dQ, &ref.dQ}}) {
    INFO(name);
    const double e = rel(g->data, r->data);
    CHECK(e > 2.2e-3);
    CHECK(e < 2.6e-3);
  }
  Model outputsOnly = exactModel();
  outputsOnly.out16 = true;
  const double floor = rel(emulate(p, in, outputsOnly, Tiles::forHeadDim(64), false).gQ.data,
                           ref.gQ.data);
  CHECK(floor > 1.5e-3);
  CHECK(floor < 1.8e-3);
}

TEST_CASE("a sharp softmax amplifies pass 1's roundings, and centering removes most of it",
          "[numerics]") {
  // scale 0.5 at d = 64: scores of standard deviation 4, rows whose P concentrates on a few
  // keys. The error BoB adds to its inputs (compared with the exact result given the stored O
  // and L) more than doubles there; centering pass 1's operand brings gQ back near the level
  // of a single rounding of Sbar (gK's, formed directly in pass 2).
  Problem p = oracle::makeProblem(256, 256, 64, false);
  p.scale = 0.5;
  const Inputs in = makeInputs(p, "uniform", 1);
  const Tiles t = Tiles::forHeadDim(64);
  const Outputs now = emulate(p, in, Model{}, t, true);
  Model fixed;
  fixed.fix = Fix::CenterLazy;
  fixed.lazyFactor = 1.25;
  const Outputs centered = emulate(p, in, fixed, t, true);
  const Outputs given = exactRows(p, in, true, &now.Oread, &now.Lread);  // same forward in both
  const double before = rel(now.gQ.data, given.gQ.data);
  const double after = rel(centered.gQ.data, given.gQ.data);
  const double gK = rel(now.gK.data, given.gK.data);
  CHECK(before > 2 * gK);
  CHECK(after < 0.7 * before);
  CHECK(after < 1.4 * gK);
  // The fix touches gQ only.
  CHECK(centered.gK.data == now.gK.data);
  CHECK(centered.gdO.data == now.gdO.data);
  CHECK(centered.c == now.c);
}

TEST_CASE("pass 1 with two accumulators is no less accurate in bf16", "[numerics]") {
  // bob_q's register plan (docs/performance.md, "The targets' gaps, what explains each"):
  // gQ = s X1 - c o dQ - s b' o X3 with X3 = P K from the forward and dQ from the first backward,
  // both float32, instead of s (X1 - c o X2 - b o X3) from four pass-1 accumulators. Feared: cancellation between the three terms. Measured here (and at
  // N = 1M, docs/numerics.md): never worse; better on sharp softmaxes, where X2's bf16 operand
  // P o dP is what the rewrite drops.
  Problem p = oracle::makeProblem(256, 256, 64, false);
  p.scale = 0.5;
  const Inputs in = makeInputs(p, "uniform", 1);
  const Tiles t = Tiles::forHeadDim(64);
  const Outputs ref = exactRows(p, in, false);
  const Outputs now = emulate(p, in, Model{}, t, false);
  Model plan;
  plan.fix = Fix::X3FromForward;
  const Outputs two = emulate(p, in, plan, t, false);
  const double before = rel(now.gQ.data, ref.gQ.data);
  const double after = rel(two.gQ.data, ref.gQ.data);
  CHECK(after < before);
  CHECK(two.gdO.data == now.gdO.data);  // gdO = X4 - c o O either way
  CHECK(two.c == now.c);
}

TEST_CASE("truncating MMA sums drift with the length of the sweep; flushing stops it",
          "[numerics]") {
  // One accumulator summing 2^16 k = 16 steps of positive products (as O = P V with V > 0):
  // every truncation loses part of an ulp toward zero, and the losses add up.
  const int steps = 1 << 16;
  std::vector<double> a(16), b(16, 1.0);
  double tc = 0, rn = 0, exact = 0;
  Model mTc, mRn;
  mRn.acc = Acc::Float32;
  unsigned x = 12345;
  for (int s = 0; s < steps; ++s) {
    for (double& v : a) {
      x = x * 1664525u + 1013904223u;
      v = toBf16(1.0 + (x >> 8) * std::ldexp(1.0, -24));
      exact += v;
    }
    tc = mmaStep(mTc, tc, a.data(), b.data(), 16);
    rn = mmaStep(mRn, rn, a.data(), b.data(), 16);
  }
  const double eTc = (exact - tc) / exact, eRn = std::fabs(exact - rn) / exact;
  CHECK(eTc > 1e-3);  // biased: always below the exact sum
  CHECK(eRn < 2e-4);
}

TEST_CASE("float32 inputs: cast to bf16, tf32, and products split into three", "[numerics]") {
  // The operand formats a float32-input kernel could use, against float64 on the same float32
  // inputs: each split form is much closer than one product of the rounded operands, and tf32
  // pieces with the accumulators flushed into float32 every block reach float32's level.
  CHECK(toTf32(1.0 + std::ldexp(1.0, -11)) == 1.0);  // a tie goes to the even neighbour
  CHECK(toTf32(1.0 + 3 * std::ldexp(1.0, -11)) == 1.0 + std::ldexp(1.0, -9));
  Problem p = oracle::makeProblem(96, 96, 32, /*causal=*/false);
  const Inputs in = makeInputs(p, "normal32", 7);
  CHECK(in.Q(3, 5) != toBf16(in.Q(3, 5)));  // float32 values, not bf16 ones
  Tiles t;
  t.fwdM = t.bwdQM = t.bobQM = 32;
  t.fwdN = t.bwdQN = t.bobQN = 32;
  t.bwdKVN = t.bobKVN = t.bwdKVM = t.bobKVM = 32;
  const oracle::BobResult bob = oracle::dense::bob(p, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
  auto worst = [&](Operands operands, int flushEvery) {
    Model m;
    m.operands = operands;
    m.out16 = m.storeO16 = false;
    m.flushEvery = flushEvery;
    const Outputs got = emulate(p, in, m, t, /*keyMajor=*/true);
    return std::max({rel(got.gQ.data, bob.gQ.data), rel(got.gK.data, bob.gK.data),
                     rel(got.gV.data, bob.gV.data), rel(got.gdO.data, bob.gdO.data)});
  };
  const double cast = worst(Operands::CastBf16, 0), tf32 = worst(Operands::Tf32, 0);
  const double bf16x3 = worst(Operands::Bf16x3, 0), tf32x3 = worst(Operands::Tf32x3, 1);
  CHECK(cast > 1e-3);
  CHECK(tf32 < cast / 4);
  CHECK(bf16x3 < tf32 / 10);
  CHECK(tf32x3 < 3e-6);
}

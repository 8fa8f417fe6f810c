// The ring steps of the C++ API (AttentionProblem::ringStep: the kernels' KernelSpec::partial
// forms) on the GPU against the float64 ring oracle's step functions
// (kernels/oracle/Ring.h), on the two chunk pairs a causal zigzag ring launches for a sequence
// cut into two equal chunks: the diagonal pair (chunk 1's queries and keys) with the causal
// kernels, and chunk 1's queries against chunk 0's keys, fully visible, with the unmasked ones
// (docs/context-parallel.md). The inputs are the whole sequence's: its float64 L, D, c, b. Every
// tensor output is f32, compared (relative L2) with the step's float64 partial result within
// bf16's bound; outputs are poisoned with NaN first.
#include "test/gpu/GpuTestUtil.h"

#include "api/Attention.h"
#include "kernels/oracle/Ring.h"

#include <cstdio>
#include <numeric>
#include <random>

using namespace flashbob;
using flashbob::test::DeviceBuffer;
using oracle::Matrix;

namespace {

constexpr int64_t kChunk = 200; // rows a chunk: not a multiple of any block
constexpr double kTol = 5e-3;   // bf16 inputs

Matrix rowsOf(const Matrix &a, int64_t first, int64_t count) {
  Matrix out(count, a.cols);
  std::copy_n(a.row(first), count * a.cols, out.data.begin());
  return out;
}

std::vector<double> rowsOf(const std::vector<double> &v, int64_t first, int64_t count) {
  return {v.begin() + first, v.begin() + first + count};
}

std::vector<oracle::Index> positions(int64_t first, int64_t count) {
  std::vector<oracle::Index> rows(static_cast<size_t>(count));
  std::iota(rows.begin(), rows.end(), first);
  return rows;
}

// A bf16 input on the device (the matrix is rounded in place first).
struct Input {
  DeviceBuffer buffer;
  explicit Input(Matrix &m) : buffer(m.data.size() * 2) {
    std::vector<uint16_t> bits = test::toHalf(m.data, true);
    buffer.upload(bits.data());
  }
};

// An f32 output (or f32 input row vector) on the device.
struct F32 {
  DeviceBuffer buffer;
  size_t count;
  explicit F32(size_t n) : buffer(n * 4), count(n) { buffer.poison(); }
  explicit F32(const std::vector<double> &values) : F32(values.size()) {
    std::vector<float> f(values.begin(), values.end());
    buffer.upload(f.data());
  }
  std::vector<double> values() const {
    std::vector<float> f(count);
    buffer.download(f.data());
    return {f.begin(), f.end()};
  }
};

void expectClose(const char *what, const std::vector<double> &got, const std::vector<double> &ref) {
  test::ErrorStats e = test::relativeError(got, ref);
  std::printf(" %s %.2e", what, e.relL2);
  INFO(what << " rel L2 " << e.relL2 << ", non-finite " << e.nonFinite);
  CHECK(e.nonFinite == 0);
  CHECK(e.relL2 <= kTol);
}

void runPair(int64_t d, int64_t keyChunk) {
  const int64_t n = 2 * kChunk, qFirst = kChunk, kFirst = keyChunk * kChunk;
  const bool diagonal = keyChunk == 1;
  std::mt19937_64 rng(17 + d + keyChunk);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&] {
    Matrix m(n, d);
    for (double &x : m.data)
      x = normal(rng);
    test::toHalf(m.data, true); // the values the GPU gets
    return m;
  };
  Matrix Q = random(), K = random(), V = random(), dO = random(), uQ = random(), uK = random(),
         uV = random();

  // The whole sequence's row scalars, in float64 on the rounded inputs; O rounded as the
  // forward's bf16 output is, since the kernels read it.
  const oracle::Problem global = oracle::makeProblem(n, n, d, /*causal=*/true);
  oracle::ForwardResult fwd = oracle::dense::forward(global, Q, K, V);
  test::toHalf(fwd.O.data, true);
  oracle::BobResult bob = oracle::dense::bob(global, Q, K, V, dO, uQ, uK, uV);
  oracle::ring::QueryShard qs;
  qs.rows = positions(qFirst, kChunk);
  qs.Q = rowsOf(Q, qFirst, kChunk);
  qs.dO = rowsOf(dO, qFirst, kChunk);
  qs.uQ = rowsOf(uQ, qFirst, kChunk);
  qs.L = rowsOf(fwd.L, qFirst, kChunk);
  Matrix O1 = rowsOf(fwd.O, qFirst, kChunk);
  for (int64_t i = 0; i < kChunk; ++i) {
    double dot = 0;
    for (int64_t c = 0; c < d; ++c)
      dot += qs.dO(i, c) * O1(i, c);
    qs.D.push_back(dot);
  }
  qs.c = rowsOf(bob.c, qFirst, kChunk);
  qs.b = rowsOf(bob.b, qFirst, kChunk);
  oracle::ring::KeyShard ks;
  ks.rows = positions(kFirst, kChunk);
  ks.K = rowsOf(K, kFirst, kChunk);
  ks.V = rowsOf(V, kFirst, kChunk);
  ks.uK = rowsOf(uK, kFirst, kChunk);
  ks.uV = rowsOf(uV, kFirst, kChunk);

  // The pair as the kernels see it: one chunk of queries, one of keys, causal on the diagonal.
  AttentionProblem p{1, 1, kChunk, kChunk, d, DType::bf16, diagonal};
  p.ringStep = true;
  Input q(qs.Q), k(ks.K), v(ks.V), o(O1), dOin(qs.dO), uQin(qs.uQ), uKin(ks.uK), uVin(ks.uV);
  const size_t tile = static_cast<size_t>(kChunk * d), rows = static_cast<size_t>(kChunk);
  F32 lse(qs.L), D(qs.D), c(qs.c), b(qs.b);
  auto tensor = [&](const DeviceBuffer &buf) { return p.contiguous(buf.get(), kChunk); };
  BobInputs in{tensor(q.buffer),    tensor(k.buffer),    tensor(v.buffer),
               tensor(o.buffer),    tensor(dOin.buffer), RowVector{lse.buffer.get()},
               tensor(uQin.buffer), tensor(uKin.buffer), tensor(uVin.buffer)};
  auto done = [] { REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS); };
  std::printf("ring step d=%ld chunk pair (1, %ld)%s:", (long)d, (long)keyChunk,
              diagonal ? " causal" : "");

  // Forward: the pair's O (f32) and L as if chunk kFirst's keys were the only ones.
  {
    F32 oStep(tile), lStep(rows);
    GPU_CHECK(attentionForward(p, in.q, in.k, in.v, tensor(oStep.buffer),
                               RowVector{lStep.buffer.get()}));
    done();
    oracle::ForwardResult ref = oracle::ring::forwardStep(global, qs, ks);
    expectClose("O", oStep.values(), ref.O.data);
    expectClose("L", lStep.values(), ref.L);
  }
  // Backward, given the global L (D from O and dO): partial dQ, dK, dV.
  {
    F32 dQ(tile), dK(tile), dV(tile), dStep(rows);
    GPU_CHECK(attentionBackward(p, in.q, in.k, in.v, in.o, in.dO, in.lse, tensor(dQ.buffer),
                                tensor(dK.buffer), tensor(dV.buffer),
                                RowVector{dStep.buffer.get()}));
    done();
    oracle::ring::BackwardPartial ref = oracle::ring::backwardStep(global, qs, ks);
    expectClose("dQ", dQ.values(), ref.dQ.data);
    expectClose("D", dStep.values(), qs.D);
    expectClose("dK", dK.values(), ref.dK.data);
    expectClose("dV", dV.values(), ref.dV.data);
  }
  // BoB pass 1, unfinished: X1..X4, c and beta over this key chunk.
  {
    F32 x1(tile), x2(tile), x3(tile), x4(tile), dStep(rows), cStep(rows), beta(rows);
    GPU_CHECK(attentionBobPass1(p, in,
                                {tensor(x1.buffer), tensor(x2.buffer), tensor(x3.buffer),
                                 tensor(x4.buffer), RowVector{dStep.buffer.get()},
                                 RowVector{cStep.buffer.get()}, RowVector{beta.buffer.get()}}));
    done();
    oracle::ring::Pass1Partial ref = oracle::ring::bobPass1Step(global, qs, ks);
    expectClose("X1", x1.values(), ref.X1.data);
    expectClose("X2", x2.values(), ref.X2.data);
    expectClose("X3", x3.values(), ref.X3.data);
    expectClose("X4", x4.values(), ref.X4.data);
    expectClose("c", cStep.values(), ref.c);
    expectClose("beta", beta.values(), ref.beta);
  }
  // BoB pass 2, given the whole sequence's D, c and b: partial gK, gV.
  {
    F32 gK(tile), gV(tile);
    GPU_CHECK(attentionBobPass2(p, in,
                                {RowVector{D.buffer.get()}, RowVector{c.buffer.get()},
                                 RowVector{b.buffer.get()}},
                                tensor(gK.buffer), tensor(gV.buffer)));
    done();
    oracle::ring::Pass2Partial ref = oracle::ring::bobPass2Step(global, qs, ks);
    expectClose("gK", gK.values(), ref.gK.data);
    expectClose("gV", gV.values(), ref.gV.data);
  }
  std::printf("\n");
}

} // namespace

TEST_CASE("the API's ring steps on a chunk pair match the float64 ring oracle's steps",
          "[gpu][ring]") {
  for (int64_t d : {64, 128})
    for (int64_t keyChunk : {0, 1})
      DYNAMIC_SECTION("d" << d << " keys of chunk " << keyChunk) { runPair(d, keyChunk); }
}

TEST_CASE("ring steps at head dims that are no multiple of 16", "[gpu][ring]") {
  // d = 72 pads inside the kernels (their f32 partial outputs stored only up to column 72);
  // d = 100 runs on zero-padded copies, the f32 outputs copied back.
  for (int64_t d : {72, 100})
    for (int64_t keyChunk : {0, 1})
      DYNAMIC_SECTION("d" << d << " keys of chunk " << keyChunk) { runPair(d, keyChunk); }
}

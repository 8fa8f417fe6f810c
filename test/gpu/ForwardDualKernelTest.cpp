// The generated fwd_dual kernel (the forward and its JVP in one sweep) on the GPU, launched
// directly in tile configurations the tile table does not pick, against the float64 oracle on
// the same bf16/fp16 inputs: O and L as dense::forward's, tO as dense::forwardJvp's along the
// tangents (tQ, tK, tV). Every output element written (outputs poisoned with NaN first),
// relative L2 error within 5e-3 (bf16) / 1e-3 (fp16). The configurations reach each form of the
// sweep (kernels/fwd/ForwardDualKernel.cpp): the plain one (accumulator rows wgmma cannot take,
// and every tile on sm_80), the rotated one with P~ and P~ o G staged in shared tiles (one and
// two row warpgroups, with and without a producer, column groups) or carried in registers
// (register_a). The API's cases (default tiles; masks, windows, GQA, packed batches) are in
// AttentionApiTest.cpp.
#include "test/gpu/CompiledKernel.h"

#include "jit/KernelCache.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "kernels/oracle/Oracle.h"

#include <cstdio>
#include <random>

using namespace flashbob;
using flashbob::test::DeviceBuffer;

namespace {

struct Case {
  int64_t batch, heads, n, m, d;
  bool causal, bf16;
  compiler::TileConfig tiles;
  bool registerA = false; // the P~ products with P~ and P~ o G from registers (sm_90a)
};

void runCase(const Case &c) {
  const bool hopper = bob::hasHopperFeatures(test::deviceArch());
  if ((c.tiles.producer || c.registerA) && !hopper)
    return; // a producer warpgroup (TMA, setmaxnreg) and register A operands need sm_90a
  compiler::KernelSpec spec;
  spec.kind = bob::KernelKind::fwd_dual;
  spec.headDim = c.d;
  spec.tiles = c.tiles;
  spec.registerA = c.registerA;
  spec.dtype = c.bf16 ? bob::ElemType::bf16 : bob::ElemType::f16;
  spec.causal = c.causal;
  spec.arch = test::deviceArch();
  std::unique_ptr<runtime::LoadedKernel> kernel = test::compileAndLoad(spec);

  std::mt19937_64 rng(c.n * 1000003 + c.m * 101 + c.d + c.causal + 2 * c.bf16 +
                      7 * c.tiles.blockM + 13 * c.tiles.blockN);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&](int64_t rows) {
    std::vector<double> v(static_cast<size_t>(c.batch * c.heads * rows * c.d));
    for (double &x : v)
      x = normal(rng);
    return v;
  };
  std::vector<double> q = random(c.n), k = random(c.m), v = random(c.m), tq = random(c.n),
                      tk = random(c.m), tv = random(c.m);
  auto upload = [&](std::vector<double> &values) {
    std::vector<uint16_t> bits = test::toHalf(values, c.bf16); // rounds `values` too
    auto buf = std::make_unique<DeviceBuffer>(bits.size() * 2);
    buf->upload(bits.data());
    return buf;
  };
  auto dq = upload(q), dk = upload(k), dv = upload(v), dtq = upload(tq), dtk = upload(tk),
       dtv = upload(tv);
  const size_t queryElements = q.size(), rows = static_cast<size_t>(c.batch * c.heads * c.n);
  DeviceBuffer dout(queryElements * 2), dlse(rows * 4), dto(queryElements * 2);
  dout.poison();
  dlse.poison();
  dto.poison();

  // The launcher's own packing, from the kernel's signature.
  const AttentionProblem problem{c.batch, c.heads, c.n, c.m, c.d,
                                 c.bf16 ? DType::bf16 : DType::fp16, c.causal};
  using kernels::Operand;
  jit::Bindings bindings;
  bindings.bind(Operand::q, problem.contiguous(dq->get(), c.n))
      .bind(Operand::k, problem.contiguous(dk->get(), c.m))
      .bind(Operand::v, problem.contiguous(dv->get(), c.m))
      .bind(Operand::tQ, problem.contiguous(dtq->get(), c.n))
      .bind(Operand::tK, problem.contiguous(dtk->get(), c.m))
      .bind(Operand::tV, problem.contiguous(dtv->get(), c.m))
      .bind(Operand::o, problem.contiguous(dout.get(), c.n))
      .bind(Operand::lse, RowVector{dlse.get()})
      .bind(Operand::tO, problem.contiguous(dto.get(), c.n));
  GPU_CHECK(jit::validate(problem, {bob::KernelKind::fwd_dual}, bindings));
  runtime::KernelArgs args;
  jit::pack(bob::KernelKind::fwd_dual, problem, bindings, args);
  GPU_CHECK(runtime::launch(test::driver(), *kernel, jit::gridFor(spec, problem), args));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);

  std::vector<uint16_t> outBits(queryElements), toBits(queryElements);
  std::vector<float> lse(rows);
  dout.download(outBits.data());
  dto.download(toBits.data());
  dlse.download(lse.data());
  std::vector<double> gotO = test::fromHalf(outBits, c.bf16),
                      gotTO = test::fromHalf(toBits, c.bf16), gotL(lse.begin(), lse.end());

  // Oracle per head on the rounded inputs.
  oracle::Problem p = oracle::makeProblem(c.n, c.m, c.d, c.causal);
  std::vector<double> refO, refL, refTO;
  for (int64_t bh = 0; bh < c.batch * c.heads; ++bh) {
    auto slice = [&](const std::vector<double> &all, int64_t n) {
      oracle::Matrix mat(n, c.d);
      std::copy_n(all.begin() + bh * n * c.d, n * c.d, mat.data.begin());
      return mat;
    };
    oracle::Matrix Q = slice(q, c.n), K = slice(k, c.m), V = slice(v, c.m);
    oracle::ForwardResult r = oracle::dense::forward(p, Q, K, V);
    oracle::Matrix t =
        oracle::dense::forwardJvp(p, Q, K, V, slice(tq, c.n), slice(tk, c.m), slice(tv, c.m));
    refO.insert(refO.end(), r.O.data.begin(), r.O.data.end());
    refL.insert(refL.end(), r.L.begin(), r.L.end());
    refTO.insert(refTO.end(), t.data.begin(), t.data.end());
  }
  test::ErrorStats eo = test::relativeError(gotO, refO), el = test::relativeError(gotL, refL),
                   et = test::relativeError(gotTO, refTO);
  const double tol = c.bf16 ? 5e-3 : 1e-3;
  std::printf("fwd_dual %s d=%ld N=%ld M=%ld %s tiles %s%s: rel L2 O %.2e, L %.2e, tO %.2e "
              "(tol %.0e)\n",
              c.bf16 ? "bf16" : "fp16", (long)c.d, (long)c.n, (long)c.m,
              c.causal ? "causal" : "full", spec.tiles.name().c_str(),
              c.registerA ? " register-A" : "", eo.relL2, el.relL2, et.relL2, tol);
  INFO(spec.name());
  CHECK(eo.nonFinite == 0);
  CHECK(el.nonFinite == 0);
  CHECK(et.nonFinite == 0);
  CHECK(eo.relL2 <= tol);
  CHECK(el.relL2 <= tol);
  CHECK(et.relL2 <= tol);
}

using Tiles = compiler::TileConfig;

} // namespace

// Over sweeps of several key blocks with ragged ends, the causal diagonal and (N > M, causal)
// rows that see no key: O = 0, tO = 0, L = -inf there.
TEST_CASE("fwd_dual kernel matches the float64 oracle in every form of its sweep",
          "[gpu][fwd_dual]") {
  struct Config {
    const char *label;
    int64_t d;
    Tiles tiles;
  };
  const Config configs[] = {
      // 32 rows a warp: no wgmma accumulator, the plain sweep on every target.
      {"plain 128x32x4", 64, Tiles{128, 32, 4, 2}},
      // One warpgroup, the rotated sweep on sm_90a (the table's d <= 128 tiles).
      {"rotated 64x64x4", 64, Tiles{64, 64, 4, 2}},
      {"rotated 64x64x4", 128, Tiles{64, 64, 4, 2}},
      // Two row warpgroups, each staging behind its own barrier; with a producer, O and tO
      // stored through Q's and tQ's tiles.
      {"row warpgroups 128x64x8", 128, Tiles{128, 64, 8, 2}},
      {"row warpgroups 128x64x8 producer", 64, Tiles{128, 64, 8, 2, 1, true}},
      // One warpgroup with a producer.
      {"producer 64x64x4", 64, Tiles{64, 64, 4, 2, 1, true}},
      // Two column groups: row sums combined across them, cg after the sweep (the table's
      // d = 256 tiles).
      {"column groups 64x32x8", 128, Tiles{64, 32, 8, 2, 2}},
      {"column groups 64x32x8", 256, Tiles{64, 32, 8, 2, 2}},
      // One stage (synchronous loads).
      {"one stage 64x32x4", 64, Tiles{64, 32, 4, 1}},
  };
  for (const Config &config : configs)
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        DYNAMIC_SECTION(config.label << " d" << config.d << (causal ? " causal" : "")
                                     << (bf16 ? " bf16" : " fp16")) {
          runCase({2, 3, 300, 200, config.d, causal, bf16, config.tiles});
          runCase({1, 2, 333, 700, config.d, causal, bf16, config.tiles});
        }
}

// P~ and P~ o G carried to the next step in registers (#bob.spec register_a, sm_90a): one and
// two row warpgroups, with and without a producer.
TEST_CASE("fwd_dual kernel with P~ and P~ o G from registers", "[gpu][fwd_dual]") {
  const Tiles tiles[] = {Tiles{64, 64, 4, 2}, Tiles{64, 64, 4, 2, 1, true},
                         Tiles{128, 64, 8, 2, 1, true}};
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (const Tiles &t : tiles)
        DYNAMIC_SECTION("d" << d << (causal ? " causal " : " ") << t.name()) {
          runCase({2, 3, 700, 650, d, causal, true, t, /*registerA=*/true});
          runCase({1, 2, 300, 200, d, causal, false, t, /*registerA=*/true});
        }
}

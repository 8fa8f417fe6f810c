// The generated forward kernel on the GPU against the float64 oracle, on the same bf16/fp16
// inputs: every output element written (outputs poisoned with NaN first), relative L2 error of
// O and L within the kernels' error bounds (5e-3 bf16, 1e-3 fp16).
#include "test/gpu/CompiledKernel.h"

#include "jit/KernelCache.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "kernels/oracle/Oracle.h"

#include <cstdio>
#include <map>
#include <random>

using namespace flashbob;
using flashbob::test::DeviceBuffer;

namespace {

struct Case {
  int64_t batch, heads, n, m, d;
  bool causal, bf16;
  int64_t blockM, blockN;
  int64_t warps = 4;
  bool producer = false;
  bool registerA = false; // P V with P from registers (sm_90a)
};

void runCase(const Case &c) {
  compiler::KernelSpec spec;
  spec.kind = bob::KernelKind::fwd;
  spec.headDim = c.d;
  spec.tiles = {c.blockM, c.blockN, c.warps};
  if (c.producer) {
    if (!bob::hasHopperFeatures(test::deviceArch()))
      return; // a producer warpgroup needs sm_90a (TMA, setmaxnreg)
    spec.tiles.stages = 2;
    spec.tiles.producer = true;
  }
  if (c.registerA) {
    if (!bob::hasHopperFeatures(test::deviceArch()))
      return; // wgmma's register A operand
    spec.registerA = true;
  }
  spec.dtype = c.bf16 ? bob::ElemType::bf16 : bob::ElemType::f16;
  spec.causal = c.causal;
  spec.arch = test::deviceArch();
  std::unique_ptr<runtime::LoadedKernel> kernel = test::compileAndLoad(spec);

  std::mt19937_64 rng(c.n * 1000003 + c.m * 101 + c.d + c.causal + 2 * c.bf16);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&](int64_t rows) {
    std::vector<double> v(static_cast<size_t>(c.batch * c.heads * rows * c.d));
    for (double &x : v)
      x = normal(rng);
    return v;
  };
  std::vector<double> q = random(c.n), k = random(c.m), v = random(c.m);
  auto qBits = test::toHalf(q, c.bf16), kBits = test::toHalf(k, c.bf16), vBits = test::toHalf(v, c.bf16);

  DeviceBuffer dq(qBits.size() * 2), dk(kBits.size() * 2), dv(vBits.size() * 2);
  DeviceBuffer dout(qBits.size() * 2), dlse(static_cast<size_t>(c.batch * c.heads * c.n) * 4);
  dq.upload(qBits.data());
  dk.upload(kBits.data());
  dv.upload(vBits.data());
  dout.poison();
  dlse.poison();

  // The launcher's own packing, from the kernel's signature.
  const AttentionProblem problem{c.batch, c.heads, c.n, c.m, c.d,
                                 c.bf16 ? DType::bf16 : DType::fp16, c.causal};
  using kernels::Operand;
  jit::Bindings bindings;
  bindings.bind(Operand::q, problem.contiguous(dq.get(), c.n))
      .bind(Operand::k, problem.contiguous(dk.get(), c.m))
      .bind(Operand::v, problem.contiguous(dv.get(), c.m))
      .bind(Operand::o, problem.contiguous(dout.get(), c.n))
      .bind(Operand::lse, RowVector{dlse.get()});
  GPU_CHECK(jit::validate(problem, {bob::KernelKind::fwd}, bindings));
  runtime::KernelArgs args;
  jit::pack(bob::KernelKind::fwd, problem, bindings, args);
  GPU_CHECK(runtime::launch(test::driver(), *kernel, jit::gridFor(spec, problem), args));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);

  std::vector<uint16_t> outBits(qBits.size());
  std::vector<float> lse(static_cast<size_t>(c.batch * c.heads * c.n));
  dout.download(outBits.data());
  dlse.download(lse.data());
  std::vector<double> out = test::fromHalf(outBits, c.bf16);

  // Oracle per head on the rounded inputs.
  oracle::Problem p = oracle::makeProblem(c.n, c.m, c.d, c.causal);
  std::vector<double> refO, refL, gotL(lse.begin(), lse.end());
  for (int64_t bh = 0; bh < c.batch * c.heads; ++bh) {
    auto slice = [&](const std::vector<double> &all, int64_t rows) {
      oracle::Matrix mat(rows, c.d);
      std::copy_n(all.begin() + bh * rows * c.d, rows * c.d, mat.data.begin());
      return mat;
    };
    oracle::ForwardResult r = oracle::dense::forward(p, slice(q, c.n), slice(k, c.m), slice(v, c.m));
    refO.insert(refO.end(), r.O.data.begin(), r.O.data.end());
    refL.insert(refL.end(), r.L.begin(), r.L.end());
  }
  test::ErrorStats eo = test::relativeError(out, refO), el = test::relativeError(gotL, refL);
  double tol = c.bf16 ? 5e-3 : 1e-3;
  std::printf("fwd %s d=%ld N=%ld M=%ld %s tiles %s%s: rel L2 O %.2e, L %.2e (tol %.0e)\n",
              c.bf16 ? "bf16" : "fp16", (long)c.d, (long)c.n, (long)c.m,
              c.causal ? "causal" : "full", spec.tiles.name().c_str(),
              c.registerA ? " register-A" : "", eo.relL2, el.relL2, tol);
  CHECK(eo.nonFinite == 0);
  CHECK(el.nonFinite == 0);
  CHECK(eo.relL2 <= tol);
  CHECK(el.relL2 <= tol);
}

} // namespace

TEST_CASE("forward kernel matches the float64 oracle", "[gpu][fwd]") {
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        for (auto [n, m] : {std::pair<int64_t, int64_t>{256, 256}, {317, 250}, {250, 317}}) {
          DYNAMIC_SECTION("d" << d << (causal ? " causal" : "") << (bf16 ? " bf16" : " fp16")
                              << " N" << n << " M" << m) {
            runCase({2, 3, n, m, d, causal, bf16, 64, 64});
          }
        }
}

TEST_CASE("forward kernel with other tiles", "[gpu][fwd]") {
  runCase({1, 2, 300, 500, 64, true, true, 128, 32});
  runCase({1, 2, 129, 77, 128, false, true, 64, 32});
}

// Two or three warpgroups of 64 rows each (on sm_90a: row warpgroups, each staging P behind its
// own barrier, compiler/passes/WarpRoles.h), with and without a producer warpgroup, over sweeps
// of several steps, ragged ends and the causal diagonal.
TEST_CASE("forward kernel with row warpgroups", "[gpu][fwd]") {
  for (int64_t warps : {8, 12})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        for (bool producer : {false, true})
          for (int64_t blockN : {64, 128}) {
            DYNAMIC_SECTION(warps << " warps d" << d << (causal ? " causal" : "")
                                  << (producer ? " producer" : "") << " block_n " << blockN) {
              const int64_t blockM = 16 * warps;
              runCase({2, 3, 700, 650, d, causal, true, blockM, blockN, warps, producer});
              runCase({1, 2, 1024, 1024, d, causal, true, blockM, blockN, warps, producer});
            }
          }
}

// P V with P carried to the next step in registers (#bob.spec register_a, sm_90a): N = d = 32,
// 64 and 128 (the register-A product's width), one and two row warpgroups, with and without a
// producer, over sweeps of several steps, ragged ends and the causal diagonal.
TEST_CASE("forward kernel with P V from registers", "[gpu][fwd]") {
  struct Tiles {
    int64_t blockM, blockN, warps;
    bool producer;
  };
  for (int64_t d : {32, 64, 128})
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        for (Tiles t :
             {Tiles{64, 128, 4, true}, Tiles{64, 64, 4, false}, Tiles{128, 128, 8, true}}) {
          DYNAMIC_SECTION("d" << d << (causal ? " causal" : "") << (bf16 ? " bf16" : " fp16")
                              << " " << t.blockM << "x" << t.blockN << "x" << t.warps
                              << (t.producer ? " producer" : "")) {
            runCase({2, 3, 700, 650, d, causal, bf16, t.blockM, t.blockN, t.warps, t.producer,
                     /*registerA=*/true});
          }
        }
}

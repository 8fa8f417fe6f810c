// Forward, backward, BoB and the forward's JVP through the C++ API on the GPU, against the float64 oracle run on
// the same bf16/fp16-rounded inputs. Outputs are poisoned with NaN first (every element must be
// written); relative L2 error of every output within 5e-3 (bf16) / 1e-3 (fp16); BoB run twice
// must give bit-identical results (no order-dependent atomics).
#include "test/gpu/GpuTestUtil.h"

#include "api/Attention.h"
#include "kernels/oracle/Oracle.h"

#include <cstdio>
#include <random>

using namespace flashbob;
using flashbob::test::DeviceBuffer;

namespace {

struct Case {
  int64_t batch, heads, n, m, d;
  bool causal, bf16;
  // Tensors laid out (batch, seq, heads, head_dim) in memory, as PyTorch's q.transpose(1, 2) of
  // a (batch, seq, heads, d) tensor: strides (seq * heads * d, d, heads * d, 1), heads closer
  // than rows (not ordered by size, which TMA's tensor maps must accept).
  bool seqMajor = false;
};

struct HostTensor {
  std::vector<double> values; // rounded to the dtype
  std::vector<uint16_t> bits;
};

void runCase(const Case &c) {
  AttentionProblem p{c.batch, c.heads, c.n, c.m, c.d, c.bf16 ? DType::bf16 : DType::fp16,
                     c.causal};
  const int64_t bh = c.batch * c.heads;

  std::mt19937_64 rng(7 + c.n * 31 + c.m * 17 + c.d + 3 * c.causal + 5 * c.bf16);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto make = [&](int64_t rows) {
    HostTensor t;
    t.values.resize(static_cast<size_t>(bh * rows * c.d));
    for (double &x : t.values)
      x = normal(rng);
    t.bits = test::toHalf(t.values, c.bf16);
    return t;
  };
  HostTensor q = make(c.n), k = make(c.m), v = make(c.m), dO = make(c.n), uQ = make(c.n),
             uK = make(c.m), uV = make(c.m);

  // Element (b, h, row, col) of a (batch, heads, rows, d) tensor: its place in memory.
  auto place = [&](int64_t b, int64_t h, int64_t row, int64_t col, int64_t rows) {
    if (c.seqMajor)
      return ((b * rows + row) * c.heads + h) * c.d + col;
    return ((b * c.heads + h) * rows + row) * c.d + col;
  };
  auto forEachElement = [&](int64_t rows, auto body) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t col = 0; col < c.d; ++col)
            body(((b * c.heads + h) * rows + row) * c.d + col, place(b, h, row, col, rows));
  };
  auto upload = [&](const HostTensor &t) {
    const int64_t rows = static_cast<int64_t>(t.bits.size()) / (bh * c.d);
    std::vector<uint16_t> memory(t.bits.size());
    forEachElement(rows, [&](int64_t logical, int64_t at) { memory[at] = t.bits[logical]; });
    auto buf = std::make_unique<DeviceBuffer>(t.bits.size() * 2);
    buf->upload(memory.data());
    return buf;
  };
  auto output = [&](int64_t rows) {
    auto buf = std::make_unique<DeviceBuffer>(static_cast<size_t>(bh * rows * c.d) * 2);
    buf->poison();
    return buf;
  };
  auto rowsBuf = [&]() {
    auto buf = std::make_unique<DeviceBuffer>(static_cast<size_t>(bh * c.n) * 4);
    buf->poison();
    return buf;
  };
  auto dq = upload(q), dk = upload(k), dv = upload(v), ddO = upload(dO), duQ = upload(uQ),
       duK = upload(uK), duV = upload(uV);
  auto dOut = output(c.n), dLse = rowsBuf(), dD = rowsBuf(), dC = rowsBuf(), dB = rowsBuf();
  auto dQg = output(c.n), dKg = output(c.m), dVg = output(c.m);
  auto gQ = output(c.n), gK = output(c.m), gV = output(c.m), gdO = output(c.n);
  auto tO = output(c.n);

  auto T = [&](const std::unique_ptr<DeviceBuffer> &b, int64_t rows) {
    Tensor t = p.contiguous(b->get(), rows);
    if (c.seqMajor) {
      t.stride[0] = rows * c.heads * c.d;
      t.stride[1] = c.d;
      t.stride[2] = c.heads * c.d;
    }
    return t;
  };
  GPU_CHECK(attentionForward(p, T(dq, c.n), T(dk, c.m), T(dv, c.m), T(dOut, c.n), {dLse->get()}));
  GPU_CHECK(attentionBackward(p, T(dq, c.n), T(dk, c.m), T(dv, c.m), T(dOut, c.n), T(ddO, c.n),
                              {dLse->get()}, T(dQg, c.n), T(dKg, c.m), T(dVg, c.m), {dD->get()}));
  BobInputs in{T(dq, c.n), T(dk, c.m), T(dv, c.m), T(dOut, c.n), T(ddO, c.n), {dLse->get()},
               T(duQ, c.n), T(duK, c.m), T(duV, c.m)};
  BobOutputs out{T(gQ, c.n), T(gK, c.m), T(gV, c.m), T(gdO, c.n), {dD->get()}, {dC->get()},
                 {dB->get()}};
  GPU_CHECK(attentionBob(p, in, out));
  // The forward's JVP along tangents (uQ, uK, uV).
  GPU_CHECK(attentionForwardJvp(p, T(dq, c.n), T(dk, c.m), T(dv, c.m), T(dOut, c.n),
                                {dLse->get()}, T(duQ, c.n), T(duK, c.m), T(duV, c.m), T(tO, c.n)));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);

  auto fetch = [&](const std::unique_ptr<DeviceBuffer> &b, int64_t rows) {
    std::vector<uint16_t> memory(static_cast<size_t>(bh * rows * c.d)), bits(memory.size());
    b->download(memory.data());
    forEachElement(rows, [&](int64_t logical, int64_t at) { bits[logical] = memory[at]; });
    return test::fromHalf(bits, c.bf16);
  };
  auto fetchRows = [&](const std::unique_ptr<DeviceBuffer> &b) {
    std::vector<float> f(static_cast<size_t>(bh * c.n));
    b->download(f.data());
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> gotO = fetch(dOut, c.n), gotL = fetchRows(dLse), gotDQ = fetch(dQg, c.n),
                      gotDK = fetch(dKg, c.m), gotDV = fetch(dVg, c.m), gotGQ = fetch(gQ, c.n),
                      gotGK = fetch(gK, c.m), gotGV = fetch(gV, c.m), gotGdO = fetch(gdO, c.n),
                      gotC = fetchRows(dC), gotB = fetchRows(dB), gotTO = fetch(tO, c.n);

  // Determinism: a second BoB must be bit-identical.
  GPU_CHECK(attentionBob(p, in, out));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(fetch(gQ, c.n) == gotGQ);
  CHECK(fetch(gK, c.m) == gotGK);

  oracle::Problem op = oracle::makeProblem(c.n, c.m, c.d, c.causal);
  std::vector<double> refO, refL, refDQ, refDK, refDV, refGQ, refGK, refGV, refGdO, refC, refB,
      refTO;
  auto append = [](std::vector<double> &all, const std::vector<double> &part) {
    all.insert(all.end(), part.begin(), part.end());
  };
  for (int64_t h = 0; h < bh; ++h) {
    auto slice = [&](const std::vector<double> &all, int64_t rows) {
      oracle::Matrix mat(rows, c.d);
      std::copy_n(all.begin() + h * rows * c.d, rows * c.d, mat.data.begin());
      return mat;
    };
    oracle::Matrix Q = slice(q.values, c.n), K = slice(k.values, c.m), V = slice(v.values, c.m),
                   DO = slice(dO.values, c.n);
    oracle::ForwardResult f = oracle::dense::forward(op, Q, K, V);
    oracle::BackwardResult bw = oracle::dense::backward(op, Q, K, V, DO);
    oracle::BobResult bb = oracle::dense::bob(op, Q, K, V, DO, slice(uQ.values, c.n),
                                              slice(uK.values, c.m), slice(uV.values, c.m));
    append(refO, f.O.data);
    append(refL, f.L);
    append(refDQ, bw.dQ.data);
    append(refDK, bw.dK.data);
    append(refDV, bw.dV.data);
    append(refGQ, bb.gQ.data);
    append(refGK, bb.gK.data);
    append(refGV, bb.gV.data);
    append(refGdO, bb.gdO.data);
    append(refC, bb.c);
    append(refB, bb.b);
    append(refTO, oracle::dense::forwardJvp(op, Q, K, V, slice(uQ.values, c.n),
                                            slice(uK.values, c.m), slice(uV.values, c.m))
                      .data);
  }
  const double tol = c.bf16 ? 5e-3 : 1e-3;
  std::printf("%s d=%ld N=%ld M=%ld %s%s:", c.bf16 ? "bf16" : "fp16", (long)c.d, (long)c.n,
              (long)c.m, c.causal ? "causal" : "full", c.seqMajor ? " (b,s,h,d) layout" : "");
  const std::tuple<const char *, std::vector<double> *, std::vector<double> *> outputs[] = {
      {"O", &gotO, &refO},     {"L", &gotL, &refL},       {"dQ", &gotDQ, &refDQ},
      {"dK", &gotDK, &refDK},  {"dV", &gotDV, &refDV},    {"gQ", &gotGQ, &refGQ},
      {"gK", &gotGK, &refGK},  {"gV", &gotGV, &refGV},    {"gdO", &gotGdO, &refGdO},
      {"c", &gotC, &refC},     {"b", &gotB, &refB},       {"tO", &gotTO, &refTO}};
  for (auto [name, got, ref] : outputs) {
    test::ErrorStats e = test::relativeError(*got, *ref);
    std::printf(" %s %.2e", name, e.relL2);
    INFO(name << " rel L2 " << e.relL2 << ", non-finite " << e.nonFinite);
    CHECK(e.nonFinite == 0);
    CHECK(e.relL2 <= tol);
  }
  std::printf("\n");
}

} // namespace

TEST_CASE("forward, backward and BoB through the API match the float64 oracle", "[gpu][api]") {
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        for (auto [n, m] : {std::pair<int64_t, int64_t>{256, 256}, {300, 200}, {200, 333}}) {
          DYNAMIC_SECTION("d" << d << (causal ? " causal" : "") << (bf16 ? " bf16" : " fp16")
                              << " N" << n << " M" << m) {
            runCase({2, 2, n, m, d, causal, bf16});
          }
        }
}

TEST_CASE("other head dims: 32, 96, 256", "[gpu][api]") {
  runCase({1, 2, 200, 333, 32, true, true});
  runCase({1, 2, 300, 200, 96, false, false});
  runCase({1, 2, 160, 160, 256, true, true});
}

TEST_CASE("tensors in (batch, seq, heads, d) layout", "[gpu][api]") {
  for (int64_t d : {64, 128})
    DYNAMIC_SECTION("d" << d) {
      Case c{2, 3, 300, 200, d, true, true};
      c.seqMajor = true;
      runCase(c);
    }
}

TEST_CASE("a second context gets its own modules", "[gpu][api]") {
  // Modules belong to the context they were loaded in: a kernel loaded in the primary context
  // must not be launched from another one. Run in a fresh context, then in the primary again.
  auto &cu = test::driver().api();
  runCase({1, 2, 130, 70, 64, false, true}); // primary context: loads fwd, bwd, BoB kernels
  CUdevice dev;
  REQUIRE(cu.cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CUcontext second = nullptr;
  REQUIRE(cu.cuCtxCreate(&second, 0, dev) == CUDA_SUCCESS); // now current on this thread
  runCase({1, 2, 130, 70, 64, false, true});
  REQUIRE(cu.cuCtxDestroy(second) == CUDA_SUCCESS);
  llvm::cantFail(runtime::usePrimaryContext(test::driver()));
  runCase({1, 2, 130, 70, 64, false, true});
}

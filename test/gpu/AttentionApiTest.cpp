// Forward, backward, BoB and the forward's JVP (alone, and with the forward in one kernel: O, L
// and tO of attentionForwardDual, each against the same references as the forward's and the
// JVP's) through the C++ API on the GPU, against the float64 oracle run on the same
// bf16/fp16-rounded inputs. Outputs are poisoned with NaN first (every element must be
// written); relative L2 error of every output within 5e-3 (bf16) / 1e-3 (fp16); BoB run twice
// must give bit-identical results (no order-dependent atomics).
#include "test/gpu/GpuTestUtil.h"

#include "api/Attention.h"
#include "kernels/oracle/Oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

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
  // Key/value heads (grouped-query attention; 0: heads). K, V, uK, uV and dK, dV, gK, gV have
  // this many; query head h reads key/value head h / (heads / headsKv).
  int64_t headsKv = 0;
  // Sliding window (left, right) as flash-attn's window_size; -1: unbounded.
  int64_t windowLeft = -1, windowRight = -1;
  // A tighter bound than the dtype's for the outputs named (those of long sweeps, whose
  // accumulators flush into reserves: KernelBuilder::flush).
  double tightTol = 0;
  std::vector<std::string> tightOutputs;
  // Outputs that are exactly zero in exact arithmetic (every row sees one key: P = 1 whatever
  // the scores, so nothing depends on Q or K), where a relative error means nothing: checked by
  // the L2 norm of the error instead, against kZeroOutputTol.
  std::vector<std::string> zeroOutputs;
  // Unused elements after each row of every tensor: NaN in the inputs (a kernel or copy that
  // read them would spread it), a pattern in the outputs that must still be there afterwards
  // (nothing may write past a row's d columns). Rows stay 16-byte aligned where the kernels read
  // the caller's tensors themselves (d a multiple of 8: a multiple of 8 here).
  int64_t rowGap = 0;
};

// What the unused elements after each row hold: a NaN in the inputs, this in the outputs.
constexpr uint16_t kGapPattern = 0x5A5A;

// The bound on a zero output's error norm: float32 residues (dS = dP - D of two sums over d
// products) stay below 2e-4 here (H100, 2026-12-07); BoB's gQ, formed from separately rounded
// terms before it was made exact in these rows, reached 6e-2 in a single element.
constexpr double kZeroOutputTol = 1e-3;
// gQ in a row that sees one key: the kernel writes the exact zero.
constexpr double kOneKeyRowTol = 0.0;

struct HostTensor {
  std::vector<double> values; // rounded to the dtype
  std::vector<uint16_t> bits;
};

void runCase(const Case &c) {
  AttentionProblem p{c.batch, c.heads, c.n, c.m, c.d, c.bf16 ? DType::bf16 : DType::fp16,
                     c.causal};
  p.headsKv = c.headsKv;
  p.windowLeft = c.windowLeft;
  p.windowRight = c.windowRight;
  const int64_t kvHeads = p.keyValueHeads(), group = c.heads / kvHeads;
  const int64_t bh = c.batch * c.heads;

  std::mt19937_64 rng(7 + c.n * 31 + c.m * 17 + c.d + 3 * c.causal + 5 * c.bf16 +
                      11 * c.windowLeft + 13 * c.windowRight);
  std::normal_distribution<double> normal(0.0, 1.0);
  // The rows and heads of the query side's tensors and of the key side's.
  struct Side {
    int64_t rows, heads;
    bool query;
  };
  const Side qs{c.n, c.heads, true}, ks{c.m, kvHeads, false};
  auto make = [&](Side side) {
    HostTensor t;
    t.values.resize(static_cast<size_t>(c.batch * side.heads * side.rows * c.d));
    for (double &x : t.values)
      x = normal(rng);
    t.bits = test::toHalf(t.values, c.bf16);
    return t;
  };
  HostTensor q = make(qs), k = make(ks), v = make(ks), dO = make(qs), uQ = make(qs),
             uK = make(ks), uV = make(ks);

  // Element (b, h, row, col) of a (batch, heads, rows, d) tensor: its place in memory, rows
  // `pitch` elements apart.
  const int64_t pitch = c.d + c.rowGap;
  auto place = [&](int64_t b, int64_t h, int64_t row, int64_t col, Side side) {
    const int64_t rows = side.rows, heads = side.heads;
    if (c.seqMajor)
      return ((b * rows + row) * heads + h) * pitch + col;
    return ((b * heads + h) * rows + row) * pitch + col;
  };
  auto elements = [&](Side side) { return size_t(c.batch * side.heads * side.rows * pitch); };
  auto forEachElement = [&](Side side, auto body) {
    const int64_t rows = side.rows, heads = side.heads;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t col = 0; col < c.d; ++col)
            body(((b * heads + h) * rows + row) * c.d + col, place(b, h, row, col, side));
  };
  auto upload = [&](const HostTensor &t, Side side) {
    std::vector<uint16_t> memory(elements(side), c.bf16 ? 0x7FC0 : 0x7E00); // gaps: NaN
    forEachElement(side, [&](int64_t logical, int64_t at) { memory[at] = t.bits[logical]; });
    auto buf = std::make_unique<DeviceBuffer>(memory.size() * 2);
    buf->upload(memory.data());
    return buf;
  };
  auto output = [&](Side side) {
    auto buf = std::make_unique<DeviceBuffer>(elements(side) * 2);
    if (c.rowGap) {
      std::vector<uint16_t> memory(elements(side), kGapPattern);
      buf->upload(memory.data());
    } else {
      buf->poison();
    }
    return buf;
  };
  auto rowsBuf = [&]() {
    auto buf = std::make_unique<DeviceBuffer>(static_cast<size_t>(bh * c.n) * 4);
    buf->poison();
    return buf;
  };
  auto dq = upload(q, qs), dk = upload(k, ks), dv = upload(v, ks), ddO = upload(dO, qs),
       duQ = upload(uQ, qs), duK = upload(uK, ks), duV = upload(uV, ks);
  auto dOut = output(qs), dLse = rowsBuf(), dD = rowsBuf(), dC = rowsBuf(), dB = rowsBuf();
  auto dQg = output(qs), dKg = output(ks), dVg = output(ks);
  auto gQ = output(qs), gK = output(ks), gV = output(ks), gdO = output(qs);
  auto tO = output(qs);
  auto dualO = output(qs), dualL = rowsBuf(), dualTO = output(qs);

  auto T = [&](const std::unique_ptr<DeviceBuffer> &b, Side side) {
    Tensor t = p.contiguous(b->get(), side.rows, side.heads);
    t.stride[0] = side.rows * side.heads * pitch;
    t.stride[1] = c.seqMajor ? pitch : side.rows * pitch;
    t.stride[2] = c.seqMajor ? side.heads * pitch : pitch;
    return t;
  };
  GPU_CHECK(attentionForward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), {dLse->get()}));
  GPU_CHECK(attentionBackward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs),
                              {dLse->get()}, T(dQg, qs), T(dKg, ks), T(dVg, ks), {dD->get()}));
  BobInputs in{T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs), {dLse->get()},
               T(duQ, qs), T(duK, ks), T(duV, ks)};
  BobOutputs out{T(gQ, qs), T(gK, ks), T(gV, ks), T(gdO, qs), {dD->get()}, {dC->get()},
                 {dB->get()}};
  GPU_CHECK(attentionBob(p, in, out));
  // The forward's JVP along tangents (uQ, uK, uV).
  GPU_CHECK(attentionForwardJvp(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs),
                                {dLse->get()}, T(duQ, qs), T(duK, ks), T(duV, ks), T(tO, qs)));
  // The forward and its JVP in one kernel, along the same tangents, into outputs of its own.
  GPU_CHECK(attentionForwardDual(p, T(dq, qs), T(dk, ks), T(dv, ks), T(duQ, qs), T(duK, ks),
                                 T(duV, ks), T(dualO, qs), {dualL->get()}, T(dualTO, qs)));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);

  // Elements past a row's d columns an output call changed (must stay 0).
  int64_t gapWrites = 0;
  auto fetch = [&](const std::unique_ptr<DeviceBuffer> &b, Side side) {
    std::vector<uint16_t> memory(elements(side)),
        bits(static_cast<size_t>(c.batch * side.heads * side.rows * c.d));
    b->download(memory.data());
    std::vector<bool> inRow(memory.size(), false);
    forEachElement(side, [&](int64_t logical, int64_t at) {
      bits[logical] = memory[at];
      inRow[at] = true;
    });
    if (c.rowGap)
      for (size_t i = 0; i < memory.size(); ++i)
        gapWrites += !inRow[i] && memory[i] != kGapPattern;
    return test::fromHalf(bits, c.bf16);
  };
  auto fetchRows = [&](const std::unique_ptr<DeviceBuffer> &b) {
    std::vector<float> f(static_cast<size_t>(bh * c.n));
    b->download(f.data());
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> gotO = fetch(dOut, qs), gotL = fetchRows(dLse), gotDQ = fetch(dQg, qs),
                      gotDK = fetch(dKg, ks), gotDV = fetch(dVg, ks), gotGQ = fetch(gQ, qs),
                      gotGK = fetch(gK, ks), gotGV = fetch(gV, ks), gotGdO = fetch(gdO, qs),
                      gotC = fetchRows(dC), gotB = fetchRows(dB), gotTO = fetch(tO, qs),
                      gotDualO = fetch(dualO, qs), gotDualL = fetchRows(dualL),
                      gotDualTO = fetch(dualTO, qs);

  // Determinism: a second BoB must be bit-identical, and a second backward (with
  // FLASHBOB_FUSED_BACKWARD: dQ summed over the key blocks in their fixed order).
  GPU_CHECK(attentionBob(p, in, out));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(fetch(gQ, qs) == gotGQ);
  CHECK(fetch(gK, ks) == gotGK);
  CHECK(fetch(gV, ks) == gotGV);
  GPU_CHECK(attentionBackward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs),
                              {dLse->get()}, T(dQg, qs), T(dKg, ks), T(dVg, ks), {dD->get()}));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(fetch(dQg, qs) == gotDQ);
  CHECK(fetch(dKg, ks) == gotDK);
  CHECK(fetch(dVg, ks) == gotDV);

  // The oracle per query head (b, h), with key/value head h / group; the key side's gradients
  // summed over each group (in query-head order, as the kernels visit them).
  oracle::Problem op = oracle::makeProblem(c.n, c.m, c.d, c.causal);
  op.windowLeft = c.windowLeft;
  op.windowRight = c.windowRight;
  const size_t keySide = static_cast<size_t>(c.batch * kvHeads * c.m * c.d);
  std::vector<double> refO, refL, refDQ, refDK(keySide), refDV(keySide), refGQ, refGK(keySide),
      refGV(keySide), refGdO, refC, refB, refTO;
  auto append = [](std::vector<double> &all, const std::vector<double> &part) {
    all.insert(all.end(), part.begin(), part.end());
  };
  for (int64_t bhIndex = 0; bhIndex < bh; ++bhIndex) {
    const int64_t kvIndex = (bhIndex / c.heads) * kvHeads + (bhIndex % c.heads) / group;
    auto slice = [&](const std::vector<double> &all, Side side) {
      const int64_t at = side.query ? bhIndex : kvIndex;
      oracle::Matrix mat(side.rows, c.d);
      std::copy_n(all.begin() + at * side.rows * c.d, side.rows * c.d, mat.data.begin());
      return mat;
    };
    auto addKeySide = [&](std::vector<double> &all, const oracle::Matrix &part) {
      for (size_t i = 0; i < part.data.size(); ++i)
        all[kvIndex * c.m * c.d + i] += part.data[i];
    };
    oracle::Matrix Q = slice(q.values, qs), K = slice(k.values, ks), V = slice(v.values, ks),
                   DO = slice(dO.values, qs);
    oracle::ForwardResult f = oracle::dense::forward(op, Q, K, V);
    oracle::BackwardResult bw = oracle::dense::backward(op, Q, K, V, DO);
    oracle::BobResult bb = oracle::dense::bob(op, Q, K, V, DO, slice(uQ.values, qs),
                                              slice(uK.values, ks), slice(uV.values, ks));
    append(refO, f.O.data);
    append(refL, f.L);
    append(refDQ, bw.dQ.data);
    addKeySide(refDK, bw.dK);
    addKeySide(refDV, bw.dV);
    append(refGQ, bb.gQ.data);
    addKeySide(refGK, bb.gK);
    addKeySide(refGV, bb.gV);
    append(refGdO, bb.gdO.data);
    append(refC, bb.c);
    append(refB, bb.b);
    append(refTO, oracle::dense::forwardJvp(op, Q, K, V, slice(uQ.values, qs),
                                            slice(uK.values, ks), slice(uV.values, ks))
                      .data);
  }
  const double tol = c.bf16 ? 5e-3 : 1e-3;
  std::printf("%s d=%ld N=%ld M=%ld %s%s heads %ld:%ld window (%ld, %ld)%s:",
              c.bf16 ? "bf16" : "fp16", (long)c.d, (long)c.n, (long)c.m,
              c.causal ? "causal" : "full", c.seqMajor ? " (b,s,h,d) layout" : "", (long)c.heads,
              (long)kvHeads, (long)c.windowLeft, (long)c.windowRight,
              c.rowGap ? (" rows " + std::to_string(pitch) + " apart").c_str() : "");
  CHECK(gapWrites == 0);
  const std::tuple<const char *, std::vector<double> *, std::vector<double> *> outputs[] = {
      {"O", &gotO, &refO},     {"L", &gotL, &refL},       {"dQ", &gotDQ, &refDQ},
      {"dK", &gotDK, &refDK},  {"dV", &gotDV, &refDV},    {"gQ", &gotGQ, &refGQ},
      {"gK", &gotGK, &refGK},  {"gV", &gotGV, &refGV},    {"gdO", &gotGdO, &refGdO},
      {"c", &gotC, &refC},     {"b", &gotB, &refB},       {"tO", &gotTO, &refTO},
      {"dual O", &gotDualO, &refO}, {"dual L", &gotDualL, &refL},
      {"dual tO", &gotDualTO, &refTO}};
  for (auto [name, got, ref] : outputs) {
    if (std::find(c.zeroOutputs.begin(), c.zeroOutputs.end(), name) != c.zeroOutputs.end()) {
      double err2 = 0;
      for (size_t i = 0; i < got->size(); ++i)
        err2 += ((*got)[i] - (*ref)[i]) * ((*got)[i] - (*ref)[i]);
      std::printf(" %s |err| %.2e", name, std::sqrt(err2));
      INFO(name << " (exactly zero) error norm " << std::sqrt(err2));
      CHECK(std::isfinite(err2));
      CHECK(std::sqrt(err2) <= kZeroOutputTol);
      continue;
    }
    test::ErrorStats e = test::relativeError(*got, *ref);
    std::printf(" %s %.2e", name, e.relL2);
    INFO(name << " rel L2 " << e.relL2 << ", non-finite " << e.nonFinite);
    CHECK(e.nonFinite == 0);
    CHECK(e.relL2 <= tol);
    if (std::find(c.tightOutputs.begin(), c.tightOutputs.end(), name) != c.tightOutputs.end())
      CHECK(e.relL2 <= c.tightTol);
  }
  // Rows that see a single key (the causal row N - M, every row of M = 1 or of a window (0, 0)):
  // gQ is exactly zero there.
  int64_t oneKeyRows = 0;
  double oneKeyWorst = 0;
  for (int64_t bhIndex = 0; bhIndex < bh; ++bhIndex)
    for (int64_t row = 0; row < c.n; ++row) {
      if (oracle::visibleKeyEnd(op, row + 1) - oracle::visibleKeyBegin(op, row) != 1)
        continue;
      ++oneKeyRows;
      for (int64_t col = 0; col < c.d; ++col)
        oneKeyWorst =
            std::max(oneKeyWorst, std::abs(gotGQ[static_cast<size_t>((bhIndex * c.n + row) * c.d + col)]));
    }
  if (oneKeyRows) {
    std::printf(" gQ of %ld one-key rows: max %.2e", (long)oneKeyRows, oneKeyWorst);
    INFO("gQ in " << oneKeyRows << " rows that see one key: max |gQ| " << oneKeyWorst);
    CHECK(oneKeyWorst <= kOneKeyRowTol);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// A packed batch (flash-attn's varlen): sequence s has lenQ[s] query rows and lenK[s] key rows,
// packed one after another in (total, heads, d) memory (flash-attn's layout) or (1, heads, total,
// d). Every output of every kernel against the oracle's varlen reference, each sequence its
// own problem; the tiles of one sequence's blocks hold the next sequence's rows (real data, not
// zeros), which the masks must hide.
struct VarlenCase {
  std::vector<int64_t> lenQ, lenK;
  int64_t heads, headsKv, d;
  bool causal, bf16;
  int64_t windowLeft = -1, windowRight = -1;
  bool seqMajor = true;
};

void runVarlenCase(const VarlenCase &c) {
  const int64_t sequences = static_cast<int64_t>(c.lenQ.size());
  std::vector<int32_t> cuQ{0}, cuK{0};
  for (int64_t s = 0; s < sequences; ++s) {
    cuQ.push_back(cuQ.back() + static_cast<int32_t>(c.lenQ[s]));
    cuK.push_back(cuK.back() + static_cast<int32_t>(c.lenK[s]));
  }
  const int64_t totalQ = cuQ.back(), totalK = cuK.back();
  AttentionProblem p{sequences, c.heads, totalQ, totalK, c.d,
                     c.bf16 ? DType::bf16 : DType::fp16, c.causal};
  p.headsKv = c.headsKv;
  p.windowLeft = c.windowLeft;
  p.windowRight = c.windowRight;
  p.varlen = true;
  p.maxSeqQ = *std::max_element(c.lenQ.begin(), c.lenQ.end());
  p.maxSeqK = *std::max_element(c.lenK.begin(), c.lenK.end());
  const int64_t kvHeads = p.keyValueHeads();

  DeviceBuffer offsetsQ(cuQ.size() * 4), offsetsK(cuK.size() * 4);
  offsetsQ.upload(cuQ.data());
  offsetsK.upload(cuK.data());
  p.cuSeqlensQ = offsetsQ.get();
  p.cuSeqlensK = offsetsK.get();

  std::mt19937_64 rng(11 + totalQ * 31 + totalK * 17 + c.d + 3 * c.causal + 5 * c.bf16);
  std::normal_distribution<double> normal(0.0, 1.0);
  struct Side {
    int64_t rows, heads;
  };
  const Side qs{totalQ, c.heads}, ks{totalK, kvHeads};
  // Logical (1, heads, rows, d) order, as the oracle's HeadTensor; `place` maps it to memory.
  auto make = [&](Side side) {
    oracle::HeadTensor t(1, side.heads, side.rows, c.d);
    for (double &x : t.data)
      x = normal(rng);
    std::vector<uint16_t> bits = test::toHalf(t.data, c.bf16);
    return std::pair{t, bits};
  };
  auto place = [&](int64_t h, int64_t row, int64_t col, Side side) {
    return c.seqMajor ? (row * side.heads + h) * c.d + col : (h * side.rows + row) * c.d + col;
  };
  auto upload = [&](const std::vector<uint16_t> &bits, Side side) {
    std::vector<uint16_t> memory(bits.size());
    for (int64_t h = 0, i = 0; h < side.heads; ++h)
      for (int64_t row = 0; row < side.rows; ++row)
        for (int64_t col = 0; col < c.d; ++col, ++i)
          memory[place(h, row, col, side)] = bits[i];
    auto buf = std::make_unique<DeviceBuffer>(bits.size() * 2);
    buf->upload(memory.data());
    return buf;
  };
  auto [q, qBits] = make(qs);
  auto [k, kBits] = make(ks);
  auto [v, vBits] = make(ks);
  auto [dO, dOBits] = make(qs);
  auto [uQ, uQBits] = make(qs);
  auto [uK, uKBits] = make(ks);
  auto [uV, uVBits] = make(ks);
  auto dq = upload(qBits, qs), dk = upload(kBits, ks), dv = upload(vBits, ks),
       ddO = upload(dOBits, qs), duQ = upload(uQBits, qs), duK = upload(uKBits, ks),
       duV = upload(uVBits, ks);
  auto output = [&](Side side) {
    auto buf = std::make_unique<DeviceBuffer>(static_cast<size_t>(side.heads * side.rows * c.d) * 2);
    buf->poison();
    return buf;
  };
  auto rowsBuf = [&]() {
    auto buf = std::make_unique<DeviceBuffer>(static_cast<size_t>(c.heads * totalQ) * 4);
    buf->poison();
    return buf;
  };
  auto dOut = output(qs), dLse = rowsBuf(), dD = rowsBuf(), dC = rowsBuf(), dB = rowsBuf();
  auto dQg = output(qs), dKg = output(ks), dVg = output(ks);
  auto gQ = output(qs), gK = output(ks), gV = output(ks), gdO = output(qs), tO = output(qs);
  auto dualO = output(qs), dualL = rowsBuf(), dualTO = output(qs);
  auto T = [&](const std::unique_ptr<DeviceBuffer> &b, Side side) {
    Tensor t = p.contiguous(b->get(), side.rows, side.heads);
    if (c.seqMajor) { // (total, heads, d): stride[0] unused
      t.stride[0] = 0;
      t.stride[1] = c.d;
      t.stride[2] = side.heads * c.d;
    }
    return t;
  };
  GPU_CHECK(attentionForward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), {dLse->get()}));
  GPU_CHECK(attentionBackward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs),
                              {dLse->get()}, T(dQg, qs), T(dKg, ks), T(dVg, ks), {dD->get()}));
  BobInputs in{T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs), {dLse->get()},
               T(duQ, qs), T(duK, ks), T(duV, ks)};
  BobOutputs out{T(gQ, qs), T(gK, ks), T(gV, ks), T(gdO, qs), {dD->get()}, {dC->get()},
                 {dB->get()}};
  GPU_CHECK(attentionBob(p, in, out));
  GPU_CHECK(attentionForwardJvp(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs),
                                {dLse->get()}, T(duQ, qs), T(duK, ks), T(duV, ks), T(tO, qs)));
  GPU_CHECK(attentionForwardDual(p, T(dq, qs), T(dk, ks), T(dv, ks), T(duQ, qs), T(duK, ks),
                                 T(duV, ks), T(dualO, qs), {dualL->get()}, T(dualTO, qs)));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);

  auto fetch = [&](const std::unique_ptr<DeviceBuffer> &b, Side side) {
    std::vector<uint16_t> memory(static_cast<size_t>(side.heads * side.rows * c.d)),
        bits(memory.size());
    b->download(memory.data());
    for (int64_t h = 0, i = 0; h < side.heads; ++h)
      for (int64_t row = 0; row < side.rows; ++row)
        for (int64_t col = 0; col < c.d; ++col, ++i)
          bits[i] = memory[place(h, row, col, side)];
    return test::fromHalf(bits, c.bf16);
  };
  auto fetchRows = [&](const std::unique_ptr<DeviceBuffer> &b) {
    std::vector<float> f(static_cast<size_t>(c.heads * totalQ));
    b->download(f.data());
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> gotGQ = fetch(gQ, qs), gotGK = fetch(gK, ks), gotGV = fetch(gV, ks);
  std::vector<double> gotDQ = fetch(dQg, qs), gotDK = fetch(dKg, ks), gotDV = fetch(dVg, ks);
  GPU_CHECK(attentionBob(p, in, out)); // determinism: bit-identical again
  GPU_CHECK(attentionBackward(p, T(dq, qs), T(dk, ks), T(dv, ks), T(dOut, qs), T(ddO, qs),
                              {dLse->get()}, T(dQg, qs), T(dKg, ks), T(dVg, ks), {dD->get()}));
  REQUIRE(test::driver().api().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(fetch(gQ, qs) == gotGQ);
  CHECK(fetch(gK, ks) == gotGK);
  CHECK(fetch(gV, ks) == gotGV);
  CHECK(fetch(dQg, qs) == gotDQ);
  CHECK(fetch(dKg, ks) == gotDK);
  CHECK(fetch(dVg, ks) == gotDV);

  oracle::Problem head = oracle::makeProblem(1, 1, c.d, c.causal);
  head.windowLeft = c.windowLeft;
  head.windowRight = c.windowRight;
  oracle::Packing packing;
  packing.cuQ.assign(cuQ.begin(), cuQ.end());
  packing.cuK.assign(cuK.begin(), cuK.end());
  oracle::BatchedForwardResult f = oracle::dense::forwardVarlen(head, packing, q, k, v);
  oracle::BatchedBackwardResult bw = oracle::dense::backwardVarlen(head, packing, q, k, v, dO);
  oracle::BatchedBobResult bb =
      oracle::dense::bobVarlen(head, packing, q, k, v, dO, uQ, uK, uV);
  // The forward's JVP per sequence and query head (the oracle's dense one on its rows).
  std::vector<double> refTO(q.data.size(), 0.0);
  const int64_t group = c.heads / kvHeads;
  for (int64_t s = 0; s < sequences; ++s) {
    if (c.lenQ[s] == 0 || c.lenK[s] == 0)
      continue;
    oracle::Problem op = head;
    op.N = c.lenQ[s];
    op.M = c.lenK[s];
    for (int64_t h = 0; h < c.heads; ++h) {
      auto rows = [&](const oracle::HeadTensor &t, int64_t th, int64_t begin, int64_t count) {
        oracle::Matrix mat(count, c.d);
        std::copy_n(t.data.begin() + (th * t.rows + begin) * c.d, count * c.d, mat.data.begin());
        return mat;
      };
      const int64_t kh = h / group;
      oracle::Matrix t = oracle::dense::forwardJvp(
          op, rows(q, h, cuQ[s], op.N), rows(k, kh, cuK[s], op.M), rows(v, kh, cuK[s], op.M),
          rows(uQ, h, cuQ[s], op.N), rows(uK, kh, cuK[s], op.M), rows(uV, kh, cuK[s], op.M));
      std::copy(t.data.begin(), t.data.end(), refTO.begin() + (h * totalQ + cuQ[s]) * c.d);
    }
  }

  const double tol = c.bf16 ? 5e-3 : 1e-3;
  std::printf("varlen %s d=%ld %zu sequences (N %ld, M %ld in all) %s heads %ld:%ld window "
              "(%ld, %ld)%s:",
              c.bf16 ? "bf16" : "fp16", (long)c.d, c.lenQ.size(), (long)totalQ, (long)totalK,
              c.causal ? "causal" : "full", (long)c.heads, (long)kvHeads, (long)c.windowLeft,
              (long)c.windowRight, c.seqMajor ? " (total, heads, d) layout" : "");
  const std::pair<const char *, std::pair<std::vector<double>, const std::vector<double> *>>
      outputs[] = {{"O", {fetch(dOut, qs), &f.O.data}},   {"L", {fetchRows(dLse), &f.L.data}},
                   {"dQ", {fetch(dQg, qs), &bw.dQ.data}}, {"dK", {fetch(dKg, ks), &bw.dK.data}},
                   {"dV", {fetch(dVg, ks), &bw.dV.data}}, {"gQ", {gotGQ, &bb.gQ.data}},
                   {"gK", {gotGK, &bb.gK.data}},          {"gV", {gotGV, &bb.gV.data}},
                   {"gdO", {fetch(gdO, qs), &bb.gdO.data}}, {"c", {fetchRows(dC), &bb.c.data}},
                   {"b", {fetchRows(dB), &bb.b.data}},    {"tO", {fetch(tO, qs), &refTO}},
                   {"dual O", {fetch(dualO, qs), &f.O.data}},
                   {"dual L", {fetchRows(dualL), &f.L.data}},
                   {"dual tO", {fetch(dualTO, qs), &refTO}}};
  for (const auto &[name, pair] : outputs) {
    test::ErrorStats e = test::relativeError(pair.first, *pair.second);
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

// A row that sees one key has P = 1 whatever its scores: dQ, dK, gQ, gK and gV vanish exactly.
// BoB's gQ = s (X1 - c X2 - b X3) cancels there term by term, which rounding would leave as
// a residue the size of the terms; the kernels write the exact zero.
TEST_CASE("rows that see a single key: exact zeros where nothing depends on the scores",
          "[gpu][api]") {
  const std::vector<std::string> zeros{"dQ", "dK", "gQ", "gK", "gV"};
  struct Shape { // every row sees one key (or none)
    const char *label;
    int64_t n, m;
    bool causal;
    int64_t windowLeft, windowRight;
  };
  const Shape everyRow[] = {{"M = 1", 300, 1, false, -1, -1},
                            {"M = 1 causal", 300, 1, true, -1, -1},
                            {"window (0, 0)", 256, 256, false, 0, 0},
                            {"causal N = M = 1", 1, 1, true, -1, -1}};
  for (int64_t d : {64, 128})
    for (bool bf16 : {true, false}) {
      for (const Shape &shape : everyRow)
        DYNAMIC_SECTION("d" << d << (bf16 ? " bf16 " : " fp16 ") << shape.label) {
          Case c{2, 2, shape.n, shape.m, d, shape.causal, bf16};
          c.windowLeft = shape.windowLeft;
          c.windowRight = shape.windowRight;
          c.zeroOutputs = zeros;
          runCase(c);
        }
      // Only row 0 sees one key; the other rows are checked as usual.
      DYNAMIC_SECTION("d" << d << (bf16 ? " bf16" : " fp16") << " causal N = M = 700, row 0") {
        runCase({2, 2, 700, 700, d, true, bf16});
      }
    }
}

TEST_CASE("other head dims: 32, 96, 256; 8, 40, 72, 100, 120 (no multiple of 16)", "[gpu][api]") {
  runCase({1, 2, 200, 333, 32, true, true});
  runCase({1, 2, 300, 200, 96, false, false});
  runCase({1, 2, 160, 160, 256, true, true});
  // No multiple of 16: the kernels of the next multiple, the columns past d zero. 8, 40, 72,
  // 120 pad inside the kernels (on the caller's tensors: TMA or masked copies read zeros past
  // d and nothing is written there); 100 runs on zero-padded copies. Every op, against the
  // oracle at d with the scale 1/sqrt(d); rows with unused elements after them (NaN in the
  // inputs, a pattern in the outputs that must survive), other layouts, grouped heads, a
  // window, both dtypes.
  struct Padded {
    int64_t d, n, m;
    bool causal, bf16, seqMajor;
    int64_t headsKv, rowGap, windowLeft, windowRight;
  };
  const Padded cases[] = {
      {8, 200, 333, true, true, false, 0, 8, -1, -1},
      {40, 300, 200, false, false, true, 1, 0, -1, -1},
      {40, 257, 257, true, true, false, 0, 8, -1, -1},
      {72, 257, 257, true, true, false, 0, 8, -1, -1},
      {72, 300, 200, false, false, true, 2, 0, 40, 17},
      {100, 300, 200, false, true, true, 0, 3, -1, -1},
      {100, 200, 333, true, false, false, 2, 0, -1, -1},
      {100, 160, 160, false, true, false, 0, 0, 30, 0},
      {120, 160, 160, true, false, false, 0, 8, -1, -1},
      {120, 333, 200, false, true, true, 1, 0, -1, -1},
  };
  for (const Padded &x : cases)
    DYNAMIC_SECTION("d" << x.d << (x.causal ? " causal" : "") << (x.bf16 ? " bf16" : " fp16")
                        << " N" << x.n << " M" << x.m << (x.seqMajor ? " (b,s,h,d)" : "")
                        << " heads 4:" << (x.headsKv ? x.headsKv : 4) << " gap " << x.rowGap
                        << " window (" << x.windowLeft << ", " << x.windowRight << ")") {
      Case c{1, 4, x.n, x.m, x.d, x.causal, x.bf16};
      c.seqMajor = x.seqMajor;
      c.headsKv = x.headsKv;
      c.rowGap = x.rowGap;
      c.windowLeft = x.windowLeft;
      c.windowRight = x.windowRight;
      runCase(c);
    }
  // Packed batches at d = 72 and 100 (flash-attn's (total, heads, d) layout).
  for (int64_t d : {72, 100})
    DYNAMIC_SECTION("varlen d" << d) {
      runVarlenCase({{300, 1, 130, 0, 257}, {200, 1, 333, 64, 257}, 4, 2, d, true, true});
    }
}

TEST_CASE("tensors in (batch, seq, heads, d) layout", "[gpu][api]") {
  for (int64_t d : {64, 128})
    DYNAMIC_SECTION("d" << d) {
      Case c{2, 3, 300, 200, d, true, true};
      c.seqMajor = true;
      runCase(c);
    }
}

TEST_CASE("grouped-query and multi-query attention: K and V shared by groups of query heads",
          "[gpu][api]") {
  // dK, dV, gK, gV sum over each group inside the key-major kernels; BoB run twice is
  // bit-identical (checked in runCase). Groups of 3 (GQA) and of every head (MQA), causal and
  // not, N != M and lengths that are no multiple of a block, both dtypes, both layouts.
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        for (int64_t headsKv : {2, 1})
          DYNAMIC_SECTION("d" << d << (causal ? " causal" : "") << (bf16 ? " bf16" : " fp16")
                              << " heads 6:" << headsKv) {
            Case c{2, 6, causal ? 200 : 300, causal ? 333 : 200, d, causal, bf16};
            c.headsKv = headsKv;
            c.seqMajor = !bf16;
            runCase(c);
          }
}

TEST_CASE("sliding windows: flash-attn's window_size through every kernel", "[gpu][api]") {
  // Windows on either side or both, with and without causal, N != M and lengths that are no
  // multiple of a block, windows narrower than a block and wider than several; rows the window
  // leaves without a key (N > M, small right side) must give O = 0, L = -inf and no gradient.
  // Not (0, 0): with one key a row, P is 1 whatever the scores, so dQ, dK, gQ and gK are zero
  // and their relative errors would compare rounding noise with rounding noise.
  struct Window {
    int64_t n, m, left, right;
    bool causal;
  };
  const Window windows[] = {{300, 300, 40, 17, false}, {333, 200, 100, -1, true},
                            {200, 333, -1, 30, false}, {257, 257, 1, 1, false},
                            {300, 130, 9, 3, false},   {400, 400, 200, 0, false}};
  for (int64_t d : {64, 128})
    for (bool bf16 : {true, false})
      for (const Window &w : windows)
        DYNAMIC_SECTION("d" << d << (bf16 ? " bf16" : " fp16") << " N" << w.n << " M" << w.m
                            << " window (" << w.left << ", " << w.right << ")"
                            << (w.causal ? " causal" : "")) {
          Case c{2, 4, w.n, w.m, d, w.causal, bf16};
          c.windowLeft = w.left;
          c.windowRight = w.right;
          c.headsKv = w.left == 100 ? 2 : 0; // one windowed case grouped
          c.seqMajor = !bf16;
          runCase(c);
        }
}

TEST_CASE("variable-length batches: packed sequences through every kernel", "[gpu][api]") {
  // Mixed lengths, none a multiple of a block, N != M per sequence, a sequence without queries
  // and one without keys (O = 0, L = -inf, no gradient), a one-row sequence; causal per
  // sequence (bottom-right), grouped heads and a window in some cases; both layouts.
  struct Lengths {
    std::vector<int64_t> q, k;
  };
  const Lengths batches[] = {{{300, 1, 130, 0, 257}, {200, 1, 333, 64, 257}},
                             {{77, 190, 64, 45}, {77, 190, 0, 101}}};
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (bool bf16 : {true, false})
        for (size_t i = 0; i < std::size(batches); ++i)
          DYNAMIC_SECTION("d" << d << (causal ? " causal" : "") << (bf16 ? " bf16" : " fp16")
                              << " batch " << i) {
            VarlenCase c{batches[i].q, batches[i].k, 4, i == 1 ? 2 : 4, d, causal, bf16};
            if (i == 1) {
              c.windowLeft = 50;
              c.windowRight = causal ? -1 : 20;
            }
            c.seqMajor = bf16;
            runVarlenCase(c);
          }
}

TEST_CASE("long sweeps: a million keys or queries keep the accuracy of short ones", "[gpu][api]") {
  // The tensor cores truncate each sum into an accumulator; unflushed, an accumulator swept over
  // 2^20 rows drifts: gQ 3.5e-3 and gdO 3.4e-3 on the H200 against 2.4e-3 at N <= 128K
  // (docs/numerics.md). The long-sweep kernels flush every KernelBuilder::kFlushBlocks blocks: the outputs of a sweep
  // over a million keys (dQ, gQ: bwd_q, bob_q, 16 query rows) and over a million queries (dK,
  // dV, gK, gV: bwd_kv, bob_kv, 16 key rows) stay at the short sweeps' 2.3-2.4e-3. The forward
  // does not flush (the online softmax rescales O at every step); gdO = X4 - c O inherits its O
  // and keeps the dtype's bound, as do the other side's outputs (a softmax over 16 rows). 16
  // rows keep the float64 oracle under a minute and a half a case; every output is checked.
  // With 16 rows on the short side the relative errors land at about 2.5e-3 either way round:
  // over a million queries each query row's softmax has 16 keys, and dQ, which sweeps those 16
  // keys only, gave 2.52e-3 on the H200 (dK 2.50e-3); over a million keys the flushed dQ gave
  // 2.51e-3 at d = 128. The bound is 2.75e-3, still below the 3.4-3.5e-3 an unflushed sweep of
  // 2^20 rows drifts to (bench/results/2026-12-02-h200-long-sweeps.md).
  struct LongSweep {
    int64_t n, m;
    std::vector<std::string> outputs;
  };
  const LongSweep sweeps[] = {{16, 1 << 20, {"dQ", "gQ"}}, {1 << 20, 16, {"dK", "dV", "gK", "gV"}}};
  for (int64_t d : {64, 128})
    for (const LongSweep &w : sweeps)
      DYNAMIC_SECTION("d" << d << " N" << w.n << " M" << w.m) {
        Case c{1, 1, w.n, w.m, d, false, true};
        c.tightTol = 2.75e-3;
        c.tightOutputs = w.outputs;
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

// `flashbob run/tune/bench`'s buffers and --check (tools/flashbob: ProblemBuffers, OracleCheck)
// with v of another head dim than q and k (--head-dim-v), on the CPU through the fake CUDA driver
// (test/fake_driver), whose device memory is host memory and whose launches run nothing: so no
// op is launched here. Every buffer has its operand's width (q, k and their kin d, v and its kin
// d_v); the check passes on outputs that are the float64 oracle's, computed here on the whole
// batch of heads from the generated inputs (the key side summed over a group's query heads) and
// written in the run's dtype; and it fails when the last column of an output shaped like v is
// wrong, which a check that read those outputs at q's width would miss.
#include "kernels/oracle/Oracle.h"
#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/Kernel.h"
#include "runtime/support/HalfFloat.h"
#include "support/Knobs.h"
#include "tools/flashbob/OracleCheck.h"
#include "tools/flashbob/ProblemBuffers.h"

#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using namespace flashbob;
using namespace flashbob::tool;

namespace {

constexpr uint64_t kSeed = 7;

void requireSuccess(llvm::Error e) {
  if (e)
    FAIL(llvm::toString(std::move(e)));
}

runtime::CudaDriver &fakeDriver() {
  support::setOverride(support::Knob::CudaDriver, FAKE_CUDA_LIBRARY);
  auto driver = runtime::CudaDriver::get();
  if (!driver)
    FAIL(llvm::toString(driver.takeError()));
  requireSuccess(runtime::usePrimaryContext(*driver));
  return *driver;
}

// The problem: query heads sharing 1 key/value head, N != M, causal, d = 24, d_v = 40 (v the
// wider: its last columns lie past q's width).
AttentionProblem problem(int64_t seqQ, int64_t seqK, int64_t heads, int64_t windowLeft = -1) {
  AttentionProblem p;
  p.batch = 1;
  p.heads = heads;
  p.headsKv = 1;
  p.seqQ = seqQ;
  p.seqK = seqK;
  p.headDim = 24;
  p.headDimV = 40;
  p.dtype = DType::bf16;
  p.causal = true;
  p.windowLeft = windowLeft;
  return p;
}

// Generated input `tensor` as the device holds it (rounded to the dtype), (1, heads, rows, cols).
oracle::HeadTensor input(const AttentionProblem &p, unsigned tensor, int64_t heads, int64_t rows,
                         int64_t cols) {
  oracle::HeadTensor t(1, heads, rows, cols);
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = inputElement(kSeed, tensor, i, p.dtype);
  return t;
}

struct Inputs {
  oracle::HeadTensor Q, K, V, dO, uQ, uK, uV;
};

Inputs inputs(const AttentionProblem &p) {
  const int64_t d = p.headDim, dv = p.valueDim(), h = p.heads, kv = p.keyValueHeads();
  return {input(p, kQ, h, p.seqQ, d),   input(p, kK, kv, p.seqK, d),
          input(p, kV, kv, p.seqK, dv), input(p, kdO, h, p.seqQ, dv),
          input(p, kuQ, h, p.seqQ, d),  input(p, kuK, kv, p.seqK, d),
          input(p, kuV, kv, p.seqK, dv)};
}

oracle::Problem oracleProblem(const AttentionProblem &p) {
  oracle::Problem o = oracle::makeProblem(p.seqQ, p.seqK, p.headDim, p.valueDim(), p.causal);
  o.windowLeft = p.windowLeft;
  return o;
}

ProblemBuffers allocate(runtime::CudaDriver &driver, Op op, const AttentionProblem &p) {
  auto buffers = ProblemBuffers::allocate(driver, op, p, kSeed);
  if (!buffers)
    FAIL(llvm::toString(buffers.takeError()));
  return std::move(*buffers);
}

// `values` written to `buffer` as the kernels would: tensors in the dtype, row vectors in f32.
void write(runtime::CudaDriver &driver, const ProblemBuffers::Buffer &buffer,
           const std::vector<double> &values, bool rowVector, DType dtype) {
  REQUIRE(buffer);
  if (rowVector) {
    std::vector<float> f(values.begin(), values.end());
    REQUIRE(buffer->bytes() == f.size() * 4);
    REQUIRE(driver.api().cuMemcpyHtoD(buffer->get(), f.data(), f.size() * 4) == CUDA_SUCCESS);
    return;
  }
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = dtype == DType::bf16 ? runtime::floatToBf16(float(values[i]))
                                   : runtime::floatToHalf(float(values[i]));
  REQUIRE(buffer->bytes() == bits.size() * 2);
  REQUIRE(driver.api().cuMemcpyHtoD(buffer->get(), bits.data(), bits.size() * 2) == CUDA_SUCCESS);
}

// The last column of the last row of head (0, 0), the head the check reads, set to 1e4 in a
// tensor buffer of `rows` rows a head, `width` elements each.
void spoilLastColumn(runtime::CudaDriver &driver, const ProblemBuffers::Buffer &buffer,
                     size_t rows, size_t width) {
  const uint16_t big = runtime::floatToBf16(1e4f);
  REQUIRE(driver.api().cuMemcpyHtoD(buffer->get() + (rows * width - 1) * 2, &big, 2) ==
          CUDA_SUCCESS);
}

// Runs the check; returns each output's relative error by name.
std::map<std::string, double> check(runtime::CudaDriver &driver, const ProblemBuffers &buffers,
                                    RunReport &report) {
  std::string text;
  llvm::raw_string_ostream os(text);
  requireSuccess(checkAgainstOracle(driver, buffers, kSeed, 64, report, os));
  INFO(text);
  CHECK(report.checked);
  std::map<std::string, double> errors;
  for (const CheckedOutput &c : report.checks)
    errors[c.name] = c.relL2;
  return errors;
}

} // namespace

TEST_CASE("run --head-dim-v: buffers at each operand's width, --check against the oracle at d_v",
          "[cli][fake]") {
  runtime::CudaDriver &driver = fakeDriver();
  const AttentionProblem p = problem(20, 28, 2);
  const size_t d = 24, dv = 40, n = 20, m = 28, heads = 2;
  const Inputs in = inputs(p);
  const oracle::Problem op = oracleProblem(p);

  SECTION("every buffer has its operand's width") {
    ProblemBuffers b = allocate(driver, Op::bob, p);
    const std::map<const char *, std::pair<const ProblemBuffers::Buffer *, size_t>> elements = {
        {"q", {&b.inputs[kQ], heads * n * d}},    {"k", {&b.inputs[kK], m * d}},
        {"v", {&b.inputs[kV], m * dv}},           {"dO", {&b.inputs[kdO], heads * n * dv}},
        {"uQ", {&b.inputs[kuQ], heads * n * d}},  {"uK", {&b.inputs[kuK], m * d}},
        {"uV", {&b.inputs[kuV], m * dv}},         {"o", {&b.out, heads * n * dv}},
        {"gQ", {&b.gq, heads * n * d}},           {"gK", {&b.gk, m * d}},
        {"gV", {&b.gv, m * dv}},                  {"gdO", {&b.gdo, heads * n * dv}}};
    for (const auto &[name, buffer] : elements) {
      INFO(name);
      REQUIRE(*buffer.first);
      CHECK((*buffer.first)->bytes() == buffer.second * 2);
    }
    ProblemBuffers bwd = allocate(driver, Op::bwd, p);
    CHECK(bwd.dq->bytes() == heads * n * d * 2);
    CHECK(bwd.dk->bytes() == m * d * 2);
    CHECK(bwd.dv->bytes() == m * dv * 2);
    ProblemBuffers dual = allocate(driver, Op::fwd_dual, p);
    CHECK(dual.tOut->bytes() == heads * n * dv * 2);
    CHECK(dual.inputs[kuV]->bytes() == m * dv * 2);
    // The inputs are the generator's, element for element, at their own width.
    std::vector<uint16_t> v(m * dv);
    REQUIRE(driver.api().cuMemcpyDtoH(v.data(), b.inputs[kV]->get(), v.size() * 2) ==
            CUDA_SUCCESS);
    for (size_t i = 0; i < v.size(); ++i)
      REQUIRE(fromBits(v[i], p.dtype) == in.V.data[i]);
    // The tensors' byte count: q, uQ, gQ and k, uK, gK at d; dO, o, gdO and v, uV, gV at d_v.
    CHECK(b.tensorBytes == double(2 * 3 * (heads * n * d + m * d + heads * n * dv + m * dv)));
  }

  SECTION("fwd: O and L") {
    ProblemBuffers b = allocate(driver, Op::fwd, p);
    const oracle::BatchedForwardResult f = oracle::dense::forwardBatched(op, in.Q, in.K, in.V);
    write(driver, b.out, f.O.data, false, p.dtype);
    write(driver, b.lse, f.L.data, true, p.dtype);
    RunReport report;
    auto errors = check(driver, b, report);
    CHECK(report.passed);
    CHECK(errors.size() == 2);
    CHECK(errors.at("O") < 5e-3);
    spoilLastColumn(driver, b.out, n, dv);
    RunReport spoiled;
    errors = check(driver, b, spoiled);
    CHECK_FALSE(spoiled.passed);
    CHECK(errors.at("O") > 5e-3);
    CHECK(errors.at("L") < 5e-3);
  }

  SECTION("bwd: dQ, D, dK and dV (the key side summed over both query heads)") {
    ProblemBuffers b = allocate(driver, Op::bwd, p);
    const oracle::BatchedBackwardResult g =
        oracle::dense::backwardBatched(op, in.Q, in.K, in.V, in.dO);
    write(driver, b.dq, g.dQ.data, false, p.dtype);
    write(driver, b.dRow, g.D.data, true, p.dtype);
    write(driver, b.dk, g.dK.data, false, p.dtype);
    write(driver, b.dv, g.dV.data, false, p.dtype);
    RunReport report;
    auto errors = check(driver, b, report);
    CHECK(report.passed);
    CHECK(errors.size() == 4);
    for (const char *name : {"dQ", "D", "dK", "dV"})
      CHECK(errors.at(name) < 5e-3);
    spoilLastColumn(driver, b.dv, m, dv);
    RunReport spoiled;
    errors = check(driver, b, spoiled);
    CHECK_FALSE(spoiled.passed);
    CHECK(errors.at("dV") > 5e-3);
    CHECK(errors.at("dK") < 5e-3);
  }

  SECTION("bob: gQ, gdO, c, b, gK and gV") {
    ProblemBuffers b = allocate(driver, Op::bob, p);
    const oracle::BatchedBobResult r =
        oracle::dense::bobBatched(op, in.Q, in.K, in.V, in.dO, in.uQ, in.uK, in.uV);
    write(driver, b.gq, r.gQ.data, false, p.dtype);
    write(driver, b.gdo, r.gdO.data, false, p.dtype);
    write(driver, b.cRow, r.c.data, true, p.dtype);
    write(driver, b.bRow, r.b.data, true, p.dtype);
    write(driver, b.gk, r.gK.data, false, p.dtype);
    write(driver, b.gv, r.gV.data, false, p.dtype);
    RunReport report;
    auto errors = check(driver, b, report);
    CHECK(report.passed);
    CHECK(errors.size() == 6);
    for (const char *name : {"gQ", "gdO", "c", "b", "gK", "gV"})
      CHECK(errors.at(name) < 5e-3);
    spoilLastColumn(driver, b.gv, m, dv);
    RunReport spoiled;
    errors = check(driver, b, spoiled);
    CHECK_FALSE(spoiled.passed);
    CHECK(errors.at("gV") > 5e-3);
    CHECK(errors.at("gQ") < 5e-3);
  }

  SECTION("fwd_dual: O, L and tO along (uQ, uK, uV)") {
    ProblemBuffers b = allocate(driver, Op::fwd_dual, p);
    const oracle::BatchedForwardResult f = oracle::dense::forwardBatched(op, in.Q, in.K, in.V);
    // Query head 0 alone is checked: its tangent output, rows of the first head.
    const oracle::Matrix tO = oracle::dense::forwardJvp(op, in.Q.head(0, 0), in.K.head(0, 0),
                                                        in.V.head(0, 0), in.uQ.head(0, 0),
                                                        in.uK.head(0, 0), in.uV.head(0, 0));
    std::vector<double> tOut(heads * n * dv, 0.0);
    std::copy(tO.data.begin(), tO.data.end(), tOut.begin());
    write(driver, b.out, f.O.data, false, p.dtype);
    write(driver, b.lse, f.L.data, true, p.dtype);
    write(driver, b.tOut, tOut, false, p.dtype);
    RunReport report;
    auto errors = check(driver, b, report);
    CHECK(report.passed);
    CHECK(errors.size() == 3);
    CHECK(errors.at("tO") < 5e-3);
  }
}

TEST_CASE("run --head-dim-v --check on a problem too large for a dense check: the last rows at "
          "each output's width",
          "[cli][fake]") {
  // N M above the dense limit (2048^2): the last 64 query rows of head (0, 0) are checked. A
  // window of 8 keys keeps the whole problem's reference (the tiled model, O(N) memory) cheap.
  runtime::CudaDriver &driver = fakeDriver();
  const AttentionProblem p = problem(2049, 2048, 1, 8);
  const Inputs in = inputs(p);
  ProblemBuffers b = allocate(driver, Op::bob, p);
  const oracle::BobResult r = oracle::tiled::bob(
      oracleProblem(p), oracle::Tiling{64, 64}, in.Q.head(0, 0), in.K.head(0, 0), in.V.head(0, 0),
      in.dO.head(0, 0), in.uQ.head(0, 0), in.uK.head(0, 0), in.uV.head(0, 0));
  write(driver, b.gq, r.gQ.data, false, p.dtype);
  write(driver, b.gdo, r.gdO.data, false, p.dtype);
  write(driver, b.cRow, r.c, true, p.dtype);
  write(driver, b.bRow, r.b, true, p.dtype);
  RunReport report;
  auto errors = check(driver, b, report);
  CHECK(report.checkedRows == 64);
  CHECK(report.passed);
  CHECK(errors.size() == 4);
  for (const char *name : {"gQ", "gdO", "c", "b"})
    CHECK(errors.at(name) < 5e-3);
  spoilLastColumn(driver, b.gdo, size_t(p.seqQ), size_t(p.valueDim()));
  RunReport spoiled;
  errors = check(driver, b, spoiled);
  CHECK_FALSE(spoiled.passed);
  CHECK(errors.at("gdO") > 5e-3);
}

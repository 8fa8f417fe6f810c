#include "tools/flashbob/OracleCheck.h"

#include "kernels/oracle/ErrorMeasure.h"
#include "kernels/oracle/Oracle.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

namespace flashbob::tool {
using runtime::CudaDriver;

namespace {
// N x M of the largest head the dense oracle holds whole (key-major outputs need all of it).
constexpr int64_t kDenseLimit = 2048LL * 2048;

// One output compared: `rows` rows from row `first` of head (0, 0), each `width` elements of
// the dtype (a tensor: d, or d_v for those shaped like v) or one f32 (width 0: a row vector, L,
// D, c, b).
struct Compared {
  const char *name;
  const ProblemBuffers::Buffer *buffer;
  int64_t width;
  int64_t first, rows;
  const std::vector<double> *ref;
};

llvm::Expected<std::vector<double>> readRows(CudaDriver &driver, const Compared &c,
                                             const AttentionProblem &p) {
  if (c.width == 0) {
    std::vector<float> f(static_cast<size_t>(c.rows));
    FLASHBOB_CU(driver, cuMemcpyDtoH(f.data(), (*c.buffer)->get() + c.first * 4, f.size() * 4));
    return std::vector<double>(f.begin(), f.end());
  }
  std::vector<uint16_t> bits(static_cast<size_t>(c.rows * c.width));
  FLASHBOB_CU(driver, cuMemcpyDtoH(bits.data(), (*c.buffer)->get() + c.first * c.width * 2,
                                   bits.size() * 2));
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    v[i] = fromBits(bits[i], p.dtype);
  return v;
}
} // namespace

llvm::Error checkAgainstOracle(CudaDriver &driver, const ProblemBuffers &buffers, uint64_t seed,
                               int64_t checkRows, RunReport &report, llvm::raw_ostream &os) {
  // Query-major outputs of query row i depend only on row i and all keys, so the last r rows form
  // an exact sub-problem (keeping the causal alignment). Key-major outputs need every query and
  // are checked only when the whole head is small enough for the dense oracle.
  const AttentionProblem &p = buffers.problem;
  const int64_t d = p.headDim, dv = p.valueDim();
  const bool full = p.seqQ <= kDenseLimit / p.seqK;
  const int64_t r = full ? p.seqQ : std::min(checkRows, p.seqQ);
  const int64_t row0 = p.seqQ - r;
  // Rows [first, first + rows) of input `tensor` as generated (its own width: d or d_v).
  auto hostRows = [&](unsigned tensor, int64_t first, int64_t rows) {
    const int64_t width = valueWidth(tensor) ? dv : d;
    oracle::Matrix m(rows, width);
    for (int64_t i = 0; i < rows * width; ++i)
      m.data[i] = inputElement(seed, tensor, (first * width) + i, p.dtype);
    return m;
  };
  oracle::Problem sub = oracle::makeProblem(r, p.seqK, d, dv, p.causal);
  sub.scale = p.effectiveScale(); // what the kernels got
  sub.windowLeft = p.windowLeft;     // the last r rows keep their diagonal: M - r = row0 + M - N
  sub.windowRight = p.windowRight;
  oracle::Matrix q = hostRows(kQ, row0, r), k = hostRows(kK, 0, p.seqK),
                 v = hostRows(kV, 0, p.seqK);
  const double tol = p.dtype == DType::bf16 ? 5e-3 : 1e-3;
  report.checked = true;
  report.checkBound = tol;
  report.checkedRows = r;
  os << llvm::formatv("check vs float64 oracle, head (0,0), {0}: rel L2 (bound {1:E0})\n",
                      full ? "every row" : llvm::formatv("last {0} query rows", r).str(), tol);
  if (full && p.grouped())
    os << llvm::formatv("  (key/value head 0: its gradients summed over query heads 0..{0})\n",
                        p.heads / p.keyValueHeads() - 1);

  // The backward ops consume the GPU's own O (rounded to the dtype), as a framework would.
  // Key/value head 0's gradients sum over the query heads of its group (grouped-query
  // attention): with a full check, each of them is run and their key-side outputs added.
  const ProblemBuffers &b = buffers;
  const int64_t group = full ? p.heads / p.keyValueHeads() : 1;
  std::optional<oracle::ForwardResult> fw;
  std::optional<oracle::BackwardResult> bw;
  std::optional<oracle::BobResult> bb;
  std::optional<oracle::Matrix> tO;
  auto addTo = [](oracle::Matrix &sum, const oracle::Matrix &term) {
    for (size_t i = 0; i < sum.data.size(); ++i)
      sum.data[i] += term.data[i];
  };
  std::vector<Compared> outputs;
  switch (b.op) {
  case Op::fwd:
    fw = oracle::dense::forward(sub, q, k, v);
    outputs = {{"O", &b.out, dv, row0, r, &fw->O.data}, {"L", &b.lse, 0, row0, r, &fw->L}};
    break;
  case Op::fwd_dual: // O and L as the forward's, tO as the forward's JVP's along (uQ, uK, uV)
    fw = oracle::dense::forward(sub, q, k, v);
    tO = oracle::dense::forwardJvp(sub, q, k, v, hostRows(kuQ, row0, r), hostRows(kuK, 0, p.seqK),
                                   hostRows(kuV, 0, p.seqK));
    outputs = {{"O", &b.out, dv, row0, r, &fw->O.data},
               {"L", &b.lse, 0, row0, r, &fw->L},
               {"tO", &b.tOut, dv, row0, r, &tO->data}};
    break;
  case Op::bwd:
    for (int64_t h = 0; h < group; ++h) {
      const int64_t at = h * p.seqQ + row0; // query head h of batch 0
      auto one = oracle::dense::backward(sub, hostRows(kQ, at, r), k, v, hostRows(kdO, at, r));
      if (!bw) {
        bw = std::move(one);
        continue;
      }
      addTo(bw->dK, one.dK);
      addTo(bw->dV, one.dV);
    }
    outputs = {{"dQ", &b.dq, d, row0, r, &bw->dQ.data}, {"D", &b.dRow, 0, row0, r, &bw->D}};
    if (full)
      outputs.insert(outputs.end(), {{"dK", &b.dk, d, 0, p.seqK, &bw->dK.data},
                                     {"dV", &b.dv, dv, 0, p.seqK, &bw->dV.data}});
    break;
  case Op::bob:
    for (int64_t h = 0; h < group; ++h) {
      const int64_t at = h * p.seqQ + row0;
      auto one = oracle::dense::bob(sub, hostRows(kQ, at, r), k, v, hostRows(kdO, at, r),
                                    hostRows(kuQ, at, r), hostRows(kuK, 0, p.seqK),
                                    hostRows(kuV, 0, p.seqK));
      if (!bb) {
        bb = std::move(one);
        continue;
      }
      addTo(bb->gK, one.gK);
      addTo(bb->gV, one.gV);
    }
    outputs = {{"gQ", &b.gq, d, row0, r, &bb->gQ.data},
               {"gdO", &b.gdo, dv, row0, r, &bb->gdO.data},
               {"c", &b.cRow, 0, row0, r, &bb->c},
               {"b", &b.bRow, 0, row0, r, &bb->b}};
    if (full)
      outputs.insert(outputs.end(), {{"gK", &b.gk, d, 0, p.seqK, &bb->gK.data},
                                     {"gV", &b.gv, dv, 0, p.seqK, &bb->gV.data}});
    break;
  }

  for (const Compared &c : outputs) {
    auto got = readRows(driver, c, p);
    if (!got)
      return got.takeError();
    oracle::ErrorStats stats = oracle::compare(*got, *c.ref);
    double e = stats.nonFinite ? std::numeric_limits<double>::infinity() : stats.relL2;
    bool ok = e <= tol;
    report.passed &= ok;
    report.checks.push_back({c.name, e, ok});
    os << llvm::formatv("  {0,-4} {1:E2}{2}\n", c.name, e, ok ? "" : "  FAIL");
  }
  if (!full)
    os << "  (key-major outputs need every query row: checked by the tests at sizes the dense "
          "oracle can hold)\n";
  os << (report.passed ? "check: PASS\n" : "check: FAIL\n");
  return llvm::Error::success();
}

} // namespace flashbob::tool

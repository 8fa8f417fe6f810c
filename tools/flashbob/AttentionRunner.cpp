#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/DeviceBuffer.h"

#include "kernels/oracle/ErrorMeasure.h"
#include "kernels/oracle/Oracle.h"
#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/EventTimer.h"
#include "runtime/launch/Kernel.h"
#include "runtime/support/HalfFloat.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace flashbob::tool {

namespace {
using runtime::CudaDriver;

// Inputs are a pure function of (seed, tensor, index): uniform on [-sqrt 3, sqrt 3) (unit
// variance), so the checker can regenerate any row without keeping the whole tensor.
float inputValue(uint64_t seed, unsigned tensor, uint64_t index) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(tensor) << 58) + index;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  double u = static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>((2.0 * u - 1.0) * 1.7320508075688772);
}

uint16_t toBits(float f, DType t) {
  return t == DType::bf16 ? runtime::floatToBf16(f) : runtime::floatToHalf(f);
}
double fromBits(uint16_t h, DType t) {
  return t == DType::bf16 ? runtime::bf16ToFloat(h) : runtime::halfToFloat(h);
}

} // namespace

const char *opName(Op op) { return op == Op::fwd ? "fwd" : op == Op::bwd ? "bwd" : "bob"; }
double flopsPerPair(Op op) { return op == Op::fwd ? 4 : op == Op::bwd ? 10 : 36; }

llvm::Expected<RunReport> runAttention(const RunOptions &opt, llvm::raw_ostream &os) {
  const AttentionProblem &p = opt.problem;
  auto driverOr = CudaDriver::get();
  if (!driverOr)
    return driverOr.takeError();
  CudaDriver &driver = *driverOr;
  if (llvm::Error e = runtime::usePrimaryContext(driver))
    return std::move(e);

  size_t free0 = 0, total = 0;
  FLASHBOB_CU(driver, cuMemGetInfo(&free0, &total));

  const int64_t bh = p.batch * p.heads, d = p.headDim;
  const size_t qElems = static_cast<size_t>(bh * p.seqQ * d), kElems = static_cast<size_t>(bh * p.seqK * d);
  const size_t rowBytes = static_cast<size_t>(bh * p.seqQ) * 4;

  // Inputs: 0 Q, 1 K, 2 V, 3 dO, 4 uQ, 5 uK, 6 uV.
  const bool needGrad = opt.op != Op::fwd, needBob = opt.op == Op::bob;
  std::vector<std::unique_ptr<DeviceBuffer>> inputs;
  RunReport report;
  for (unsigned t = 0; t < 7; ++t) {
    if ((t == 3 && !needGrad) || (t >= 4 && !needBob)) {
      inputs.emplace_back(nullptr);
      continue;
    }
    bool queries = t == 0 || t == 3 || t == 4;
    size_t n = queries ? qElems : kElems;
    std::vector<uint16_t> host(n);
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        for (size_t i = w; i < n; i += threads)
          host[i] = toBits(inputValue(opt.seed, t, i), p.dtype);
      });
    for (auto &th : pool)
      th.join();
    auto buf = std::make_unique<DeviceBuffer>(driver);
    if (llvm::Error e = buf->allocate(n * 2))
      return std::move(e);
    FLASHBOB_CU(driver, cuMemcpyHtoD(buf->get(), host.data(), n * 2));
    report.tensorBytes += n * 2;
    inputs.push_back(std::move(buf));
  }
  auto alloc = [&](size_t bytes, bool tensor) -> llvm::Expected<std::unique_ptr<DeviceBuffer>> {
    auto buf = std::make_unique<DeviceBuffer>(driver);
    if (llvm::Error e = buf->allocate(bytes))
      return std::move(e);
    // NaN everywhere: anything a kernel fails to write shows up in the check.
    FLASHBOB_CU(driver, cuMemsetD8(buf->get(), 0xFF, bytes));
    (tensor ? report.tensorBytes : report.workspaceBytes) += bytes;
    return std::move(buf);
  };
#define FLASHBOB_ALLOC(name, bytes, tensor)                                                       \
  auto name##Or = alloc(bytes, tensor);                                                           \
  if (!name##Or)                                                                                  \
    return name##Or.takeError();                                                                  \
  std::unique_ptr<DeviceBuffer> name = std::move(*name##Or);
  FLASHBOB_ALLOC(out, qElems * 2, true)
  FLASHBOB_ALLOC(lse, rowBytes, false)
  std::unique_ptr<DeviceBuffer> dq, dk, dv, gq, gk, gv, gdo, dRow, cRow, bRow;
  if (needGrad) {
    auto dRowOr = alloc(rowBytes, false);
    if (!dRowOr)
      return dRowOr.takeError();
    dRow = std::move(*dRowOr);
  }
  if (opt.op == Op::bwd) {
    FLASHBOB_ALLOC(a, qElems * 2, true) dq = std::move(a);
    FLASHBOB_ALLOC(b2, kElems * 2, true) dk = std::move(b2);
    FLASHBOB_ALLOC(c2, kElems * 2, true) dv = std::move(c2);
  }
  if (needBob) {
    FLASHBOB_ALLOC(a, qElems * 2, true) gq = std::move(a);
    FLASHBOB_ALLOC(b2, kElems * 2, true) gk = std::move(b2);
    FLASHBOB_ALLOC(c2, kElems * 2, true) gv = std::move(c2);
    FLASHBOB_ALLOC(d2, qElems * 2, true) gdo = std::move(d2);
    FLASHBOB_ALLOC(e2, rowBytes, false) cRow = std::move(e2);
    FLASHBOB_ALLOC(f2, rowBytes, false) bRow = std::move(f2);
  }
#undef FLASHBOB_ALLOC

  auto Q = [&](const std::unique_ptr<DeviceBuffer> &b) { return p.contiguous(b->get(), p.seqQ); };
  auto K = [&](const std::unique_ptr<DeviceBuffer> &b) { return p.contiguous(b->get(), p.seqK); };
  auto forward = [&] {
    return attentionForward(p, Q(inputs[0]), K(inputs[1]), K(inputs[2]), Q(out), {lse->get()});
  };
  auto runOp = [&]() -> llvm::Error {
    switch (opt.op) {
    case Op::fwd:
      return forward();
    case Op::bwd:
      return attentionBackward(p, Q(inputs[0]), K(inputs[1]), K(inputs[2]), Q(out), Q(inputs[3]),
                               {lse->get()}, Q(dq), K(dk), K(dv), {dRow->get()});
    case Op::bob:
      return attentionBob(p,
                          {Q(inputs[0]), K(inputs[1]), K(inputs[2]), Q(out), Q(inputs[3]),
                           {lse->get()}, Q(inputs[4]), K(inputs[5]), K(inputs[6])},
                          {Q(gq), K(gk), K(gv), Q(gdo), {dRow->get()}, {cRow->get()}, {bRow->get()}});
    }
    return llvm::Error::success();
  };

  // The forward provides O and L for the backward ops; the first run also compiles (JIT) or
  // loads the kernels from the disk cache.
  auto firstStart = std::chrono::steady_clock::now();
  if (opt.op != Op::fwd)
    if (llvm::Error e = forward())
      return std::move(e);
  if (llvm::Error e = runOp())
    return std::move(e);
  FLASHBOB_CU(driver, cuCtxSynchronize());
  double firstMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             firstStart).count();
  report.firstMs = firstMs;
  for (int i = 0; i < opt.warmup; ++i)
    if (llvm::Error e = runOp())
      return std::move(e);
  if (opt.warmup > 0)
    FLASHBOB_CU(driver, cuCtxSynchronize());

  // Host cost of one warm call (kernel cached, validation, argument packing, cuLaunchKernel):
  // many calls back to back without waiting, timed on the host.
  if (opt.launchOverhead) {
    const int calls = 2000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i)
      if (llvm::Error e = runOp())
        return std::move(e);
    auto t1 = std::chrono::steady_clock::now();
    FLASHBOB_CU(driver, cuCtxSynchronize());
    os << llvm::formatv("host overhead per {0} call: {1:F2} us (mean of {2} warm calls, "
                        "{3} kernel launch(es) each)\n",
                        opName(opt.op),
                        std::chrono::duration<double, std::micro>(t1 - t0).count() / calls, calls,
                        opt.op == Op::fwd ? 1 : 2);
  }

  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  std::vector<float> times;
  const int maxRuns = std::max(1, opt.repeat), minRuns = std::min(2, maxRuns);
  auto loopStart = std::chrono::steady_clock::now();
  for (int i = 0; i < maxRuns; ++i) {
    if (opt.timeBudgetMs > 0 && i >= minRuns &&
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loopStart)
                .count() >= opt.timeBudgetMs)
      break;
    if (opt.beforeTimedRun)
      if (llvm::Error e = opt.beforeTimedRun())
        return std::move(e);
    auto ms = timer->time(nullptr, runOp);
    if (!ms)
      return ms.takeError();
    times.push_back(static_cast<float>(*ms));
  }
  report.timesMs = times;
  std::sort(times.begin(), times.end());
  report.medianMs = times[times.size() / 2];
  double pairs = static_cast<double>(p.seqQ) * p.seqK * (p.causal ? 0.5 : 1.0) * bh;
  report.flops = flopsPerPair(opt.op) * pairs * d;
  report.tflops = report.flops / (report.medianMs * 1e-3) / 1e12;
  size_t free1 = 0;
  FLASHBOB_CU(driver, cuMemGetInfo(&free1, &total));
  report.deviceUsedBytes = static_cast<double>(free0) - static_cast<double>(free1);

  os << llvm::formatv("{0} batch={1} heads={2} N={3} M={4} d={5} {6}{7}: median {8:F3} ms over {9} "
                      "runs, {10:F1} TFLOP/s ({11} N M d{12})\n",
                      opName(opt.op), p.batch, p.heads, p.seqQ, p.seqK, d,
                      p.dtype == DType::bf16 ? "bf16" : "fp16", p.causal ? " causal" : "",
                      report.medianMs, times.size(), report.tflops, flopsPerPair(opt.op),
                      p.causal ? " / 2" : "");
  os << llvm::formatv("first call (JIT compile or disk cache, then run): {0:F1} ms\n", firstMs);
  os << llvm::formatv("device memory: tensors {0:F3} GiB, O(N) workspace (L, D, c, b) {1:F2} MiB, "
                      "in use after the run {2:F3} GiB (nothing N x M; kernels allocate nothing)\n",
                      report.tensorBytes / (1ull << 30), report.workspaceBytes / (1 << 20),
                      report.deviceUsedBytes / (1ull << 30));
  if (!opt.check)
    return report;

  // ---- Check against the float64 oracle, on head (0, 0) --------------------------------------
  // Query-major outputs of query row i depend only on row i and all keys, so the last r rows form
  // an exact sub-problem (keeping the causal alignment). Key-major outputs need every query and
  // are checked only when the whole head is small enough for the dense oracle.
  report.checked = true;
  const bool full = p.seqQ * p.seqK <= 2048LL * 2048;
  const int64_t r = full ? p.seqQ : std::min(opt.checkRows, p.seqQ);
  const int64_t row0 = p.seqQ - r;
  auto hostRows = [&](unsigned tensor, int64_t first, int64_t rows) {
    oracle::Matrix m(rows, d);
    for (int64_t i = 0; i < rows * d; ++i)
      m.data[i] = fromBits(toBits(inputValue(opt.seed, tensor, (first * d) + i), p.dtype), p.dtype);
    return m;
  };
  auto deviceRows = [&](const std::unique_ptr<DeviceBuffer> &b, int64_t first, int64_t rows)
      -> llvm::Expected<std::vector<double>> {
    std::vector<uint16_t> bits(static_cast<size_t>(rows * d));
    FLASHBOB_CU(driver, cuMemcpyDtoH(bits.data(), b->get() + first * d * 2, bits.size() * 2));
    std::vector<double> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      v[i] = fromBits(bits[i], p.dtype);
    return v;
  };
  auto deviceVec = [&](const std::unique_ptr<DeviceBuffer> &b, int64_t first, int64_t rows)
      -> llvm::Expected<std::vector<double>> {
    std::vector<float> f(static_cast<size_t>(rows));
    FLASHBOB_CU(driver, cuMemcpyDtoH(f.data(), b->get() + first * 4, f.size() * 4));
    return std::vector<double>(f.begin(), f.end());
  };

  oracle::Problem sub = oracle::makeProblem(r, p.seqK, d, p.causal);
  if (p.scale)
    sub.scale = *p.scale;
  oracle::Matrix q = hostRows(0, row0, r), k = hostRows(1, 0, p.seqK), v = hostRows(2, 0, p.seqK);
  const double tol = p.dtype == DType::bf16 ? 5e-3 : 1e-3;
  report.checkBound = tol;
  report.checkedRows = r;
  os << llvm::formatv("check vs float64 oracle, head (0,0), {0}: rel L2 (bound {1:E0})\n",
                      full ? "every row" : llvm::formatv("last {0} query rows", r).str(), tol);
  auto compare = [&](const char *name, llvm::Expected<std::vector<double>> got,
                     const std::vector<double> &ref) -> llvm::Error {
    if (!got)
      return got.takeError();
    oracle::ErrorStats stats = oracle::compare(*got, ref);
    double e = stats.nonFinite ? std::numeric_limits<double>::infinity() : stats.relL2;
    bool ok = e <= tol;
    report.passed &= ok;
    report.checks.push_back({name, e, ok});
    os << llvm::formatv("  {0,-4} {1:E2}{2}\n", name, e, ok ? "" : "  FAIL");
    return llvm::Error::success();
  };
#define FLASHBOB_COMPARE(name, got, ref)                                                          \
  if (llvm::Error e = compare(name, got, ref))                                                    \
    return std::move(e);
  // The backward ops consume the GPU's own O (rounded to the dtype), as a framework would.
  oracle::ForwardResult f = oracle::dense::forward(sub, q, k, v);
  if (opt.op == Op::fwd) {
    FLASHBOB_COMPARE("O", deviceRows(out, row0, r), f.O.data)
    FLASHBOB_COMPARE("L", deviceVec(lse, row0, r), f.L)
  } else {
    oracle::Matrix dO = hostRows(3, row0, r);
    if (opt.op == Op::bwd) {
      oracle::BackwardResult bw = oracle::dense::backward(sub, q, k, v, dO);
      FLASHBOB_COMPARE("dQ", deviceRows(dq, row0, r), bw.dQ.data)
      FLASHBOB_COMPARE("D", deviceVec(dRow, row0, r), bw.D)
      if (full) {
        FLASHBOB_COMPARE("dK", deviceRows(dk, 0, p.seqK), bw.dK.data)
        FLASHBOB_COMPARE("dV", deviceRows(dv, 0, p.seqK), bw.dV.data)
      }
    } else {
      oracle::BobResult bb = oracle::dense::bob(sub, q, k, v, dO, hostRows(4, row0, r),
                                                hostRows(5, 0, p.seqK), hostRows(6, 0, p.seqK));
      FLASHBOB_COMPARE("gQ", deviceRows(gq, row0, r), bb.gQ.data)
      FLASHBOB_COMPARE("gdO", deviceRows(gdo, row0, r), bb.gdO.data)
      FLASHBOB_COMPARE("c", deviceVec(cRow, row0, r), bb.c)
      FLASHBOB_COMPARE("b", deviceVec(bRow, row0, r), bb.b)
      if (full) {
        FLASHBOB_COMPARE("gK", deviceRows(gk, 0, p.seqK), bb.gK.data)
        FLASHBOB_COMPARE("gV", deviceRows(gv, 0, p.seqK), bb.gV.data)
      }
    }
  }
#undef FLASHBOB_COMPARE
  if (!full)
    os << "  (key-major outputs need every query row: checked by the tests at sizes the dense "
          "oracle can hold)\n";
  os << (report.passed ? "check: PASS\n" : "check: FAIL\n");
  return report;
}

} // namespace flashbob::tool

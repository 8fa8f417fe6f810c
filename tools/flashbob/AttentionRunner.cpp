#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/OracleCheck.h"
#include "tools/flashbob/ProblemBuffers.h"

#include "compiler/dialect/Target.h"
#include "jit/HeadDims.h"
#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/EventTimer.h"
#include "runtime/launch/Kernel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>

namespace flashbob::tool {
using runtime::CudaDriver;

const char *opName(Op op) {
  switch (op) {
  case Op::fwd: return "fwd";
  case Op::bwd: return "bwd";
  case Op::bob: return "bob";
  case Op::fwd_dual: return "fwd_dual";
  }
  return "?";
}
FlopCount flopsPerPair(Op op) {
  switch (op) {
  case Op::fwd: return {2, 2};
  case Op::bwd: return {6, 4};
  case Op::bob: return {22, 14};
  case Op::fwd_dual: return {6, 6};
  }
  return {0, 0};
}

namespace {
// Whether `op` reads the forward's O and L, which timeOp then computes first (the forward ops
// write them).
bool readsForward(Op op) { return op == Op::bwd || op == Op::bob; }

// (query, key) pairs one head computes: N M, with a causal mask N M / 2 (the convention of
// published causal figures), with a sliding window those it lets through, counted row by row.
double pairsPerHead(const AttentionProblem &p) {
  if (!p.windowed())
    return static_cast<double>(p.seqQ) * p.seqK * (p.causal ? 0.5 : 1.0);
  const int64_t right = p.rightReach(), offset = p.seqK - p.seqQ;
  double pairs = 0;
  for (int64_t i = 0; i < p.seqQ; ++i) {
    const int64_t lo = p.windowLeft < 0 ? 0 : std::max<int64_t>(0, i + offset - p.windowLeft);
    const int64_t hi = right < 0 ? p.seqK - 1 : std::min<int64_t>(p.seqK - 1, i + offset + right);
    pairs += static_cast<double>(std::max<int64_t>(0, hi - lo + 1));
  }
  return pairs;
}
} // namespace

namespace {
double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Host cost of one warm call (kernel cached, validation, argument packing, cuLaunchKernel):
// many calls back to back without waiting, timed on the host.
llvm::Error printLaunchOverhead(CudaDriver &driver, const ProblemBuffers &buffers,
                                llvm::raw_ostream &os) {
  const int calls = 2000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    if (llvm::Error e = buffers.launch())
      return e;
  auto t1 = std::chrono::steady_clock::now();
  FLASHBOB_CU(driver, cuCtxSynchronize());
  os << llvm::formatv("host overhead per {0} call: {1:F2} us (mean of {2} warm calls, "
                      "{3} kernel launch(es) each)\n",
                      opName(buffers.op),
                      std::chrono::duration<double, std::micro>(t1 - t0).count() / calls, calls,
                      readsForward(buffers.op) ? 2 : 1);
  return llvm::Error::success();
}

// The first call, the warm-up and the timed runs of the op; fills the report's times.
llvm::Error timeOp(CudaDriver &driver, const ProblemBuffers &buffers, const RunOptions &opt,
                   RunReport &report, llvm::raw_ostream &os) {
  // The forward provides O and L for the backward ops; the first run also compiles (JIT) or
  // loads the kernels from the disk cache.
  auto firstStart = std::chrono::steady_clock::now();
  if (readsForward(opt.op))
    if (llvm::Error e = buffers.forward())
      return e;
  if (llvm::Error e = buffers.launch())
    return e;
  FLASHBOB_CU(driver, cuCtxSynchronize());
  report.firstMs = msSince(firstStart);
  for (int i = 0; i < opt.warmup; ++i)
    if (llvm::Error e = buffers.launch())
      return e;
  if (opt.warmup > 0)
    FLASHBOB_CU(driver, cuCtxSynchronize());
  if (opt.launchOverhead)
    if (llvm::Error e = printLaunchOverhead(driver, buffers, os))
      return e;

  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  const int maxRuns = std::max(1, opt.iters), minRuns = std::min(2, maxRuns);
  auto loopStart = std::chrono::steady_clock::now();
  for (int i = 0; i < maxRuns; ++i) {
    if (opt.timeBudgetMs > 0 && i >= minRuns && msSince(loopStart) >= opt.timeBudgetMs)
      break;
    if (opt.beforeTimedRun)
      if (llvm::Error e = opt.beforeTimedRun())
        return e;
    support::reportProgress({std::string("timing ") + opName(opt.op), size_t(i) + 1,
                             size_t(maxRuns), "", support::LogLevel::Debug});
    auto ms = timer->time(nullptr, [&] { return buffers.launch(); });
    if (!ms)
      return ms.takeError();
    report.timesMs.push_back(static_cast<float>(*ms));
  }
  std::vector<float> sorted = report.timesMs;
  std::sort(sorted.begin(), sorted.end());
  report.medianMs = sorted[sorted.size() / 2];
  return llvm::Error::success();
}

void printRun(const RunOptions &opt, const RunReport &report, llvm::raw_ostream &os) {
  const AttentionProblem &p = opt.problem;
  const std::string heads =
      p.grouped() ? llvm::formatv("{0} heads_kv={1}", p.heads, p.keyValueHeads()).str()
                  : std::to_string(p.heads);
  const std::string mask =
      std::string(p.causal ? " causal" : "") +
      (p.windowed() ? llvm::formatv(" window ({0}, {1})", p.windowLeft, p.rightReach()).str()
                    : "");
  const FlopCount f = flopsPerPair(opt.op);
  const bool oneWidth = p.valueDim() == p.headDim;
  const std::string perPair =
      oneWidth ? llvm::formatv("{0:F2} d", f.oneWidth()).str()
               : llvm::formatv("{0:F2} d + {1:F2} d_v", f.scores, f.values).str();
  const std::string count =
      p.windowed() || p.varlen ? perPair + " per visible pair"
      : oneWidth ? llvm::formatv("{0:F2} N M d{1}", f.oneWidth(), p.causal ? " / 2" : "").str()
                 : llvm::formatv("({0}) N M{1}", perPair, p.causal ? " / 2" : "").str();
  const std::string dims = oneWidth ? llvm::formatv("d={0}", p.headDim).str()
                                    : llvm::formatv("d={0} d_v={1}", p.headDim, p.valueDim()).str();
  const std::string batch =
      p.varlen ? llvm::formatv("{0} packed (longest {1}, {2})", p.batch, p.maxSeqQ, p.maxSeqK).str()
               : std::to_string(p.batch);
  os << llvm::formatv("{0} batch={1} heads={2} N={3} M={4} {5} {6}{7}: median {8:F3} ms over {9} "
                      "runs, {10:F1} TFLOP/s ({11})\n",
                      opName(opt.op), batch, heads, p.seqQ, p.seqK, dims,
                      p.dtype == DType::bf16 ? "bf16" : "fp16", mask, report.medianMs,
                      report.timesMs.size(), report.tflops, count);
  os << llvm::formatv("first call (JIT compile or disk cache, then run): {0:F1} ms\n",
                      report.firstMs);
  os << llvm::formatv("device memory: tensors {0:F3} GiB, O(N) workspace (L, D, c, b) {1:F2} MiB, "
                      "in use after the run {2:F3} GiB (nothing N x M; the kernels allocate "
                      "nothing, the fused backward N x d floats for the call)\n",
                      report.tensorBytes / (1ull << 30), report.workspaceBytes / (1 << 20),
                      report.deviceUsedBytes / (1ull << 30));
  switch (jit::headDimPadding(p)) {
  case jit::HeadDimPadding::none: break;
  case jit::HeadDimPadding::inKernel:
    os << llvm::formatv("head_dim {0}: kernels of tile width {1}, which read the columns past {0} "
                        "as zeros\n",
                        p.headDim, bob::kernelHeadDim(p.headDim));
    break;
  case jit::HeadDimPadding::copy: // one width for q, k and v: that of the wider side
    os << llvm::formatv("head_dim {0}{1}: each call copies its tensors into zero-padded memory "
                        "{2} wide around the kernels (allocated and freed on the stream)\n",
                        p.headDim,
                        p.valueDim() != p.headDim
                            ? llvm::formatv(" (head_dim_v {0})", p.valueDim()).str()
                            : std::string(),
                        jit::paddedProblem(p).headDim);
    break;
  }
}
} // namespace

llvm::Expected<RunReport> runAttention(const RunOptions &opt, llvm::raw_ostream &os) {
  const AttentionProblem &p = opt.problem;
  auto driverOr = CudaDriver::get();
  if (!driverOr)
    return driverOr.takeError();
  CudaDriver &driver = *driverOr;
  if (llvm::Error e = runtime::usePrimaryContext(driver))
    return std::move(e);
  size_t free0 = 0, free1 = 0, total = 0;
  FLASHBOB_CU(driver, cuMemGetInfo(&free0, &total));

  auto buffers =
      ProblemBuffers::allocate(driver, opt.op, p, opt.seed, opt.cuSeqlensQ, opt.cuSeqlensK);
  if (!buffers)
    return buffers.takeError();
  RunReport report;
  report.tensorBytes = buffers->tensorBytes;
  report.workspaceBytes = buffers->workspaceBytes;
  {
    ProgressDisplay progress(opt.progress); // the first call compiles (and autotunes)
    if (llvm::Error e = timeOp(driver, *buffers, opt, report, os))
      return std::move(e);
  }
  double pairs = pairsPerHead(p) * p.batch * p.heads;
  if (p.varlen) { // each sequence its own problem
    pairs = 0;
    for (size_t s = 0; s + 1 < opt.cuSeqlensQ.size(); ++s) {
      AttentionProblem one = p;
      one.varlen = false;
      one.seqQ = opt.cuSeqlensQ[s + 1] - opt.cuSeqlensQ[s];
      one.seqK = opt.cuSeqlensK[s + 1] - opt.cuSeqlensK[s];
      pairs += pairsPerHead(one) * p.heads;
    }
  }
  report.flops = flopsPerPair(opt.op).perPair(p.headDim, p.valueDim()) * pairs;
  report.tflops = report.flops / (report.medianMs * 1e-3) / 1e12;
  FLASHBOB_CU(driver, cuMemGetInfo(&free1, &total));
  report.deviceUsedBytes = static_cast<double>(free0) - static_cast<double>(free1);
  printRun(opt, report, os);

  if (opt.check)
    if (llvm::Error e = checkAgainstOracle(driver, *buffers, opt.seed, opt.checkRows, report, os))
      return std::move(e);
  return report;
}

} // namespace flashbob::tool

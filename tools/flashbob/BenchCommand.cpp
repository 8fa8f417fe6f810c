// `flashbob bench`: one attention op timed the way results are reported: median of warm
// runs with CUDA events and the L2 flushed before each, canonical TFLOP/s and its share of a
// dense bf16 matrix-product ceiling measured in the same process (cuBLAS, loaded with dlopen),
// bytes moved against HBM and against a device-to-device copy measured in the same process, peak
// device memory, optionally the float64 check; --json writes every figure as one object.
//   flashbob bench --op bob --heads 16 --seq-q 16384 --head-dim 128 --causal --json bob.json
#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/Kernel.h"
#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/BenchReferences.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/DeviceBuffer.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/IntegerOption.h"
#include "tools/flashbob/OutputFile.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/ProblemOptions.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace flashbob::tool {
namespace cl = llvm::cl;
using runtime::CudaDriver;

cl::SubCommand benchCommand("bench", "Benchmark one attention op: median time (L2 flushed), "
                                     "TFLOP/s vs a measured bf16 matmul ceiling, bandwidth, "
                                     "peak memory");

namespace {
ProblemOptions problemOptions({&benchCommand}, {/*seq=*/4096, /*iters=*/10, /*warmup=*/1});
cl::opt<double> ceilingTflops("ceiling-tflops",
                              cl::desc("Use this bf16 matmul ceiling (TFLOP/s) instead of "
                                       "measuring one with cuBLAS"),
                              cl::sub(benchCommand), cl::cat(benchCategory), cl::init(0.0));
IntegerOpt<int64_t> flushMiB("l2-flush-mib",
                          cl::desc("MiB written before each timed run to flush the L2 "
                                   "(at least 256)"),
                          cl::sub(benchCommand), cl::cat(benchCategory), cl::init(256));
cl::opt<std::string> jsonPath("json", cl::desc("Write every figure as one JSON object to FILE"),
                              cl::value_desc("FILE"), cl::sub(benchCommand),
                              cl::cat(benchCategory));

constexpr double kHbmNominalTBs = 4.8; // H200 datasheet

// The flags of bench alone (the problem's are checked by ProblemOptions): one line naming the
// flag, or nothing.
std::optional<std::string> badBenchFlag() {
  if (ceilingTflops.getNumOccurrences() && !(ceilingTflops > 0 && std::isfinite(ceilingTflops))) {
    char value[64];
    std::snprintf(value, sizeof(value), "%g", double(ceilingTflops));
    return std::string("--ceiling-tflops: must be a positive number, got ") + value;
  }
  if (flushMiB < 256)
    return llvm::formatv("--l2-flush-mib: must be at least 256, got {0}", int64_t(flushMiB)).str();
  // The buffer's byte count (MiB << 20) must fit a size_t: 2^44 MiB wrapped to 0 bytes.
  constexpr int64_t kMostMiB = int64_t(std::numeric_limits<size_t>::max() >> 20);
  if (flushMiB > kMostMiB)
    return llvm::formatv("--l2-flush-mib: must be at most {0} (a byte count in 64 bits), got {1}",
                         kMostMiB, int64_t(flushMiB))
        .str();
  return std::nullopt;
}

// The problem that was run (or failed to run), for the JSON.
llvm::json::Object problemJson(const RunOptions &o) {
  const AttentionProblem &p = o.problem;
  llvm::json::Object json{{"op", opName(o.op)},
                          {"batch", p.batch},
                          {"heads", p.heads},
                          {"seq_q", p.seqQ},
                          {"seq_k", p.seqK},
                          {"head_dim", p.headDim},
                          {"dtype", p.dtype == DType::bf16 ? "bf16" : "fp16"},
                          {"causal", p.causal}};
  if (p.scale)
    json["scale"] = *p.scale;
  if (p.grouped())
    json["heads_kv"] = p.keyValueHeads();
  if (p.valueDim() != p.headDim)
    json["head_dim_v"] = p.valueDim();
  if (p.windowed())
    json["window"] = llvm::json::Array{p.windowLeft, p.rightReach()};
  if (p.varlen) { // seq_q and seq_k are then the packed totals
    json["cu_seqlens_q"] = llvm::json::Array(o.cuSeqlensQ);
    json["cu_seqlens_k"] = llvm::json::Array(o.cuSeqlensK);
  }
  return json;
}

bool writeJson(const llvm::json::Object &object) {
  if (jsonPath.empty())
    return true;
  // Through a temporary file renamed into place: a script polling for results never reads half
  // a file, and a failed write leaves the previous one.
  if (llvm::Error e = writeOutput(jsonPath, [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(object))) << "\n";
      })) {
    llvm::errs() << "flashbob bench: --json: " << llvm::toString(std::move(e)) << "\n";
    return false;
  }
  return true;
}

// A failure after the arguments were accepted: one line, the JSON (if asked for) says it too;
// the exit code from the error's class.
int failed(const RunOptions &o, llvm::Error error, const std::string &context = "") {
  support::ErrorReport report = support::takeErrorReport(std::move(error));
  const std::string message = context + report.message;
  int code = reportError("bench", message, exitCodeFor(report.kind));
  llvm::json::Object json = problemJson(o);
  json["ok"] = false;
  json["error"] = message;
  writeJson(json);
  return code;
}

// What the op is measured against; a reference that cannot be measured leaves a note instead.
struct References {
  std::optional<Ceiling> ceiling;
  std::string ceilingNote;
  std::optional<Copy> copy;
  std::string copyNote;
};

// Measured before the op, so that their buffers are freed before its baseline memory is read;
// printed as they come.
References measureReferences(CudaDriver &driver) {
  References refs;
  if (ceilingTflops.getNumOccurrences()) {
    refs.ceiling = Ceiling{double(ceilingTflops), "given", "", 0, 0};
    llvm::outs() << llvm::formatv("ceiling: {0:F1} TFLOP/s (given with --ceiling-tflops)\n",
                                  refs.ceiling->tflops);
  } else if (auto measured = measureCeiling(driver)) {
    refs.ceiling = *measured;
    llvm::outs() << llvm::formatv("ceiling: {0:F1} TFLOP/s (cuBLAS {1}, bf16 GEMM {2}^3 with f32 "
                                  "accumulation, best of 5: {3:F3} ms; {4})\n",
                                  refs.ceiling->tflops, refs.ceiling->cublasVersion, kGemmSize,
                                  refs.ceiling->bestMs, refs.ceiling->library);
  } else {
    refs.ceilingNote = llvm::toString(measured.takeError());
    llvm::outs() << "ceiling: not measured (" << refs.ceilingNote << ")\n";
  }
  if (auto measured = measureCopy(driver)) {
    refs.copy = *measured;
    llvm::outs() << llvm::formatv("copy: {0:F2} TB/s (cuMemcpyDtoD of {1} MiB, bytes read + "
                                  "written, best of 5)\n",
                                  refs.copy->tbs, refs.copy->bytes >> 20);
  } else {
    refs.copyNote = llvm::toString(measured.takeError());
    llvm::outs() << "copy: not measured (" << refs.copyNote << ")\n";
  }
  return refs;
}

// The figures bench reports beyond the run's own: bandwidth and the shares of the references.
struct Figures {
  double bytes = 0, tbs = 0, pctHbm = 0;
  std::optional<double> pctCeiling, pctCopy;
  float minMs = 0;
};

Figures figuresOf(const RunReport &r, const References &refs) {
  Figures f;
  f.bytes = r.tensorBytes + r.workspaceBytes;
  f.tbs = f.bytes / (r.medianMs * 1e-3) / 1e12;
  f.pctHbm = 100.0 * f.tbs / kHbmNominalTBs;
  if (refs.ceiling)
    f.pctCeiling = 100.0 * r.tflops / refs.ceiling->tflops;
  if (refs.copy)
    f.pctCopy = 100.0 * f.tbs / refs.copy->tbs;
  f.minMs = *std::min_element(r.timesMs.begin(), r.timesMs.end());
  return f;
}

void printFigures(const RunOptions &o, const RunReport &r, const References &refs,
                  const Figures &f, size_t flushBytes) {
  llvm::outs() << llvm::formatv("timing: median {0:F3} ms, min {1:F3} ms of {2} timed runs after "
                                "{3} warm-up(s); {4} MiB written before each run (L2 flush, "
                                "not timed)\n",
                                r.medianMs, f.minMs, r.timesMs.size(), o.warmup, flushBytes >> 20);
  llvm::outs() << llvm::formatv("compute: {0:F3} TFLOP in {1:F3} ms = {2:F1} TFLOP/s", r.flops / 1e12,
                                r.medianMs, r.tflops);
  if (f.pctCeiling)
    llvm::outs() << llvm::formatv(" = {0:F1}% of the bf16 matmul ceiling ({1:F1} TFLOP/s, {2})\n",
                                  *f.pctCeiling, refs.ceiling->tflops, refs.ceiling->source);
  else
    llvm::outs() << " (no ceiling: not measured)\n";
  llvm::outs() << llvm::formatv("memory traffic: {0:F1} MB (inputs + outputs, read or written once) "
                                "= {1:F3} TB/s: {2:F2}% of HBM {3} TB/s nominal",
                                f.bytes / 1e6, f.tbs, f.pctHbm, kHbmNominalTBs);
  if (f.pctCopy)
    llvm::outs() << llvm::formatv(", {0:F2}% of the measured copy {1:F2} TB/s\n", *f.pctCopy,
                                  refs.copy->tbs);
  else
    llvm::outs() << "\n";
  llvm::outs() << llvm::formatv("peak device memory: {0:F3} GiB ({1} bytes) in use after the run "
                                "over the baseline\n",
                                r.deviceUsedBytes / (1ull << 30), int64_t(r.deviceUsedBytes));
}

llvm::json::Value optionalNumber(std::optional<double> v) {
  return v ? llvm::json::Value(*v) : llvm::json::Value(nullptr);
}

llvm::json::Object ceilingJson(const References &refs) {
  const std::optional<Ceiling> &c = refs.ceiling;
  llvm::json::Object json{
      {"tflops", optionalNumber(c ? std::optional<double>(c->tflops) : std::nullopt)},
      {"source", c ? c->source : std::string("none")}};
  if (c && c->source == "cublas") {
    json["library"] = c->library;
    json["cublas_version"] = c->cublasVersion;
    json["gemm"] = llvm::formatv("bf16 {0}^3, f32 accumulation, best of 5", kGemmSize).str();
    json["best_ms"] = c->bestMs;
  }
  if (!refs.ceilingNote.empty())
    json["note"] = refs.ceilingNote;
  return json;
}

llvm::json::Object copyJson(const References &refs) {
  const std::optional<Copy> &c = refs.copy;
  llvm::json::Object json{
      {"tbs", optionalNumber(c ? std::optional<double>(c->tbs) : std::nullopt)}};
  if (c) {
    json["buffer_bytes"] = int64_t(c->bytes);
    json["best_ms"] = c->bestMs;
  }
  if (!refs.copyNote.empty())
    json["note"] = refs.copyNote;
  return json;
}

llvm::json::Value checkJson(const RunReport &r) {
  if (!r.checked)
    return nullptr;
  llvm::json::Object errors;
  for (const CheckedOutput &c : r.checks)
    errors[c.name] = std::isfinite(c.relL2) ? llvm::json::Value(c.relL2) : llvm::json::Value("inf");
  return llvm::json::Object{{"passed", r.passed},
                            {"bound", r.checkBound},
                            {"rows", r.checkedRows},
                            {"rel_l2", std::move(errors)}};
}

// Every figure of a finished bench, as --json writes it.
llvm::json::Object benchJson(const RunOptions &o, const DeviceInfo &device, int driverVersion,
                             const References &refs, const RunReport &r, const Figures &f,
                             size_t flushBytes) {
  llvm::json::Object out = problemJson(o);
  out["ok"] = true;
  out["device"] = llvm::json::Object{{"name", device.name},
                                     {"sm", llvm::formatv("sm_{0}{1}", device.ccMajor, device.ccMinor).str()},
                                     {"sms", device.sms},
                                     {"l2_bytes", device.l2Bytes},
                                     {"driver_version", driverVersion}};
  out["warmup"] = o.warmup;
  out["iters_requested"] = o.iters;
  out["time_budget_s"] = o.timeBudgetMs / 1e3;
  out["iters"] = int64_t(r.timesMs.size());
  llvm::json::Array times;
  for (float t : r.timesMs)
    times.push_back(double(t));
  out["times_ms"] = std::move(times);
  out["median_ms"] = r.medianMs;
  out["min_ms"] = double(f.minMs);
  out["first_call_ms"] = r.firstMs;
  out["l2_flush_bytes"] = int64_t(flushBytes);
  out["flops"] = r.flops;
  const FlopCount count = flopsPerPair(o.op);
  out["flop_count"] =
      (o.problem.valueDim() == o.problem.headDim
           ? llvm::formatv("{0} N M d per head", count.oneWidth()).str()
           : llvm::formatv("({0} d + {1} d_v) N M per head", count.scores, count.values).str()) +
      (o.problem.causal ? ", halved (causal)" : "");
  out["tflops"] = r.tflops;
  out["ceiling"] = ceilingJson(refs);
  out["percent_of_ceiling"] = optionalNumber(f.pctCeiling);
  out["bytes"] = f.bytes;
  out["tensor_bytes"] = r.tensorBytes;
  out["workspace_bytes"] = r.workspaceBytes;
  out["bandwidth_tbs"] = f.tbs;
  out["hbm_nominal_tbs"] = kHbmNominalTBs;
  out["percent_of_hbm_nominal"] = f.pctHbm;
  out["copy"] = copyJson(refs);
  out["percent_of_copy"] = optionalNumber(f.pctCopy);
  out["device_memory_used_bytes"] = r.deviceUsedBytes;
  out["check"] = checkJson(r);
  return out;
}

} // namespace

int runBench() {
  // Bad arguments: one line naming the flag, before the driver is looked for, and no JSON.
  auto options = problemOptions.runOptions();
  if (!options)
    return reportError("bench", llvm::toString(options.takeError()), kExitUsage);
  if (auto bad = badBenchFlag())
    return reportError("bench", *bad, kExitUsage);

  auto driverOr = CudaDriver::get();
  if (!driverOr)
    return failed(*options, driverOr.takeError());
  CudaDriver &driver = *driverOr;
  if (llvm::Error e = runtime::usePrimaryContext(driver))
    return failed(*options, std::move(e));
  auto device = deviceInfo(driver);
  if (!device)
    return failed(*options, device.takeError());
  llvm::outs() << llvm::formatv("device: {0} (sm_{1}{2}, {3} SMs, L2 {4} MiB), CUDA driver {5}.{6}\n",
                                device->name, device->ccMajor, device->ccMinor, device->sms,
                                device->l2Bytes >> 20, driver.version() / 1000,
                                (driver.version() % 1000) / 10);
  References refs = measureReferences(driver);

  // The L2 flush: a scratch buffer written before each timed run, outside the timed interval.
  // Allocated before the run, so the run's memory figure does not include it.
  DeviceBuffer flush(driver);
  const size_t flushBytes = static_cast<size_t>(flushMiB) << 20;
  if (llvm::Error e = flush.allocate(flushBytes))
    return failed(*options, std::move(e), "L2 flush buffer: ");
  unsigned char flushValue = 0;
  options->beforeTimedRun = [&]() -> llvm::Error {
    FLASHBOB_CU(driver, cuMemsetD8(flush.get(), ++flushValue, flushBytes));
    return llvm::Error::success();
  };
  auto report = runAttention(*options, llvm::outs());
  if (!report)
    return failed(*options, report.takeError());

  Figures figures = figuresOf(*report, refs);
  printFigures(*options, *report, refs, figures, flushBytes);
  if (!writeJson(benchJson(*options, *device, driver.version(), refs, *report, figures,
                           flushBytes)))
    return kExitFailure;
  return report->passed ? kExitOk : kExitFailure;
}

} // namespace flashbob::tool

// `flashbob bench`: one attention op timed the way results are reported (issue 6): median of warm
// runs with CUDA events and the L2 flushed before each, canonical TFLOP/s and its share of a
// dense bf16 matrix-product ceiling measured in the same process (cuBLAS, loaded with dlopen),
// bytes moved against HBM and against a device-to-device copy measured in the same process, peak
// device memory, optionally the float64 check; --json writes every figure as one object.
//   flashbob bench --op bob --heads 16 --seq 16384 --head-dim 128 --causal --json bob.json
#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/EventTimer.h"
#include "runtime/launch/Kernel.h"
#include "support/Knobs.h"
#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/DeviceBuffer.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <optional>
#include <thread>
#include <vector>

#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#define FLASHBOB_HAVE_CUBLAS_HEADER 1
#endif

namespace flashbob::tool {
namespace cl = llvm::cl;
using runtime::CudaDriver;

cl::SubCommand benchCommand("bench", "Benchmark one attention op: median time (L2 flushed), "
                                     "TFLOP/s vs a measured bf16 matmul ceiling, bandwidth, "
                                     "peak memory");

namespace {
cl::opt<Op> op("op", cl::desc("Operation"), cl::sub(benchCommand), cl::init(Op::bob),
               cl::values(clEnumValN(Op::fwd, "fwd", "forward: O, L"),
                          clEnumValN(Op::bwd, "bwd", "backward: dQ, dK, dV"),
                          clEnumValN(Op::bob, "bob", "backward-over-backward: gQ, gK, gV, gdO")));
cl::opt<int64_t> batch("batch", cl::desc("Batch size"), cl::sub(benchCommand), cl::init(1));
cl::opt<int64_t> heads("heads", cl::desc("Heads"), cl::sub(benchCommand), cl::init(1));
cl::opt<int64_t> seq("seq", cl::desc("Queries N"), cl::sub(benchCommand), cl::init(4096));
// `run` and `tune` call it --seq-q: the same spelling works here.
cl::alias seqQ("seq-q", cl::desc("Alias for --seq"), cl::aliasopt(seq));
cl::opt<int64_t> seqK("seq-k", cl::desc("Keys M (default N)"), cl::sub(benchCommand), cl::init(0));
cl::opt<int64_t> headDim("head-dim", cl::desc("Head dimension d"), cl::sub(benchCommand),
                         cl::init(64));
cl::opt<std::string> dtype("dtype", cl::desc("bf16 or fp16"), cl::sub(benchCommand),
                           cl::init("bf16"));
cl::opt<bool> causal("causal", cl::desc("Causal mask (bottom-right aligned)"),
                     cl::sub(benchCommand));
cl::opt<int> warmup("warmup", cl::desc("Untimed warm runs after the first call"),
                    cl::sub(benchCommand), cl::init(1));
cl::opt<int> iters("iters", cl::desc("Timed runs (median reported)"), cl::sub(benchCommand),
                   cl::init(10));
cl::opt<double> timeBudget("time-budget",
                           cl::desc("Seconds: stop timing once the timed runs took this long, "
                                    "after at least 2 (0: always --iters)"),
                           cl::sub(benchCommand), cl::init(0.0));
cl::opt<bool> check("check", cl::desc("Compare with the float64 oracle"), cl::sub(benchCommand));
cl::opt<int64_t> checkRows("check-rows",
                           cl::desc("Query rows checked when the problem is too large for a "
                                    "dense check (the last rows of head 0)"),
                           cl::sub(benchCommand), cl::init(64));
cl::opt<double> ceilingTflops("ceiling-tflops",
                              cl::desc("Use this bf16 matmul ceiling (TFLOP/s) instead of "
                                       "measuring one with cuBLAS"),
                              cl::sub(benchCommand), cl::init(0.0));
cl::opt<int64_t> flushMiB("l2-flush-mib",
                          cl::desc("MiB written before each timed run to flush the L2 "
                                   "(at least 256)"),
                          cl::sub(benchCommand), cl::init(256));
cl::opt<std::string> jsonPath("json", cl::desc("Write every figure as one JSON object to FILE"),
                              cl::value_desc("FILE"), cl::sub(benchCommand));

constexpr double kHbmNominalTBs = 4.8; // H200 datasheet
constexpr int64_t kGemmSize = 8192;

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Best (smallest) device time of `runs` runs of `work` on the null stream (the stream the API
// calls and cuBLAS use here), in ms, after `warm` untimed ones.
llvm::Expected<double> bestTime(runtime::EventTimer &timer, int warm, int runs,
                                llvm::function_ref<llvm::Error()> work) {
  for (int i = 0; i < warm; ++i)
    if (llvm::Error e = work())
      return std::move(e);
  double bestMs = INFINITY;
  for (int i = 0; i < runs; ++i) {
    auto ms = timer.time(nullptr, work);
    if (!ms)
      return ms.takeError();
    bestMs = std::min(bestMs, *ms);
  }
  return bestMs;
}

// ---- cuBLAS through dlopen (never linked) ------------------------------------------------------
// The few ABI values we pass; checked against the header where the toolkit has it.
constexpr int kCublasOpN = 0;           // CUBLAS_OP_N
constexpr int kCudaR16BF = 14;          // CUDA_R_16BF
constexpr int kCublasCompute32F = 68;   // CUBLAS_COMPUTE_32F
constexpr int kCublasGemmDefault = -1;  // CUBLAS_GEMM_DEFAULT
#ifdef FLASHBOB_HAVE_CUBLAS_HEADER
static_assert(CUBLAS_OP_N == kCublasOpN && CUDA_R_16BF == kCudaR16BF &&
                  CUBLAS_COMPUTE_32F == kCublasCompute32F &&
                  CUBLAS_GEMM_DEFAULT == kCublasGemmDefault,
              "cuBLAS ABI values changed");
#endif

struct Cublas {
  using Create = int (*)(void **handle);
  using Destroy = int (*)(void *handle);
  using SetStream = int (*)(void *handle, CUstream stream);
  using GetVersion = int (*)(void *handle, int *version);
  using GemmEx = int (*)(void *handle, int transa, int transb, int m, int n, int k,
                         const void *alpha, const void *a, int aType, int lda, const void *b,
                         int bType, int ldb, const void *beta, void *c, int cType, int ldc,
                         int computeType, int algo);
  using StatusString = const char *(*)(int status);

  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream setStream = nullptr;
  GetVersion getVersion = nullptr;
  GemmEx gemmEx = nullptr;
  StatusString statusString = nullptr; // optional
  std::string library;                 // the file dlopen found

  llvm::Error check(int status, llvm::StringRef call) const {
    if (status == 0)
      return llvm::Error::success();
    const char *text = statusString ? statusString(status) : nullptr;
    return fail(llvm::formatv("{0}: cuBLAS status {1}{2}{3}", call, status, text ? " " : "",
                              text ? text : ""));
  }
};

// FLASHBOB_CUBLAS (a path or name), then libcublas.so.13, .so.12, .so. Kept loaded for the
// process (cuBLAS tears its runtime down at exit).
llvm::Expected<Cublas> loadCublas() {
  std::vector<std::string> candidates;
  if (std::string forced = support::knobs::cublas(); !forced.empty())
    candidates.push_back(forced);
  for (const char *name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
    candidates.push_back(name);
  std::string why;
  for (const std::string &name : candidates) {
    void *handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = ::dlerror();
      why += (why.empty() ? "" : "; ") + std::string(err ? err : name + ": dlopen failed");
      continue;
    }
    Cublas c;
    c.create = reinterpret_cast<Cublas::Create>(::dlsym(handle, "cublasCreate_v2"));
    c.destroy = reinterpret_cast<Cublas::Destroy>(::dlsym(handle, "cublasDestroy_v2"));
    c.setStream = reinterpret_cast<Cublas::SetStream>(::dlsym(handle, "cublasSetStream_v2"));
    c.getVersion = reinterpret_cast<Cublas::GetVersion>(::dlsym(handle, "cublasGetVersion_v2"));
    c.gemmEx = reinterpret_cast<Cublas::GemmEx>(::dlsym(handle, "cublasGemmEx"));
    c.statusString = reinterpret_cast<Cublas::StatusString>(::dlsym(handle, "cublasGetStatusString"));
    if (!c.create || !c.destroy || !c.setStream || !c.getVersion || !c.gemmEx) {
      why += (why.empty() ? "" : "; ") + name + ": missing cublasCreate_v2/cublasGemmEx";
      continue;
    }
    Dl_info info;
    c.library = ::dladdr(reinterpret_cast<void *>(c.gemmEx), &info) && info.dli_fname
                    ? info.dli_fname
                    : name;
    return c;
  }
  return fail("cuBLAS not loaded: " + why);
}

struct Ceiling {
  double tflops = 0;
  std::string source;  // "cublas" or "given"
  std::string library; // cuBLAS file
  int cublasVersion = 0;
  double bestMs = 0;
};

// Random bf16 bit patterns with magnitudes in [2^-6, 4): never zeros (METHOD.md: zeros run a
// matrix product faster than real data).
std::vector<uint16_t> randomBf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      size_t begin = n * w / threads, end = n * (w + 1) / threads;
      uint64_t x = seed + 0x9E3779B97F4A7C15ull * (w + 1);
      for (size_t i = begin; i < end; ++i) {
        x += 0x9E3779B97F4A7C15ull;
        uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        uint16_t sign = static_cast<uint16_t>((z >> 63) << 15);
        uint16_t exponent = static_cast<uint16_t>((121 + ((z >> 7) & 7)) << 7);
        out[i] = sign | exponent | static_cast<uint16_t>(z & 0x7F);
      }
    });
  for (auto &t : pool)
    t.join();
  return out;
}

// Dense bf16 GEMM 8192^3 with f32 accumulation (cublasGemmEx), best of 5 after 2 warm-ups.
llvm::Expected<Ceiling> measureCeiling(CudaDriver &driver) {
  auto cublas = loadCublas();
  if (!cublas)
    return cublas.takeError();
  const size_t elems = static_cast<size_t>(kGemmSize) * kGemmSize, bytes = elems * 2;
  DeviceBuffer a(driver), b(driver), c(driver);
  if (llvm::Error e = a.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = b.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = c.allocate(bytes))
    return std::move(e);
  {
    std::vector<uint16_t> host = randomBf16(elems, 1);
    FLASHBOB_CU(driver, cuMemcpyHtoD(a.get(), host.data(), bytes));
    host = randomBf16(elems, 2);
    FLASHBOB_CU(driver, cuMemcpyHtoD(b.get(), host.data(), bytes));
  }
  void *handle = nullptr;
  if (llvm::Error e = cublas->check(cublas->create(&handle), "cublasCreate"))
    return std::move(e);
  llvm::scope_exit destroy([&] { cublas->destroy(handle); });
  if (llvm::Error e = cublas->check(cublas->setStream(handle, nullptr), "cublasSetStream"))
    return std::move(e);
  Ceiling result;
  result.source = "cublas";
  result.library = cublas->library;
  cublas->getVersion(handle, &result.cublasVersion);
  const float alpha = 1.0f, beta = 0.0f;
  const int n = static_cast<int>(kGemmSize);
  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  auto gemm = [&]() -> llvm::Error {
    return cublas->check(cublas->gemmEx(handle, kCublasOpN, kCublasOpN, n, n, n, &alpha,
                                        reinterpret_cast<void *>(a.get()), kCudaR16BF, n,
                                        reinterpret_cast<void *>(b.get()), kCudaR16BF, n, &beta,
                                        reinterpret_cast<void *>(c.get()), kCudaR16BF, n,
                                        kCublasCompute32F, kCublasGemmDefault),
                         "cublasGemmEx");
  };
  auto ms = bestTime(*timer, 2, 5, gemm);
  if (!ms)
    return ms.takeError();
  FLASHBOB_CU(driver, cuCtxSynchronize());
  result.bestMs = *ms;
  result.tflops = 2.0 * kGemmSize * kGemmSize * kGemmSize / (*ms * 1e-3) / 1e12;
  return result;
}

struct Copy {
  double tbs = 0;     // (bytes read + bytes written) / time
  size_t bytes = 0;   // one buffer
  double bestMs = 0;
};

// cuMemcpyDtoD of one large buffer (1 GiB, less when memory is short), best of 5.
llvm::Expected<Copy> measureCopy(CudaDriver &driver) {
  size_t freeBytes = 0, total = 0;
  FLASHBOB_CU(driver, cuMemGetInfo(&freeBytes, &total));
  size_t bytes = std::min<size_t>(size_t(1) << 30, freeBytes / 4) & ~size_t(0xFFFFF);
  if (bytes == 0)
    return fail("too little free device memory for a copy");
  DeviceBuffer src(driver), dst(driver);
  if (llvm::Error e = src.allocate(bytes))
    return std::move(e);
  if (llvm::Error e = dst.allocate(bytes))
    return std::move(e);
  FLASHBOB_CU(driver, cuMemsetD32(src.get(), 0x3F803F80u, bytes / 4));
  auto timer = runtime::EventTimer::create(driver);
  if (!timer)
    return timer.takeError();
  auto ms = bestTime(*timer, 1, 5, [&]() -> llvm::Error {
    FLASHBOB_CU(driver, cuMemcpyDtoD(dst.get(), src.get(), bytes));
    return llvm::Error::success();
  });
  if (!ms)
    return ms.takeError();
  Copy c;
  c.bytes = bytes;
  c.bestMs = *ms;
  c.tbs = 2.0 * bytes / (*ms * 1e-3) / 1e12;
  return c;
}

struct DeviceInfo {
  std::string name;
  int sms = 0, l2Bytes = 0, ccMajor = 0, ccMinor = 0;
};

llvm::Expected<DeviceInfo> deviceInfo(CudaDriver &driver) {
  DeviceInfo info;
  CUdevice dev;
  FLASHBOB_CU(driver, cuCtxGetDevice(&dev));
  char name[256] = {};
  FLASHBOB_CU(driver, cuDeviceGetName(name, sizeof(name), dev));
  info.name = name;
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.l2Bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&info.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  return info;
}

// The problem as given on the command line (also when nothing ran, for the JSON).
llvm::json::Object problemJson() {
  return llvm::json::Object{{"op", opName(op)},
                            {"batch", int64_t(batch)},
                            {"heads", int64_t(heads)},
                            {"seq_q", int64_t(seq)},
                            {"seq_k", int64_t(seqK ? seqK : seq)},
                            {"head_dim", int64_t(headDim)},
                            {"dtype", std::string(dtype)},
                            {"causal", bool(causal)}};
}

bool writeJson(const llvm::json::Object &object) {
  if (jsonPath.empty())
    return true;
  // Through a temporary file renamed into place: a script polling for results never reads half
  // a file, and a failed write leaves the previous one.
  if (llvm::Error e = llvm::writeToOutput(jsonPath, [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(object))) << "\n";
        return llvm::Error::success();
      })) {
    llvm::errs() << "flashbob bench: --json: cannot write '" << jsonPath
                 << "': " << llvm::toString(std::move(e)) << "\n";
    return false;
  }
  return true;
}

// A failure after the arguments were accepted: one line, the JSON (if asked for) says it too.
int failed(const std::string &message, ExitCode code = kExitFailure) {
  llvm::errs() << "flashbob bench: " << message << "\n";
  llvm::json::Object o = problemJson();
  o["ok"] = false;
  o["error"] = message;
  writeJson(o);
  return code;
}

// The same for an error: its class picks the exit code.
int failed(llvm::Error e, const std::string &context = "") {
  support::ErrorReport report = support::takeErrorReport(std::move(e));
  return failed(context + report.message, exitCodeFor(report.kind));
}

// A number as the user would have typed it (-5, 0.25), for error messages.
std::string plain(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

// Bad arguments: one line naming the flag, nothing run.
std::optional<std::string> validateArguments() {
  auto positive = [](const char *flag, int64_t v) -> std::optional<std::string> {
    if (v <= 0)
      return llvm::formatv("--{0}: must be positive, got {1}", flag, v).str();
    return std::nullopt;
  };
  if (auto e = positive("batch", batch))
    return e;
  if (auto e = positive("heads", heads))
    return e;
  if (auto e = positive("seq", seq))
    return e;
  if (seqK < 0)
    return llvm::formatv("--seq-k: must be positive (or 0 for N), got {0}", int64_t(seqK)).str();
  if (headDim < 16 || headDim > 256 || headDim % 16 != 0)
    return llvm::formatv("--head-dim: {0} is unsupported (a multiple of 16 in [16, 256])",
                         int64_t(headDim))
        .str();
  if (dtype != "bf16" && dtype != "fp16")
    return "--dtype: unknown type '" + dtype + "' (bf16, fp16)";
  if (warmup < 0)
    return llvm::formatv("--warmup: must be 0 or more, got {0}", int(warmup)).str();
  if (iters < 1)
    return llvm::formatv("--iters: must be at least 1, got {0}", int(iters)).str();
  if (!(timeBudget >= 0) || !std::isfinite(timeBudget))
    return "--time-budget: must be 0 or a positive number of seconds, got " + plain(timeBudget);
  if (auto e = positive("check-rows", checkRows))
    return e;
  if (ceilingTflops.getNumOccurrences() && !(ceilingTflops > 0 && std::isfinite(ceilingTflops)))
    return "--ceiling-tflops: must be a positive number, got " + plain(ceilingTflops);
  if (flushMiB < 256)
    return llvm::formatv("--l2-flush-mib: must be at least 256, got {0}", int64_t(flushMiB)).str();
  return std::nullopt;
}

llvm::json::Value optionalNumber(std::optional<double> v) {
  return v ? llvm::json::Value(*v) : llvm::json::Value(nullptr);
}

} // namespace

int runBench() {
  if (auto bad = validateArguments()) {
    llvm::errs() << "flashbob bench: " << *bad << "\n";
    return kExitUsage;
  }
  auto driverOr = CudaDriver::get();
  if (!driverOr)
    return failed(driverOr.takeError());
  CudaDriver &driver = *driverOr;
  if (llvm::Error e = runtime::usePrimaryContext(driver))
    return failed(std::move(e));
  auto device = deviceInfo(driver);
  if (!device)
    return failed(device.takeError());
  llvm::outs() << llvm::formatv("device: {0} (sm_{1}{2}, {3} SMs, L2 {4} MiB), CUDA driver {5}.{6}\n",
                                device->name, device->ccMajor, device->ccMinor, device->sms,
                                device->l2Bytes >> 20, driver.version() / 1000,
                                (driver.version() % 1000) / 10);

  // Ceilings first (their buffers are freed before the op's baseline memory is read).
  std::optional<Ceiling> ceiling;
  std::string ceilingNote;
  if (ceilingTflops.getNumOccurrences()) {
    ceiling = Ceiling{double(ceilingTflops), "given", "", 0, 0};
    llvm::outs() << llvm::formatv("ceiling: {0:F1} TFLOP/s (given with --ceiling-tflops)\n",
                                  ceiling->tflops);
  } else if (auto measured = measureCeiling(driver)) {
    ceiling = *measured;
    llvm::outs() << llvm::formatv("ceiling: {0:F1} TFLOP/s (cuBLAS {1}, bf16 GEMM {2}^3 with f32 "
                                  "accumulation, best of 5: {3:F3} ms; {4})\n",
                                  ceiling->tflops, ceiling->cublasVersion, kGemmSize,
                                  ceiling->bestMs, ceiling->library);
  } else {
    ceilingNote = llvm::toString(measured.takeError());
    llvm::outs() << "ceiling: not measured (" << ceilingNote << ")\n";
  }
  std::optional<Copy> copy;
  std::string copyNote;
  if (auto measured = measureCopy(driver)) {
    copy = *measured;
    llvm::outs() << llvm::formatv("copy: {0:F2} TB/s (cuMemcpyDtoD of {1} MiB, bytes read + "
                                  "written, best of 5)\n",
                                  copy->tbs, copy->bytes >> 20);
  } else {
    copyNote = llvm::toString(measured.takeError());
    llvm::outs() << "copy: not measured (" << copyNote << ")\n";
  }

  // The L2 flush: a scratch buffer written before each timed run, outside the timed interval.
  // Allocated before the run, so the run's memory figure does not include it.
  DeviceBuffer flush(driver);
  const size_t flushBytes = static_cast<size_t>(flushMiB) << 20;
  if (llvm::Error e = flush.allocate(flushBytes))
    return failed(std::move(e), "L2 flush buffer: ");
  unsigned char flushValue = 0;

  RunOptions o;
  o.op = op;
  o.problem.batch = batch;
  o.problem.heads = heads;
  o.problem.seqQ = seq;
  o.problem.seqK = seqK ? seqK : seq;
  o.problem.headDim = headDim;
  o.problem.dtype = dtype == "bf16" ? DType::bf16 : DType::fp16;
  o.problem.causal = causal;
  o.check = check;
  o.checkRows = checkRows;
  o.repeat = iters;
  o.warmup = warmup;
  o.timeBudgetMs = timeBudget * 1e3;
  o.beforeTimedRun = [&]() -> llvm::Error {
    FLASHBOB_CU(driver, cuMemsetD8(flush.get(), ++flushValue, flushBytes));
    return llvm::Error::success();
  };
  auto report = runAttention(o, llvm::outs());
  if (!report)
    return failed(report.takeError());

  const RunReport &r = *report;
  const double seconds = r.medianMs * 1e-3;
  const double bytes = r.tensorBytes + r.workspaceBytes;
  const double tbs = bytes / seconds / 1e12;
  std::optional<double> pctCeiling, pctCopy;
  if (ceiling)
    pctCeiling = 100.0 * r.tflops / ceiling->tflops;
  if (copy)
    pctCopy = 100.0 * tbs / copy->tbs;
  const double pctHbm = 100.0 * tbs / kHbmNominalTBs;
  float minMs = *std::min_element(r.timesMs.begin(), r.timesMs.end());

  llvm::outs() << llvm::formatv("timing: median {0:F3} ms, min {1:F3} ms of {2} timed runs after "
                                "{3} warm-up(s); {4} MiB written before each run (L2 flush, "
                                "not timed)\n",
                                r.medianMs, minMs, r.timesMs.size(), int(warmup), flushBytes >> 20);
  llvm::outs() << llvm::formatv("compute: {0:F3} TFLOP in {1:F3} ms = {2:F1} TFLOP/s", r.flops / 1e12,
                                r.medianMs, r.tflops);
  if (pctCeiling)
    llvm::outs() << llvm::formatv(" = {0:F1}% of the bf16 matmul ceiling ({1:F1} TFLOP/s, {2})\n",
                                  *pctCeiling, ceiling->tflops, ceiling->source);
  else
    llvm::outs() << " (no ceiling: not measured)\n";
  llvm::outs() << llvm::formatv("memory traffic: {0:F1} MB (inputs + outputs, read or written once) "
                                "= {1:F3} TB/s: {2:F2}% of HBM {3} TB/s nominal",
                                bytes / 1e6, tbs, pctHbm, kHbmNominalTBs);
  if (pctCopy)
    llvm::outs() << llvm::formatv(", {0:F2}% of the measured copy {1:F2} TB/s\n", *pctCopy,
                                  copy->tbs);
  else
    llvm::outs() << "\n";
  llvm::outs() << llvm::formatv("peak device memory: {0:F3} GiB ({1} bytes) in use after the run "
                                "over the baseline\n",
                                r.deviceUsedBytes / (1ull << 30), int64_t(r.deviceUsedBytes));

  llvm::json::Object out = problemJson();
  out["ok"] = true;
  out["device"] = llvm::json::Object{{"name", device->name},
                                     {"sm", llvm::formatv("sm_{0}{1}", device->ccMajor, device->ccMinor).str()},
                                     {"sms", device->sms},
                                     {"l2_bytes", device->l2Bytes},
                                     {"driver_version", driver.version()}};
  out["warmup"] = int(warmup);
  out["iters_requested"] = int(iters);
  out["time_budget_s"] = double(timeBudget);
  out["iters"] = int64_t(r.timesMs.size());
  llvm::json::Array times;
  for (float t : r.timesMs)
    times.push_back(double(t));
  out["times_ms"] = std::move(times);
  out["median_ms"] = r.medianMs;
  out["min_ms"] = double(minMs);
  out["first_call_ms"] = r.firstMs;
  out["l2_flush_bytes"] = int64_t(flushBytes);
  out["flops"] = r.flops;
  out["flop_count"] = llvm::formatv("{0} N M d per head{1}", flopsPerPair(op),
                                    causal ? ", halved (causal)" : "")
                          .str();
  out["tflops"] = r.tflops;
  llvm::json::Object ceilingJson{{"tflops", optionalNumber(ceiling ? std::optional<double>(ceiling->tflops)
                                                                   : std::nullopt)},
                                 {"source", ceiling ? ceiling->source : std::string("none")}};
  if (ceiling && ceiling->source == "cublas") {
    ceilingJson["library"] = ceiling->library;
    ceilingJson["cublas_version"] = ceiling->cublasVersion;
    ceilingJson["gemm"] = llvm::formatv("bf16 {0}^3, f32 accumulation, best of 5", kGemmSize).str();
    ceilingJson["best_ms"] = ceiling->bestMs;
  }
  if (!ceilingNote.empty())
    ceilingJson["note"] = ceilingNote;
  out["ceiling"] = std::move(ceilingJson);
  out["percent_of_ceiling"] = optionalNumber(pctCeiling);
  out["bytes"] = bytes;
  out["tensor_bytes"] = r.tensorBytes;
  out["workspace_bytes"] = r.workspaceBytes;
  out["bandwidth_tbs"] = tbs;
  out["hbm_nominal_tbs"] = kHbmNominalTBs;
  out["percent_of_hbm_nominal"] = pctHbm;
  llvm::json::Object copyJson{{"tbs", optionalNumber(copy ? std::optional<double>(copy->tbs)
                                                          : std::nullopt)}};
  if (copy) {
    copyJson["buffer_bytes"] = int64_t(copy->bytes);
    copyJson["best_ms"] = copy->bestMs;
  }
  if (!copyNote.empty())
    copyJson["note"] = copyNote;
  out["copy"] = std::move(copyJson);
  out["percent_of_copy"] = optionalNumber(pctCopy);
  out["device_memory_used_bytes"] = r.deviceUsedBytes;
  if (r.checked) {
    llvm::json::Object errors;
    for (const CheckedOutput &c : r.checks)
      errors[c.name] = std::isfinite(c.relL2) ? llvm::json::Value(c.relL2)
                                              : llvm::json::Value("inf");
    out["check"] = llvm::json::Object{{"passed", r.passed},
                                      {"bound", r.checkBound},
                                      {"rows", r.checkedRows},
                                      {"rel_l2", std::move(errors)}};
  } else {
    out["check"] = nullptr;
  }
  if (!writeJson(out))
    return kExitFailure;
  return r.passed ? kExitOk : kExitFailure;
}

} // namespace flashbob::tool

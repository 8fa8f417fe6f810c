#include "jit/Tuning.h"

#include "jit/Compile.h"
#include "kernels/TileTable.h"
#include "runtime/cache/DiskCache.h"
#include "runtime/launch/EventTimer.h"
#include "runtime/tune/Autotuner.h"
#include "support/Knobs.h"
#include "support/Log.h"
#include "support/Progress.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <map>
#include <mutex>

namespace flashbob::jit {

namespace {
std::atomic<int> autotuneSwitch{-1}; // -1: follow FLASHBOB_AUTOTUNE
} // namespace

bool autotuneEnabled() {
  int s = autotuneSwitch.load();
  if (s >= 0)
    return s == 1;
  // Read once: this is on every launch's path.
  static const bool fromEnvironment = support::knobs::autotune();
  return fromEnvironment;
}

void setAutotune(bool on) { autotuneSwitch = on ? 1 : 0; }

std::string tuningDir() {
  llvm::SmallString<256> dir(runtime::DiskCache::defaultDirectory());
  llvm::sys::path::append(dir, "autotune");
  return std::string(dir);
}

llvm::Expected<compiler::KernelSpec>
chooseSpec(KernelCache &cache, const compiler::KernelSpec &base, const AttentionProblem &p,
           CUstream stream, const std::function<llvm::Error(const CachedKernel &)> &launch) {
  if (!autotuneEnabled())
    return base;
  static runtime::Autotuner tuner(tuningDir());

  runtime::CudaDriver &driver = cache.driver();
  CUdevice dev;
  FLASHBOB_CU(driver, cuCtxGetDevice(&dev));
  // After the first call for a kernel, problem bucket and device, the decision comes from
  // memory: pruning builds every candidate's IR, which would cost milliseconds per launch.
  const uint64_t bucket = llvm::PowerOf2Ceil(static_cast<uint64_t>(std::max(p.longestQ(), p.longestK())));
  const std::string memoKey = base.name() + " seq<=" + std::to_string(bucket) +
                              " device=" + std::to_string(dev) + " dir=" + tuningDir();
  static std::mutex memoMutex;
  static std::map<std::string, compiler::KernelSpec> memo;
  {
    std::lock_guard<std::mutex> lock(memoMutex);
    if (auto it = memo.find(memoKey); it != memo.end())
      return it->second;
  }
  // Timing synchronizes on events, which a stream being captured into a CUDA graph refuses
  // (and the candidates' launches would become part of the graph): while capturing, launch the
  // tile table's kernel untuned, and tune at a later call outside capture. A stream whose state
  // cannot be read counts as capturing.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.api().cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    support::log(support::LogLevel::Debug, "flashbob autotune: " + base.name() +
                                               ": not tuned while the stream is captured");
    return base;
  }
  auto remember = [&](const compiler::KernelSpec &chosen) {
    std::lock_guard<std::mutex> lock(memoMutex);
    memo.emplace(memoKey, chosen);
    return chosen;
  };
  char gpu[128] = {};
  FLASHBOB_CU(driver, cuDeviceGetName(gpu, sizeof(gpu), dev));
  int sharedLimit = 0;
  FLASHBOB_CU(driver, cuDeviceGetAttribute(&sharedLimit,
                                           CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));

  // Candidates, pruned before anything is compiled: by the compiler's verifier, by registers
  // (accumulators that cannot stay in a thread's registers), then by the device's shared memory
  // per block (exact bytes from the IR, no lowering).
  std::vector<compiler::KernelSpec> specs;
  std::vector<std::string> names;
  for (const compiler::TileConfig &t : kernels::candidateTiles(base.kind, base.headDim, base.arch)) {
    compiler::KernelSpec s = base;
    s.tiles = t;
    auto ok = runnable(s, sharedLimit);
    if (!ok) {
      llvm::consumeError(ok.takeError());
      continue;
    }
    if (!*ok)
      continue;
    specs.push_back(s);
    names.push_back(t.name());
  }
  // The kernel's key without its tiles (the base's are the table's, fixed by the rest), the
  // problem's bucket and the GPU.
  const std::string key = KernelKey(base).text() + "seq<=" + std::to_string(bucket) +
                          "\ngpu " + gpu + "\n";

  // One progress event per candidate (the tuner measures each a few times in a row). Debug
  // by default: the tuner's own Info line already says tuning has started.
  size_t reported = specs.size();
  auto measure = [&](size_t i) -> llvm::Expected<double> {
    if (i != reported) {
      reported = i;
      support::reportProgress({"autotuning " + bob::stringifyKernelKind(base.kind).str(), i + 1,
                               specs.size(), names[i], support::LogLevel::Debug});
    }
    auto kernel = cache.kernel(specs[i]); // compiles and loads once; a failure: unusable
    if (!kernel)
      return kernel.takeError();
    if ((*kernel)->loaded->sharedBytes() > static_cast<unsigned>(sharedLimit))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "needs %u B of shared memory, the device has %d",
                                     (*kernel)->loaded->sharedBytes(), sharedLimit);
    auto timer = runtime::EventTimer::create(driver);
    if (!timer)
      return timer.takeError();
    return timer->time(stream, [&] { return launch(**kernel); });
  };
  auto result = tuner.tune(key, names, measure, runtime::Autotuner::kRepeats,
                           base.name() + " (seq<=" + std::to_string(bucket) + ")");
  if (!result)
    return result.takeError();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == result->winner)
      return remember(specs[i]);
  return remember(base);
}

} // namespace flashbob::jit

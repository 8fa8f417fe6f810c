#include "jit/KernelCache.h"

#include "compiler/dialect/Target.h"
#include "jit/CachedMetadata.h"
#include "jit/Compile.h"
#include "jit/Launch.h"
#include "kernels/TileTable.h"
#include "runtime/cache/DiskCache.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"
#include "support/Progress.h"

#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <optional>
#include <system_error>
#include <thread>

namespace flashbob::jit {

namespace {
// The target for a GPU of compute capability major.minor: its own (Hopper: sm_90a, with wgmma
// and TMA). FLASHBOB_ARCH=sm_90 on Hopper picks the generic target instead: the mma.sync +
// cp.async path that sm_80..sm_89 GPUs run, checked on this GPU.
llvm::Expected<bob::Arch> targetFor(int major, int minor) {
  const std::string own = "sm_" + std::to_string(major) + std::to_string(minor);
  // Not compile errors: nothing was compiled, and no retry or other setting would help.
  if (major < 8)
    return support::makeUnsupportedDevice(own, "the kernels need sm_80 or newer (mma.sync bf16)");
  std::optional<bob::Arch> arch = bob::defaultArchFor(major, minor);
  if (!arch)
    return support::makeUnsupportedDevice(
        own, "no target is known for it (sm_80, sm_86, sm_89, sm_90, sm_90a)");
  if (const std::string forced = support::knobs::arch(); !forced.empty()) {
    std::optional<bob::Arch> choice = compiler::parseArch(forced);
    if (!choice || bob::targetInfo(*choice).computeCapability != major * 10 + minor)
      return support::makeInvalidArgument(
          "FLASHBOB_ARCH", "FLASHBOB_ARCH=" + forced + ": this GPU is " + own +
                               " and runs cubins built for " + own +
                               (bob::stringifyArch(*arch) != own
                                    ? " or " + bob::stringifyArch(*arch).str()
                                    : std::string()));
    arch = choice;
  }
  return *arch;
}
} // namespace

llvm::Expected<KernelCache *> KernelCache::get() {
  static std::mutex mutex;
  static std::map<CUcontext, std::unique_ptr<KernelCache>> caches;
  auto driver = runtime::CudaDriver::get();
  if (!driver)
    return driver.takeError();
  CUcontext context = nullptr;
  FLASHBOB_CU(*driver, cuCtxGetCurrent(&context));
  if (!context) {
    if (llvm::Error e = runtime::usePrimaryContext(*driver))
      return std::move(e);
    FLASHBOB_CU(*driver, cuCtxGetCurrent(&context));
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = caches.find(context); it != caches.end())
    return it->second.get();

  CUdevice dev;
  FLASHBOB_CU(*driver, cuCtxGetDevice(&dev));
  int major = 0, minor = 0;
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  auto arch = targetFor(major, minor);
  if (!arch)
    return arch.takeError();
  int sharedLimit = 0;
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&sharedLimit,
                                            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  auto &cache = caches[context];
  cache.reset(new KernelCache(*driver, *arch, context, sharedLimit));
  return cache.get();
}

llvm::Expected<compiler::KernelSpec> KernelCache::fitted(compiler::KernelSpec spec) {
  if (sharedLimit_ >= kernels::tableSharedBudget(spec.arch))
    return std::move(spec);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = fitted_.find(spec); it != fitted_.end())
    return it->second;
  auto tiles = fitSharedMemory(spec, sharedLimit_);
  if (!tiles)
    return tiles.takeError();
  compiler::KernelSpec result = spec;
  result.tiles = *tiles;
  fitted_.emplace(spec, result);
  return result;
}

namespace {
runtime::DiskCache &diskCache() {
  static runtime::DiskCache cache(runtime::DiskCache::defaultDirectory());
  return cache;
}
} // namespace

const CachedKernel *KernelCache::find(const compiler::KernelSpec &spec) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(spec);
  return it == kernels_.end() ? nullptr : it->second.get();
}

llvm::Expected<const CachedKernel *> KernelCache::kernel(const compiler::KernelSpec &spec) {
  if (const CachedKernel *hit = find(spec))
    return hit;
  auto [step, total] = support::KernelStep::current();
  auto image = obtain(spec, step, total);
  if (!image)
    return image.takeError();
  return install(spec, std::move(*image), step, total);
}

llvm::Error KernelCache::prepare(llvm::ArrayRef<compiler::KernelSpec> specs) {
  std::vector<size_t> missing;
  for (size_t i = 0; i < specs.size(); ++i)
    if (!find(specs[i]) && llvm::none_of(missing, [&](size_t j) { return specs[j] == specs[i]; }))
      missing.push_back(i);
  std::vector<std::optional<llvm::Expected<Built>>> images(missing.size());
  {
    // One thread per kernel (an HVP step has six at most): compiles are CPU-bound and
    // independent. std::thread, not a pool: nothing outlives this call.
    std::vector<std::thread> threads;
    for (size_t m = 0; m < missing.size(); ++m) {
      auto compileOne = [&, m] {
        images[m].emplace(obtain(specs[missing[m]], missing[m] + 1, specs.size()));
      };
      // A process that may start no more threads (a limit on them, RLIMIT_NPROC) compiles on
      // this one: a failed std::thread throws, and an exception out of a C API call would end
      // the host.
      try {
        threads.emplace_back(compileOne);
      } catch (const std::system_error &) {
        compileOne();
      }
    }
    for (std::thread &t : threads)
      t.join();
  }
  llvm::Error first = llvm::Error::success();
  for (size_t m = 0; m < missing.size(); ++m) {
    llvm::Expected<Built> &image = *images[m];
    if (!image) {
      if (first)
        llvm::consumeError(image.takeError());
      else
        first = image.takeError();
      continue;
    }
    if (first) // after an error nothing more is loaded; the images stay in the disk cache
      continue;
    if (auto loaded = install(specs[missing[m]], std::move(*image), missing[m] + 1, specs.size());
        !loaded)
      first = loaded.takeError();
  }
  return first;
}

llvm::Expected<KernelCache::Built> KernelCache::obtain(const compiler::KernelSpec &spec,
                                                        size_t step, size_t total) {
  // The launch facts come from the spec, on a hit too: the front stage (the kernel built and the
  // passes that decide them, milliseconds) derives them, and metadata.json's must be equal
  // (jit/CachedMetadata.h) or the entry is removed and the kernel compiled from this front stage.
  auto front = compileFront(spec);
  if (!front)
    return front.takeError();
  const compiler::LaunchFacts &facts = front->artifacts;
  // On disk: every stage of a kernel compiled by any earlier process with the same key.
  const std::string keyText = KernelKey(spec).text();
  auto check = [&](const runtime::CacheEntry &e) -> llvm::Error {
    const std::string *bin = e.file("kernel.cubin");
    if (!bin || bin->empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "no kernel.cubin");
    return validateCachedMetadata(e.metadata, facts);
  };
  if (auto hit = diskCache().lookup(keyText, check))
    return Built{*hit->file("kernel.cubin"), facts, /*fromDisk=*/true};
  return compile(std::move(*front), spec, keyText, step, total);
}

llvm::Expected<KernelCache::Built> KernelCache::compile(FrontStage front,
                                                         const compiler::KernelSpec &spec,
                                                         const std::string &keyText, size_t step,
                                                         size_t total) {
  const std::string name = spec.name();
  // Info: a compilation is what makes a first call take seconds; say which kernel of the
  // operation it is ("compiling bob_q (1/2)").
  support::reportProgress({"compiling " + bob::stringifyKernelKind(spec.kind).str(), step, total,
                           name, support::LogLevel::Info});
  auto artifacts = compileBack(std::move(front), spec, /*assemble=*/true);
  if (!artifacts)
    return artifacts.takeError();
  support::log(support::LogLevel::Debug,
               llvm::formatv("flashbob: compiled {0}: {1} registers, {2} B spilled, {3} B shared",
                             name, artifacts->registers, artifacts->spillBytes,
                             artifacts->sharedBytes));
  std::vector<runtime::CacheFile> files = {
      {"kernel.bob.mlir", artifacts->bobIR}, {"kernel.lowered.mlir", artifacts->loweredIR},
      {"kernel.ll", artifacts->llvmIR},      {"kernel.ptx", artifacts->ptx},
      {"kernel.cubin", artifacts->cubin},    {"ptxas.log", artifacts->ptxasLog}};
  llvm::json::Object metadata{{"name", name},
                              {"entry", artifacts->entry},
                              {"threads", artifacts->threads},
                              {"shared_bytes", artifacts->sharedBytes},
                              {"tensor_maps", runtime::tensorMapsToJson(artifacts->tensorMaps)},
                              {"registers", artifacts->registers},
                              {"spill_bytes", artifacts->spillBytes}};
  if (llvm::Error e = diskCache().store(keyText, files, std::move(metadata)))
    llvm::consumeError(std::move(e)); // a cache that cannot store is not a failure
  return Built{std::move(artifacts->cubin),
               std::move(static_cast<compiler::LaunchFacts &>(*artifacts)), /*fromDisk=*/false};
}

namespace {
// Why the cubin that `loaded` came from is not the kernel of `spec` with the launch facts
// `facts`: its entry is missing, or its parameters (as the driver reports them) are not those a
// launch packs. Nothing when it is that kernel; an error for any other failure to load it.
llvm::Expected<std::optional<std::string>>
notTheKernel(llvm::Expected<std::unique_ptr<runtime::LoadedKernel>> &loaded,
             const compiler::KernelSpec &spec, const compiler::LaunchFacts &facts) {
  if (loaded)
    return runtime::paramMismatch(**loaded, packedParamSizes(spec, facts.tensorMaps.size()));
  std::optional<std::string> missing;
  llvm::Error rest = llvm::handleErrors(
      loaded.takeError(), [&](std::unique_ptr<support::CudaCallError> e) -> llvm::Error {
        if (e->call() != "cuModuleGetFunction" || e->result() != CUDA_ERROR_NOT_FOUND)
          return llvm::Error(std::move(e));
        missing = "the cubin has no kernel " + facts.entry;
        return llvm::Error::success();
      });
  if (rest)
    return std::move(rest);
  return missing;
}
} // namespace

llvm::Expected<const CachedKernel *> KernelCache::install(const compiler::KernelSpec &spec,
                                                          Built built, size_t step,
                                                          size_t total) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto it = kernels_.find(spec); it != kernels_.end())
    return it->second.get(); // another thread loaded it meanwhile
  const compiler::LaunchFacts &facts = built.facts;
  runtime::KernelImage image{built.cubin, facts.entry, static_cast<unsigned>(facts.threads),
                             static_cast<unsigned>(facts.sharedBytes), facts.tensorMaps};
  auto loaded = runtime::LoadedKernel::load(driver_, image);
  auto wrong = notTheKernel(loaded, spec, facts);
  if (!wrong)
    return wrong.takeError();
  if (*wrong) {
    if (!built.fromDisk) // just compiled: the compiler and the launcher disagree
      return llvm::createStringError(llvm::inconvertibleErrorCode(), **wrong);
    // Checksums and metadata were sound, the cubin is another kernel (an entry of another
    // calling convention, or swapped in): left there, it would fail every run. Without the
    // lock while compiling; the next install looks again.
    lock.unlock();
    const std::string keyText = KernelKey(spec).text();
    diskCache().discardEntry(keyText, **wrong);
    auto front = compileFront(spec);
    if (!front)
      return front.takeError();
    auto fresh = compile(std::move(*front), spec, keyText, step, total);
    if (!fresh)
      return fresh.takeError();
    return install(spec, std::move(*fresh), step, total);
  }
  auto entry = std::make_unique<CachedKernel>(CachedKernel{spec, std::move(*loaded)});
  const CachedKernel *result = entry.get();
  kernels_.emplace(spec, std::move(entry));
  return result;
}

} // namespace flashbob::jit

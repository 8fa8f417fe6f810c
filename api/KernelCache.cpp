#include "api/KernelCache.h"

#include "CompilerHash.h"
#include "compiler/pipeline/Ptxas.h"
#include "kernels/Kernels.h"
#include "runtime/cache/DiskCache.h"
#include "support/Knobs.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <cstring>
#include <map>

namespace flashbob::api {

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
  if (major < 8)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "flashbob: the GPU is sm_" + std::to_string(major * 10 + minor) +
                                       "; the kernels need sm_80 or newer (mma.sync bf16)");
  // Hopper gets the sm_90a target (wgmma/TMA-capable); others their own. FLASHBOB_ARCH=sm_90
  // on Hopper picks the generic target instead: the mma.sync + cp.async path that sm_80..sm_89
  // GPUs run, checked on this GPU.
  const std::string own = "sm_" + std::to_string(major) + std::to_string(minor);
  std::string arch = own + (major == 9 ? "a" : "");
  if (const std::string forced = support::knobs::arch(); !forced.empty()) {
    if (forced != own && forced != arch)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "FLASHBOB_ARCH=" + forced + ": this GPU is " + own +
              " and runs cubins built for " + own + (arch != own ? " or " + arch : std::string()));
    arch = forced;
  }
  int sharedLimit = 0;
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&sharedLimit,
                                            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
  auto &cache = caches[context];
  cache.reset(new KernelCache(*driver, arch, context, sharedLimit));
  return cache.get();
}

llvm::Expected<compiler::KernelSpec> KernelCache::fitted(compiler::KernelSpec spec) {
  if (sharedLimit_ >= kernels::tableSharedBudget(spec.arch))
    return std::move(spec);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = spec.name();
  if (auto it = fittedSpecs_.find(key); it != fittedSpecs_.end())
    return it->second;
  auto tiles = kernels::fitSharedMemory(spec, sharedLimit_);
  if (!tiles)
    return tiles.takeError();
  kernels::applyTiles(spec, *tiles);
  fittedSpecs_[key] = spec;
  return std::move(spec);
}

std::vector<runtime::TensorMapSpec> tensorMapsOf(const compiler::KernelArtifacts &artifacts) {
  std::vector<runtime::TensorMapSpec> maps;
  for (const compiler::TensorMapArg &m : artifacts.tensorMaps)
    maps.push_back({static_cast<unsigned>(m.tensor), static_cast<unsigned>(m.rowsOf),
                    static_cast<unsigned>(m.boxRows), static_cast<unsigned>(m.boxCols),
                    static_cast<unsigned>(m.swizzle), static_cast<unsigned>(m.elementBytes)});
  return maps;
}

namespace {
// Everything that can change the generated cubin, one field per line (the disk cache hashes it
// and keeps it to compare on lookup).
std::string diskKeyText(const compiler::KernelSpec &spec) {
  double scale = spec.effectiveScale();
  uint64_t scaleBits;
  std::memcpy(&scaleBits, &scale, sizeof(scaleBits));
  compiler::TargetOptions target;
  return llvm::formatv("flashbob kernel\nspec {0}\nscale {1:x-}\noptions O{2} {3}\n"
                       "flashbob {4}\ncompiler {5}\nllvm {6}\nptxas {7}\narch {8}\n",
                       spec.name(), scaleBits, target.optLevel, target.ptxFeatures(),
                       FLASHBOB_VERSION, FLASHBOB_COMPILER_HASH, LLVM_VERSION_STRING,
                       compiler::ptxasVersion(), spec.arch)
      .str();
}

runtime::DiskCache &diskCache() {
  static runtime::DiskCache cache(runtime::DiskCache::defaultDirectory());
  return cache;
}
} // namespace

// The in-memory key: the spec's fields as raw bytes. Built on every launch, so no formatting.
static std::string memoryKey(const compiler::KernelSpec &s) {
  const int64_t fields[] = {static_cast<int64_t>(s.kind), s.headDim, s.blockM, s.blockN, s.warps,
                            s.warpCols, s.stages, static_cast<int64_t>(s.dtype), s.causal,
                            s.producer};
  double scale = s.effectiveScale();
  std::string key(reinterpret_cast<const char *>(fields), sizeof(fields));
  key.append(reinterpret_cast<const char *>(&scale), sizeof(scale));
  key += s.arch;
  return key;
}

llvm::Expected<const CachedKernel *> KernelCache::kernel(const compiler::KernelSpec &spec) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string memKey = memoryKey(spec);
  if (auto it = kernels_.find(memKey); it != kernels_.end())
    return it->second.get();
  std::string key = spec.name();

  // On disk: every stage of a kernel compiled by any earlier process with the same key.
  std::string keyText = diskKeyText(spec);
  std::string cubin, entryName;
  int64_t threads = 0, sharedBytes = 0;
  std::vector<runtime::TensorMapSpec> tensorMaps;
  if (auto hit = diskCache().lookup(keyText)) {
    const std::string *bin = hit->file("kernel.cubin");
    auto entry = hit->metadata.getString("entry");
    auto t = hit->metadata.getInteger("threads");
    auto sb = hit->metadata.getInteger("shared_bytes");
    auto maps = runtime::tensorMapsFromJson(hit->metadata.getArray("tensor_maps"));
    if (bin && entry && t && sb && maps) {
      cubin = *bin;
      entryName = entry->str();
      threads = *t;
      sharedBytes = *sb;
      tensorMaps = std::move(*maps);
    }
  }
  if (cubin.empty()) {
    auto artifacts = kernels::compileKernel(spec, /*assemble=*/true);
    if (!artifacts)
      return artifacts.takeError();
    cubin = artifacts->cubin;
    entryName = artifacts->entry;
    threads = artifacts->threads;
    sharedBytes = artifacts->sharedBytes;
    tensorMaps = tensorMapsOf(*artifacts);
    std::vector<runtime::CacheFile> files = {
        {"kernel.bob.mlir", artifacts->bobIR}, {"kernel.lowered.mlir", artifacts->loweredIR},
        {"kernel.ll", artifacts->llvmIR},      {"kernel.ptx", artifacts->ptx},
        {"kernel.cubin", artifacts->cubin},    {"ptxas.log", artifacts->ptxasLog}};
    llvm::json::Object metadata{{"name", key},
                                {"entry", entryName},
                                {"threads", threads},
                                {"shared_bytes", sharedBytes},
                                {"tensor_maps", runtime::tensorMapsToJson(tensorMaps)},
                                {"registers", artifacts->registers},
                                {"spill_bytes", artifacts->spillBytes}};
    if (llvm::Error e = diskCache().store(keyText, files, std::move(metadata)))
      llvm::consumeError(std::move(e)); // a cache that cannot store is not a failure
  }
  runtime::KernelImage image{cubin, entryName, static_cast<unsigned>(threads),
                             static_cast<unsigned>(sharedBytes), std::move(tensorMaps)};
  auto loaded = runtime::LoadedKernel::load(driver_, image);
  if (!loaded)
    return loaded.takeError();
  auto entry = std::make_unique<CachedKernel>(CachedKernel{spec, std::move(*loaded)});
  const CachedKernel *result = entry.get();
  kernels_[memKey] = std::move(entry);
  return result;
}

} // namespace flashbob::api

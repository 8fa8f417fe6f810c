#include "api/KernelCache.h"

#include "kernels/Kernels.h"

namespace flashbob::api {

llvm::Expected<KernelCache *> KernelCache::get() {
  static std::unique_ptr<KernelCache> cache;
  static std::mutex initMutex;
  std::lock_guard<std::mutex> lock(initMutex);
  if (cache)
    return cache.get();
  auto driver = runtime::CudaDriver::get();
  if (!driver)
    return driver.takeError();
  // A framework (PyTorch, JAX) has usually made its device's primary context current already:
  // use that one; otherwise take device 0's primary context.
  CUcontext existing = nullptr;
  FLASHBOB_CU(*driver, cuCtxGetCurrent(&existing));
  if (!existing)
    if (llvm::Error e = runtime::usePrimaryContext(*driver))
      return std::move(e);
  CUdevice dev;
  FLASHBOB_CU(*driver, cuCtxGetDevice(&dev));
  int major = 0, minor = 0;
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  FLASHBOB_CU(*driver, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  if (major < 8)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "flashbob: the GPU is sm_" + std::to_string(major * 10 + minor) +
                                       "; the kernels need sm_80 or newer (mma.sync bf16)");
  // Hopper gets the sm_90a target (wgmma/TMA-capable); others their own.
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor) + (major == 9 ? "a" : "");
  CUcontext context = nullptr;
  FLASHBOB_CU(*driver, cuCtxGetCurrent(&context));
  cache.reset(new KernelCache(*driver, arch, context));
  return cache.get();
}

llvm::Error KernelCache::makeCurrent() {
  CUcontext current = nullptr;
  FLASHBOB_CU(driver_, cuCtxGetCurrent(&current));
  if (current != context_)
    FLASHBOB_CU(driver_, cuCtxSetCurrent(context_));
  return llvm::Error::success();
}

llvm::Expected<const CachedKernel *> KernelCache::kernel(const compiler::KernelSpec &spec) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key = spec.name();
  if (auto it = kernels_.find(key); it != kernels_.end())
    return it->second.get();
  auto artifacts = kernels::compileKernel(spec, /*assemble=*/true);
  if (!artifacts)
    return artifacts.takeError();
  runtime::KernelImage image{artifacts->cubin, false, artifacts->entry,
                             static_cast<unsigned>(artifacts->threads),
                             static_cast<unsigned>(artifacts->sharedBytes)};
  auto loaded = runtime::LoadedKernel::load(driver_, image);
  if (!loaded)
    return loaded.takeError();
  auto entry = std::make_unique<CachedKernel>(CachedKernel{spec, std::move(*loaded)});
  const CachedKernel *result = entry.get();
  kernels_[key] = std::move(entry);
  return result;
}

} // namespace flashbob::api

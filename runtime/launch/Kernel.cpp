#include "runtime/launch/Kernel.h"

#include "support/Errors.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace flashbob::runtime {

llvm::Error usePrimaryContext(CudaDriver &driver, int device) {
  CUdevice dev;
  FLASHBOB_CU(driver, cuDeviceGet(&dev, device));
  CUcontext ctx = nullptr;
  FLASHBOB_CU(driver, cuDevicePrimaryCtxRetain(&ctx, dev));
  FLASHBOB_CU(driver, cuCtxSetCurrent(ctx));
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<LoadedKernel>> LoadedKernel::load(CudaDriver &driver,
                                                                 const KernelImage &image) {
  std::unique_ptr<LoadedKernel> k(new LoadedKernel(driver));
  // Keep the loader's error log: a rejected cubin (wrong arch, corrupt) says why.
  char errorLog[4096] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog, reinterpret_cast<void *>(sizeof(errorLog))};
  CUresult r =
      driver.api().cuModuleLoadDataEx(&k->module_, image.data.data(), 2, options, values);
  if (r != CUDA_SUCCESS)
    return support::makeCudaCallError("cuModuleLoadDataEx", int(r),
                                      driver.describe(r) +
                                          (errorLog[0] ? std::string("\n") + errorLog : ""));
  std::string entry = image.entry.str();
  FLASHBOB_CU(driver, cuModuleGetFunction(&k->function_, k->module_, entry.c_str()));
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  FLASHBOB_CU(driver, cuFuncSetAttribute(k->function_,
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(image.sharedBytes)));
  k->threads_ = image.threads;
  k->sharedBytes_ = image.sharedBytes;
  k->tensorMaps_ = image.tensorMaps;
  return k;
}

LoadedKernel::~LoadedKernel() {
  if (module_)
    driver_.api().cuModuleUnload(module_);
}

void KernelArgs::addMemRef(CUdeviceptr base, llvm::ArrayRef<int64_t> sizes,
                           llvm::ArrayRef<int64_t> strides) {
  values_.push_back(base); // allocated
  values_.push_back(base); // aligned
  values_.push_back(0);    // offset (elements)
  for (int64_t s : sizes)
    values_.push_back(static_cast<uint64_t>(s));
  for (int64_t s : strides)
    values_.push_back(static_cast<uint64_t>(s));
  memrefs_.push_back({base, llvm::SmallVector<int64_t, 4>(sizes),
                      llvm::SmallVector<int64_t, 4>(strides)});
}

void KernelArgs::addI64(int64_t v) { values_.push_back(static_cast<uint64_t>(v)); }
void KernelArgs::addPointer(CUdeviceptr p) { values_.push_back(p); }

llvm::SmallVector<void *, 160> KernelArgs::pointers() {
  llvm::SmallVector<void *, 160> out;
  for (uint64_t &v : values_)
    out.push_back(&v);
  return out;
}

llvm::Error launch(CudaDriver &driver, const LoadedKernel &kernel, GridDims grid, KernelArgs &args,
                   CUstream stream) {
  llvm::SmallVector<void *, 160> params = args.pointers();
  llvm::SmallVector<CUdeviceptr, 8> maps;
  for (const TensorMapSpec &spec : kernel.tensorMaps()) {
    auto map = kernel.tensorMapPool().get(spec, args.memrefs(), stream);
    if (!map)
      return map.takeError();
    maps.push_back(*map);
  }
  for (CUdeviceptr &map : maps)
    params.push_back(&map);
  FLASHBOB_CU(driver, cuLaunchKernel(kernel.function(), grid.x, grid.y, grid.z, kernel.threads(),
                                     1, 1, kernel.sharedBytes(), stream, params.data(), nullptr));
  return llvm::Error::success();
}

} // namespace flashbob::runtime

#include "runtime/launch/Kernel.h"

#include "support/Errors.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <optional>
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
  // The parameters the kernel takes, as the driver laid them out from the image: a launch
  // checks its own against them. Past the last one the driver answers CUDA_ERROR_INVALID_VALUE
  // (a kernel's parameters fit in 32 KiB, so there are fewer than 32768 of them).
  for (size_t i = 0; i < 32768; ++i) {
    size_t offset = 0, size = 0;
    CUresult status = driver.api().cuFuncGetParamInfo(k->function_, i, &offset, &size);
    if (status == CUDA_ERROR_INVALID_VALUE)
      break;
    if (llvm::Error e = driver.check(status, "cuFuncGetParamInfo"))
      return std::move(e);
    k->paramSizes_.push_back(static_cast<uint32_t>(size));
  }
  k->threads_ = image.threads;
  k->sharedBytes_ = image.sharedBytes;
  k->tensorMaps_ = image.tensorMaps;
  k->entry_ = entry;
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
  valueBytes_.resize(values_.size(), 8);
  memrefs_.push_back({base, llvm::SmallVector<int64_t, 4>(sizes),
                      llvm::SmallVector<int64_t, 4>(strides)});
}

void KernelArgs::addI64(int64_t v) {
  values_.push_back(static_cast<uint64_t>(v));
  valueBytes_.push_back(8);
}

void KernelArgs::addF32(float v) {
  static_assert(llvm::endianness::native == llvm::endianness::little,
                "a 4-byte parameter is read from the low bytes of its 8-byte slot");
  values_.push_back(llvm::bit_cast<uint32_t>(v));
  valueBytes_.push_back(4);
}

void KernelArgs::addPointer(CUdeviceptr p) {
  values_.push_back(p);
  valueBytes_.push_back(8);
}

llvm::MutableArrayRef<CUtensorMap> KernelArgs::tensorMaps(size_t count) {
  if (count > maps_.size())
    return {};
  mapCount_ = count;
  return llvm::MutableArrayRef<CUtensorMap>(maps_.data(), count);
}

llvm::SmallVector<void *, 160> KernelArgs::pointers() {
  llvm::SmallVector<void *, 160> out;
  for (uint64_t &v : values_)
    out.push_back(&v);
  for (size_t i = 0; i < mapCount_; ++i)
    out.push_back(&maps_[i]);
  return out;
}

llvm::SmallVector<uint32_t, 160> KernelArgs::sizes() const {
  llvm::SmallVector<uint32_t, 160> out(valueBytes_.begin(), valueBytes_.end());
  out.append(mapCount_, sizeof(CUtensorMap));
  return out;
}

std::optional<std::string> paramMismatch(const LoadedKernel &kernel,
                                         llvm::ArrayRef<uint32_t> passed) {
  llvm::ArrayRef<uint32_t> taken = kernel.paramSizes();
  for (size_t i = 0; i < std::max(taken.size(), passed.size()); ++i)
    if (i >= taken.size() || i >= passed.size() || taken[i] != passed[i])
      return llvm::formatv("{0} takes {1} parameters, the launch passes {2}; they first differ "
                           "at parameter {3} ({4} bytes taken, {5} passed): a kernel compiled "
                           "for another calling convention",
                           kernel.entry(), taken.size(), passed.size(), i,
                           i < taken.size() ? std::to_string(taken[i]) : "none",
                           i < passed.size() ? std::to_string(passed[i]) : "none")
          .str();
  return std::nullopt;
}

llvm::Error launch(CudaDriver &driver, const LoadedKernel &kernel, GridDims grid, KernelArgs &args,
                   CUstream stream) {
  llvm::ArrayRef<TensorMapSpec> specs = kernel.tensorMaps();
  llvm::MutableArrayRef<CUtensorMap> maps = args.tensorMaps(specs.size());
  if (maps.size() != specs.size())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("{0} takes {1} tensor maps, more than {2}",
                                                 kernel.entry(), specs.size(), kMaxTensorMaps));
  for (size_t i = 0; i < specs.size(); ++i)
    if (llvm::Error e = encodeTensorMap(driver, specs[i], args.memrefs(), maps[i]))
      return e;
  if (std::optional<std::string> mismatch = paramMismatch(kernel, args.sizes()))
    return llvm::createStringError(llvm::inconvertibleErrorCode(), *mismatch);
  llvm::SmallVector<void *, 160> params = args.pointers();
  FLASHBOB_CU(driver, cuLaunchKernel(kernel.function(), grid.x, grid.y, grid.z, kernel.threads(),
                                     1, 1, kernel.sharedBytes(), stream, params.data(), nullptr));
  return llvm::Error::success();
}

} // namespace flashbob::runtime

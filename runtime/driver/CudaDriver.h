// The CUDA Driver API, loaded at run time.
//
// Binaries never link libcuda: a machine without a GPU (CI, the build machine) must still start
// them and run every CPU feature. libcuda.so.1 is dlopen'ed once; only cuGetProcAddress_v2 is
// taken with dlsym and every other entry point is resolved through it at the ABI version of the
// PFN_ typedef we call it with (cuda.h #defines versioned names, e.g. cuMemAlloc -> cuMemAlloc_v2,
// so a raw dlsym of the plain name would bind the wrong ABI).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "llvm/Support/Error.h"

#include <string>

namespace flashbob::runtime {

// X(name, abi-version): the PFN_<name>_v<abi> typedef and the version passed to cuGetProcAddress.
#define FLASHBOB_CUDA_DRIVER_ENTRY_POINTS(X)                                                      \
  X(cuInit, 2000)                                                                                 \
  X(cuDriverGetVersion, 2020)                                                                     \
  X(cuGetErrorName, 6000)                                                                         \
  X(cuGetErrorString, 6000)                                                                       \
  X(cuDeviceGetCount, 2000)                                                                       \
  X(cuDeviceGet, 2000)                                                                            \
  X(cuDeviceGetName, 2000)                                                                        \
  X(cuDeviceGetAttribute, 2000)                                                                   \
  X(cuDeviceTotalMem, 3020)                                                                       \
  X(cuDevicePrimaryCtxRetain, 7000)                                                               \
  X(cuDevicePrimaryCtxRelease, 11000)                                                             \
  X(cuCtxGetCurrent, 4000)                                                                        \
  X(cuCtxSetCurrent, 4000)                                                                        \
  X(cuCtxGetDevice, 2000)                                                                         \
  X(cuCtxSynchronize, 2000)                                                                       \
  X(cuCtxCreate, 3020)                                                                            \
  X(cuCtxDestroy, 4000)                                                                           \
  X(cuModuleLoadDataEx, 2010)                                                                     \
  X(cuModuleUnload, 2000)                                                                         \
  X(cuModuleGetFunction, 2000)                                                                    \
  X(cuFuncGetAttribute, 2020)                                                                     \
  X(cuFuncSetAttribute, 9000)                                                                     \
  X(cuFuncGetParamInfo, 12040)                                                                    \
  X(cuLaunchKernel, 4000)                                                                         \
  X(cuMemAlloc, 3020)                                                                             \
  X(cuMemFree, 3020)                                                                              \
  X(cuMemAllocAsync, 11020)                                                                       \
  X(cuMemFreeAsync, 11020)                                                                        \
  X(cuMemGetInfo, 3020)                                                                           \
  X(cuMemcpyHtoD, 3020)                                                                           \
  X(cuMemcpyHtoDAsync, 3020)                                                                      \
  X(cuMemcpyDtoH, 3020)                                                                           \
  X(cuMemcpyDtoD, 3020)                                                                           \
  X(cuMemsetD8, 3020)                                                                             \
  X(cuMemsetD32, 3020)                                                                            \
  X(cuMemsetD32Async, 3020)                                                                       \
  X(cuMemcpy2DAsync, 3020)                                                                        \
  X(cuMemcpy3DAsync, 3020)                                                                        \
  X(cuMemsetD2D8Async, 3020)                                                                      \
  X(cuStreamCreate, 2000)                                                                         \
  X(cuStreamDestroy, 4000)                                                                        \
  X(cuStreamSynchronize, 2000)                                                                    \
  X(cuStreamIsCapturing, 10000)                                                                   \
  X(cuEventCreate, 2000)                                                                          \
  X(cuEventDestroy, 4000)                                                                         \
  X(cuEventRecord, 2000)                                                                          \
  X(cuEventSynchronize, 2000)                                                                     \
  X(cuEventElapsedTime, 2000)                                                                     \
  X(cuTensorMapEncodeTiled, 12000)

// The resolved entry points. Members are named after the API call so call sites read naturally:
// `driver.api().cuMemAlloc(&ptr, bytes)`.
struct DriverApi {
#define FLASHBOB_DECLARE_ENTRY(name, abi) PFN_##name##_v##abi name = nullptr;
  FLASHBOB_CUDA_DRIVER_ENTRY_POINTS(FLASHBOB_DECLARE_ENTRY)
#undef FLASHBOB_DECLARE_ENTRY
};

class CudaDriver {
public:
  // The process-wide driver: dlopen + cuInit on first use. Fails with a support::NoDriverError
  // ("no CUDA driver found: ...") when libcuda.so.1 (FLASHBOB_CUDA_DRIVER) is absent or cuInit
  // reports no device.
  static llvm::Expected<CudaDriver &> get();

  const DriverApi &api() const { return api_; }
  int version() const { return version_; }

  // Turns a CUresult into a support::CudaCallError naming the call and the CUresult name and
  // text, e.g. "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
  llvm::Error check(CUresult result, llvm::StringRef call) const;
  std::string describe(CUresult result) const;

private:
  CudaDriver() = default;
  llvm::Error load();

  void *handle_ = nullptr;
  DriverApi api_;
  int version_ = 0;
};

// Evaluates a driver call and returns its error from the enclosing function (which returns
// llvm::Error or llvm::Expected<T>), naming the call.
#define FLASHBOB_CU(driver, call)                                                                 \
  do {                                                                                            \
    if (auto flashbobCuErr = (driver).check((driver).api().call, #call))                         \
      return std::move(flashbobCuErr);                                                            \
  } while (0)

} // namespace flashbob::runtime

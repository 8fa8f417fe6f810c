// The driver loads, resolves its entry points and reaches the device through the primary
// context; errors carry the call name.
#include <catch2/catch.hpp>

#include "runtime/driver/CudaDriver.h"

using flashbob::runtime::CudaDriver;

TEST_CASE("driver reaches a tensor-core GPU through the primary context", "[gpu][driver]") {
  CudaDriver &driver = llvm::cantFail(CudaDriver::get());
  const auto &cu = driver.api();
  CUdevice dev;
  REQUIRE(cu.cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  int major = 0;
  REQUIRE(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ==
          CUDA_SUCCESS);
  CHECK(major >= 8); // mma.sync m16n8k16 bf16 needs sm_80+

  CUcontext ctx = nullptr;
  REQUIRE(cu.cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  REQUIRE(cu.cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  REQUIRE(cu.cuMemAlloc(&ptr, 1 << 20) == CUDA_SUCCESS);
  REQUIRE(cu.cuMemsetD32(ptr, 0x3f800000u, 1 << 18) == CUDA_SUCCESS);
  float host[4] = {};
  REQUIRE(cu.cuMemcpyDtoH(host, ptr + 1024, sizeof(host)) == CUDA_SUCCESS);
  CHECK(host[0] == 1.0f);
  CHECK(host[3] == 1.0f);
  REQUIRE(cu.cuMemFree(ptr) == CUDA_SUCCESS);
  REQUIRE(cu.cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
}

TEST_CASE("driver errors name the call and the CUresult", "[gpu][driver]") {
  CudaDriver &driver = llvm::cantFail(CudaDriver::get());
  std::string text =
      llvm::toString(driver.check(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc(&ptr, bytes)"));
  CHECK(text.find("cuMemAlloc:") == 0);
  CHECK(text.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
}

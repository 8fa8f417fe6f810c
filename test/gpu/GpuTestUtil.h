// Helpers shared by the GPU tests: device buffers, host<->device copies in bf16/fp16, the
// device's target arch, and the relative L2 error the tests report.
#pragma once

#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/Kernel.h"
#include "runtime/support/HalfFloat.h"
#include "compiler/dialect/Target.h"
#include "kernels/oracle/ErrorMeasure.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace flashbob::test {

inline runtime::CudaDriver &driver() {
  static runtime::CudaDriver &d = [] () -> runtime::CudaDriver & {
    runtime::CudaDriver &drv = llvm::cantFail(runtime::CudaDriver::get());
    llvm::cantFail(runtime::usePrimaryContext(drv));
    return drv;
  }();
  return d;
}

// Fails the test with the error's text (which names the CUDA call) when `expr` fails.
#define GPU_CHECK(expr)                                                                           \
  do {                                                                                            \
    if (llvm::Error gpuCheckErr = (expr))                                                         \
      FAIL(#expr << ": " << llvm::toString(std::move(gpuCheckErr)));                              \
  } while (0)

class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    REQUIRE(driver().api().cuMemAlloc(&ptr_, bytes ? bytes : 1) == CUDA_SUCCESS);
  }
  ~DeviceBuffer() { driver().api().cuMemFree(ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  CUdeviceptr get() const { return ptr_; }
  void upload(const void *src) { REQUIRE(driver().api().cuMemcpyHtoD(ptr_, src, bytes_) == CUDA_SUCCESS); }
  void download(void *dst) const { REQUIRE(driver().api().cuMemcpyDtoH(dst, ptr_, bytes_) == CUDA_SUCCESS); }
  // Fill with 0xFF bytes: NaN in every float format, so unwritten outputs are caught.
  void poison() { REQUIRE(driver().api().cuMemsetD8(ptr_, 0xFF, bytes_) == CUDA_SUCCESS); }

private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

// The target this GPU gets by default (sm_90a on Hopper: wgmma/TMA-capable).
inline bob::Arch deviceArch() {
  CUdevice dev;
  REQUIRE(driver().api().cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  int major = 0, minor = 0;
  driver().api().cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  driver().api().cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  std::optional<bob::Arch> arch = bob::defaultArchFor(major, minor);
  REQUIRE(arch.has_value());
  return *arch;
}

// Rounds to the 16-bit format (in place) and returns the bit patterns to upload.
inline std::vector<uint16_t> toHalf(std::vector<double> &values, bool bf16) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    float f = static_cast<float>(values[i]);
    bits[i] = bf16 ? runtime::floatToBf16(f) : runtime::floatToHalf(f);
    values[i] = bf16 ? runtime::bf16ToFloat(bits[i]) : runtime::halfToFloat(bits[i]);
  }
  return bits;
}

inline std::vector<double> fromHalf(const std::vector<uint16_t> &bits, bool bf16) {
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    out[i] = bf16 ? runtime::bf16ToFloat(bits[i]) : runtime::halfToFloat(bits[i]);
  return out;
}

using oracle::ErrorStats;

inline ErrorStats relativeError(const std::vector<double> &got, const std::vector<double> &ref) {
  return oracle::compare(got, ref);
}

} // namespace flashbob::test

// What `flashbob bench` measures an op against, in the same process: a dense bf16 matrix-product
// ceiling (cuBLAS, loaded with dlopen: never linked), a device-to-device copy, and the device.
#pragma once

#include "runtime/driver/CudaDriver.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace flashbob::tool {

constexpr int64_t kGemmSize = 8192; // the ceiling's GEMM is kGemmSize^3

struct Ceiling {
  double tflops = 0;
  std::string source;  // "cublas" or "given"
  std::string library; // cuBLAS file
  int cublasVersion = 0;
  double bestMs = 0;
};

// Dense bf16 GEMM kGemmSize^3 with f32 accumulation (cublasGemmEx), best of 5 after 2 warm-ups.
// cuBLAS is FLASHBOB_CUBLAS (a path or name), else libcublas.so.13, .so.12, .so.
llvm::Expected<Ceiling> measureCeiling(runtime::CudaDriver &driver);

struct Copy {
  double tbs = 0;   // (bytes read + bytes written) / time
  size_t bytes = 0; // one buffer
  double bestMs = 0;
};

// cuMemcpyDtoD of one large buffer (1 GiB, less when memory is short), best of 5.
llvm::Expected<Copy> measureCopy(runtime::CudaDriver &driver);

struct DeviceInfo {
  std::string name;
  int sms = 0, l2Bytes = 0, ccMajor = 0, ccMinor = 0;
};

// The device of the current context.
llvm::Expected<DeviceInfo> deviceInfo(runtime::CudaDriver &driver);

} // namespace flashbob::tool

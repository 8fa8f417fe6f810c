// One device allocation owned by the CLI (inputs, outputs, scratch), freed with it. Shared by
// the runner of `run`/`demo` and by `bench`.
#pragma once

#include "runtime/driver/CudaDriver.h"

#include "llvm/Support/Error.h"

namespace flashbob::tool {

class DeviceBuffer {
public:
  explicit DeviceBuffer(runtime::CudaDriver &d) : driver_(d) {}
  ~DeviceBuffer() {
    if (ptr_)
      driver_.api().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  llvm::Error allocate(size_t bytes) {
    FLASHBOB_CU(driver_, cuMemAlloc(&ptr_, bytes));
    bytes_ = bytes;
    return llvm::Error::success();
  }
  CUdeviceptr get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

private:
  runtime::CudaDriver &driver_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

} // namespace flashbob::tool

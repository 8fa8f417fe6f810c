// A compiled kernel loaded into the current context, and launching it.
//
// Argument packing follows the MLIR memref calling convention our kernels use: each memref
// argument is (allocated ptr, aligned ptr, offset, sizes..., strides...) with 64-bit integers.
// Kernels that read tiles with TMA take their tensor maps after those (TensorMaps.h); the launch
// appends them.
#pragma once

#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/TensorMaps.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace flashbob::runtime {

// The primary context of a device made current on this thread (what frameworks use, so our
// allocations and theirs share one context).
llvm::Error usePrimaryContext(CudaDriver &driver, int device = 0);

struct KernelImage {
  llvm::StringRef data;    // a cubin (ptxas' output; the driver's PTX JIT is never used)
  llvm::StringRef entry;
  unsigned threads = 0;
  unsigned sharedBytes = 0;
  std::vector<TensorMapSpec> tensorMaps; // in argument order, after the memrefs
};

class LoadedKernel {
public:
  static llvm::Expected<std::unique_ptr<LoadedKernel>> load(CudaDriver &driver,
                                                            const KernelImage &image);
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel &) = delete;
  LoadedKernel &operator=(const LoadedKernel &) = delete;

  CUfunction function() const { return function_; }
  unsigned threads() const { return threads_; }
  unsigned sharedBytes() const { return sharedBytes_; }
  llvm::ArrayRef<TensorMapSpec> tensorMaps() const { return tensorMaps_; }
  TensorMapPool &tensorMapPool() const { return *pool_; }

private:
  LoadedKernel(CudaDriver &driver) : driver_(driver), pool_(std::make_unique<TensorMapPool>(driver)) {}
  CudaDriver &driver_;
  std::vector<TensorMapSpec> tensorMaps_;
  std::unique_ptr<TensorMapPool> pool_; // this context's copies of the maps
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  unsigned threads_ = 0, sharedBytes_ = 0;
};

// Kernel parameters in order; keeps the values alive until the launch.
class KernelArgs {
public:
  void addMemRef(CUdeviceptr base, llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<int64_t> strides);
  void addI64(int64_t v);
  void addPointer(CUdeviceptr p);
  llvm::SmallVector<void *, 160> pointers();
  // The memref arguments, in order (what tensor maps are built from).
  llvm::ArrayRef<MemRefArg> memrefs() const { return memrefs_; }

private:
  // Inline capacity for the largest kernel (BoB pass 1: 14 memrefs of up to 11 values), so that
  // packing a launch allocates nothing.
  llvm::SmallVector<uint64_t, 160> values_;
  llvm::SmallVector<MemRefArg, 16> memrefs_;
};

struct GridDims {
  unsigned x = 1, y = 1, z = 1;
};

// Launches `kernel` with `args` followed by its tensor maps (built from args' memrefs).
llvm::Error launch(CudaDriver &driver, const LoadedKernel &kernel, GridDims grid, KernelArgs &args,
                   CUstream stream = nullptr);

} // namespace flashbob::runtime

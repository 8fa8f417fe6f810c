// A compiled kernel loaded into the current context, and launching it.
//
// Argument packing follows the MLIR memref calling convention our kernels use: each memref
// argument is (allocated ptr, aligned ptr, offset, sizes..., strides...) with 64-bit integers;
// scalars follow as f32. Kernels that read tiles with TMA take their tensor maps by value after
// every other argument (TensorMaps.h); the launch encodes and appends them. A launch checks the
// parameters it passes against the ones the driver says the kernel takes (cuFuncGetParamInfo),
// so a cubin of another calling convention is refused instead of reading garbage.
#pragma once

#include "runtime/driver/CudaDriver.h"
#include "runtime/launch/TensorMaps.h"

#include "llvm/ADT/ArrayRef.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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
  std::vector<TensorMapSpec> tensorMaps; // in argument order, after every other argument
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
  // The byte size of each parameter, as the driver reports the kernel's (cuFuncGetParamInfo).
  llvm::ArrayRef<uint32_t> paramSizes() const { return paramSizes_; }
  const std::string &entry() const { return entry_; }

private:
  LoadedKernel(CudaDriver &driver) : driver_(driver) {}
  CudaDriver &driver_;
  std::vector<TensorMapSpec> tensorMaps_;
  std::vector<uint32_t> paramSizes_;
  std::string entry_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  unsigned threads_ = 0, sharedBytes_ = 0;
};

// The most tensor maps one launch passes (BoB pass 1 takes 7).
inline constexpr size_t kMaxTensorMaps = 16;

// Kernel parameters in order; keeps the values alive until the launch.
class KernelArgs {
public:
  void addMemRef(CUdeviceptr base, llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<int64_t> strides);
  void addI64(int64_t v);
  void addF32(float v);
  void addPointer(CUdeviceptr p);
  // The `count` tensor maps passed by value after every other parameter, to be encoded by the
  // caller (launch does); empty when count exceeds kMaxTensorMaps.
  llvm::MutableArrayRef<CUtensorMap> tensorMaps(size_t count);
  // cuLaunchKernel's kernelParams: one pointer per parameter, tensor maps last.
  llvm::SmallVector<void *, 160> pointers();
  // The byte size of each parameter, in the order of pointers().
  llvm::SmallVector<uint32_t, 160> sizes() const;
  // The memref arguments, in order (what tensor maps are built from).
  llvm::ArrayRef<MemRefArg> memrefs() const { return memrefs_; }

private:
  // Inline capacity for the largest kernel (BoB pass 1: 14 memrefs of up to 11 values), so that
  // packing a launch allocates nothing. A 4-byte scalar sits in the low bytes of its slot (the
  // driver reads its first 4 bytes; hosts are little-endian).
  llvm::SmallVector<uint64_t, 160> values_;
  llvm::SmallVector<uint8_t, 160> valueBytes_;
  llvm::SmallVector<MemRefArg, 16> memrefs_;
  std::array<CUtensorMap, kMaxTensorMaps> maps_; // CUtensorMap's own alignment (128)
  size_t mapCount_ = 0;
};

// The first parameter whose size `kernel` takes (as the driver reports it) and `passed` differ
// on, as a message ("<entry> takes 31 parameters, the launch passes 30; they first differ at
// ..."); nothing when they agree.
std::optional<std::string> paramMismatch(const LoadedKernel &kernel,
                                         llvm::ArrayRef<uint32_t> passed);

struct GridDims {
  unsigned x = 1, y = 1, z = 1;
};

// Launches `kernel` with `args` followed by its tensor maps (encoded from args' memrefs), after
// checking that the parameters' sizes are the kernel's. No device memory, copy or
// synchronization: the launch is an ordinary stream operation (CUDA graph capture included).
llvm::Error launch(CudaDriver &driver, const LoadedKernel &kernel, GridDims grid, KernelArgs &args,
                   CUstream stream = nullptr);

} // namespace flashbob::runtime

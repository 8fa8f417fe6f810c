// TMA tensor maps for kernel launches (sm_90a kernels read their tiles with TMA).
//
// A kernel that uses TMA takes, after its memref arguments, one pointer per tensor map: a
// CUtensorMap in device memory describing one of its memref arguments (the compiler lists them
// in the kernel's metadata, bob.tensor_maps). The launcher encodes each map from the memref the
// caller passed (cuTensorMapEncodeTiled) and keeps one device copy per distinct map, so a launch
// with tensors seen before costs one hash lookup per map and no copy.
#pragma once

#include "runtime/driver/CudaDriver.h"
#include "support/TensorMapSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace flashbob::runtime {

// One tensor-map argument of a kernel (support/TensorMapSpec.h).
using support::TensorMapSpec;

// A memref argument as the launcher passed it.
struct MemRefArg {
  CUdeviceptr base = 0;
  llvm::SmallVector<int64_t, 4> sizes, strides; // elements
};

// What cuTensorMapEncodeTiled gets for one map: TMA's dimension order is innermost first,
// (head_dim, seq, heads, batch), strides in bytes for the outer three.
struct TensorMapParams {
  CUdeviceptr address = 0;
  cuuint64_t dims[4] = {};
  cuuint64_t strides[3] = {};
  cuuint32_t box[4] = {};
  unsigned swizzleBytes = 0, elementBytes = 0;
};

// The parameters of `spec` over the memrefs a launch passed, or an error naming the argument
// (index out of range, not rank 4, head_dim not contiguous, bound longer than the tensor).
llvm::Expected<TensorMapParams> tensorMapParams(const TensorMapSpec &spec,
                                                llvm::ArrayRef<MemRefArg> memrefs);

// Tensor-map specs in a compiled kernel's metadata (the disk cache's metadata.json):
// [[tensor, rows_of, box_rows, box_cols, swizzle, element_bytes], ...]. Reading gives nothing
// for a missing or malformed field (the entry is then treated as a miss).
llvm::json::Array tensorMapsToJson(llvm::ArrayRef<TensorMapSpec> maps);
std::optional<std::vector<TensorMapSpec>> tensorMapsFromJson(const llvm::json::Array *json);

// Device copies of encoded tensor maps, for one CUDA context. Thread-safe.
class TensorMapPool {
public:
  explicit TensorMapPool(CudaDriver &driver) : driver_(driver) {}
  ~TensorMapPool();
  TensorMapPool(const TensorMapPool &) = delete;
  TensorMapPool &operator=(const TensorMapPool &) = delete;

  // The device address of the map `spec` describes over `memrefs`, encoded and copied on first
  // use. A new map is copied on `stream` and the stream synchronized before the address is
  // shared, so a launch on any stream may use it. Errors name the call and the argument.
  llvm::Expected<CUdeviceptr> get(const TensorMapSpec &spec, llvm::ArrayRef<MemRefArg> memrefs,
                                  CUstream stream);

private:
  // Everything a map encodes: address, 4 sizes, 3 strides, box (2), swizzle, element bytes.
  using Key = std::array<uint64_t, 12>;
  struct KeyHash {
    size_t operator()(const Key &k) const;
  };
  CudaDriver &driver_;
  std::mutex mutex_;
  std::unordered_map<Key, CUdeviceptr, KeyHash> maps_; // -> its device copy
  std::vector<CUdeviceptr> slabs_;
  size_t usedInSlab_ = 0;
};

} // namespace flashbob::runtime

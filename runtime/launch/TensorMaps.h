// TMA tensor maps for kernel launches (sm_90a kernels read their tiles with TMA).
//
// A kernel that uses TMA takes, after every other argument, one CUtensorMap per map by value
// (a 128-byte `const __grid_constant__` parameter, compiler/passes/TensorMapParams.cpp), each
// describing one of its memref arguments (the compiler lists them in the kernel's metadata,
// bob.tensor_maps). The launcher encodes each map on the host from the memref the caller passed
// and hands it to cuLaunchKernel with the other arguments: no device memory, no copy and no
// stream synchronization, so a launch can be captured into a CUDA graph whatever it has seen.
#pragma once

#include "runtime/driver/CudaDriver.h"
#include "support/TensorMapSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace flashbob::runtime {

// One tensor-map argument of a kernel (support/TensorMapSpec.h).
using support::TensorMapSpec;
static_assert(sizeof(CUtensorMap) == support::kTensorMapBytes &&
                  alignof(CUtensorMap) % support::kTensorMapAlign == 0,
              "the kernels' tensor-map parameters are CUDA's CUtensorMap");

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

// Encodes into `map` the tensor map `spec` describes over `memrefs` (cuTensorMapEncodeTiled, a
// host-only call: no device work), or copies the one this thread last encoded from the same
// parameters. Errors name the argument or the call.
llvm::Error encodeTensorMap(CudaDriver &driver, const TensorMapSpec &spec,
                            llvm::ArrayRef<MemRefArg> memrefs, CUtensorMap &map);

} // namespace flashbob::runtime

#include "runtime/launch/TensorMaps.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>

namespace flashbob::runtime {
namespace {

constexpr size_t kMapBytes = sizeof(CUtensorMap); // 128, and slots stay 128-byte aligned
constexpr size_t kSlabBytes = 64 * 1024;

llvm::Error invalid(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

CUtensorMapSwizzle swizzleMode(unsigned bytes) {
  switch (bytes) {
  case 32:
    return CU_TENSOR_MAP_SWIZZLE_32B;
  case 64:
    return CU_TENSOR_MAP_SWIZZLE_64B;
  default:
    return CU_TENSOR_MAP_SWIZZLE_128B;
  }
}

} // namespace

size_t TensorMapPool::KeyHash::operator()(const Key &k) const {
  return static_cast<size_t>(llvm::hash_combine_range(k.begin(), k.end()));
}

TensorMapPool::~TensorMapPool() {
  for (CUdeviceptr slab : slabs_)
    driver_.api().cuMemFree(slab);
}

llvm::Expected<CUdeviceptr> TensorMapPool::get(const TensorMapSpec &spec,
                                               llvm::ArrayRef<MemRefArg> memrefs, CUstream stream) {
  if (spec.tensorArg >= memrefs.size() || spec.rowsArg >= memrefs.size())
    return invalid(llvm::formatv("tensor map over memref argument {0} (rows of {1}): the launch "
                                 "passed {2} memref arguments",
                                 spec.tensorArg, spec.rowsArg, memrefs.size()));
  const MemRefArg &t = memrefs[spec.tensorArg];
  const MemRefArg &rowsOf = memrefs[spec.rowsArg];
  if (t.sizes.size() != 4 || t.strides.size() != 4 || rowsOf.sizes.size() < 3)
    return invalid(llvm::formatv("tensor map over memref argument {0}: expected a rank-4 "
                                 "(batch, heads, seq, head_dim) tensor",
                                 spec.tensorArg));
  if (rowsOf.sizes[2] > t.sizes[2])
    return invalid(llvm::formatv("tensor map over memref argument {0}: bounded by {1} rows (of "
                                 "argument {2}) but it has {3}",
                                 spec.tensorArg, rowsOf.sizes[2], spec.rowsArg, t.sizes[2]));
  if (t.strides[3] != 1)
    return invalid(llvm::formatv("tensor map over memref argument {0}: head_dim stride is {1}, "
                                 "TMA needs 1",
                                 spec.tensorArg, t.strides[3]));
  // TMA's order is innermost first: (head_dim, seq, heads, batch).
  const uint64_t elem = spec.elementBytes;
  cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.sizes[3]), static_cast<cuuint64_t>(rowsOf.sizes[2]),
                        static_cast<cuuint64_t>(t.sizes[1]), static_cast<cuuint64_t>(t.sizes[0])};
  cuuint64_t strides[3] = {t.strides[2] * elem, t.strides[1] * elem, t.strides[0] * elem};
  cuuint32_t box[4] = {spec.boxCols, spec.boxRows, 1, 1};

  const Key key = {t.base,     dims[0],    dims[1],    dims[2], dims[3],           strides[0],
                   strides[1], strides[2], box[0],     box[1],  spec.swizzleBytes, elem};
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = maps_.find(key); it != maps_.end())
    return it->second;

  CUtensorMap map;
  FLASHBOB_CU(driver_, cuTensorMapEncodeTiled(
                           &map, elem == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                           4, reinterpret_cast<void *>(t.base), dims, strides, box,
                           /*elementStrides=*/std::array<cuuint32_t, 4>{1, 1, 1, 1}.data(),
                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzleMode(spec.swizzleBytes),
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  if (slabs_.empty() || usedInSlab_ + kMapBytes > kSlabBytes) {
    CUdeviceptr slab = 0;
    FLASHBOB_CU(driver_, cuMemAlloc(&slab, kSlabBytes));
    slabs_.push_back(slab);
    usedInSlab_ = 0;
  }
  CUdeviceptr slot = slabs_.back() + usedInSlab_;
  // Slots are never rewritten, so no kernel in flight can see a map change under it.
  FLASHBOB_CU(driver_, cuMemcpyHtoDAsync(slot, &map, kMapBytes, stream));
  FLASHBOB_CU(driver_, cuStreamSynchronize(stream));
  usedInSlab_ += kMapBytes;
  maps_.emplace(key, slot);
  return slot;
}

} // namespace flashbob::runtime

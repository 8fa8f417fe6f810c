// One tensor-map argument of a kernel (sm_90a kernels read their tiles with TMA): the one
// shape of this datum. The compiler derives it from #bob.tensor_map (compiler/pipeline), the
// disk cache stores it (runtime/launch/TensorMaps.h, JSON), the launcher encodes a CUtensorMap
// from it over the memrefs of a launch and passes it by value.
#pragma once

namespace flashbob::support {

// A tensor map is a kernel parameter passed by value (compiler/passes/TensorMapParams.cpp):
// CUDA's CUtensorMap, 128 bytes, which the TMA unit reads from a 64-byte aligned address.
inline constexpr unsigned kTensorMapBytes = 128;
inline constexpr unsigned kTensorMapAlign = 64;

struct TensorMapSpec {
  // Indices among the kernel's memref arguments: the map covers `tensorArg` (batch, heads, seq,
  // head_dim) with `rowsArg`'s sequence length (rows past it read as zero).
  unsigned tensorArg = 0, rowsArg = 0;
  // One TMA copy moves boxRows x boxCols elements into a shared tile swizzled over
  // swizzleBytes (32, 64 or 128).
  unsigned boxRows = 0, boxCols = 0, swizzleBytes = 0, elementBytes = 0;

  bool operator==(const TensorMapSpec &o) const {
    return tensorArg == o.tensorArg && rowsArg == o.rowsArg && boxRows == o.boxRows &&
           boxCols == o.boxCols && swizzleBytes == o.swizzleBytes && elementBytes == o.elementBytes;
  }
};

} // namespace flashbob::support

// Copies between two strided arrays of rows on a stream, in as few driver copies as their
// strides allow: one 2D copy (cuMemcpy2DAsync) where the rows of each side are evenly spaced,
// one 3D copy (cuMemcpy3DAsync) where they are two evenly spaced runs, a loop of those
// otherwise. Knows nothing of attention (jit/HeadDims.h copies tensors in and out of
// zero-padded ones with it).
#pragma once

#include "runtime/driver/CudaDriver.h"

#include <cstdint>
#include <vector>

namespace flashbob::runtime {

// Rows of some number of contiguous bytes indexed by three dimensions: row (i0, i1, i2) starts at
// base + i0 * strideBytes[0] + i1 * strideBytes[1] + i2 * strideBytes[2].
struct RowArray {
  CUdeviceptr base = 0;
  int64_t strideBytes[3] = {0, 0, 0};
};

// The driver copies that move `rowBytes` bytes of every row of `extents` from `src` to `dst`,
// each a CUDA_MEMCPY3D (Depth 1: a 2D copy). Dimensions of extent 1 are dropped, dimensions
// whose rows follow one another evenly on both sides merge, the innermost dimension whose
// pitches hold a row and are at most `maxPitch` (CU_DEVICE_ATTRIBUTE_MAX_PITCH) becomes the
// copies' height, the next one out their depth where it is evenly spaced in whole pitches on
// both sides, and the others a loop. Strides must be positive; extents positive.
std::vector<CUDA_MEMCPY3D> planRowCopy(const int64_t extents[3], const RowArray &src,
                                       const RowArray &dst, int64_t rowBytes, int64_t maxPitch);

// Enqueues planRowCopy's copies on `stream`; the first failing call's error, naming it.
llvm::Error copyRows(CudaDriver &driver, const int64_t extents[3], const RowArray &src,
                     const RowArray &dst, int64_t rowBytes, int64_t maxPitch, CUstream stream);

} // namespace flashbob::runtime

// The layout of shared tiles, agreed on by bob-allocate-shared (sizes, offsets), bob-lower-tiles
// (addresses) and the wgmma descriptors. Two layouts, chosen per tile from the target:
//
// Padded (sm_80 and every tile wgmma cannot read): row-major, each row padded by 16 bytes.
// ldmatrix reads 8 rows of 16 bytes; with a row pitch of (cols + 8) * 2 bytes those rows start in
// 8 different 4-bank groups, so neither ldmatrix nor the 16-byte cp.async writes conflict.
//
// Swizzled (sm_90a, 16-bit tiles): the layout wgmma descriptors (and TMA) understand. The tile is
// cut into column blocks W bytes wide (W = 128, 64 or 32: the widest that divides a row); block j
// holds columns [j*W/2, (j+1)*W/2) of every row, rows W bytes apart, blocks one after another.
// Inside a block the 16-byte chunk c of row r is stored at chunk c ^ ((r / (128 / W)) % (W / 16)):
// the hardware's W-byte swizzle, which also keeps ldmatrix and cp.async conflict-free.
// An 8-row group of a block (8 * W bytes) is one swizzle atom; tiles start 1024-byte aligned so
// every atom does.
#pragma once

#include "compiler/dialect/BobDialect.h"
#include "compiler/dialect/Target.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace flashbob::bob::shared {

inline constexpr int64_t kAlignment = 128;
inline constexpr int64_t kSwizzleAlignment = 1024;
// TMA mbarriers: 8 bytes each, at most 32 (TmaPatterns.cpp).
inline constexpr int64_t kMbarrierBytes = 32 * 8;

// Row reductions of a kernel with column groups (spec warp_cols > 1) combine the groups'
// partial sums through one f32 buffer of warp_cols x rows in static shared memory
// (bob-lower-tiles, MathPatterns.cpp: bob.reduce not `within_group`, bob.combine_groups): its
// bytes for the largest such reduction in `kernel`, 0 without groups.
inline int64_t rowExchangeBytes(mlir::Operation *kernel, SpecAttr spec) {
  if (!spec || spec.getWarpCols() == 1)
    return 0;
  int64_t rows = 0;
  kernel->walk([&](mlir::Operation *op) {
    auto reduce = mlir::dyn_cast<ReduceOp>(op);
    if (reduce && !reduce.getWithinGroup())
      rows = std::max(rows, reduce.getType().getSize());
    if (auto combine = mlir::dyn_cast<CombineGroupsOp>(op))
      rows = std::max(rows, combine.getType().getSize());
  });
  return spec.getWarpCols() * rows * 4;
}

// Static shared memory that bob-lower-tiles places beside the dynamic tiles: the row exchange,
// and on sm_90a the TMA mbarriers, padded so that the swizzled dynamic tiles after them start
// 1024-byte aligned. Launches and the shared-memory budget count it.
inline int64_t staticReserve(bool hopper, int64_t exchangeBytes) {
  if (!hopper)
    return llvm::alignTo(exchangeBytes, kAlignment);
  return llvm::alignTo(kMbarrierBytes + exchangeBytes, kSwizzleAlignment);
}

// The 8-byte slots of the TMA barrier group on sm_90a: all of the static reserve that the row
// exchange (`exchangeBytes`, as declared in the module) leaves, not just the barriers in use, so
// that the static variables fill the reserve exactly. The dynamic tiles after them then start
// 1024-byte aligned whichever assembler lays out the shared section: ptxas pads it to the
// extern array's alignment, nvJitLink's link does not (bench/results/2026-12-01-h200-assemblers.md).
// Kernels with a row exchange but no TMA barriers declare the exchange that large instead.
inline int64_t barrierGroupSlots(int64_t exchangeBytes) {
  return (staticReserve(/*hopper=*/true, exchangeBytes) - exchangeBytes) / 8;
}

// The static reserve of `kernel` (a bob.kernel or the gpu.func it became) with spec `spec`.
inline int64_t staticReserveOf(mlir::Operation *kernel, SpecAttr spec) {
  return staticReserve(hasHopperFeatures(spec), rowExchangeBytes(kernel, spec));
}

// Shared memory one block of `kernel` uses once bob-allocate-shared has placed its tiles: the
// dynamic tiles plus the static reserve. What the SM's budget, the blocks per SM and the
// launcher's limit are checked against.
inline int64_t blockSharedBytes(KernelOp kernel) {
  return kernel.getSharedBytes() + staticReserveOf(kernel, kernel.getSpec());
}

inline int64_t elementBytes(SharedTileType t) {
  return t.getElementType().getIntOrFloatBitWidth() / 8;
}

struct Layout {
  int64_t rows, cols, elemBytes;
  int64_t swizzleBytes; // 0: padded row-major; else W above

  bool swizzled() const { return swizzleBytes != 0; }
  // Padded: elements between the starts of two consecutive rows.
  int64_t rowPitch() const { return cols + 16 / elemBytes; }
  // Swizzled: elements per column block, and the blocks.
  int64_t blockCols() const { return swizzleBytes / elemBytes; }
  int64_t blocks() const { return cols / blockCols(); }
  int64_t blockBytes() const { return rows * swizzleBytes; }
  int64_t bytes() const { return swizzled() ? rows * cols * elemBytes : rows * rowPitch() * elemBytes; }
  int64_t alignment() const { return swizzled() ? kSwizzleAlignment : kAlignment; }
  // Swizzled: the chunk that chunk `chunk` of row `row` is stored at.
  int64_t swizzleChunk(int64_t row, int64_t chunk) const {
    return chunk ^ ((row / (128 / swizzleBytes)) % (swizzleBytes / 16));
  }
};

inline Layout layoutFor(SharedTileType t, bool hopper) {
  Layout l{t.getRows(), t.getCols(), elementBytes(t), 0};
  if (hopper && l.elemBytes == 2 && l.rows % 8 == 0)
    for (int64_t w : {128, 64, 32})
      if ((l.cols * l.elemBytes) % w == 0) {
        l.swizzleBytes = w;
        break;
      }
  return l;
}

} // namespace flashbob::bob::shared

// When a bob.mma becomes a warpgroup wgmma (sm_90a) rather than per-warp mma.sync: the one rule,
// used by bob-stage-operands (which moves register A operands to shared memory for it) and by
// bob-lower-tiles (which emits it). Anything else stays on mma.sync, which is always correct.
//
// wgmma m64nNk16 gives each warp of a warpgroup 16 rows of the 64, in exactly the m16n8
// accumulator layout of FragmentLayout.h, so a tile whose warps own one 16-row fragment each
// (rows == 16 * warps) keeps its layout: warpgroup g computes rows [64g, 64g + 64). With column
// groups (FragmentLayout.h) each warpgroup of a group computes its group's columns.
#pragma once

#include "compiler/passes/SharedLayout.h"

namespace flashbob::bob::wgmma {

// The accumulator side: whole warpgroups of one fragment row per warp (rows == 16 * warps per
// column group), each group's N = cols / warp_cols a legal wgmma width.
inline bool accumulatorFits(RegTileType acc, SpecAttr spec) {
  const int64_t rowWarps = spec.getWarps() / spec.getWarpCols();
  const int64_t n = acc.getCols() / spec.getWarpCols();
  return hasHopperFeatures(spec) && rowWarps % 4 == 0 && acc.getRows() == 16 * rowWarps &&
         n % 8 == 0 && n <= 256;
}

// A shared operand wgmma can read through a descriptor: swizzled, 16-bit.
inline bool operandFits(SharedTileType t, bool hopper) {
  return shared::layoutFor(t, hopper).swizzled();
}

inline bool applies(MmaOp op, SpecAttr spec) {
  auto a = mlir::dyn_cast<SharedTileType>(op.getA().getType());
  const bool hopper = hasHopperFeatures(spec);
  if (!a || !accumulatorFits(op.getAcc().getType(), spec) || !operandFits(a, hopper) ||
      !operandFits(op.getB().getType(), hopper))
    return false;
  // A column group's B columns start at group * N; an MN-major B (B = tile) is addressed by
  // whole column blocks, so N must be one or more of them.
  const int64_t n = op.getAcc().getType().getCols() / spec.getWarpCols();
  return spec.getWarpCols() == 1 || op.getTransposeB() ||
         n % shared::layoutFor(op.getB().getType(), hopper).blockCols() == 0;
}

} // namespace flashbob::bob::wgmma

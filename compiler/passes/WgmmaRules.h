// When a bob.mma becomes a warpgroup wgmma (sm_90a) rather than per-warp mma.sync: the rules,
// used by bob-stage-operands (which moves register A operands to shared memory for it, unless
// they can stay in registers) and by bob-lower-tiles (which emits it). Anything else stays on
// mma.sync, which is always correct.
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

// A register A operand read from registers (#bob.spec register_a; lower_tiles/WgmmaRegisterA.cpp):
// wgmma takes A for m64nNk16 as four 32-bit registers per k16 slice, each warp of the
// warpgroup holding its 16 rows in the m16k16 layout of FragmentLayout.h. A register tile is in
// that layout when each warp owns one 16-row fragment of whole warpgroups (what
// accumulatorFits asks of the result, whose rows are A's) and all of its columns: no column
// groups (warp_cols = 1), which split a tile's columns, i.e. the inner dimension, over warps.
// registerAccumulatorFits: products into `acc` may take such an A (kernels ask it before
// choosing to keep a tile in registers for a later product, e.g. the forward's P).
inline bool registerAccumulatorFits(RegTileType acc, SpecAttr spec) {
  return spec.getRegisterA() && spec.getWarpCols() == 1 && accumulatorFits(acc, spec);
}

inline bool registerAFits(MmaOp op, SpecAttr spec) {
  return mlir::isa<RegTileType>(op.getA().getType()) && !op.getTransposeA() &&
         registerAccumulatorFits(op.getAcc().getType(), spec) &&
         operandFits(op.getB().getType(), hasHopperFeatures(spec));
}

} // namespace flashbob::bob::wgmma

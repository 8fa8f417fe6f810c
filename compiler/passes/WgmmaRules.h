// When a bob.mma becomes a warpgroup wgmma (sm_90a) rather than per-warp mma.sync: the one rule,
// used by bob-stage-operands (which moves register A operands to shared memory for it) and by
// bob-lower-tiles (which emits it). Anything else stays on mma.sync, which is always correct.
//
// wgmma m64nNk16 gives each warp of a warpgroup 16 rows of the 64, in exactly the m16n8
// accumulator layout of FragmentLayout.h, so a tile whose warps own one 16-row fragment each
// (rows == 16 * warps) keeps its layout: warpgroup g computes rows [64g, 64g + 64).
#pragma once

#include "compiler/passes/SharedLayout.h"

namespace flashbob::bob::wgmma {

// The accumulator side: whole warpgroups, one fragment row per warp, N a legal wgmma width.
inline bool accumulatorFits(RegTileType acc, int64_t warps, bool hopper) {
  return hopper && warps % 4 == 0 && acc.getRows() == 16 * warps && acc.getCols() % 8 == 0 &&
         acc.getCols() <= 256;
}

// A shared operand wgmma can read through a descriptor: swizzled, 16-bit.
inline bool operandFits(SharedTileType t, bool hopper) {
  return shared::layoutFor(t, hopper).swizzled();
}

inline bool applies(MmaOp op, int64_t warps, bool hopper) {
  auto a = mlir::dyn_cast<SharedTileType>(op.getA().getType());
  return a && accumulatorFits(op.getAcc().getType(), warps, hopper) && operandFits(a, hopper) &&
         operandFits(op.getB().getType(), hopper);
}

} // namespace flashbob::bob::wgmma

// Tile heuristics, all in one table (as FlashAttention-3's hopper/ does): the starting
// configuration per kernel kind and head dimension, which the autotuner's space is built around.
#pragma once

#include "compiler/KernelSpec.h"

namespace flashbob::kernels {

struct TileConfig {
  int64_t blockM, blockN, warps, stages;
};

// The default tiles for `kind` at `headDim` on the mma.sync path.
TileConfig defaultTiles(bob::KernelKind kind, int64_t headDim);

} // namespace flashbob::kernels

// Tile heuristics, all in one table (as FlashAttention-3's hopper/ does): the starting
// configuration per kernel kind and head dimension, which the autotuner's space is built around.
#pragma once

#include "compiler/KernelSpec.h"

#include <string>
#include <vector>

namespace flashbob::kernels {

struct TileConfig {
  int64_t blockM, blockN, warps, stages;
};

// The default tiles for `kind` at `headDim` on the mma.sync path.
TileConfig defaultTiles(bob::KernelKind kind, int64_t headDim);

// The autotuner's space for `kind` at `headDim`: the default first, then neighbours (block
// sizes halved/doubled, 8 warps). Specs the compiler or the device cannot run are pruned by the
// caller (the compiler's verifier, shared memory per block), never here.
std::vector<TileConfig> candidateTiles(bob::KernelKind kind, int64_t headDim);

// "m64_n32_w4": how a configuration is named in tuning records and logs.
std::string tileName(const TileConfig &t);

} // namespace flashbob::kernels

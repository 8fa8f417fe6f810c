// Tile heuristics, all in one table (as FlashAttention-3's hopper/ does): the starting
// configuration per kernel kind and head dimension, which the autotuner's space is built around.
#pragma once

#include "compiler/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace flashbob::kernels {

using compiler::TileConfig;

// The default tiles for `kind` at `headDim` on target `arch` (sm_90a has its own column).
TileConfig defaultTiles(bob::KernelKind kind, int64_t headDim, bob::Arch arch);

// FLASHBOB_TILES's text (support/Knobs.cpp): comma-separated `kind=tiles`, the tiles as
// TileConfig::name spells them (bob_kv=m48_n128_w8_s2,fwd=m128_n128_w8p_s2); each kind's tiles
// then replace the table's at every head dim, for timing a configuration without editing the
// table. An error names the entry that is no such pair.
llvm::Expected<std::vector<std::pair<bob::KernelKind, TileConfig>>>
parseTileOverrides(llvm::StringRef text);

// The target whose shared memory per block (compiler/dialect/Target.h) the defaults for `arch`
// are made to fit: sm_90a for its own column; sm_80 (163 KB) for the generic column, which also
// serves sm_86/sm_89 with 99 KB: there the launcher shrinks the defaults
// (kernels::fitSharedMemory). PtxMatrixTest checks both.
bob::Arch tableTarget(bob::Arch arch);
int64_t tableSharedBudget(bob::Arch arch);

// f32 values each thread keeps in its loop-carried accumulators: own rows x head_dim per
// accumulator (fwd: O; bwd_q: dQ; bwd_kv: dK, dV; bob_q: X1..X4; bob_kv: gK, gV; fwd_jvp: tO;
// fwd_dual: O, tO), spread over the block's threads. A thread has 255 registers: past one
// register file of accumulator state a kernel lives in local memory, so buildKernel rejects it
// unless its warps already own the fewest rows they can (16), i.e. no tile choice would fit.
int64_t accumulatorFloatsPerThread(const compiler::KernelSpec &spec);
inline constexpr int64_t kMaxAccumulatorFloatsPerThread = 256;
// One clear line when `spec` keeps more than that, else success.
llvm::Error checkRegisterFootprint(const compiler::KernelSpec &spec);

// The autotuner's space for `kind` at `headDim`: the default first, then neighbours (block
// sizes halved/doubled, 8 warps, 8 warps in two column groups), then on sm_90a each two-stage
// configuration without column groups again with a producer warpgroup. Specs the compiler or the
// device cannot run are pruned by the caller (the compiler's verifier, shared memory per
// block), never here.
std::vector<TileConfig> candidateTiles(bob::KernelKind kind, int64_t headDim, bob::Arch arch);

} // namespace flashbob::kernels

// Autotuning of the tile configuration of each attention kernel: candidates from the tile table
// (kernels/TileTable), pruned by the compiler's rejections and the device's shared memory,
// timed with CUDA events on the real problem, the winner persisted per (kernel kind, head dim,
// dtype, causal, scale, sequence-length bucket, GPU, compiler build) under the cache directory.
#pragma once

#include "api/Attention.h"
#include "api/KernelCache.h"

#include <functional>

namespace flashbob::api {

// On when FLASHBOB_AUTOTUNE=1 or after setAutotune(true).
bool autotuneEnabled();
void setAutotune(bool on);

// Directory of tuning records: <cache dir>/autotune.
std::string tuningDir();

// The spec to launch: `base` (the tile table's default) or, with autotuning on, the tuned one.
// `launch` runs one launch of a candidate on the real arguments (on `stream`).
llvm::Expected<compiler::KernelSpec>
chooseSpec(KernelCache &cache, const compiler::KernelSpec &base, const AttentionProblem &p,
           CUstream stream, const std::function<llvm::Error(const CachedKernel &)> &launch);

} // namespace flashbob::api

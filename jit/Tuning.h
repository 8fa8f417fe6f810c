// Autotuning of the tile configuration of each attention kernel: candidates from the tile table
// (kernels/TileTable), pruned by the compiler's rejections and the device's shared memory
// (jit::runnable), timed with CUDA events on the real problem, the winner persisted per kernel
// key (jit/KernelKey: spec, compiler build, toolchain), sequence-length bucket and GPU under the
// cache directory.
#pragma once

#include "jit/KernelCache.h"
#include "jit/Problem.h"

#include <functional>

namespace flashbob::jit {

// On when FLASHBOB_AUTOTUNE=1 or after setAutotune(true).
bool autotuneEnabled();
void setAutotune(bool on);

// Directory of tuning records: <cache dir>/autotune.
std::string tuningDir();

// The spec to launch: `base` (the tile table's default) or, with autotuning on, the tuned one.
// `launch` runs one launch of a candidate on the real arguments (on `stream`). Tuning times
// candidates with events it synchronizes: never while `stream` is being captured into a CUDA
// graph (then `base`, unless this process tuned the kernel before).
llvm::Expected<compiler::KernelSpec>
chooseSpec(KernelCache &cache, const compiler::KernelSpec &base, const AttentionProblem &p,
           CUstream stream, const std::function<llvm::Error(const CachedKernel &)> &launch);

} // namespace flashbob::jit

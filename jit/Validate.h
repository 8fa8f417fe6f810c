// The checks that name a bad argument before anything runs: the problem's sizes and limits, every
// operand a call's kernels take (bound, aligned, laid out as its layout needs), a scalar a normal
// f32, outputs that share no memory with another operand, a packed batch's offsets. The one home
// of the limits the kernels have (the longest sequence, the grid).
#pragma once

#include "compiler/dialect/Target.h"
#include "jit/Bindings.h"
#include "jit/Problem.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

#include <cstdint>

namespace flashbob::jit {

// The longest sequence (N or M) the kernels index correctly: rows, the mask and TMA coordinates
// are 32-bit there, and a block's end (start + at most 256 rows) must not wrap either.
inline constexpr int64_t kMaxSequence = (int64_t(1) << 31) - 256;
// The grid's y dimension (batch * heads) is limited to 65535 blocks by CUDA.
inline constexpr int64_t kMaxGridY = 65535;

// The problem alone: its sizes within the limits above and the kernels' head dims, the mask, the
// window, the scale. The error names the field.
llvm::Error validateProblem(const AttentionProblem &p);

// Checks the problem's sizes, then every argument that one of `kinds` takes: an operand bound,
// aligned and laid out as its layout needs, a scalar a normal f32; then that no output (an
// operand any of `kinds` writes) shares memory with another operand (jit/Overlap.h), naming
// both ("o overlaps k"). The error names the argument (as kernels::operandInfo spells it;
// "scale" for a scalar); on an error nothing may be launched.
llvm::Error validate(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds,
                     const Bindings &bindings);

// For a packed batch (p.varlen), checks what the offsets hold: cu_seqlens_q/k start at 0, never
// decrease, end at the side's total rows, and no sequence is longer than max_seqlen_q/k. Reads
// them from the device after the stream's earlier work (a synchronization); skipped while the
// stream is being captured into a CUDA graph, or with FLASHBOB_CHECK_OFFSETS=0. Call after
// validate.
llvm::Error validateOffsets(const AttentionProblem &p, const Bindings &bindings, CUstream stream);

// Whether each of `kinds` runs in the problem's form (a ring step needs their ring-step forms).
llvm::Error validateKinds(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds);

} // namespace flashbob::jit

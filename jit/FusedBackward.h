// The fused first backward (kernels/bwd/FusedBackwardKernels.cpp): when it runs instead of
// bwd_q and bwd_kv, and its launches with the workspace it needs.
#pragma once

#include "compiler/dialect/BobEnums.h"
#include "jit/Bindings.h"
#include "jit/Problem.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

namespace flashbob::jit {

// The fused backward's kernels, in launch order.
llvm::ArrayRef<bob::KernelKind> fusedBackwardKinds();

// FLASHBOB_FUSED_BACKWARD, read once.
bool fusedBackwardEnabled();

// Whether the backward of `p` runs fused on a GPU whose target is `arch`: FLASHBOB_FUSED_BACKWARD
// on (read once), sm_90a (bulk reductions, wgmma), head_dim <= 128 (at 256 the sm_90a tiles of
// the two kernels keep a smaller query block than dQ's part needs, and dK, dV and dQ's part
// would not stay in registers), not a ring step (whose dQ is a float32 partial of bwd_q's
// ring-step form), and a head dim that needs no padding (a multiple of 16, jit/HeadDims.h: the
// fused kernels read no tensor_dim narrower than their tiles, and the workspace's dQ sum is
// head_dim wide). Otherwise bwd_q and bwd_kv run, as on every other target, padded in the
// kernel or through copies as any other operation's kernels.
bool runsFusedBackward(const AttentionProblem &p, bob::Arch arch);

// The bytes of the workspace the fused backward takes for `p`: dQaccum, (batch, heads, N,
// head_dim) f32, then the counters, (batch, heads, ceil(N / kernels::kCounterRows)) int32.
uint64_t fusedBackwardWorkspaceBytes(const AttentionProblem &p);

// Launches bwd_dot, bwd_fused and bwd_dq for `p` on `stream` (after validate, with the
// operands of bwd_q and bwd_kv bound: the same q, k, v, o, dO, lse, dQ, dK, dV, D). The
// workspace is allocated on the stream (cuMemAllocAsync: no synchronization, and a CUDA graph
// may capture it), zeroed before each launch of bwd_fused (the autotuner's timed ones too) and
// freed on the stream after bwd_dq.
llvm::Error launchFusedBackward(const AttentionProblem &p, Bindings bindings, CUstream stream);

} // namespace flashbob::jit

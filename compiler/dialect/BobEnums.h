// The dialect's enums (kernel kinds, element types, SM targets, ...) without the dialect: what
// the layers above the compiler (jit, api, tools, the kernels' tables) name, so that they do not
// parse MLIR's IR headers for them (BobDialect.h takes seconds of every file that includes it).
#pragma once

#include "mlir/Support/LLVM.h"

#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "compiler/dialect/BobEnums.h.inc"

namespace flashbob::bob {

// The kinds of the fused first backward (kernels/bwd/FusedBackwardKernels.cpp): sm_90a only.
inline bool isFusedBackwardKind(KernelKind kind) {
  return kind == KernelKind::bwd_dot || kind == KernelKind::bwd_fused ||
         kind == KernelKind::bwd_dq;
}

// Key-major kinds (bwd_kv, bob_kv, bwd_fused) own key rows and sweep query blocks; the others
// own query rows and sweep key blocks (bwd_dot and bwd_dq sweep nothing). Decides which block
// size is a kernel's own and how its grid runs.
inline bool isKeyMajor(KernelKind kind) {
  return kind == KernelKind::bwd_kv || kind == KernelKind::bob_kv ||
         kind == KernelKind::bwd_fused;
}

// Kinds whose accumulators flush into reserves on long sweeps (KernelSpec::longSweep): the
// backward's and BoB's. The forward's O is rescaled by the online softmax at every step, and
// its JVP's with it (fwd_jvp, fwd_dual): they keep plain accumulators.
inline bool isLongSweepKind(KernelKind kind) {
  return kind == KernelKind::bwd_q || kind == KernelKind::bwd_kv || kind == KernelKind::bob_q ||
         kind == KernelKind::bob_kv || kind == KernelKind::bwd_fused;
}

// Kinds with a ring-step form (KernelSpec::partial, docs/context-parallel.md): all but the
// forward's JVP, alone or with the forward (fwd_dual), whose partials would merge only with the
// tangents of the partial L's, which neither writes, and the fused backward's kinds (a ring
// step runs bwd_q and bwd_kv).
inline bool hasPartialForm(KernelKind kind) {
  return kind != KernelKind::fwd_jvp && kind != KernelKind::fwd_dual &&
         !isFusedBackwardKind(kind);
}

} // namespace flashbob::bob

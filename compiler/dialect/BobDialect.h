// The `bob` dialect: C++ declarations generated from BobBase/BobAttrs/BobTypes/BobOps.td.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"

#include <limits>
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "compiler/dialect/BobDialect.h.inc"
#include "compiler/dialect/BobEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "compiler/dialect/BobAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "compiler/dialect/BobTypes.h.inc"

#define GET_OP_CLASSES
#include "compiler/dialect/BobOps.h.inc"

namespace flashbob::bob {

// Name of the attribute that carries the spec on a gpu.func once bob.kernel is lowered.
inline constexpr llvm::StringLiteral kSpecAttrName = "bob.spec";
// Name of the attribute holding the dynamic shared memory size in bytes (set by
// bob-allocate-shared on bob.kernel, carried onto the gpu.func).
inline constexpr llvm::StringLiteral kSharedBytesAttrName = "bob.shared_bytes";
// Name of the attribute listing the tensor maps a kernel takes (bob-use-tma, on bob.kernel and
// carried onto the gpu.func): one #bob.tensor_map per tensor-map argument, in argument order.
inline constexpr llvm::StringLiteral kTensorMapsAttrName = "bob.tensor_maps";

// The spec of the kernel that encloses `op` (a bob.kernel, or a function carrying bob.spec),
// or null when there is none (e.g. a tile op outside any kernel, rejected by verifiers).
SpecAttr getEnclosingSpec(mlir::Operation *op);

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

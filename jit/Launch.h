// Launching attention kernels (after jit/Validate.h's checks): the kernel arguments packed by
// walking the kernel's signature (kernels/Signature.h), as Triton's launcher is generated from a
// kernel's signature, the grid, the spec a problem starts from.
#pragma once

#include "compiler/KernelSpec.h"
#include "jit/Bindings.h"
#include "jit/Problem.h"
#include "kernels/Signature.h"
#include "runtime/launch/Kernel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <bitset>
#include <functional>

namespace flashbob::jit {

// The spec a problem starts from: the tile table's default tiles for `arch` (warp
// specialization as FLASHBOB_PRODUCER forces it, when set), the problem's dtype and mask.
compiler::KernelSpec defaultSpec(const AttentionProblem &p, bob::KernelKind kind, bob::Arch arch);

// The arguments of the kernel of `kind`, in its signature's order: each operand as a memref
// (batch, heads, rows, head_dim) or (batch, heads, rows), rows the length of its side; each
// scalar as the f32 kernels::scalarValue gives for the problem's scale. For a ring step
// (p.ringStep) the arguments of the kind's ring-step form (KernelSpec::partial; its f32 outputs
// are laid out alike).
void pack(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
          runtime::KernelArgs &args);

// The byte size of each parameter pack() passes to the kernel of `spec` (its signature's, in
// the spec's form: varlen, partial), followed by `tensorMaps` maps by value: the parameter list
// the kernel's own (cuFuncGetParamInfo) must equal.
llvm::SmallVector<uint32_t, 160> packedParamSizes(const compiler::KernelSpec &spec,
                                                  size_t tensorMaps);

// x over the blocks of the rows the kernel owns (queries for query-major kinds, keys for
// key-major ones; of the longest sequence, for a packed batch), y over batch * heads.
runtime::GridDims gridFor(const compiler::KernelSpec &spec, const AttentionProblem &p);

// Launches the kernel of `kind` for `p` on `stream`: compiled or loaded on first use, its tiles
// fitted to the GPU and, with autotuning on, tuned. Call validate first. `beforeEach`, when
// given, is queued on the stream before every launch of the kernel, the autotuner's timed ones
// included: what a kernel that adds into its outputs needs reset (the fused backward's sums and
// counters).
llvm::Error launch(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
                   CUstream stream, const std::function<llvm::Error()> &beforeEach = {});

// Compiles (or loads from the disk cache) the kernel of each of `kinds` for `p` on the current
// context's GPU, its tiles fitted as a launch would, all at once (KernelCache::prepare: one
// thread per kernel not yet loaded), and launches nothing: a later call for the problem pays no
// compile time. Checks the problem's sizes first (no tensors are involved).
llvm::Error precompile(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds);

// What an operation's call does before launching its kernels in order (after validate): the
// kernels the launches will use, compiled at once as precompile does where missing (a lookup
// each where not). With autotuning on it does nothing (the tuner picks and compiles them).
llvm::Error prepareKernels(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds);

} // namespace flashbob::jit

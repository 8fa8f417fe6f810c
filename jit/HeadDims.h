// Head dims that are no multiple of 16: how a problem's d reaches kernels whose tiles are a
// multiple of 16 wide (compiler/dialect/Target.h has the rules: which d the library takes, the
// tile width it runs at, which tensor widths a kernel pads itself). docs/architecture.md,
// "Head dims", says why there are two ways.
#pragma once

#include "compiler/dialect/BobEnums.h"
#include "jit/Bindings.h"
#include "jit/Problem.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

namespace flashbob::jit {

enum class HeadDimPadding {
  none,     // d is a tile width: the kernels read and write the tensors as they are
  inKernel, // the kernels' tiles are kernelHeadDim(d) wide, their tensors d (#bob.spec
            // tensor_dim): TMA and the masked copies read the columns past d as zeros and
            // write only the first d
  copy,     // the call copies the tensors into zero-padded ones kernelHeadDim(d) wide, runs the
            // kernels on those and copies the outputs' first d columns back (runOnPaddedCopies)
};

// How problem `p`'s head dim is padded: none for a multiple of 16, inKernel for another
// multiple of 8 (unless FLASHBOB_PAD_IN_KERNEL=0), copy otherwise, and copy whenever the
// values' head dim differs from the scores' (the kernels take one width: q and k, or v and its
// kin, run zero-padded to the wider one; zero columns of q and k add nothing to the scores,
// zero columns of v give zero columns of O, and no output column the caller gets depends on
// them).
HeadDimPadding headDimPadding(const AttentionProblem &p);

// The problem a padded-copy call's kernels run: p at head dim kernelHeadDim(max(d, d_v)) for
// every tensor, with p's effective scale (1/sqrt(d) by default, never the padded width's)
// passed explicitly.
AttentionProblem paddedProblem(const AttentionProblem &p);

// The padded-copy path of an operation's call (after jit::validate and validateOffsets): every
// tensor operand that `kinds` take is given zero-padded device memory as wide as the padded
// problem's head dim
// (one stream-ordered allocation, cuMemAllocAsync, freed on the stream after the last copy;
// a device without memory pools allocates with cuMemAlloc and waits for the stream before
// freeing). Inputs are copied in (their padding columns zeroed), `launch` runs the kernels on
// paddedProblem(p) with those tensors bound instead (row vectors and offsets unchanged), and
// each output's first columns (d, or d_v for v's kin) are copied back to the caller's tensor. Inputs bound to the
// same memory share one copy. Every copy is a stream operation: under CUDA graph capture the
// call is captured whole (a device without memory pools refuses capture).
llvm::Error runOnPaddedCopies(
    const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds, const Bindings &bindings,
    CUstream stream,
    llvm::function_ref<llvm::Error(const AttentionProblem &, const Bindings &)> launch);

} // namespace flashbob::jit

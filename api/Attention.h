// FlashBoB's C++ API: attention forward, backward and backward-over-backward (BoB) on device
// pointers. Kernels are generated for the problem's specialization on first use (JIT) and kept
// for the process. Every argument is checked before anything is launched; errors name the
// argument. Exact math (docs/bob-math.md); extra device memory is O(N) floats, nothing N x N.
#pragma once

#include "jit/Problem.h"

#include "llvm/Support/Error.h"

namespace flashbob {

// O = softmax(s Q K^T) V and L = logsumexp rows.
llvm::Error attentionForward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                             const Tensor &v, const Tensor &o, RowVector lse,
                             CUstream stream = nullptr);

// dQ, dK, dV from the forward's O and L. `dRow` receives D = rowsum(dO o O) (O(N) workspace).
llvm::Error attentionBackward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                              const Tensor &v, const Tensor &o, const Tensor &dO, RowVector lse,
                              const Tensor &dQ, const Tensor &dK, const Tensor &dV, RowVector dRow,
                              CUstream stream = nullptr);

// BoB: given cotangents uQ, uK, uV of dQ, dK, dV, the gradients of <uQ,dQ>+<uK,dK>+<uV,dV> with
// respect to Q, K, V, dO. `dRow`, `cRow`, `bRow` are O(N) workspaces (D, c, b).
struct BobInputs {
  Tensor q, k, v, o, dO;
  RowVector lse;
  Tensor uQ, uK, uV;
};
struct BobOutputs {
  Tensor gQ, gK, gV, gdO;
  RowVector dRow, cRow, bRow;
};
llvm::Error attentionBob(const AttentionProblem &p, const BobInputs &in, const BobOutputs &out,
                         CUstream stream = nullptr);

// The forward's JVP: tO, the change of O along tangents tQ, tK, tV of q, k, v, from the
// forward's O and L (one kernel; BoB's gdO at u = t without the rest of BoB).
llvm::Error attentionForwardJvp(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                const Tensor &v, const Tensor &o, RowVector lse, const Tensor &tQ,
                                const Tensor &tK, const Tensor &tV, const Tensor &tO,
                                CUstream stream = nullptr);

// Compiles (or loads from the disk cache) the kernels the operations `ops` run for `p` on the
// current GPU, all at once (one thread per kernel), without launching anything, so that the
// first real call pays no compile time. Values match flashbob_op in api/flashbob.h.
enum class AttentionOp { forward, backward, bob, forward_jvp };
llvm::Error attentionPrecompile(const AttentionProblem &p, llvm::ArrayRef<AttentionOp> ops);

} // namespace flashbob

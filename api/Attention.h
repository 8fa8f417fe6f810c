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

// Context parallelism (docs/context-parallel.md): with p.ringStep, attentionForward and
// attentionBackward run one ring step on a (query shard, key shard) pair, writing float32
// partials; BoB's two passes run separately, since pass 2 needs the c and b that pass 1's
// partials give only once summed over every key shard:
// - pass 1 (p.ringStep required): the query shard's unfinished accumulators X1..X4 (float32
//   tensors like Q), D, c and beta = rowsum(G o dS + P o W) (b before its - c o D), summed over
//   key shards by the caller and finished elementwise: b = sum beta - c o D,
//   gQ = s (X1 - c o X2 - b o X3), gdO = X4 - c o O;
// - pass 2: gK and gV of the key shard from the query shard's whole-sequence D, c and b (with
//   p.ringStep float32 partials, summed over query shards by the caller).
struct BobPass1Outputs {
  Tensor x1, x2, x3, x4;
  RowVector dRow, cRow, betaRow;
};
llvm::Error attentionBobPass1(const AttentionProblem &p, const BobInputs &in,
                              const BobPass1Outputs &out, CUstream stream = nullptr);
struct BobPass2Rows {
  RowVector dRow, cRow, bRow;
};
llvm::Error attentionBobPass2(const AttentionProblem &p, const BobInputs &in,
                              const BobPass2Rows &rows, const Tensor &gK, const Tensor &gV,
                              CUstream stream = nullptr);

// The forward's JVP: tO, the change of O along tangents tQ, tK, tV of q, k, v, from the
// forward's O and L (one kernel; BoB's gdO at u = t without the rest of BoB).
llvm::Error attentionForwardJvp(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                const Tensor &v, const Tensor &o, RowVector lse, const Tensor &tQ,
                                const Tensor &tK, const Tensor &tV, const Tensor &tO,
                                CUstream stream = nullptr);

// The forward and its JVP in one kernel (one sweep over the keys): O and L as attentionForward
// writes them, and tO along tangents tQ, tK, tV of q, k, v, from the unrounded O (no ring step).
llvm::Error attentionForwardDual(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                                 const Tensor &v, const Tensor &tQ, const Tensor &tK,
                                 const Tensor &tV, const Tensor &o, RowVector lse,
                                 const Tensor &tO, CUstream stream = nullptr);

// Compiles (or loads from the disk cache) the kernels the operations `ops` run for `p` on the
// current GPU, all at once (one thread per kernel), without launching anything, so that the
// first real call pays no compile time. Values match flashbob_op in api/flashbob.h.
enum class AttentionOp { forward, backward, bob, forward_jvp, bob_pass1, bob_pass2, forward_dual };
llvm::Error attentionPrecompile(const AttentionProblem &p, llvm::ArrayRef<AttentionOp> ops);

} // namespace flashbob

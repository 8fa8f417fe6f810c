// FlashBoB's C++ API: attention forward, backward and backward-over-backward (BoB) on device
// pointers. Kernels are generated for the problem's specialization on first use (JIT) and kept
// for the process. Every argument is checked before anything is launched; errors name the
// argument. Exact math (docs/bob-math.md); extra device memory is O(N) floats, nothing N x N.
#pragma once

#include <cuda.h>

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace flashbob {

enum class DType { bf16, fp16 };

// A (batch, heads, seq, head_dim) tensor of the problem's dtype in device memory, with strides
// in elements (the head_dim stride must be 1).
struct Tensor {
  CUdeviceptr data = 0;
  int64_t stride[4] = {0, 0, 0, 1};
};

// A (batch, heads, seq) f32 vector per row, contiguous (L, D, c, b).
struct RowVector {
  CUdeviceptr data = 0;
};

struct AttentionProblem {
  int64_t batch = 1, heads = 1;
  int64_t seqQ = 0;             // N, queries
  int64_t seqK = 0;             // M, keys
  int64_t headDim = 64;         // d
  DType dtype = DType::bf16;
  bool causal = false;          // bottom-right aligned when M != N
  std::optional<double> scale;  // default 1/sqrt(d)

  // Contiguous strides for a (batch, heads, rows, head_dim) tensor.
  Tensor contiguous(CUdeviceptr data, int64_t rows) const;
};

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

} // namespace flashbob

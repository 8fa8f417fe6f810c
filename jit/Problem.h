// An attention problem and the device memory of its tensors, as plain data: what the API takes
// and the launcher packs (jit/Launch.h).
#pragma once

#include "kernels/Signature.h"

#include <cuda.h>

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
  std::optional<double> scale;  // default 1/sqrt(d); passed to the kernels at launch
  // Key/value heads (K, V, dK, dV, uK, uV, gK, gV): a divisor of `heads`, grouped-query
  // attention (1: multi-query); 0 means `heads`. Last, so that aggregate initializations of
  // the fields above stay as they were.
  int64_t headsKv = 0;
  // Sliding window (flash-attn's window_size): query i sees key j only if
  // i + (M - N) - windowLeft <= j <= i + (M - N) + windowRight; -1 leaves a side unbounded (both
  // -1: no window). With `causal` the right side is 0 whatever windowRight says.
  int64_t windowLeft = -1;
  int64_t windowRight = -1;
  // Keys past the diagonal a query sees: 0 when causal, else the window's right side (-1: all).
  int64_t rightReach() const { return causal ? 0 : windowRight; }
  // Whether a window bounds what the causal flag alone would not.
  bool windowed() const { return windowLeft >= 0 || (!causal && windowRight >= 0); }
  // Variable-length batch (flash-attn's varlen): `batch` sequences whose rows are packed one
  // after another, seqQ and seqK the total rows of each side. Every tensor is then
  // (1, heads, total rows, head_dim) (stride[0] unused), every row vector (1, heads, total
  // rows), and cuSeqlensQ/K (device int32, batch + 1 each: 0, the running sums of the
  // sequences' lengths, the total) say where each sequence's rows are. Each sequence is its own
  // attention problem, its mask in its own rows (causal: bottom-right per sequence).
  // maxSeqQ/maxSeqK bound the sequences' lengths (the grid covers that many rows).
  bool varlen = false;
  CUdeviceptr cuSeqlensQ = 0, cuSeqlensK = 0;
  int64_t maxSeqQ = 0, maxSeqK = 0;
  // The most rows one sequence has on each side: N and M, or for a packed batch its bounds.
  int64_t longestQ() const { return varlen ? maxSeqQ : seqQ; }
  int64_t longestK() const { return varlen ? maxSeqK : seqK; }
  // The batch extent of the tensors: 1 when packed.
  int64_t tensorBatch() const { return varlen ? 1 : batch; }
  // One step of a context-parallel ring (docs/context-parallel.md): the problem is a pair of
  // shards (a query chunk and a key chunk, the mask the pair's: causal on a diagonal pair, none
  // where the keys all come first), L, D, c and b are the whole sequence's, and the kernels'
  // ring-step forms run (KernelSpec::partial): every tensor output is float32, a partial sum
  // (the forward's O a partial to merge with its L), and BoB's first pass writes its
  // unfinished accumulators X1..X4, c and beta (attentionBobPass1).
  bool ringStep = false;
  // The values' head dim (v, o, dO and the tensors shaped like them, kernels::Width::values),
  // when it differs from the scores' (q and k: headDim), as in multi-head latent attention;
  // 0 means headDim. The kernels run both at one width (jit/HeadDims.h).
  int64_t headDimV = 0;

  // The softmax scale the kernels get: `scale`, or 1/sqrt(d).
  double effectiveScale() const;
  // The values' head dim: headDimV, or headDim.
  int64_t valueDim() const { return headDimV ? headDimV : headDim; }
  // The head dim of a tensor of that width.
  int64_t width(kernels::Width w) const { return w == kernels::Width::values ? valueDim() : headDim; }
  // The key/value heads: headsKv, or heads.
  int64_t keyValueHeads() const { return headsKv ? headsKv : heads; }
  // Whether query heads share key/value heads (the kernels' spec `grouped`).
  bool grouped() const { return keyValueHeads() != heads; }
  // Contiguous strides for a (batch, heads, rows, head_dim) tensor (`heads` of them; pass
  // keyValueHeads() for the key side).
  Tensor contiguous(CUdeviceptr data, int64_t rows) const;
  Tensor contiguous(CUdeviceptr data, int64_t rows, int64_t tensorHeads) const;
  // ... with rows `width` elements wide (valueDim() for v and its kin).
  Tensor contiguous(CUdeviceptr data, int64_t rows, int64_t tensorHeads, int64_t width) const;
};

} // namespace flashbob

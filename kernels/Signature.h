// The launch signature of every kernel kind, declared once: which tensors and scalars it takes,
// in which order, and what each one is. The kernel builders derive their arguments from it
// (KernelBuilder::beginKernel), the launcher packs arguments by walking it (jit/Launch), the
// checks of the API name tensors and scalars by it, and the GPU tests bind tensors through it.
#pragma once

#include "compiler/dialect/BobEnums.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace flashbob::kernels {

// Every tensor an attention kernel reads or writes, by its role in the math (docs/bob-math.md).
enum class Operand : uint8_t {
  q, k, v, o, dO,     // inputs and output of the forward, the output's cotangent
  lse,                // L: the forward's natural log-sum-exp per query row
  dQ, dK, dV,         // the first backward
  D,                  // rowsum(dO o O) per query row
  c, b,               // BoB's row scalars
  uQ, uK, uV,         // BoB's cotangents of dQ, dK, dV
  gQ, gK, gV, gdO,    // BoB's outputs
  tQ, tK, tV, tO,     // the forward's JVP: tangents of q, k, v and the tangent of O
  cuSeqlensQ, cuSeqlensK, // variable-length batches: each sequence's first row, per side
  X1, X2, X3, X4,     // BoB pass 1's accumulators (a partial bob_q writes them unfinished)
  beta,               // rowsum(G o dS + P o W) per query row: b before its - c o D
  dQaccum,            // the fused backward's dQ / s: each key block adds its part (f32)
  dQsemaphores,       // the order in which the key blocks add into dQaccum, per query block
};
inline constexpr size_t kOperandCount = static_cast<size_t>(Operand::dQsemaphores) + 1;

// How an operand is laid out in global memory.
enum class Layout : uint8_t {
  tensor, // (batch, heads, seq, head_dim) in the problem's dtype (a partial kernel's outputs:
          // f32); unit stride along head_dim
  rows,   // (batch, heads, seq) f32, contiguous
  offsets, // (sequences + 1) i32, contiguous: flash-attn's cu_seqlens, 0 first, total last
  sums,    // (batch, heads, seq, head_dim) f32, unit stride along head_dim: a sum that blocks
           // add into (bob.bulk_reduce_add), zero before the first
  counters, // (batch, heads, ceil(seq / kCounterRows)) i32, contiguous, zero before the first
           // launch: one counter per kCounterRows rows (bob.semaphore_wait / _signal)
};
// Rows per counter of a `counters` operand: the fewest rows a block can own (block_m is a
// multiple of 16), so a block of any size finds its counter at its first row / block size, and
// the array's size does not depend on the spec.
inline constexpr int64_t kCounterRows = 16;
// Which sequence its `seq` axis runs over.
enum class Side : uint8_t { query, key }; // N or M rows
// Which head dim a tensor's rows have: the scores' (q, k and the tensors shaped like them) or
// the values' (v, o, dO and theirs). The two differ when a problem's head_dim_v does
// (jit/HeadDims.h); operands that are not tensors say `scores`.
enum class Width : uint8_t { scores, values };

struct OperandInfo {
  Operand operand;
  llvm::StringLiteral name; // as the API's errors and the CLI spell it
  Layout layout;
  Side side;
  Width width;
};
const OperandInfo &operandInfo(Operand operand);

// log2(e): the kernels compute softmax in log2 units, with exp2.
constexpr double kLog2e = 1.4426950408889634;

// A scalar argument: one f32 the launcher computes from the problem (scalarValue), so that a
// new value runs the same kernel. Kernels specialized for the default scale
// (KernelSpec::scaleArgument unset) use the same values as constants instead: the products are
// the same f32 multiplies, so results do not depend on which way the value arrives.
enum class Scalar : uint8_t {
  scale,       // s, the softmax scale (gradients carry one factor s)
  scaleLog2e,  // s log2(e): the scores in log2 units, for exp2
};
inline constexpr size_t kScalarCount = static_cast<size_t>(Scalar::scaleLog2e) + 1;

struct ScalarInfo {
  Scalar scalar;
  llvm::StringLiteral name; // as messages spell it
};
const ScalarInfo &scalarInfo(Scalar scalar);

// The value of `scalar` for softmax scale `scale` (the problem's, default applied), rounded to
// f32 once, here.
float scalarValue(Scalar scalar, double scale);

// The default softmax scale, 1/sqrt(head_dim).
double defaultScale(int64_t headDim);

// Whether every scalar of `scale` rounds to the f32 of the default scale's: then the kernels
// specialized for the default scale compute exactly what the argument would.
bool isDefaultScale(double scale, int64_t headDim);

// One kernel argument: an operand, read or written, or a scalar.
struct Param {
  bool isScalar;
  Operand operand; // when !isScalar
  Scalar scalar;   // when isScalar
  bool output;
};

// The arguments of `kind` in launch order, tensor inputs first, then outputs, then (for a
// variable-length batch, `varlen`) cu_seqlens_q and cu_seqlens_k, then scalars
// (every operand comes before every scalar: an operand's position is its memref's among the
// kernel's memref arguments, which tensor maps refer to):
//   fwd     q, k, v | o, lse | s log2(e)
//   bwd_q   q, k, v, o, dO, lse | dQ, D | s, s log2(e)
//   bwd_kv  q, k, v, dO, lse, D | dK, dV | s, s log2(e)
//   bob_q   q, k, v, o, dO, lse, uQ, uK, uV | gQ, gdO, D, c, b | s, s log2(e)
//   bob_kv  q, k, v, dO, lse, D, c, b, uQ, uK, uV | gK, gV | s, s log2(e)
//   fwd_jvp q, k, v, o, lse, tQ, tK, tV | tO | s, s log2(e)
//   fwd_dual q, k, v, tQ, tK, tV | o, lse, tO | s, s log2(e)
//   bwd_dot   o, dO | D
//   bwd_fused q, k, v, dO, lse, D | dK, dV, dQaccum, dQsemaphores | s, s log2(e)
//   bwd_dq    dQaccum | dQ | s
// (the fused backward's three kernels, in launch order: bwd_fused adds into dQaccum, ordered
// by dQsemaphores, which the caller zeroes first.)
// With `varlen` the tensors are packed (1, heads, total rows, head_dim), row vectors (1, heads,
// total rows), and the two offsets locate each sequence's rows in them.
// A `partial` kernel (KernelSpec::partial: one step of a context-parallel ring) writes its
// tensor outputs in f32, to be summed or merged over the ring's steps; bob_q's then are its
// unfinished accumulators and row sums:
//   bob_q   q, k, v, o, dO, lse, uQ, uK, uV | X1, X2, X3, X4, D, c, beta | s, s log2(e)
llvm::ArrayRef<Param> signature(bob::KernelKind kind, bool varlen, bool partial = false);
// Whether `param`, a tensor, is float32 rather than the problem's dtype: the outputs of a
// partial kernel.
inline bool isFloat32Tensor(const Param &param, bool partial) { return partial && param.output; }

// Whether `kind` takes an operand of the key side (not the fused backward's bwd_dot and bwd_dq,
// which then depend on neither the mask nor the grouping), and whether it takes a scalar (not
// bwd_dot).
bool readsKeys(bob::KernelKind kind);
bool takesScalars(bob::KernelKind kind);

// How many of the arguments of `kind` are operands (memrefs): they come first.
size_t operandCount(bob::KernelKind kind, bool varlen, bool partial = false);

// Position of `operand` among the arguments of `kind`; -1 when the kind does not take it.
int argumentIndex(bob::KernelKind kind, bool varlen, Operand operand, bool partial = false);

} // namespace flashbob::kernels

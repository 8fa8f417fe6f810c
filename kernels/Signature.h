// The launch signature of every kernel kind, declared once: which tensors it takes, in which
// order, and what each one is. The kernel builders derive their arguments from it
// (KernelBuilder::beginKernel), the launcher packs arguments by walking it (jit/Launch), the
// checks of the API name tensors by it, and the GPU tests bind tensors through it.
#pragma once

#include "compiler/dialect/BobDialect.h"

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
};
inline constexpr size_t kOperandCount = static_cast<size_t>(Operand::tO) + 1;

// How an operand is laid out in global memory.
enum class Layout : uint8_t {
  tensor, // (batch, heads, seq, head_dim) in the problem's dtype; unit stride along head_dim
  rows,   // (batch, heads, seq) f32, contiguous
};
// Which sequence its `seq` axis runs over.
enum class Side : uint8_t { query, key }; // N or M rows

struct OperandInfo {
  Operand operand;
  llvm::StringLiteral name; // as the API's errors and the CLI spell it
  Layout layout;
  Side side;
};
const OperandInfo &operandInfo(Operand operand);

// One kernel argument: an operand, read or written.
struct Param {
  Operand operand;
  bool output;
};

// The arguments of `kind` in launch order, inputs first:
//   fwd     q, k, v | o, lse
//   bwd_q   q, k, v, o, dO, lse | dQ, D
//   bwd_kv  q, k, v, dO, lse, D | dK, dV
//   bob_q   q, k, v, o, dO, lse, uQ, uK, uV | gQ, gdO, D, c, b
//   bob_kv  q, k, v, dO, lse, D, c, b, uQ, uK, uV | gK, gV
//   fwd_jvp q, k, v, o, lse, tQ, tK, tV | tO
llvm::ArrayRef<Param> signature(bob::KernelKind kind);

// Position of `operand` among the arguments of `kind`; -1 when the kind does not take it.
int argumentIndex(bob::KernelKind kind, Operand operand);

} // namespace flashbob::kernels

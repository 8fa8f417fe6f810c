#include "jit/Bindings.h"

#include <algorithm>

namespace flashbob::jit {

using kernels::Operand;

Bindings &Bindings::bind(Operand operand, const Tensor &tensor) {
  tensors_[index(operand)] = tensor;
  bound_.set(index(operand));
  return *this;
}

Bindings &Bindings::bind(Operand operand, RowVector rows) {
  Tensor t;
  t.data = rows.data;
  return bind(operand, t);
}

// The batch stride the kernels get: a packed batch's tensors have one batch and any stride[0]
// (flash-attn's (total, heads, d) tensors have none), so the one of a tensor holding them, which
// a tensor map accepts as any other (a positive multiple of 16 bytes) and no index reaches.
int64_t batchStride(const AttentionProblem &p, const Tensor &t, int64_t heads, int64_t rows) {
  return p.varlen ? std::max(t.stride[1] * heads, t.stride[2] * rows) : t.stride[0];
}

} // namespace flashbob::jit

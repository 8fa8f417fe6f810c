// The device memory bound to each operand of one attention call, and the batch stride the kernels
// get from a tensor: what the checks (jit/Validate.h) and the launcher (jit/Launch.h) both read.
#pragma once

#include "jit/Problem.h"
#include "kernels/Signature.h"

#include <array>
#include <bitset>
#include <cstdint>

namespace flashbob::jit {

// The device memory of each operand of one attention call.
class Bindings {
public:
  Bindings &bind(kernels::Operand operand, const Tensor &tensor);
  Bindings &bind(kernels::Operand operand, RowVector rows);
  bool bound(kernels::Operand operand) const { return bound_[index(operand)]; }
  // The tensor (for a row operand: its address, strides unused).
  const Tensor &operator[](kernels::Operand operand) const { return tensors_[index(operand)]; }

private:
  static size_t index(kernels::Operand o) { return static_cast<size_t>(o); }
  std::array<Tensor, kernels::kOperandCount> tensors_{};
  std::bitset<kernels::kOperandCount> bound_;
};

// The batch stride the kernels get: a packed batch's tensors have one batch and any stride[0]
// (flash-attn's (total, heads, d) tensors have none), so the one of a tensor holding them, which
// a tensor map accepts as any other (a positive multiple of 16 bytes) and no index reaches.
int64_t batchStride(const AttentionProblem &p, const Tensor &t, int64_t heads, int64_t rows);

} // namespace flashbob::jit

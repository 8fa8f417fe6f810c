#include "jit/Problem.h"

#include "kernels/Signature.h"

namespace flashbob {

double AttentionProblem::effectiveScale() const {
  return scale ? *scale : kernels::defaultScale(headDim);
}

Tensor AttentionProblem::contiguous(CUdeviceptr data, int64_t rows) const {
  return contiguous(data, rows, heads);
}

Tensor AttentionProblem::contiguous(CUdeviceptr data, int64_t rows, int64_t tensorHeads) const {
  Tensor t;
  t.data = data;
  t.stride[0] = tensorHeads * rows * headDim;
  t.stride[1] = rows * headDim;
  t.stride[2] = headDim;
  t.stride[3] = 1;
  return t;
}

} // namespace flashbob

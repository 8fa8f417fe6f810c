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
  return contiguous(data, rows, tensorHeads, headDim);
}

Tensor AttentionProblem::contiguous(CUdeviceptr data, int64_t rows, int64_t tensorHeads,
                                    int64_t width) const {
  Tensor t;
  t.data = data;
  t.stride[0] = tensorHeads * rows * width;
  t.stride[1] = rows * width;
  t.stride[2] = width;
  t.stride[3] = 1;
  return t;
}

} // namespace flashbob

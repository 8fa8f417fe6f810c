// The device buffers of one run of an op, and its launch on them: the generated inputs (a pure
// function of seed, tensor and index, so the check can regenerate any row instead of keeping a
// copy), and the outputs and O(N) workspaces, filled with NaN so that anything a kernel fails to
// write shows up in the check. Shared by `run`, `tune`, `bench` and the demo (AttentionRunner).
#pragma once

#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/DeviceBuffer.h"

#include "runtime/driver/CudaDriver.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <memory>

namespace flashbob::tool {

// The inputs, numbered as the generator's tensor index. uQ, uK, uV are BoB's cotangents and
// fwd_dual's tangents (tQ, tK, tV).
enum Input : unsigned { kQ, kK, kV, kdO, kuQ, kuK, kuV, kInputs };
// Whether input `tensor` is of the values' side (v, dO, uV: the problem's valueDim() wide) or
// the scores' (q, k, uQ, uK: headDim wide); and whether its rows are the queries' (else keys').
bool valueWidth(unsigned tensor);
bool queryRows(unsigned tensor);

// Element `index` of input `tensor` as stored on the device (rounded to `dtype`): uniform on
// [-sqrt 3, sqrt 3) before rounding (unit variance).
double inputElement(uint64_t seed, unsigned tensor, uint64_t index, DType dtype);
// A stored element of `dtype` as a number.
double fromBits(uint16_t bits, DType dtype);

struct ProblemBuffers {
  using Buffer = std::unique_ptr<DeviceBuffer>;

  // Allocates what `op` reads and writes on `problem` (a valid one: ProblemOptions or the
  // caller checked it) and uploads the inputs generated from `seed`; for a packed batch also
  // its offsets cuSeqlensQ/K (RunOptions'), which the stored problem then points to.
  static llvm::Expected<ProblemBuffers> allocate(runtime::CudaDriver &driver, Op op,
                                                 const AttentionProblem &problem, uint64_t seed,
                                                 llvm::ArrayRef<int32_t> cuSeqlensQ = {},
                                                 llvm::ArrayRef<int32_t> cuSeqlensK = {});

  // O and L, which the backward ops consume: run once before timing bwd or bob.
  llvm::Error forward() const;
  // The op itself, on the null stream.
  llvm::Error launch() const;

  Op op = Op::bob;
  AttentionProblem problem;
  double tensorBytes = 0;    // inputs and outputs: N x d and M x d (x d_v for v's kin)
  double workspaceBytes = 0; // L, D, c, b: O(N)
  std::array<Buffer, kInputs> inputs; // by Input; null where the op does not read it
  // Outputs shaped like q and k are headDim wide, those shaped like v (o, dv, gv, gdo, tOut)
  // valueDim().
  Buffer out, lse;                    // the forward's O and L (every op)
  Buffer dq, dk, dv;                  // bwd
  Buffer gq, gk, gv, gdo;             // bob
  Buffer tOut;                        // fwd_dual: tO
  Buffer dRow, cRow, bRow;            // workspaces: D (bwd, bob), c and b (bob)
  Buffer offsetsQ, offsetsK;          // a packed batch's cu_seqlens
};

} // namespace flashbob::tool

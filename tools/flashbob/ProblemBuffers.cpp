#include "tools/flashbob/ProblemBuffers.h"

#include "kernels/oracle/Oracle.h"
#include "runtime/launch/Kernel.h"
#include "runtime/support/HalfFloat.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace flashbob::tool {
using runtime::CudaDriver;

namespace {
uint16_t toBits(float f, DType t) {
  return t == DType::bf16 ? runtime::floatToBf16(f) : runtime::floatToHalf(f);
}

// Input `tensor` on the host, generated on every core (the large problems have GiBs of inputs).
std::vector<uint16_t> generateInput(uint64_t seed, unsigned tensor, size_t n, DType dtype) {
  std::vector<uint16_t> host(n);
  constexpr size_t kChunk = size_t{1} << 16;
  llvm::parallelFor(0, (n + kChunk - 1) / kChunk, [&](size_t chunk) {
    for (size_t i = chunk * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
      host[i] = toBits(oracle::generatedInput(seed, tensor, i), dtype);
  });
  return host;
}
} // namespace

bool valueWidth(unsigned tensor) { return tensor == kV || tensor == kdO || tensor == kuV; }
bool queryRows(unsigned tensor) { return tensor == kQ || tensor == kdO || tensor == kuQ; }

double inputElement(uint64_t seed, unsigned tensor, uint64_t index, DType dtype) {
  return fromBits(toBits(oracle::generatedInput(seed, tensor, index), dtype), dtype);
}

double fromBits(uint16_t bits, DType dtype) {
  return dtype == DType::bf16 ? runtime::bf16ToFloat(bits) : runtime::halfToFloat(bits);
}

llvm::Expected<ProblemBuffers> ProblemBuffers::allocate(CudaDriver &driver, Op op,
                                                        const AttentionProblem &p, uint64_t seed,
                                                        llvm::ArrayRef<int32_t> cuSeqlensQ,
                                                        llvm::ArrayRef<int32_t> cuSeqlensK) {
  ProblemBuffers b;
  b.op = op;
  b.problem = p;
  // A packed batch's tensors are (1, heads, total rows, d), or d_v wide for v and its kin.
  const size_t batch = static_cast<size_t>(p.tensorBatch()), d = static_cast<size_t>(p.headDim),
               dv = static_cast<size_t>(p.valueDim());
  const size_t bh = batch * p.heads, bhKv = batch * p.keyValueHeads();
  const size_t qElems = bh * p.seqQ * d, kElems = bhKv * p.seqK * d;
  const size_t qValueElems = bh * p.seqQ * dv, kValueElems = bhKv * p.seqK * dv;
  const size_t rowBytes = bh * p.seqQ * 4;
  const bool grad = op == Op::bwd || op == Op::bob, bob = op == Op::bob,
             dual = op == Op::fwd_dual;

  auto newBuffer = [&](size_t bytes, double &total) -> llvm::Expected<Buffer> {
    auto buffer = std::make_unique<DeviceBuffer>(driver);
    if (llvm::Error e = buffer->allocate(bytes))
      return std::move(e);
    total += bytes;
    return std::move(buffer);
  };

  if (p.varlen) {
    for (auto [offsets, slot, pointer] :
         {std::tuple{cuSeqlensQ, &b.offsetsQ, &b.problem.cuSeqlensQ},
          std::tuple{cuSeqlensK, &b.offsetsK, &b.problem.cuSeqlensK}}) {
      double ignored = 0;
      auto buffer = newBuffer(offsets.size() * sizeof(int32_t), ignored);
      if (!buffer)
        return buffer.takeError();
      FLASHBOB_CU(driver, cuMemcpyHtoD((*buffer)->get(), offsets.data(),
                                       offsets.size() * sizeof(int32_t)));
      *pointer = (*buffer)->get();
      *slot = std::move(*buffer);
    }
  }

  for (unsigned t = 0; t < kInputs; ++t) {
    if ((t == kdO && !grad) || (t >= kuQ && !bob && !dual))
      continue;
    const size_t n = valueWidth(t) ? (queryRows(t) ? qValueElems : kValueElems)
                                   : (queryRows(t) ? qElems : kElems);
    // The device buffer first: a problem too large for the GPU fails here, in one line, before
    // the host copy of its inputs is made.
    auto buffer = newBuffer(n * 2, b.tensorBytes);
    if (!buffer)
      return buffer.takeError();
    std::vector<uint16_t> host = generateInput(seed, t, n, p.dtype);
    FLASHBOB_CU(driver, cuMemcpyHtoD((*buffer)->get(), host.data(), n * 2));
    b.inputs[t] = std::move(*buffer);
  }

  const struct {
    Buffer *slot;
    size_t bytes;
    bool tensor; // else an O(N) workspace
    bool wanted;
  } outputs[] = {
      {&b.out, qValueElems * 2, true, true},   {&b.lse, rowBytes, false, true},
      {&b.dRow, rowBytes, false, grad},         {&b.dq, qElems * 2, true, op == Op::bwd},
      {&b.dk, kElems * 2, true, op == Op::bwd}, {&b.dv, kValueElems * 2, true, op == Op::bwd},
      {&b.gq, qElems * 2, true, bob},           {&b.gk, kElems * 2, true, bob},
      {&b.gv, kValueElems * 2, true, bob},      {&b.gdo, qValueElems * 2, true, bob},
      {&b.cRow, rowBytes, false, bob},          {&b.bRow, rowBytes, false, bob},
      {&b.tOut, qValueElems * 2, true, dual},
  };
  for (const auto &o : outputs) {
    if (!o.wanted)
      continue;
    auto buffer = newBuffer(o.bytes, o.tensor ? b.tensorBytes : b.workspaceBytes);
    if (!buffer)
      return buffer.takeError();
    FLASHBOB_CU(driver, cuMemsetD8((*buffer)->get(), 0xFF, o.bytes)); // NaN everywhere
    *o.slot = std::move(*buffer);
  }
  return std::move(b);
}

namespace {
// Contiguous (batch, heads, rows, width) views of the buffers: query-major and key-major (with
// the key/value heads), headDim wide (q, k) or valueDim() wide (qv, kv: v and its kin).
struct Views {
  const AttentionProblem &p;
  Tensor q(const ProblemBuffers::Buffer &b) const { return p.contiguous(b->get(), p.seqQ); }
  Tensor k(const ProblemBuffers::Buffer &b) const {
    return p.contiguous(b->get(), p.seqK, p.keyValueHeads());
  }
  Tensor qv(const ProblemBuffers::Buffer &b) const {
    return p.contiguous(b->get(), p.seqQ, p.heads, p.valueDim());
  }
  Tensor kv(const ProblemBuffers::Buffer &b) const {
    return p.contiguous(b->get(), p.seqK, p.keyValueHeads(), p.valueDim());
  }
};
} // namespace

llvm::Error ProblemBuffers::forward() const {
  Views t{problem};
  return attentionForward(problem, t.q(inputs[kQ]), t.k(inputs[kK]), t.kv(inputs[kV]), t.qv(out),
                          {lse->get()});
}

llvm::Error ProblemBuffers::launch() const {
  Views t{problem};
  switch (op) {
  case Op::fwd:
    return forward();
  case Op::bwd:
    return attentionBackward(problem, t.q(inputs[kQ]), t.k(inputs[kK]), t.kv(inputs[kV]),
                             t.qv(out), t.qv(inputs[kdO]), {lse->get()}, t.q(dq), t.k(dk),
                             t.kv(dv), {dRow->get()});
  case Op::bob:
    return attentionBob(problem,
                        {t.q(inputs[kQ]), t.k(inputs[kK]), t.kv(inputs[kV]), t.qv(out),
                         t.qv(inputs[kdO]), {lse->get()}, t.q(inputs[kuQ]), t.k(inputs[kuK]),
                         t.kv(inputs[kuV])},
                        {t.q(gq), t.k(gk), t.kv(gv), t.qv(gdo), {dRow->get()}, {cRow->get()},
                         {bRow->get()}});
  case Op::fwd_dual:
    return attentionForwardDual(problem, t.q(inputs[kQ]), t.k(inputs[kK]), t.kv(inputs[kV]),
                                t.q(inputs[kuQ]), t.k(inputs[kuK]), t.kv(inputs[kuV]), t.qv(out),
                                {lse->get()}, t.qv(tOut));
  }
  return llvm::Error::success();
}

} // namespace flashbob::tool

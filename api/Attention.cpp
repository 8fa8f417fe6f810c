#include "api/Attention.h"

#include "api/KernelCache.h"
#include "api/Tuning.h"
#include "kernels/Kernels.h"
#include "kernels/TileTable.h"
#include "runtime/launch/Kernel.h"
#include "support/Errors.h"
#include "support/Knobs.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>

namespace flashbob {

Tensor AttentionProblem::contiguous(CUdeviceptr data, int64_t rows) const {
  Tensor t;
  t.data = data;
  t.stride[0] = heads * rows * headDim;
  t.stride[1] = rows * headDim;
  t.stride[2] = headDim;
  t.stride[3] = 1;
  return t;
}

namespace {

llvm::Error invalid(const llvm::Twine &what) {
  // Every message here starts with the argument's name ("k is a null pointer").
  std::string message = what.str();
  llvm::StringRef argument = llvm::StringRef(message).take_until([](char c) { return c == ' '; });
  return support::makeInvalidArgument(argument, "flashbob: " + message);
}

llvm::Error validateProblem(const AttentionProblem &p) {
  if (p.batch <= 0)
    return invalid("batch must be positive, got " + llvm::Twine(p.batch));
  if (p.heads <= 0)
    return invalid("heads must be positive, got " + llvm::Twine(p.heads));
  if (p.seqQ <= 0)
    return invalid("seq_q (N) must be positive, got " + llvm::Twine(p.seqQ));
  if (p.seqK <= 0)
    return invalid("seq_k (M) must be positive, got " + llvm::Twine(p.seqK));
  if (p.headDim <= 0 || p.headDim % 16 != 0 || p.headDim > 256)
    return invalid("head_dim " + llvm::Twine(p.headDim) +
                   " is unsupported (a multiple of 16 up to 256)");
  if (p.batch * p.heads > 65535)
    return invalid("batch * heads = " + llvm::Twine(p.batch * p.heads) +
                   " exceeds the grid's y limit 65535");
  if (p.scale && (!std::isfinite(*p.scale) || *p.scale <= 0))
    return invalid("scale must be a positive finite number");
  return llvm::Error::success();
}

// The kernels copy rows in 16-byte pieces: base and row starts must be 16-byte aligned.
llvm::Error validateTensor(const AttentionProblem &p, const Tensor &t, const char *name) {
  if (!t.data)
    return invalid(llvm::Twine(name) + " is a null pointer");
  if (t.stride[3] != 1)
    return invalid(llvm::Twine(name) + " must have unit stride along head_dim, got " +
                   llvm::Twine(t.stride[3]));
  if (t.data % 16 != 0)
    return invalid(llvm::Twine(name) + " is not 16-byte aligned");
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] <= 0 || t.stride[i] % 8 != 0)
      return invalid(llvm::formatv("{0} stride[{1}] = {2} must be a positive multiple of 8 "
                                   "elements (16-byte aligned rows)",
                                   name, i, t.stride[i]));
  if (t.stride[2] < p.headDim)
    return invalid(llvm::formatv("{0} rows overlap: stride[2] = {1} < head_dim {2}", name,
                                 t.stride[2], p.headDim));
  return llvm::Error::success();
}

llvm::Error validateRows(RowVector r, const char *name) {
  if (!r.data)
    return invalid(llvm::Twine(name) + " is a null pointer");
  if (r.data % 4 != 0)
    return invalid(llvm::Twine(name) + " is not 4-byte aligned");
  return llvm::Error::success();
}

// FLASHBOB_PRODUCER=1 (or 0) turns warp specialization on (off) for every two-stage sm_90a
// kernel without column groups, whatever the tile table says: for A/B timing and the GPU tests
// of the producer path. Read once: this is on every launch's path.
int producerOverride() {
  static const int value = [] {
    std::optional<bool> forced = support::knobs::producer();
    return forced ? int(*forced) : -1;
  }();
  return value;
}

compiler::KernelSpec specFor(const AttentionProblem &p, bob::KernelKind kind,
                             const std::string &arch) {
  compiler::KernelSpec s;
  s.kind = kind;
  s.headDim = p.headDim;
  kernels::applyTiles(s, kernels::defaultTiles(kind, p.headDim, arch));
  if (int producer = producerOverride();
      producer >= 0 && arch == "sm_90a" && s.stages == 2 && s.warpCols == 1)
    s.producer = producer == 1;
  s.dtype = p.dtype == DType::bf16 ? bob::ElemType::bf16 : bob::ElemType::f16;
  s.causal = p.causal;
  s.scale = p.scale;
  s.arch = arch;
  return s;
}

void addTensor(runtime::KernelArgs &args, const AttentionProblem &p, const Tensor &t, int64_t rows) {
  args.addMemRef(t.data, {p.batch, p.heads, rows, p.headDim},
                 {t.stride[0], t.stride[1], t.stride[2], 1});
}

void addRows(runtime::KernelArgs &args, const AttentionProblem &p, RowVector r, int64_t rows) {
  args.addMemRef(r.data, {p.batch, p.heads, rows}, {p.heads * rows, rows, 1});
}

// Launches kernel `kind` for problem `p` with arguments filled by `fill`.
template <typename Fill>
llvm::Error run(const AttentionProblem &p, bob::KernelKind kind, CUstream stream, Fill fill) {
  auto cache = api::KernelCache::get();
  if (!cache)
    return cache.takeError();
  auto launch = [&](const api::CachedKernel &k) {
    runtime::KernelArgs args;
    fill(args);
    kernels::Grid g = kernels::gridFor(k.spec, p.batch, p.heads, p.seqQ, p.seqK);
    return runtime::launch((*cache)->driver(), *k.loaded, {g.x, g.y, g.z}, args, stream);
  };
  auto base = (*cache)->fitted(specFor(p, kind, (*cache)->arch()));
  if (!base)
    return base.takeError();
  auto spec = api::chooseSpec(**cache, *base, p, stream, launch);
  if (!spec)
    return spec.takeError();
  auto kernel = (*cache)->kernel(*spec);
  if (!kernel)
    return kernel.takeError();
  return launch(**kernel);
}

} // namespace

llvm::Error attentionForward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                             const Tensor &v, const Tensor &o, RowVector lse, CUstream stream) {
  if (llvm::Error e = validateProblem(p))
    return e;
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"},
                               {&o, "o"}})
    if (llvm::Error e = validateTensor(p, *t, name))
      return e;
  if (llvm::Error e = validateRows(lse, "lse"))
    return e;
  return run(p, bob::KernelKind::fwd, stream, [&](runtime::KernelArgs &a) {
    addTensor(a, p, q, p.seqQ);
    addTensor(a, p, k, p.seqK);
    addTensor(a, p, v, p.seqK);
    addTensor(a, p, o, p.seqQ);
    addRows(a, p, lse, p.seqQ);
  });
}

llvm::Error attentionBackward(const AttentionProblem &p, const Tensor &q, const Tensor &k,
                              const Tensor &v, const Tensor &o, const Tensor &dO, RowVector lse,
                              const Tensor &dQ, const Tensor &dK, const Tensor &dV, RowVector dRow,
                              CUstream stream) {
  if (llvm::Error e = validateProblem(p))
    return e;
  for (auto [t, name] :
       {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&o, "o"},
        {&dO, "dO"}, {&dQ, "dQ"}, {&dK, "dK"}, {&dV, "dV"}})
    if (llvm::Error e = validateTensor(p, *t, name))
      return e;
  if (llvm::Error e = validateRows(lse, "lse"))
    return e;
  if (llvm::Error e = validateRows(dRow, "D"))
    return e;
  // bwd_q writes D, which bwd_kv reads: same stream, in order.
  if (llvm::Error e = run(p, bob::KernelKind::bwd_q, stream, [&](runtime::KernelArgs &a) {
        addTensor(a, p, q, p.seqQ);
        addTensor(a, p, k, p.seqK);
        addTensor(a, p, v, p.seqK);
        addTensor(a, p, o, p.seqQ);
        addTensor(a, p, dO, p.seqQ);
        addRows(a, p, lse, p.seqQ);
        addTensor(a, p, dQ, p.seqQ);
        addRows(a, p, dRow, p.seqQ);
      }))
    return e;
  return run(p, bob::KernelKind::bwd_kv, stream, [&](runtime::KernelArgs &a) {
    addTensor(a, p, q, p.seqQ);
    addTensor(a, p, k, p.seqK);
    addTensor(a, p, v, p.seqK);
    addTensor(a, p, dO, p.seqQ);
    addRows(a, p, lse, p.seqQ);
    addRows(a, p, dRow, p.seqQ);
    addTensor(a, p, dK, p.seqK);
    addTensor(a, p, dV, p.seqK);
  });
}

llvm::Error attentionBob(const AttentionProblem &p, const BobInputs &in, const BobOutputs &out,
                         CUstream stream) {
  if (llvm::Error e = validateProblem(p))
    return e;
  for (auto [t, name] :
       {std::pair{&in.q, "q"}, {&in.k, "k"}, {&in.v, "v"},
        {&in.o, "o"}, {&in.dO, "dO"}, {&in.uQ, "uQ"},
        {&in.uK, "uK"}, {&in.uV, "uV"}, {&out.gQ, "gQ"},
        {&out.gK, "gK"}, {&out.gV, "gV"}, {&out.gdO, "gdO"}})
    if (llvm::Error e = validateTensor(p, *t, name))
      return e;
  for (auto [r, name] : {std::pair{in.lse, "lse"}, {out.dRow, "D"}, {out.cRow, "c"}, {out.bRow, "b"}})
    if (llvm::Error e = validateRows(r, name))
      return e;
  // Pass 1 writes D, c, b; pass 2 reads them (same stream, in order).
  if (llvm::Error e = run(p, bob::KernelKind::bob_q, stream, [&](runtime::KernelArgs &a) {
        addTensor(a, p, in.q, p.seqQ);
        addTensor(a, p, in.k, p.seqK);
        addTensor(a, p, in.v, p.seqK);
        addTensor(a, p, in.o, p.seqQ);
        addTensor(a, p, in.dO, p.seqQ);
        addRows(a, p, in.lse, p.seqQ);
        addTensor(a, p, in.uQ, p.seqQ);
        addTensor(a, p, in.uK, p.seqK);
        addTensor(a, p, in.uV, p.seqK);
        addTensor(a, p, out.gQ, p.seqQ);
        addTensor(a, p, out.gdO, p.seqQ);
        addRows(a, p, out.dRow, p.seqQ);
        addRows(a, p, out.cRow, p.seqQ);
        addRows(a, p, out.bRow, p.seqQ);
      }))
    return e;
  return run(p, bob::KernelKind::bob_kv, stream, [&](runtime::KernelArgs &a) {
    addTensor(a, p, in.q, p.seqQ);
    addTensor(a, p, in.k, p.seqK);
    addTensor(a, p, in.v, p.seqK);
    addTensor(a, p, in.dO, p.seqQ);
    addRows(a, p, in.lse, p.seqQ);
    addRows(a, p, out.dRow, p.seqQ);
    addRows(a, p, out.cRow, p.seqQ);
    addRows(a, p, out.bRow, p.seqQ);
    addTensor(a, p, in.uQ, p.seqQ);
    addTensor(a, p, in.uK, p.seqK);
    addTensor(a, p, in.uV, p.seqK);
    addTensor(a, p, out.gK, p.seqK);
    addTensor(a, p, out.gV, p.seqK);
  });
}

} // namespace flashbob

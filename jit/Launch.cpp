#include "jit/Launch.h"

#include "compiler/dialect/Target.h"
#include "jit/KernelCache.h"
#include "jit/Tuning.h"
#include "kernels/TileTable.h"
#include "support/Errors.h"
#include "support/Knobs.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <optional>

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

namespace {
// `argument` is named first in `what`.
llvm::Error invalid(llvm::StringRef argument, const llvm::Twine &what) {
  return support::makeInvalidArgument(argument, "flashbob: " + what);
}

// The kernels copy rows in 16-byte pieces: base and row starts must be 16-byte aligned.
llvm::Error validateTensor(const AttentionProblem &p, const Tensor &t, llvm::StringRef name) {
  if (!t.data)
    return invalid(name, name + " is a null pointer");
  if (t.stride[3] != 1)
    return invalid(name, name + " must have unit stride along head_dim, got " + llvm::Twine(t.stride[3]));
  if (t.data % 16 != 0)
    return invalid(name, name + " is not 16-byte aligned");
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] <= 0 || t.stride[i] % 8 != 0)
      return invalid(name, llvm::formatv("{0} stride[{1}] = {2} must be a positive multiple of 8 "
                                   "elements (16-byte aligned rows)",
                                   name, i, t.stride[i]));
  if (t.stride[2] < p.headDim)
    return invalid(name, llvm::formatv("{0} rows overlap: stride[2] = {1} < head_dim {2}", name,
                                 t.stride[2], p.headDim));
  return llvm::Error::success();
}

llvm::Error validateRows(const Tensor &r, llvm::StringRef name) {
  if (!r.data)
    return invalid(name, name + " is a null pointer");
  if (r.data % 4 != 0)
    return invalid(name, name + " is not 4-byte aligned");
  return llvm::Error::success();
}

} // namespace

llvm::Error validateProblem(const AttentionProblem &p) {
  if (p.batch <= 0)
    return invalid("batch", "batch must be positive, got " + llvm::Twine(p.batch));
  if (p.heads <= 0)
    return invalid("heads", "heads must be positive, got " + llvm::Twine(p.heads));
  if (p.seqQ <= 0)
    return invalid("seq_q", "seq_q (N) must be positive, got " + llvm::Twine(p.seqQ));
  if (p.seqK <= 0)
    return invalid("seq_k", "seq_k (M) must be positive, got " + llvm::Twine(p.seqK));
  if (p.headDim <= 0 || p.headDim % 16 != 0 || p.headDim > 256)
    return invalid("head_dim", "head_dim " + llvm::Twine(p.headDim) +
                   " is unsupported (a multiple of 16 up to 256)");
  if (p.batch * p.heads > 65535)
    return invalid("batch", "batch * heads = " + llvm::Twine(p.batch * p.heads) +
                   " exceeds the grid's y limit 65535");
  if (p.scale && (!std::isfinite(*p.scale) || *p.scale <= 0))
    return invalid("scale", "scale must be a positive finite number");
  return llvm::Error::success();
}

llvm::Error validate(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds,
                     const Bindings &bindings) {
  if (llvm::Error e = validateProblem(p))
    return e;
  std::bitset<kernels::kOperandCount> checked;
  for (bob::KernelKind kind : kinds)
    for (const kernels::Param &param : kernels::signature(kind)) {
      const size_t i = static_cast<size_t>(param.operand);
      if (checked[i])
        continue;
      checked.set(i);
      const kernels::OperandInfo &info = kernels::operandInfo(param.operand);
      if (!bindings.bound(param.operand))
        return invalid(info.name, info.name + " is not given");
      llvm::Error e = info.layout == kernels::Layout::rows
                          ? validateRows(bindings[param.operand], info.name)
                          : validateTensor(p, bindings[param.operand], info.name);
      if (e)
        return e;
    }
  return llvm::Error::success();
}

compiler::KernelSpec defaultSpec(const AttentionProblem &p, bob::KernelKind kind, bob::Arch arch) {
  compiler::KernelSpec s;
  s.kind = kind;
  s.headDim = p.headDim;
  s.tiles = kernels::defaultTiles(kind, p.headDim, arch);
  // FLASHBOB_PRODUCER=1 (or 0) turns warp specialization on (off) for every two-stage sm_90a
  // kernel without column groups, whatever the tile table says: for A/B timing and the GPU
  // tests of the producer path. Read once (support/Knobs.h): this is on every launch's path.
  static const std::optional<bool> producer = support::knobs::producer();
  if (producer && bob::hasHopperFeatures(arch) && s.tiles.stages == 2 && s.tiles.warpCols == 1)
    s.tiles.producer = *producer;
  s.dtype = p.dtype == DType::bf16 ? bob::ElemType::bf16 : bob::ElemType::f16;
  s.causal = p.causal;
  s.scale = p.scale;
  s.arch = arch;
  return s;
}

void pack(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
          runtime::KernelArgs &args) {
  for (const kernels::Param &param : kernels::signature(kind)) {
    const kernels::OperandInfo &info = kernels::operandInfo(param.operand);
    const Tensor &t = bindings[param.operand];
    const int64_t rows = info.side == kernels::Side::query ? p.seqQ : p.seqK;
    if (info.layout == kernels::Layout::rows)
      args.addMemRef(t.data, {p.batch, p.heads, rows}, {p.heads * rows, rows, 1});
    else
      args.addMemRef(t.data, {p.batch, p.heads, rows, p.headDim},
                     {t.stride[0], t.stride[1], t.stride[2], 1});
  }
}

runtime::GridDims gridFor(const compiler::KernelSpec &spec, const AttentionProblem &p) {
  const bool keyMajor = bob::isKeyMajor(spec.kind);
  const int64_t rows = keyMajor ? p.seqK : p.seqQ;
  const int64_t block = keyMajor ? spec.tiles.blockN : spec.tiles.blockM;
  runtime::GridDims g;
  g.x = static_cast<unsigned>((rows + block - 1) / block);
  g.y = static_cast<unsigned>(p.batch * p.heads);
  return g;
}

llvm::Error launch(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
                   CUstream stream) {
  auto cache = KernelCache::get();
  if (!cache)
    return cache.takeError();
  auto run = [&](const CachedKernel &k) {
    runtime::KernelArgs args;
    pack(kind, p, bindings, args);
    return runtime::launch((*cache)->driver(), *k.loaded, gridFor(k.spec, p), args, stream);
  };
  auto base = (*cache)->fitted(defaultSpec(p, kind, (*cache)->arch()));
  if (!base)
    return base.takeError();
  auto spec = chooseSpec(**cache, *base, p, stream, run);
  if (!spec)
    return spec.takeError();
  auto kernel = (*cache)->kernel(*spec);
  if (!kernel)
    return kernel.takeError();
  return run(**kernel);
}

llvm::Error precompile(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds) {
  if (llvm::Error e = validateProblem(p))
    return e;
  auto cache = KernelCache::get();
  if (!cache)
    return cache.takeError();
  for (bob::KernelKind kind : kinds) {
    auto spec = (*cache)->fitted(defaultSpec(p, kind, (*cache)->arch()));
    if (!spec)
      return spec.takeError();
    if (auto kernel = (*cache)->kernel(*spec); !kernel)
      return kernel.takeError();
  }
  return llvm::Error::success();
}

} // namespace flashbob::jit

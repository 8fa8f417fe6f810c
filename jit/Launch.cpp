#include "jit/Launch.h"

#include "jit/Validate.h"

#include "compiler/dialect/Target.h"
#include "jit/HeadDims.h"
#include "jit/KernelCache.h"
#include "jit/Tuning.h"
#include "kernels/Kernels.h"
#include "kernels/TileTable.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace flashbob::jit {

using kernels::Operand;

// The most rows one block's sweep visits: the other side's sequence (over every query head of
// the group for a grouped key-major kernel, whose accumulators sum over them), at most the
// window's span when both sides are bounded.
static int64_t sweptRows(const AttentionProblem &p, bob::KernelKind kind) {
  const bool keyMajor = bob::isKeyMajor(kind);
  int64_t rows = keyMajor ? p.longestQ() : p.longestK();
  const int64_t right = p.rightReach();
  if (p.windowLeft >= 0 && right >= 0)
    rows = std::min(rows, p.windowLeft + right + 1);
  return keyMajor ? rows * (p.heads / p.keyValueHeads()) : rows;
}

compiler::KernelSpec defaultSpec(const AttentionProblem &p, bob::KernelKind kind, bob::Arch arch) {
  compiler::KernelSpec s;
  s.kind = kind;
  // The tiles' width: d, or the next multiple of 16 (jit/HeadDims.h), with the tensors d wide
  // where the kernel pads them itself (a padded-copy call's kernels run on paddedProblem(p),
  // whose d is a tile width already).
  s.headDim = bob::kernelHeadDim(p.headDim);
  if (headDimPadding(p) == HeadDimPadding::inKernel)
    s.tensorDim = p.headDim;
  s.tiles = kernels::defaultTiles(kind, s.headDim, arch);
  // FLASHBOB_TILES replaces them for the kinds it names. Read once, like the knobs below.
  static const std::vector<std::pair<bob::KernelKind, compiler::TileConfig>> overrides = [] {
    auto parsed = kernels::parseTileOverrides(support::knobs::tiles());
    if (parsed)
      return std::move(*parsed);
    support::log(support::LogLevel::Warning, llvm::toString(parsed.takeError()) + ": ignored");
    return std::vector<std::pair<bob::KernelKind, compiler::TileConfig>>();
  }();
  for (const auto &[overridden, tiles] : overrides)
    if (overridden == kind)
      s.tiles = tiles;
  // FLASHBOB_PRODUCER=1 (or 0) turns warp specialization on (off) for every two-stage sm_90a
  // kernel without column groups, whatever the tile table says: for A/B timing and the GPU
  // tests of the producer path. Read once (support/Knobs.h): this is on every launch's path.
  static const std::optional<bool> producer = support::knobs::producer();
  if (producer && bob::hasHopperFeatures(arch) && s.tiles.stages == 2 && s.tiles.warpCols == 1)
    s.tiles.producer = *producer;
  s.dtype = p.dtype == DType::bf16 ? bob::ElemType::bf16 : bob::ElemType::f16;
  // The window (-1, 0) is the causal mask: the causal kernels run it. A causal problem's right
  // side is 0 whatever the window says, as in flash-attn.
  s.causal = p.causal || (p.windowLeft < 0 && p.windowRight == 0);
  s.windowLeft = p.windowLeft;
  s.windowRight = s.causal ? -1 : p.windowRight;
  s.arch = arch;
  // Compiled in, the default scale is 1/sqrt of the spec's tensor width: a padded-copy call's
  // 1/sqrt(d) is not the padded width's, so its kernels take it as an argument.
  s.scaleArgument = !kernels::isDefaultScale(p.effectiveScale(), s.tensorWidth());
  s.grouped = p.grouped();
  s.varlen = p.varlen;
  s.partial = p.ringStep;
  // FLASHBOB_LONG_SWEEP=1 (or 0) flushes (or does not) whatever the sweep's length: the A/B
  // of the flush's cost and accuracy at any length. Read once, like FLASHBOB_PRODUCER.
  static const std::optional<bool> longSweep = support::knobs::longSweep();
  s.longSweep = bob::isLongSweepKind(kind) &&
                longSweep.value_or(sweptRows(p, kind) >= kernels::kLongSweepRows);
  // Kinds without key rows (the fused backward's bwd_dot and bwd_dq) depend on neither the
  // mask nor the grouping, and bwd_dot on no scalar: one kernel serves every such problem.
  if (!kernels::readsKeys(kind)) {
    s.causal = false;
    s.windowLeft = s.windowRight = -1;
    s.grouped = false;
  }
  if (!kernels::takesScalars(kind))
    s.scaleArgument = false;
  // FLASHBOB_REGISTER_A=1: register-A products on sm_90a (KernelSpec::registerA); a field of
  // the spec, so its kernels have their own names and cache entries. Read once, like the others.
  static const bool registerA = support::knobs::registerA();
  s.registerA = registerA && bob::hasHopperFeatures(arch);
  return s;
}

void pack(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
          runtime::KernelArgs &args) {
  for (const kernels::Param &param : kernels::signature(kind, p.varlen, p.ringStep)) {
    if (param.isScalar) {
      args.addF32(kernels::scalarValue(param.scalar, p.effectiveScale()));
      continue;
    }
    const kernels::OperandInfo &info = kernels::operandInfo(param.operand);
    const Tensor &t = bindings[param.operand];
    const bool query = info.side == kernels::Side::query;
    const int64_t rows = query ? p.seqQ : p.seqK;
    switch (info.layout) {
    case kernels::Layout::rows: // row vectors are all the queries'
      args.addMemRef(t.data, {p.tensorBatch(), p.heads, rows}, {p.heads * rows, rows, 1});
      break;
    case kernels::Layout::offsets:
      args.addMemRef(t.data, {p.batch + 1}, {1});
      break;
    case kernels::Layout::counters: { // one per kCounterRows rows of each sequence
      const int64_t blocks = (p.longestQ() + kernels::kCounterRows - 1) / kernels::kCounterRows;
      args.addMemRef(t.data, {p.batch, p.heads, blocks}, {p.heads * blocks, blocks, 1});
      break;
    }
    case kernels::Layout::tensor:
    case kernels::Layout::sums: {
      const int64_t heads = query ? p.heads : p.keyValueHeads();
      args.addMemRef(t.data,
                     {p.tensorBatch(), heads, rows, p.headDim},
                     {batchStride(p, t, heads, rows), t.stride[1], t.stride[2], 1});
      break;
    }
    }
  }
}

llvm::SmallVector<uint32_t, 160> packedParamSizes(const compiler::KernelSpec &spec,
                                                  size_t tensorMaps) {
  // pack() itself, over unbound tensors: the sizes depend on the form alone, never on values.
  AttentionProblem p;
  p.varlen = spec.varlen;
  p.ringStep = spec.partial;
  runtime::KernelArgs args;
  pack(spec.kind, p, Bindings(), args);
  (void)args.tensorMaps(tensorMaps); // more than a launch has room for: none, a mismatch
  return args.sizes();
}

runtime::GridDims gridFor(const compiler::KernelSpec &spec, const AttentionProblem &p) {
  const bool keyMajor = bob::isKeyMajor(spec.kind);
  const int64_t rows = keyMajor ? p.longestK() : p.longestQ();
  const int64_t block = keyMajor ? spec.tiles.blockN : spec.tiles.blockM;
  runtime::GridDims g;
  // validateProblem bounds both: rows < 2^31 (so x < 2^31 - 1, the grid's x limit) and
  // batch * heads <= 65535; the casts cannot truncate.
  g.x = static_cast<unsigned>((rows + block - 1) / block);
  // Key-major kinds: one block row per key/value head (it sums over its group's query heads).
  g.y = static_cast<unsigned>(p.batch * (keyMajor ? p.keyValueHeads() : p.heads));
  return g;
}

llvm::Error launch(bob::KernelKind kind, const AttentionProblem &p, const Bindings &bindings,
                   CUstream stream, const std::function<llvm::Error()> &beforeEach) {
  auto cache = KernelCache::get();
  if (!cache)
    return cache.takeError();
  auto run = [&](const CachedKernel &k) -> llvm::Error {
    if (beforeEach)
      if (llvm::Error e = beforeEach())
        return e;
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

// The kernels of `kinds` for `p` as launches pick them untuned, compiled or loaded at once.
static llvm::Error prepareDefault(const AttentionProblem &p,
                                  llvm::ArrayRef<bob::KernelKind> kinds) {
  auto cache = KernelCache::get();
  if (!cache)
    return cache.takeError();
  std::vector<compiler::KernelSpec> specs;
  for (bob::KernelKind kind : kinds) {
    auto spec = (*cache)->fitted(defaultSpec(p, kind, (*cache)->arch()));
    if (!spec)
      return spec.takeError();
    specs.push_back(std::move(*spec));
  }
  return (*cache)->prepare(specs);
}

llvm::Error precompile(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds) {
  if (llvm::Error e = validateProblem(p))
    return e;
  if (llvm::Error e = validateKinds(p, kinds))
    return e;
  return prepareDefault(p, kinds);
}

llvm::Error prepareKernels(const AttentionProblem &p, llvm::ArrayRef<bob::KernelKind> kinds) {
  if (kinds.size() < 2 || autotuneEnabled())
    return llvm::Error::success(); // one kernel: the launch compiles it as soon
  return prepareDefault(p, kinds);
}

} // namespace flashbob::jit

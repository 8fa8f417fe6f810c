#include "jit/FusedBackward.h"

#include "compiler/dialect/Target.h"
#include "jit/HeadDims.h"
#include "jit/KernelCache.h"
#include "jit/Launch.h"
#include "kernels/Signature.h"
#include "support/Knobs.h"

#include "llvm/Support/MathExtras.h"

namespace flashbob::jit {

using kernels::Operand;

llvm::ArrayRef<bob::KernelKind> fusedBackwardKinds() {
  static constexpr bob::KernelKind kinds[] = {bob::KernelKind::bwd_dot,
                                              bob::KernelKind::bwd_fused,
                                              bob::KernelKind::bwd_dq};
  return kinds;
}

bool fusedBackwardEnabled() {
  // Read once: this is on every backward's path.
  static const bool enabled = support::knobs::fusedBackward();
  return enabled;
}

bool runsFusedBackward(const AttentionProblem &p, bob::Arch arch) {
  return fusedBackwardEnabled() && arch == bob::Arch::sm_90a && p.headDim <= 128 &&
         !p.ringStep && headDimPadding(p) == HeadDimPadding::none;
}

namespace {
uint64_t sumBytes(const AttentionProblem &p) {
  return uint64_t(p.tensorBatch()) * uint64_t(p.heads) * uint64_t(p.seqQ) *
         uint64_t(p.headDim) * 4;
}
uint64_t counterBytes(const AttentionProblem &p) {
  const int64_t blocks = (p.longestQ() + kernels::kCounterRows - 1) / kernels::kCounterRows;
  return uint64_t(p.batch) * uint64_t(p.heads) * uint64_t(blocks) * 4;
}
} // namespace

uint64_t fusedBackwardWorkspaceBytes(const AttentionProblem &p) {
  // The counters start 16-byte aligned (the sums' rows are whole 16-byte pieces anyway).
  return llvm::alignTo(sumBytes(p), 16) + counterBytes(p);
}

llvm::Error launchFusedBackward(const AttentionProblem &p, Bindings bindings, CUstream stream) {
  auto cache = KernelCache::get();
  if (!cache)
    return cache.takeError();
  runtime::CudaDriver &driver = (*cache)->driver();
  const uint64_t bytes = fusedBackwardWorkspaceBytes(p);
  CUdeviceptr workspace = 0;
  FLASHBOB_CU(driver, cuMemAllocAsync(&workspace, bytes, stream));
  bindings.bind(Operand::dQaccum, p.contiguous(workspace, p.seqQ));
  bindings.bind(Operand::dQsemaphores, RowVector{workspace + llvm::alignTo(sumBytes(p), 16)});
  // Both are sums over the key blocks: zero before every launch of bwd_fused.
  auto zero = [&]() -> llvm::Error {
    FLASHBOB_CU(driver, cuMemsetD32Async(workspace, 0, bytes / 4, stream));
    return llvm::Error::success();
  };
  llvm::Error launched = llvm::Error::success();
  for (bob::KernelKind kind : fusedBackwardKinds()) {
    launched = launch(kind, p, bindings, stream,
                      kind == bob::KernelKind::bwd_fused ? zero : std::function<llvm::Error()>());
    if (launched)
      break;
  }
  // Freed on the stream after the kernels that use it, whether they were launched or not.
  llvm::Error freed =
      driver.check(driver.api().cuMemFreeAsync(workspace, stream), "cuMemFreeAsync");
  if (launched) {
    llvm::consumeError(std::move(freed));
    return launched;
  }
  return freed;
}

} // namespace flashbob::jit

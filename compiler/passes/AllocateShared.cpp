// bob-allocate-shared: give every shared tile of a kernel its place in dynamic shared memory.
//
// Tiles are laid out one after another in program order (all are live for the whole kernel in
// today's kernels; a liveness-based reuse can come later without changing any author's code).
// Sizes and alignments come from the tile's layout for the kernel's target (SharedLayout.h).
#include "compiler/passes/Passes.h"
#include "compiler/passes/SharedLayout.h"

#include "llvm/Support/MathExtras.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBALLOCATESHARED
#include "compiler/passes/Passes.h.inc"

namespace {
struct AllocateShared : impl::BobAllocateSharedBase<AllocateShared> {
  using Base::Base;

  void runOnOperation() override {
    KernelOp kernel = getOperation();
    mlir::Builder b(kernel.getContext());
    const bool hopper = hasHopperFeatures(kernel.getSpec());
    int64_t offset = 0;
    kernel.walk([&](AllocSharedOp alloc) {
      shared::Layout layout = shared::layoutFor(alloc.getType(), hopper);
      offset = llvm::alignTo(offset, layout.alignment());
      alloc.setOffsetAttr(b.getI64IntegerAttr(offset));
      offset += layout.bytes();
    });
    // Static shared memory (TMA mbarriers on sm_90a, the column groups' row exchange) comes
    // out of the same budget; on sm_90a the dynamic tiles start at a 1024-byte boundary after it.
    const int64_t exchange = shared::rowExchangeBytes(kernel, kernel.getSpec());
    const int64_t reserve = shared::staticReserve(hopper, exchange);
    const int64_t budget = maxBytes > 0 ? maxBytes.getValue()
                                        : targetInfo(kernel.getSpec().getArch()).sharedPerBlock;
    const int64_t limit = budget - reserve;
    if (offset > limit) {
      auto diag = kernel.emitError() << "shared tiles need " << offset
                                     << " bytes of shared memory, more than the " << limit
                                     << " a block may use";
      if (reserve != 0)
        diag << " (" << budget << " less " << reserve << " for "
             << (hopper ? "TMA mbarriers" : "") << (hopper && exchange ? " and " : "")
             << (exchange ? "the column groups' row exchange" : "") << ")";
      diag << "; use smaller block_m/block_n";
      return signalPassFailure();
    }
    kernel->setAttr(kSharedBytesAttrName, b.getI64IntegerAttr(offset));
  }
};
} // namespace
} // namespace flashbob::bob

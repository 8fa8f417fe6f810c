// bob-join-index-widths: the 32-bit index arithmetic meets the 64-bit lowering of memory and
// control flow (Passes.td says where and why each join is exact).
//
// Why two widths: ptxas keeps a 64-bit value in two registers, and the kernels' index values
// (rows, columns, block and loop counters, per-thread offsets) are hoisted out of the sweep's
// loop; in 32 bits they take half (docs/performance.md, "32-bit index arithmetic"). The global
// addresses stay 64-bit: the memref conversion computes batch * stride0 + head * stride1 +
// row * stride2 + col from the descriptor's 64-bit strides, so a (batch, head) slice may span
// more than 2^31 elements (any strides the API accepts).
#include "compiler/passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBJOININDEXWIDTHS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

struct JoinIndexWidths : impl::BobJoinIndexWidthsBase<JoinIndexWidths> {
  void runOnOperation() override {
    SmallVector<UnrealizedConversionCastOp> joins;
    getOperation().walk([&](UnrealizedConversionCastOp outer) {
      if (outer->getNumOperands() != 1 || outer->getNumResults() != 1 ||
          !outer.getOperand(0).getType().isIndex())
        return;
      auto inner = outer.getOperand(0).getDefiningOp<UnrealizedConversionCastOp>();
      if (!inner || inner->getNumOperands() != 1)
        return;
      auto from = dyn_cast<IntegerType>(inner.getOperand(0).getType());
      auto to = dyn_cast<IntegerType>(outer.getResult(0).getType());
      if (from && to)
        joins.push_back(outer);
    });
    for (UnrealizedConversionCastOp outer : joins) {
      auto inner = outer.getOperand(0).getDefiningOp<UnrealizedConversionCastOp>();
      Value source = inner.getOperand(0);
      auto from = cast<IntegerType>(source.getType());
      auto to = cast<IntegerType>(outer.getResult(0).getType());
      OpBuilder b(outer);
      Value joined = source;
      if (from.getWidth() < to.getWidth())
        joined = LLVM::ZExtOp::create(b, outer.getLoc(), to, source);
      else if (from.getWidth() > to.getWidth())
        joined = LLVM::TruncOp::create(b, outer.getLoc(), to, source);
      outer.getResult(0).replaceAllUsesWith(joined);
      outer.erase();
      if (inner->use_empty())
        inner.erase();
    }
  }
};
} // namespace
} // namespace flashbob::bob

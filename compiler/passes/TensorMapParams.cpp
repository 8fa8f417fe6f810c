// bob-tensor-map-params: every tensor map is a kernel parameter passed by value.
//
// A TMA copy reads its CUtensorMap from memory: global, constant, or the kernel's parameter
// space. Passed by value, the launcher only encodes the maps on the host and hands them to
// cuLaunchKernel with the other arguments: no device allocation, no copy, no stream
// synchronization, which is what lets a launch be captured into a CUDA graph the first time a
// shape is seen. The parameter must be `const __grid_constant__` (PTX ISA 7.7): its address is
// then a generic address the TMA unit can read, rather than that of a per-thread local copy.
//
// In MLIR that is three attributes on an !llvm.ptr argument of an nvvm.kernel llvm.func:
// llvm.byval (128 bytes), llvm.align (64: the TMA unit's requirement) and nvvm.grid_constant,
// which the NVVM translation turns into LLVM's "nvvm.grid_constant" parameter attribute. They
// are set here, after the GPU-to-NVVM conversion, because that conversion drops llvm.byval from
// gpu.func arguments and the NVVM verifier accepts nvvm.grid_constant only on nvvm.kernel
// functions.
#include "compiler/passes/Passes.h"
#include "support/TensorMapSpec.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBTENSORMAPPARAMS
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

struct TensorMapParams : impl::BobTensorMapParamsBase<TensorMapParams> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    auto mapBytes = LLVM::LLVMArrayType::get(b.getI8Type(), support::kTensorMapBytes);
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto maps = func->getAttrOfType<ArrayAttr>(kTensorMapsAttrName);
      if (!maps || maps.empty())
        return;
      // bob-use-tma appended one argument per map after all others, in the order of the list.
      const unsigned count = maps.size();
      if (count > func.getNumArguments()) {
        func.emitOpError("has ") << count << " tensor maps but " << func.getNumArguments()
                                 << " arguments";
        return signalPassFailure();
      }
      for (unsigned i = func.getNumArguments() - count; i < func.getNumArguments(); ++i) {
        if (!isa<LLVM::LLVMPointerType>(func.getArgument(i).getType())) {
          func.emitOpError("tensor-map argument ") << i << " is not an !llvm.ptr";
          return signalPassFailure();
        }
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(), TypeAttr::get(mapBytes));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(support::kTensorMapAlign));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
      }
    });
  }
};
} // namespace
} // namespace flashbob::bob

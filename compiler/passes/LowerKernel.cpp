// bob-lower-kernel: each bob.kernel becomes a gpu.func kernel in the module's gpu.module.
//
// Only the container changes: the body (tile ops, scf loops, memref arguments) moves as it is,
// so bob-lower-tiles runs inside ordinary GPU functions and upstream passes do the rest. The
// function gets the block size and, for a producer kernel, the blocks per SM and the register
// split of its warpgroups (WarpRoles.h).
#include "compiler/passes/Passes.h"
#include "compiler/passes/SharedLayout.h"
#include "compiler/passes/WarpRoles.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBLOWERKERNEL
#include "compiler/passes/Passes.h.inc"

namespace {
constexpr llvm::StringLiteral kGpuModuleName = "flashbob_kernels";

struct LowerKernel : impl::BobLowerKernelBase<LowerKernel> {
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::MLIRContext *ctx = module.getContext();
    auto kernels = llvm::to_vector(module.getOps<KernelOp>());
    if (kernels.empty())
      return;

    mlir::OpBuilder b(ctx);
    module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
    auto gpuModule = module.lookupSymbol<mlir::gpu::GPUModuleOp>(kGpuModuleName);
    if (!gpuModule) {
      b.setInsertionPointToEnd(module.getBody());
      gpuModule = mlir::gpu::GPUModuleOp::create(b, module.getLoc(), kGpuModuleName);
    }

    for (KernelOp kernel : kernels) {
      b.setInsertionPointToEnd(gpuModule.getBody());
      auto func = mlir::gpu::GPUFuncOp::create(b, kernel.getLoc(), kernel.getSymName(),
                                               kernel.getFunctionType());
      func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
      // Argument attributes (e.g. llvm.noalias) carry over to the GPU function.
      if (mlir::ArrayAttr argAttrs = kernel.getArgAttrsAttr())
        func.setAllArgAttrs(argAttrs);
      SpecAttr spec = kernel.getSpec();
      func->setAttr(kSpecAttrName, spec);
      func->setAttr(kSharedBytesAttrName, b.getI64IntegerAttr(kernel.getSharedBytes()));
      if (auto maps = kernel->getAttr(kTensorMapsAttrName))
        func->setAttr(kTensorMapsAttrName, maps);
      int32_t threads = static_cast<int32_t>(spec.getThreads());
      func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));
      // setmaxnreg needs the register count at entry, which ptxas derives from the block size
      // and the blocks per SM (.minnctapersm); otherwise it ignores setmaxnreg (C7508) and
      // compiles the consumers for 65536 / threads registers (WarpRoles.h).
      if (spec.getProducer()) {
        RegisterSplit split = registerSplit(spec, shared::blockSharedBytes(kernel));
        func->setAttr(mlir::NVVM::NVVMDialect::getMinctasmAttrName(),
                      b.getI32IntegerAttr(split.blocksPerSm));
        func->setAttr(kProducerRegistersAttrName, b.getI32IntegerAttr(split.producer));
        func->setAttr(kConsumerRegistersAttrName, b.getI32IntegerAttr(split.consumer));
      }

      // Move the body; the bob.return terminator becomes gpu.return.
      func.getBody().getBlocks().clear();
      func.getBody().takeBody(kernel.getBody());
      mlir::Block &entry = func.getBody().front();
      mlir::Operation *ret = entry.getTerminator();
      b.setInsertionPoint(ret);
      mlir::gpu::ReturnOp::create(b, ret->getLoc());
      ret->erase();
      kernel.erase();
    }
  }
};
} // namespace
} // namespace flashbob::bob

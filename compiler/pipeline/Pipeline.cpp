#include "compiler/pipeline/Pipeline.h"
#include "compiler/passes/Passes.h"
#include "compiler/pipeline/PtxEmitter.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::compiler {
using namespace mlir;

void buildSharedMemoryPlan(OpPassManager &pm, int64_t maxBytes) {
  OpPassManager &kernel = pm.nest<bob::KernelOp>();
  kernel.addPass(bob::createBobPipelineLoads());
  kernel.addPass(bob::createBobChunkSweeps());
  kernel.addPass(bob::createBobStageOperands());
  kernel.addPass(bob::createBobAllocateShared(bob::BobAllocateSharedOptions{maxBytes}));
}

void buildLaunchFactsPipeline(OpPassManager &pm) {
  buildSharedMemoryPlan(pm, bob::BobAllocateSharedOptions{}.maxBytes);
  pm.addNestedPass<bob::KernelOp>(bob::createBobUseTma());
}

void buildBobLoweringPipeline(OpPassManager &pm) {
  pm.addPass(bob::createBobLowerKernel());
  pm.addNestedPass<gpu::GPUModuleOp>(bob::createBobLowerTiles());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildBobPipeline(OpPassManager &pm) {
  buildLaunchFactsPipeline(pm);
  buildBobLoweringPipeline(pm);
}

bool narrowIndexFor(bob::SpecAttr spec, bool grouped) {
  // A grouped key-major sweep runs group * (query blocks) steps in one loop
  // (KernelBuilder::sweep), up to 65535 * 2^27: past 2^31, so its counter stays 64-bit.
  if (grouped && bob::isKeyMajor(spec.getKind()))
    return false;
  return spec.getKind() != bob::KernelKind::bob_q && spec.getHeadDim() <= 128;
}

void buildLoweringPipeline(OpPassManager &pm, const TargetOptions &target, bool narrowIndex) {
  GpuNVVMAttachTargetOptions attach;
  attach.chip = bob::stringifyArch(target.arch).str();
  attach.features = target.ptxFeatures();
  attach.optLevel = static_cast<int>(target.optLevel);
  pm.addPass(createGpuNVVMAttachTarget(attach));
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // The kernels' index arithmetic in 32 bits, their memory and control flow lowered at 64
  // (bob-join-index-widths joins the two; docs/performance.md, "32-bit index arithmetic", measured
  // the registers). Every index value an arith or index op computes fits in i32:
  // - rows and block starts: N, M <= jit::kMaxSequence = 2^31 - 256, so a block's end (start +
  //   at most 256 rows) too; columns < head_dim <= 256; batch and heads <= 65535 (grid y);
  //   thread, warp and block ids < 2^31 (the grid's x limit);
  // - shared-memory offsets: < 228 KB;
  // - loop counters: blocks of one sequence, < 2^31 / 16 (a grouped key-major sweep, which
  //   counts group * blocks steps, keeps 64 bits: narrowIndexFor);
  // - the loop bounds from N, M and the window (kernels/common/AttentionTiles.cpp computes the
  //   sums of N, M and window sizes, which can pass 2^31, in i64 explicitly);
  // - add, sub and mul wrap modulo 2^32 like any n-bit arithmetic, so an intermediate that
  //   passes 2^31 still gives the exact result when the result fits.
  // What does not fit stays 64-bit by construction: global addresses (batch * stride0 + head *
  // stride1 + row * stride2 + col, from the memref descriptor's i64 strides, in the GPU-to-NVVM
  // conversion at 64 bits), so a (batch, head) slice may span any number of elements.
  // Kernels that do not take it (narrowIndexFor) keep 64-bit index arithmetic; the join then
  // finds nothing to do.
  ArithToLLVMConversionPassOptions arith;
  ConvertIndexToLLVMPassOptions index;
  if (narrowIndex)
    arith.indexBitwidth = index.indexBitwidth = 32;
  pm.addPass(createArithToLLVMConversionPass(arith));
  pm.addPass(createConvertIndexToLLVMPass(index));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addNestedPass<gpu::GPUModuleOp>(bob::createBobJoinIndexWidths());
  pm.addNestedPass<gpu::GPUModuleOp>(bob::createBobTensorMapParams());
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());
}

namespace {
std::string print(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

// Runs `pm`, turning the diagnostics it emits into the error's text.
llvm::Error run(PassManager &pm, ModuleOp module, llvm::StringRef stage) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    // Errors only, one line each: notes such as "see current operation" would print the whole
    // kernel. The kernel's IR is available through `flashbob compile --emit bob`.
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return success();
    llvm::raw_string_ostream os(diagnostics);
    if (!isa<UnknownLoc>(d.getLocation()))
      os << d.getLocation() << ": ";
    os << d << "\n";
    return success();
  });
  if (succeeded(pm.run(module)))
    return llvm::Error::success();
  llvm::StringRef text = llvm::StringRef(diagnostics).rtrim();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), stage + " failed: " + text);
}
} // namespace

namespace {
llvm::Error compileError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// The launch facts an operation carries as attributes: bob.kernel after bob-use-tma, and the
// gpu.func (later llvm.func) bob-lower-kernel makes of it.
LaunchFacts factsOf(Operation *op, std::string entry, int64_t threads) {
  LaunchFacts facts;
  facts.entry = std::move(entry);
  facts.threads = threads;
  if (auto bytes = op->getAttrOfType<IntegerAttr>(bob::kSharedBytesAttrName))
    facts.sharedBytes = bytes.getInt();
  if (auto maps = op->getAttrOfType<ArrayAttr>(bob::kTensorMapsAttrName))
    for (auto map : maps.getAsRange<bob::TensorMapAttr>()) {
      auto u = [](int64_t v) { return static_cast<unsigned>(v); };
      facts.tensorMaps.push_back({u(map.getTensor()), u(map.getRowsOf()), u(map.getBoxRows()),
                                  u(map.getBoxCols()), u(map.getSwizzle()),
                                  u(map.getElementBytes())});
    }
  return facts;
}

llvm::Expected<bob::KernelOp> theKernel(ModuleOp module) {
  auto kernels = llvm::to_vector(module.getOps<bob::KernelOp>());
  if (kernels.size() != 1)
    return compileError("compile: expected one bob.kernel in the module, found " +
                        llvm::Twine(kernels.size()));
  return kernels.front();
}
} // namespace

llvm::Expected<LaunchFacts> decideLaunchFacts(ModuleOp module, std::string *bobIR) {
  if (bobIR)
    *bobIR = print(module);
  if (llvm::Expected<bob::KernelOp> kernel = theKernel(module); !kernel)
    return kernel.takeError();
  PassManager passes(module.getContext());
  buildLaunchFactsPipeline(passes);
  if (llvm::Error e = run(passes, module, "bob passes"))
    return std::move(e);
  llvm::Expected<bob::KernelOp> kernel = theKernel(module);
  if (!kernel)
    return kernel.takeError();
  return factsOf(*kernel, kernel->getSymName().str(), kernel->getSpec().getThreads());
}

llvm::Expected<KernelArtifacts> lowerToPtx(ModuleOp module, const TargetOptions &target,
                                           KernelArtifacts front) {
  KernelArtifacts out = std::move(front);
  PassManager bobPasses(module.getContext());
  buildBobLoweringPipeline(bobPasses);
  if (llvm::Error e = run(bobPasses, module, "bob passes"))
    return std::move(e);
  out.loweredIR = print(module);

  bool narrowIndex = false;
  module.walk([&](gpu::GPUFuncOp func) {
    // Whether the kernel is grouped is not a field of #bob.spec; its name says it
    // (KernelSpec::name: "_gqa").
    if (auto spec = func->getAttrOfType<bob::SpecAttr>(bob::kSpecAttrName))
      narrowIndex = narrowIndexFor(spec, func.getName().contains("_gqa"));
  });
  PassManager lowering(module.getContext());
  buildLoweringPipeline(lowering, target, narrowIndex);
  if (llvm::Error e = run(lowering, module, "lowering to LLVM"))
    return std::move(e);

  gpu::GPUModuleOp gpuModule;
  module.walk([&](gpu::GPUModuleOp m) { gpuModule = m; });
  if (!gpuModule)
    return compileError("compile: no gpu.module");
  Operation *func = gpuModule.lookupSymbol(out.entry);
  if (!func)
    return compileError("compile: no kernel " + out.entry + " in the gpu.module");
  // A disk-cache hit trusts the facts decideLaunchFacts gives (jit/CachedMetadata.h): a pass
  // that changed them later would make every hit disagree with its own compile.
  if (!(factsOf(func, out.entry, out.threads) == static_cast<const LaunchFacts &>(out)))
    return compileError("compile: " + out.entry +
                        "'s shared memory or tensor maps changed after bob-use-tma; the launch "
                        "facts must be final when decideLaunchFacts returns");

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule;
  std::string diagnostics;
  {
    // Its diagnostics into the error too: MLIR's default handler prints to llvm::errs().
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        diagnostics += "\n" + d.str();
      return success();
    });
    llvmModule = translateModuleToLLVMIR(gpuModule, llvmContext, "flashbob");
  }
  if (!llvmModule)
    return compileError("translation to LLVM IR failed (translateModuleToLLVMIR)" +
                        diagnostics);
  auto ptx = emitPtx(*llvmModule, target, &out.llvmIR);
  if (!ptx)
    return ptx.takeError();
  out.ptx = std::move(*ptx);
  return out;
}

llvm::Expected<KernelArtifacts> compileToPtx(ModuleOp module, const TargetOptions &target) {
  KernelArtifacts front;
  llvm::Expected<LaunchFacts> facts = decideLaunchFacts(module, &front.bobIR);
  if (!facts)
    return facts.takeError();
  static_cast<LaunchFacts &>(front) = std::move(*facts);
  return lowerToPtx(module, target, std::move(front));
}

} // namespace flashbob::compiler

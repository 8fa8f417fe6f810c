// bob-lower-tiles: every tile op of every kernel becomes gpu/nvgpu/nvvm/vector/arith/memref ops.
// The patterns live in lower_tiles/ (memory, math, tensor cores); this file is the driver.
#include "compiler/passes/Passes.h"
#include "compiler/passes/lower_tiles/TileLowering.h"

#include "mlir/Dialect/SCF/Transforms/Patterns.h"

namespace flashbob::bob {
#define GEN_PASS_DEF_BOBLOWERTILES
#include "compiler/passes/Passes.h.inc"

namespace {
using namespace mlir;

// A workgroup-memory global `name` of `count` elements at the start of `module`, unless one
// exists: the static shared memory bob-lower-tiles' patterns refer to by name.
void declareSharedGlobal(gpu::GPUModuleOp module, StringRef name, int64_t count, Type element,
                         StringRef visibility, int64_t alignment) {
  if (module.lookupSymbol(name))
    return;
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(module.getBody());
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto type = MemRefType::get({count}, element, MemRefLayoutAttrInterface(), space);
  memref::GlobalOp::create(b, module.getLoc(), name, b.getStringAttr(visibility), type,
                           /*initial_value=*/Attribute(), /*constant=*/false,
                           b.getI64IntegerAttr(alignment));
}

struct LowerTiles : impl::BobLowerTilesBase<LowerTiles> {
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    // The one shared-memory symbol all shared tiles are views of; swizzled tiles need their
    // 1024-byte alignment from its start.
    bool usesShared = false, hopper = false;
    module.walk([&](AllocSharedOp) { usesShared = true; });
    for (auto func : module.getOps<gpu::GPUFuncOp>())
      hopper |= hasHopperFeatures(func->getAttrOfType<SpecAttr>(kSpecAttrName));
    if (usesShared)
      declareSharedGlobal(module, lowering::kSharedMemorySymbol, /*count=*/0,
                          IntegerType::get(ctx, 8), "public",
                          hopper ? shared::kSwizzleAlignment : 16);

    // Column groups exchange partial row reductions through one static f32 buffer, sized for
    // the largest need of the module's kernels (SharedLayout.h).
    int64_t exchangeBytes = 0;
    for (auto func : module.getOps<gpu::GPUFuncOp>()) {
      auto spec = func->getAttrOfType<SpecAttr>(kSpecAttrName);
      exchangeBytes = std::max(exchangeBytes, shared::rowExchangeBytes(func, spec));
    }
    // On sm_90a the static variables fill the static reserve: the TMA barrier group takes
    // what the exchange leaves (SharedLayout.h, barrierGroupSlots); without TMA the exchange
    // takes it all.
    bool tma = false;
    module.walk([&](LoadSharedOp load) { tma |= static_cast<bool>(load.getTensorMap()); });
    if (exchangeBytes > 0)
      declareSharedGlobal(module, lowering::kRowExchangeSymbol,
                          (hopper && !tma ? shared::staticReserve(true, exchangeBytes)
                                          : exchangeBytes) / 4,
                          Float32Type::get(ctx), "private", 16);

    // Each kernel is converted with its own warp layout (it decides every per-thread layout).
    for (auto func : module.getOps<gpu::GPUFuncOp>()) {
      auto spec = func->getAttrOfType<SpecAttr>(kSpecAttrName);
      if (!spec)
        continue;
      lowering::TileTypeConverter converter(ctx, spec.getWarps(), spec.getWarpCols(),
                                            hasHopperFeatures(spec));
      lowering::TmaBarriers tma;
      if (failed(lowering::prepareTmaBarriers(func, tma)))
        return signalPassFailure();
      ConversionTarget target(*ctx);
      target.addIllegalDialect<BobDialect>();
      // Selects between shared tiles (double buffers) are rewritten on converted memrefs.
      target.addDynamicallyLegalOp<arith::SelectOp>(
          [&](arith::SelectOp op) { return converter.isLegal(op.getType()); });
      target.addLegalDialect<arith::ArithDialect, vector::VectorDialect, memref::MemRefDialect,
                             nvgpu::NVGPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect,
                             gpu::GPUDialect>();
      // TMA loads cast their tensor-map pointer to an nvgpu descriptor (TmaPatterns.cpp).
      target.addLegalOp<UnrealizedConversionCastOp>();
      lowering::StoreRuns runs = lowering::findStoreRuns(func);
      RewritePatternSet patterns(ctx);
      lowering::populateMemoryPatterns(converter, tma, runs, patterns);
      lowering::populateTmaPatterns(converter, tma, patterns);
      lowering::populateMathPatterns(converter, patterns);
      lowering::populateWarpSpecializationPatterns(converter, patterns);
      lowering::populateMmaPatterns(converter, patterns);
      lowering::populateLocalPatterns(converter, patterns);
      lowering::populateBulkPatterns(converter, patterns);
      lowering::placeProductWaits(func);
      lowering::populateWgmmaPatterns(converter, patterns);
      lowering::populateWgmmaRegisterAPatterns(converter, patterns);
      scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
      if (failed(applyPartialConversion(func, target, std::move(patterns))))
        return signalPassFailure();
      if (spec.getProducer())
        lowering::useConsumerBarriers(func);
    }
  }
};
} // namespace
} // namespace flashbob::bob

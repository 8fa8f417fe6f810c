#include "kernels/Kernels.h"
#include "compiler/passes/SharedLayout.h"
#include "kernels/TileTable.h"
#include "kernels/common/KernelBuilder.h"
#include "compiler/passes/Passes.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/pipeline/Ptxas.h"

#include "mlir/Pass/PassManager.h"

#include <limits>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

namespace flashbob::kernels {

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildKernel(mlir::MLIRContext &ctx,
                                                             const compiler::KernelSpec &spec) {
  if (llvm::Error e = compiler::validate(spec, &ctx))
    return std::move(e);
  if (llvm::Error e = checkRegisterFootprint(spec))
    return std::move(e);
  KernelBuilder kb(&ctx, spec);
  switch (spec.kind) {
  case bob::KernelKind::fwd:
    buildForward(kb);
    break;
  case bob::KernelKind::bwd_q:
    buildBackwardQuery(kb);
    break;
  case bob::KernelKind::bwd_kv:
    buildBackwardKeyValue(kb);
    break;
  case bob::KernelKind::bob_q:
    buildBobQuery(kb);
    break;
  case bob::KernelKind::bob_kv:
    buildBobKeyValue(kb);
    break;
  default:
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel kind '" + bob::stringifyKernelKind(spec.kind) +
                                       "' is not implemented yet");
  }
  std::string diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "; ";
      return mlir::success();
    });
    if (mlir::succeeded(mlir::verify(*kb.module)))
      return std::move(kb.module);
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the " + bob::stringifyKernelKind(spec.kind) +
                                     " builder produced invalid IR: " + diagnostics);
}

llvm::Expected<compiler::KernelArtifacts> compileKernel(const compiler::KernelSpec &spec,
                                                      bool assemble) {
  mlir::DialectRegistry registry;
  compiler::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  auto module = buildKernel(ctx, spec);
  if (!module)
    return module.takeError();
  compiler::TargetOptions target;
  target.arch = spec.arch;
  auto artifacts = compiler::compileToPtx(**module, target);
  if (!artifacts || !assemble)
    return artifacts;
  auto cubin = compiler::assembleWithPtxas(artifacts->ptx, spec.arch);
  if (!cubin)
    return cubin.takeError();
  artifacts->cubin = std::move(cubin->binary);
  artifacts->ptxasLog = std::move(cubin->log);
  artifacts->registers = cubin->registers;
  artifacts->spillBytes = cubin->spillStoreBytes + cubin->spillLoadBytes;
  artifacts->stackBytes = cubin->stackBytes;
  return artifacts;
}

llvm::Expected<int64_t> sharedBytesFor(const compiler::KernelSpec &spec) {
  mlir::DialectRegistry registry;
  compiler::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = buildKernel(ctx, spec);
  if (!module)
    return module.takeError();
  mlir::PassManager pm(&ctx);
  // No limit here: the caller compares with its device's.
  compiler::buildSharedMemoryPlan(pm, std::numeric_limits<int64_t>::max());
  if (mlir::failed(pm.run(**module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "bob-allocate-shared failed for " + spec.name());
  int64_t bytes = 0;
  (*module)->walk([&](bob::KernelOp k) {
    // Plus what bob-lower-tiles adds in static shared memory (TMA mbarriers, row exchange).
    bytes = k.getSharedBytes() +
            bob::shared::staticReserve(bob::shared::isHopper(k.getSpec()),
                                       bob::shared::rowExchangeBytes(k, k.getSpec()));
  });
  return bytes;
}

llvm::Expected<TileConfig> fitSharedMemory(const compiler::KernelSpec &spec,
                                           int64_t maxSharedBytes) {
  TileConfig t{spec.blockM, spec.blockN, spec.warps, spec.stages, spec.warpCols, spec.producer};
  const bool keyMajor = bob::isKeyMajor(spec.kind);
  int64_t &own = keyMajor ? t.blockN : t.blockM, &swept = keyMajor ? t.blockM : t.blockN;
  mlir::DialectRegistry registry;
  compiler::registerDialects(registry);
  mlir::MLIRContext ctx(registry);
  // Whether `t` is a kernel the compiler builds and whose shared memory fits.
  auto fits = [&]() -> llvm::Expected<bool> {
    compiler::KernelSpec s = spec;
    applyTiles(s, t);
    if (llvm::Error e = compiler::validate(s, &ctx)) {
      llvm::consumeError(std::move(e));
      return false;
    }
    if (llvm::Error e = checkRegisterFootprint(s)) {
      llvm::consumeError(std::move(e));
      return false;
    }
    auto bytes = sharedBytesFor(s);
    if (!bytes)
      return bytes.takeError();
    return *bytes <= maxSharedBytes;
  };
  // The steps, smallest change first; each keeps the ones before it. Own rows split over the
  // warps in whole 16-row fragments, so past 16 rows a warp the warps halve with them.
  auto step = [&]() {
    const int64_t fragmentRows = 16 * (t.warps / t.warpCols);
    if (t.stages > 1)
      t.stages = 1, t.producer = false; // a producer needs the second stage
    else if (swept > 16)
      swept /= 2;
    else if (own / 2 >= fragmentRows && own / 2 % fragmentRows == 0)
      own /= 2;
    else if (t.warpCols == 1 && t.warps > 1 && own / 2 >= 16)
      own /= 2, t.warps /= 2;
    else
      return false;
    return true;
  };
  do {
    auto ok = fits();
    if (!ok)
      return ok.takeError();
    if (*ok)
      return t;
  } while (step());
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::Twine("no tiles of ") + spec.name() + " fit the GPU's " +
          llvm::Twine(maxSharedBytes) + " bytes of shared memory per block (smallest tried: " +
          tileName(t) + ")");
}

Grid gridFor(const compiler::KernelSpec &spec, int64_t batch, int64_t heads, int64_t seqQ,
             int64_t seqK) {
  bool keyMajor = bob::isKeyMajor(spec.kind);
  int64_t rows = keyMajor ? seqK : seqQ;
  int64_t block = keyMajor ? spec.blockN : spec.blockM;
  Grid g;
  g.x = static_cast<unsigned>((rows + block - 1) / block);
  g.y = static_cast<unsigned>(batch * heads);
  return g;
}

} // namespace flashbob::kernels

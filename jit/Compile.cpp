#include "jit/Compile.h"

#include "compiler/passes/SharedLayout.h"
#include "compiler/pipeline/Assembler.h"
#include "compiler/pipeline/Registration.h"
#include "kernels/Kernels.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <limits>

namespace flashbob::jit {

llvm::Expected<FrontStage> compileFront(const compiler::KernelSpec &spec) {
  FrontStage front;
  front.context = compiler::makeContext();
  auto module = kernels::buildKernel(*front.context, spec);
  if (!module)
    return module.takeError();
  front.module = std::move(*module);
  auto facts = compiler::decideLaunchFacts(*front.module, &front.artifacts.bobIR);
  if (!facts)
    return facts.takeError();
  static_cast<compiler::LaunchFacts &>(front.artifacts) = std::move(*facts);
  return front;
}

llvm::Expected<compiler::KernelArtifacts> compileBack(FrontStage front,
                                                      const compiler::KernelSpec &spec,
                                                      bool assemble) {
  // What the lowering may create without its passes declaring it.
  front.context->loadAllAvailableDialects();
  compiler::TargetOptions target;
  target.arch = spec.arch;
  auto artifacts = compiler::lowerToPtx(*front.module, target, std::move(front.artifacts));
  if (!artifacts || !assemble)
    return artifacts;
  auto cubin = compiler::assemble(artifacts->ptx, spec.arch);
  if (!cubin)
    return cubin.takeError();
  artifacts->cubin = std::move(cubin->binary);
  artifacts->ptxasLog = std::move(cubin->log);
  artifacts->registers = cubin->registers;
  artifacts->spillBytes = cubin->spillStoreBytes + cubin->spillLoadBytes;
  return artifacts;
}

llvm::Expected<compiler::KernelArtifacts> compileKernel(const compiler::KernelSpec &spec,
                                                        bool assemble) {
  auto front = compileFront(spec);
  if (!front)
    return front.takeError();
  return compileBack(std::move(*front), spec, assemble);
}

namespace {
// The passes that place shared memory, run on the kernel of `spec` with the per-block budget
// `maxBytes` (0: its target's): the bytes it needs, or the passes' errors. Their diagnostics go
// into the error, not to MLIR's default handler (stderr, from inside a library).
llvm::Expected<int64_t> planSharedMemory(const compiler::KernelSpec &spec, int64_t maxBytes) {
  auto ctx = compiler::makeContext();
  auto module = kernels::buildKernel(*ctx, spec);
  if (!module)
    return module.takeError();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(ctx.get(), [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return mlir::success();
  });
  mlir::PassManager pm(ctx.get());
  compiler::buildSharedMemoryPlan(pm, maxBytes);
  if (mlir::failed(pm.run(**module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   diagnostics.empty() ? "bob-allocate-shared failed for " + spec.name()
                                                       : diagnostics);
  int64_t bytes = 0;
  (*module)->walk([&](bob::KernelOp k) { bytes = bob::shared::blockSharedBytes(k); });
  return bytes;
}
} // namespace

llvm::Expected<int64_t> sharedBytesFor(const compiler::KernelSpec &spec) {
  // No limit here: the caller compares with its device's.
  return planSharedMemory(spec, std::numeric_limits<int64_t>::max());
}

llvm::Error checkSharedMemory(const compiler::KernelSpec &spec) {
  auto bytes = planSharedMemory(spec, /*maxBytes=*/0);
  return bytes ? llvm::Error::success() : bytes.takeError();
}

llvm::Expected<bool> runnable(const compiler::KernelSpec &spec, int64_t maxSharedBytes) {
  mlir::MLIRContext ctx; // the verifier needs only the attribute storage
  if (llvm::Error e = compiler::validate(spec, &ctx)) {
    llvm::consumeError(std::move(e));
    return false;
  }
  if (llvm::Error e = kernels::checkRegisterFootprint(spec)) {
    llvm::consumeError(std::move(e));
    return false;
  }
  auto bytes = sharedBytesFor(spec);
  if (!bytes)
    return bytes.takeError();
  return *bytes <= maxSharedBytes;
}

llvm::Expected<compiler::TileConfig> fitSharedMemory(const compiler::KernelSpec &spec,
                                                     int64_t maxSharedBytes) {
  compiler::KernelSpec s = spec;
  compiler::TileConfig &t = s.tiles;
  const bool keyMajor = bob::isKeyMajor(spec.kind);
  int64_t &own = keyMajor ? t.blockN : t.blockM, &swept = keyMajor ? t.blockM : t.blockN;
  // The steps, smallest change first; each keeps the ones before it. Own rows split over the
  // warps in whole 16-row fragments, so past 16 rows a warp the warps halve with them; swept
  // rows split over column groups in whole 16-column fragments. Column groups go last (each
  // warp then holds whole rows: more registers, which runnable() may refuse).
  auto step = [&]() {
    const int64_t fragmentRows = 16 * (t.warps / t.warpCols);
    if (t.stages > 1)
      t.stages = 1, t.producer = false; // a producer needs the second stage
    else if (swept / 2 >= 16 * t.warpCols)
      swept /= 2;
    else if (own / 2 >= fragmentRows && own / 2 % fragmentRows == 0)
      own /= 2;
    else if (t.warps / 2 >= t.warpCols && own / 2 >= 16 * (t.warps / 2 / t.warpCols))
      own /= 2, t.warps /= 2;
    else if (t.warpCols > 1)
      t.warps /= t.warpCols, t.warpCols = 1;
    else
      return false;
    return true;
  };
  do {
    auto ok = runnable(s, maxSharedBytes);
    if (!ok)
      return ok.takeError();
    if (*ok)
      return t;
  } while (step());
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::Twine("no tiles of ") + spec.name() + " fit the GPU's " +
          llvm::Twine(maxSharedBytes) + " bytes of shared memory per block (smallest tried: " +
          t.name() + ")");
}

} // namespace flashbob::jit

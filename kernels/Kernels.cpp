#include "kernels/Kernels.h"

#include "kernels/TileTable.h"
#include "kernels/common/KernelBuilder.h"

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
  case bob::KernelKind::fwd_jvp:
    buildForwardJvp(kb);
    break;
  case bob::KernelKind::fwd_dual:
    buildForwardDual(kb);
    break;
  case bob::KernelKind::bwd_dot:
    buildBackwardDot(kb);
    break;
  case bob::KernelKind::bwd_fused:
    buildBackwardFused(kb);
    break;
  case bob::KernelKind::bwd_dq:
    buildBackwardDQ(kb);
    break;
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

} // namespace flashbob::kernels

// The kernel families: spec -> bob IR. Each kernel's arguments are its signature
// (kernels/Signature.h); compiling, caching and launching are jit/'s.
#pragma once

#include "compiler/KernelSpec.h"
#include "kernels/Signature.h"
#include "kernels/TileTable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/Error.h"

namespace flashbob::kernels {

class KernelBuilder;

// Sweeps over at least this many rows run long-sweep kernels (KernelSpec::longSweep): without
// flushes their accumulators' truncation drift reaches bf16's level from here on (at 2^17 rows
// it adds 3e-5 to BoB's 2.4e-3; at 2^18, 1.2e-4; at 2^20, 1.1e-3: docs/numerics.md).
inline constexpr int64_t kLongSweepRows = int64_t{1} << 17;

// Builds the module holding the one bob.kernel for `spec`; errors name an unsupported field.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildKernel(mlir::MLIRContext &ctx,
                                                             const compiler::KernelSpec &spec);

// Families (one file each).
void buildForward(KernelBuilder &kb);          // fwd/ForwardKernel.cpp
void buildBackwardQuery(KernelBuilder &kb);    // bwd/BackwardKernels.cpp
void buildBackwardKeyValue(KernelBuilder &kb);
void buildBobQuery(KernelBuilder &kb);         // bob/BobQueryKernel.cpp
void buildBobKeyValue(KernelBuilder &kb);      // bob/BobKeyKernel.cpp
void buildForwardJvp(KernelBuilder &kb);       // fwd/ForwardJvpKernel.cpp
void buildForwardDual(KernelBuilder &kb);      // fwd/ForwardDualKernel.cpp
void buildBackwardDot(KernelBuilder &kb);      // bwd/FusedBackwardKernels.cpp
void buildBackwardFused(KernelBuilder &kb);
void buildBackwardDQ(KernelBuilder &kb);

} // namespace flashbob::kernels

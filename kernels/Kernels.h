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

} // namespace flashbob::kernels

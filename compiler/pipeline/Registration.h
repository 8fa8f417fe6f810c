// Everything a context needs to hold and lower bob IR: dialects, the ConvertToLLVM interfaces
// used by convert-gpu-to-nvvm, the NVVM target and the LLVM-IR translations. Without these the
// upstream conversions silently leave ops behind (docs/toolchain.md).
#pragma once

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace flashbob::compiler {

void registerDialects(mlir::DialectRegistry &registry);
// A context with those registered: every place that builds or compiles kernels starts here.
std::unique_ptr<mlir::MLIRContext> makeContext();
// bob passes and the upstream passes our pipeline uses, for flashbob-opt.
void registerPasses();

} // namespace flashbob::compiler

// Everything a context needs to hold and lower bob IR: dialects, the ConvertToLLVM interfaces
// used by convert-gpu-to-nvvm, the NVVM target and the LLVM-IR translations. Without these the
// upstream conversions silently leave ops behind (docs/toolchain.md).
#pragma once

#include "mlir/IR/DialectRegistry.h"

namespace flashbob::compiler {

void registerDialects(mlir::DialectRegistry &registry);
// bob passes and the upstream passes our pipeline uses, for flashbob-opt.
void registerPasses();

} // namespace flashbob::compiler

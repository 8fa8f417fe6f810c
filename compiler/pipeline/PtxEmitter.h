// LLVM IR -> PTX with LLVM's NVPTX backend, in process (no PTX text is written by hand).
#pragma once

#include "compiler/pipeline/Pipeline.h"

#include "llvm/IR/Module.h"

namespace flashbob::compiler {

// Sets the NVPTX triple and data layout, optimizes at target.optLevel, prints the optimized IR
// into *optimizedIR (if given) and returns the PTX. Checks the PTX declares dynamic shared memory
// as `.extern` (a zero-size internal declaration would be a 1-byte array: docs/toolchain.md).
llvm::Expected<std::string> emitPtx(llvm::Module &module, const TargetOptions &target,
                                    std::string *optimizedIR = nullptr);

} // namespace flashbob::compiler

// How PTX becomes machine code, decided once per process: the toolkit's ptxas binary (the one
// FLASHBOB_PTXAS names, or one found that runs), else the CUDA driver's own JIT when the module
// is loaded (the PTX is the module image). In process through nvJitLink (the toolkit's library or
// the nvidia-nvjitlink wheel's) only when FLASHBOB_ASSEMBLER=nvjitlink asks: its 13.0 cubins of
// these kernels fail on the H200 (bench/results/2026-12-01-h200-assemblers.md). The choice and
// its version are part of every kernel's cache key (jit/KernelKey).
#pragma once

#include "compiler/dialect/BobDialect.h"
#include "compiler/pipeline/Ptxas.h"

#include "llvm/Support/Error.h"

#include <string>

namespace flashbob::compiler {

enum class AssemblerKind { nvJitLink, ptxas, driverJit };

struct AssemblerChoice {
  AssemblerKind kind;
  std::string identity; // e.g. "nvJitLink 13.0 (libnvJitLink.so.13)", "ptxas <version line>"
};

// The assembler of this process; an error only when FLASHBOB_ASSEMBLER names one that is not
// there (or is not a name), saying why.
llvm::Expected<AssemblerChoice> chosenAssembler();

// `ptx` for `arch` through the chosen assembler. With the driver's JIT the result's binary is
// the PTX itself, NUL-terminated (cuModuleLoadDataEx takes either), without a resource report
// (registers -1).
llvm::Expected<Cubin> assemble(const std::string &ptx, bob::Arch arch);

} // namespace flashbob::compiler

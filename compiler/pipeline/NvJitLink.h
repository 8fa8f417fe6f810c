// PTX -> cubin in process through nvJitLink (the CUDA toolkit's libnvJitLink.so, or the one of
// the nvidia-nvjitlink wheel PyTorch installs), loaded with dlopen like the driver: no toolkit
// binary and no subprocess at run time.
#pragma once

#include "compiler/pipeline/Ptxas.h"

#include "llvm/Support/Error.h"

#include <string>

namespace flashbob::compiler {

// The library is opened once per process: $FLASHBOB_NVJITLINK, else libnvJitLink.so.13 on the
// loader's path, else <CUDA root>/lib64 (CUDA_HOME, CUDA_PATH, the build's FLASHBOB_CUDA_ROOT).
// "nvJitLink <major>.<minor> (<path>)" for cache keys; an error saying what was tried when none
// loads.
llvm::Expected<std::string> nvJitLinkIdentity();

// Assembles `ptx` for `arch` (e.g. "sm_90a") at -O3 with the verbose report, which is ptxas's
// own (Cubin::log, registers and spills parsed from it). Errors name the failing nvJitLink call
// and carry its error log.
llvm::Expected<Cubin> assembleWithNvJitLink(const std::string &ptx, const std::string &arch);

} // namespace flashbob::compiler

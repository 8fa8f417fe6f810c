// PTX -> cubin with the CUDA toolkit's ptxas, run as a subprocess (-v for its resource report).
#pragma once

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace flashbob::compiler {

struct Cubin {
  std::string binary;
  std::string log;        // ptxas -v output
  int registers = -1;     // per thread
  int spillStoreBytes = 0, spillLoadBytes = 0, stackBytes = 0;
  int staticSharedBytes = 0;  // the "bytes smem" of the report (static shared variables; 0 when none)
};

// Where a CUDA toolkit may be, in order: $CUDA_HOME, $CUDA_PATH, the build's FLASHBOB_CUDA_ROOT
// (unset ones left out). ptxas and libnvJitLink are looked for under them.
std::vector<std::string> cudaToolkitRoots();

// Locates ptxas: $FLASHBOB_PTXAS, then <CUDA root>/bin/ptxas (FLASHBOB_CUDA_ROOT at build time,
// $CUDA_HOME, $CUDA_PATH), then $PATH.
llvm::Expected<std::string> findPtxas();

// On failure the error holds ptxas' messages and a command that reproduces it (the PTX is kept
// in a temporary file named in that command).
llvm::Expected<Cubin> assembleWithPtxas(const std::string &ptx, const std::string &arch);

// The last line of `ptxas --version` (e.g. "Cuda compilation tools, release 13.0, V13.0.88"),
// run once per process; part of cache keys. Empty when ptxas cannot be run.
std::string ptxasVersion();

// Fills registers/spills/stack/static shared memory from a `ptxas -v` report.
void parsePtxasReport(Cubin &cubin);

} // namespace flashbob::compiler

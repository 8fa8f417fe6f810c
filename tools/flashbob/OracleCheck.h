// The --check of `run`, `tune`, `bench` and the demo: a run's outputs against the float64
// oracle, on head (0, 0).
#pragma once

#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/ProblemBuffers.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {

// Compares the outputs in `buffers` (after the op ran on them) with the oracle on the inputs
// regenerated from `seed`; records every error in `report` (checked, passed, checks) and prints
// them to `os`. Problems too large for the dense oracle check their last `checkRows` query rows.
// Errors are failed copies from the device; a wrong output is a failed check, not an error.
llvm::Error checkAgainstOracle(runtime::CudaDriver &driver, const ProblemBuffers &buffers,
                               uint64_t seed, int64_t checkRows, RunReport &report,
                               llvm::raw_ostream &os);

} // namespace flashbob::tool

// Refusing a flag given twice. llvm::cl lets a cl::opt occur any number of times and keeps the
// last value, so `flashbob run --seq-q 4096 ... --seq-q 64` would silently run the second; a
// flag that takes one value must be given once. (cl::list and cl::bits are meant to repeat.)
#pragma once

#include "llvm/Support/Error.h"

namespace flashbob::tool {

// After cl::ParseCommandLineOptions: an error naming the first (by name) single-value flag of
// the chosen command that occurred more than once, counting its aliases (--seq is --seq-q).
llvm::Error checkRepeatedOptions();

} // namespace flashbob::tool

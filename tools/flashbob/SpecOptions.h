// Command-line flags that describe a kernel spec (`compile`). The flags that name a property of
// the problem too (--head-dim, --dtype, --causal) are spelled as in ProblemOptions. The softmax
// scale is not one: the kernel takes the default scale's values as constants, or with
// --scale-argument reads any scale from its arguments, given at launch (run, bench, tune --scale).
#pragma once

#include "compiler/KernelSpec.h"
#include "tools/flashbob/IntegerOption.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace flashbob::tool {

struct SpecOptions {
  explicit SpecOptions(llvm::cl::SubCommand &sub);

  llvm::cl::opt<std::string> kernel;
  IntegerOpt<int64_t> headDim, tensorDim, blockM, blockN, warps, warpCols, stages;
  llvm::cl::opt<bool> producer;
  llvm::cl::opt<std::string> dtype;
  llvm::cl::opt<bool> causal;
  llvm::cl::opt<bool> scaleArgument;
  llvm::cl::opt<bool> grouped, varlen, longSweep, partial, registerA;
  IntegerOpt<int64_t> windowLeft, windowRight;
  llvm::cl::opt<std::string> arch;

  // The spec, or an error naming the flag that is wrong, or what about the tiles the flags
  // give does not fit the target (registers, shared memory): all usage errors.
  llvm::Expected<compiler::KernelSpec> spec() const;
};

} // namespace flashbob::tool

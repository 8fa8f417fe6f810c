// The flags of `run`, `tune` and `bench` that say what to compute (op, shape, dtype, mask,
// scale), how to time it and whether to check it. Declared once so that the three commands
// spell every flag alike and refuse bad values alike; each command file makes one instance on
// its subcommands, with that command's defaults.
#pragma once

#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/IntegerOption.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <initializer_list>

namespace flashbob::tool {

// What a command runs when a flag is not given (`bench` times longer problems more often).
struct ProblemDefaults {
  int64_t seq;
  int iters;
  int warmup;
};

class ProblemOptions {
public:
  ProblemOptions(std::initializer_list<llvm::cl::SubCommand *> subcommands,
                 const ProblemDefaults &defaults);

  // The run these flags describe, or an error naming the flag ("--seq-q: must be positive, got
  // -5"). Checks everything that needs no GPU, so a command calls it before it looks for the
  // driver: bad flags get their own message (and kExitUsage) on a machine without one.
  llvm::Expected<RunOptions> runOptions() const;

private:
  // --seqlens-q/k: the packed batch, its offsets and bounds, into `o`.
  llvm::Error packBatch(RunOptions &o) const;

  llvm::cl::SubCommandGroup subcommands_; // first: the options below register on it
  llvm::cl::opt<Op> op_;
  IntegerOpt<int64_t> batch_, heads_, headsKv_, seqQ_;
  llvm::cl::alias seq_;
  IntegerOpt<int64_t> seqK_, headDim_, headDimV_;
  IntegerList<int64_t> seqlensQ_, seqlensK_;
  llvm::cl::opt<std::string> dtype_;
  llvm::cl::opt<bool> causal_;
  IntegerOpt<int64_t> windowLeft_, windowRight_; // declared in the constructor's order
  llvm::cl::opt<double> scale_;
  IntegerOpt<int> iters_, warmup_;
  llvm::cl::opt<double> timeBudget_;
  llvm::cl::opt<bool> check_;
  IntegerOpt<int64_t> checkRows_;
  llvm::cl::opt<ProgressStyle> progress_;
};

} // namespace flashbob::tool

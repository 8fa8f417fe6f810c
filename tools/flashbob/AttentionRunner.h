// Runs forward / backward / BoB through the C++ API on generated inputs, times the requested
// op, measures device memory, and checks against the float64 oracle. Shared by `flashbob run`
// and `flashbob demo`.
#pragma once

#include "api/Attention.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace flashbob::tool {

enum class Op { fwd, bwd, bob };

struct RunOptions {
  Op op = Op::bob;
  AttentionProblem problem;
  bool check = false;
  int repeat = 5;         // timed runs (median reported)
  uint64_t seed = 1;
  int64_t checkRows = 64; // query rows checked when the problem is too large for a dense check
  bool launchOverhead = false; // also time the host side of many warm calls
};

struct RunReport {
  double medianMs = 0;
  double tflops = 0;          // canonical flop count (bob-math.md) over the median time
  double tensorBytes = 0;     // inputs + outputs (N x d and M x d tensors)
  double workspaceBytes = 0;  // L, D, c, b: O(N)
  double deviceUsedBytes = 0; // device memory in use at the end, over the baseline (peak: the
                              // kernels allocate nothing themselves)
  bool checked = false, passed = true;
};

// Prints a human-readable report to `os` as it goes; errors name the failing call.
llvm::Expected<RunReport> runAttention(const RunOptions &options, llvm::raw_ostream &os);

} // namespace flashbob::tool

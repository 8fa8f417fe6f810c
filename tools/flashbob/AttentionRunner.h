// Runs forward / backward / BoB / forward + JVP through the C++ API on generated inputs, times the requested
// op, measures device memory, and checks against the float64 oracle. Shared by `flashbob run`,
// `tune`, `bench` and `demo`; its steps are ProblemBuffers (allocate), timeOp (time) and
// OracleCheck (check).
#pragma once

#include "api/Attention.h"
#include "tools/flashbob/ProgressDisplay.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

namespace flashbob::tool {

// fwd_dual: the forward and its JVP in one kernel (O, L and tO along tangents uQ, uK, uV).
enum class Op { fwd, bwd, bob, fwd_dual };

const char *opName(Op op);
// Canonical flops per head and unmasked (query, key) pair (docs/bob-math.md, "Work"): 2 per
// multiply-add of each block product, counted as `scores` per unit of d (the products whose
// inner or output width is q's and k's: S, G and the outputs shaped like q and k) plus
// `values` per unit of d_v (those over v's width: P V, dP = dO V^T, W = dO uV^T and the
// outputs shaped like v):
//   forward   2 d +  2 d_v   S; P V                                      (4 d at d_v = d)
//   backward  6 d +  4 d_v   S, dQ, dK; dP, dV                           (10 d)
//   BoB      22 d + 14 d_v   pass 1 S, G (two), X1 (two), X3; dP, W, X4 (two)
//                            pass 2 S, G (two), gK (two); dP, W, gV      (36 d)
//   fwd_dual  6 d +  6 d_v   S, G (two); P V, P tV, (P o G) V            (12 d)
struct FlopCount {
  double scores, values;
  double perPair(int64_t d, int64_t dv) const { return scores * d + values * dv; }
  // In units of d where d_v = d.
  double oneWidth() const { return scores + values; }
};
FlopCount flopsPerPair(Op op);

struct RunOptions {
  Op op = Op::bob;
  AttentionProblem problem;
  // A packed batch (problem.varlen): each sequence's first row, batch + 1 per side, on the host
  // (ProblemBuffers puts them on the device and points the problem at them). Empty otherwise.
  std::vector<int32_t> cuSeqlensQ, cuSeqlensK;
  bool check = false;
  int iters = 5;          // timed runs (median reported)
  uint64_t seed = 1;
  int64_t checkRows = 64; // query rows checked when the problem is too large for a dense check
  bool launchOverhead = false; // also time the host side of many warm calls
  int warmup = 0;         // untimed runs after the first call (which compiles or loads)
  // When positive: stop timing once this much wall time has gone into the timed runs, after at
  // least min(2, iters) of them (`iters` stays the upper bound).
  double timeBudgetMs = 0;
  // Called before each timed run, outside the timed interval (`flashbob bench` flushes the L2).
  std::function<llvm::Error()> beforeTimedRun;
  // How compiling, autotuning and the timed runs show their progress on stderr.
  ProgressStyle progress = ProgressStyle::automatic;
};

struct CheckedOutput {
  std::string name;
  double relL2 = 0; // +inf when the output holds a NaN or an infinity
  bool passed = true;
};

struct RunReport {
  double medianMs = 0;
  std::vector<float> timesMs; // every timed run, in order
  double firstMs = 0;         // first call: JIT compile or disk-cache load, then one run
  double flops = 0;           // canonical count for the whole problem (all heads)
  double tflops = 0;          // canonical flop count (docs/bob-math.md) over the median time
  double tensorBytes = 0;     // inputs + outputs (N x d and M x d tensors)
  double workspaceBytes = 0;  // L, D, c, b: O(N)
  double deviceUsedBytes = 0; // device memory in use at the end, over the baseline (peak: the
                              // kernels allocate nothing themselves; FLASHBOB_FUSED_BACKWARD's
                              // workspace lives only during each backward call)
  bool checked = false, passed = true;
  double checkBound = 0;               // relative L2 bound of the check
  int64_t checkedRows = 0;             // query rows of head (0, 0) compared
  std::vector<CheckedOutput> checks;   // one entry per compared output
};

// Prints a human-readable report to `os` as it goes; errors name the failing call.
llvm::Expected<RunReport> runAttention(const RunOptions &options, llvm::raw_ostream &os);

} // namespace flashbob::tool

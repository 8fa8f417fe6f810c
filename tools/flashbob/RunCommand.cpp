// `flashbob run`: forward, backward, BoB or forward + JVP on generated inputs on the GPU; prints the time, the
// device memory, and with --check the error of every output against the float64 oracle.
//   flashbob run --op bob --batch 1 --heads 16 --seq-q 16384 --head-dim 128 --causal --check
#include "jit/Tuning.h"
#include "support/Knobs.h"
#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"
#include "tools/flashbob/OptionCategories.h"
#include "tools/flashbob/ProblemOptions.h"

#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::SubCommand runCommand("run", "Run attention (fwd, bwd, bob, fwd_dual) on the GPU, time and "
                                 "check it");
cl::SubCommand tuneCommand("tune", "Autotune the kernels of an op for a problem and persist the "
                                   "winners (then run it like `run`)");

namespace {
ProblemOptions problemOptions({&runCommand, &tuneCommand}, {/*seq=*/1024, /*iters=*/5,
                                                            /*warmup=*/0});
cl::opt<bool> tune("tune", cl::desc("Autotune the tiles first (winners persist in the cache "
                                    "directory; FLASHBOB_AUTOTUNE=1 does the same)"),
                   cl::sub(runCommand), cl::cat(runCategory));
cl::opt<bool> launchOverhead("launch-overhead",
                              cl::desc("Also measure the host cost of one warm call"),
                              cl::sub(runCommand), cl::cat(runCategory));
} // namespace

int runRun() {
  auto options = problemOptions.runOptions();
  if (!options)
    return reportError("run", llvm::toString(options.takeError()), kExitUsage);
  options->launchOverhead = launchOverhead;
  if (tune || tuneCommand) {
    jit::setAutotune(true);
    // `tune` shows every candidate unless FLASHBOB_PRINT_AUTOTUNING says otherwise.
    if (tuneCommand && !support::rawValue(support::Knob::PrintAutotuning))
      support::setOverride(support::Knob::PrintAutotuning, "1");
  }
  auto report = runAttention(*options, llvm::outs());
  if (!report) {
    return reportError("run", report.takeError());
  }
  return report->passed ? kExitOk : kExitFailure;
}

} // namespace flashbob::tool

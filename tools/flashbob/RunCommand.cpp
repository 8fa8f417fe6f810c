// `flashbob run`: forward, backward or BoB on generated inputs on the GPU; prints the time, the
// device memory, and with --check the error of every output against the float64 oracle.
//   flashbob run --op bob --batch 1 --heads 16 --seq-q 16384 --head-dim 128 --causal --check
#include "api/Tuning.h"
#include "support/Knobs.h"
#include "tools/flashbob/AttentionRunner.h"
#include "tools/flashbob/Commands.h"
#include "tools/flashbob/ExitCodes.h"

#include "llvm/Support/raw_ostream.h"

namespace flashbob::tool {
namespace cl = llvm::cl;

cl::SubCommand runCommand("run", "Run attention (fwd, bwd, bob) on the GPU, time and check it");
cl::SubCommand tuneCommand("tune", "Autotune the kernels of an op for a problem and persist the "
                                   "winners (then run it like `run`)");

namespace {
cl::opt<Op> op("op", cl::desc("Operation"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(Op::bob),
               cl::values(clEnumValN(Op::fwd, "fwd", "forward: O, L"),
                          clEnumValN(Op::bwd, "bwd", "backward: dQ, dK, dV"),
                          clEnumValN(Op::bob, "bob", "backward-over-backward: gQ, gK, gV, gdO")));
cl::opt<int64_t> batch("batch", cl::desc("Batch size"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(1));
cl::opt<int64_t> heads("heads", cl::desc("Heads"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(1));
cl::opt<int64_t> seqQ("seq-q", cl::desc("Queries N"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(1024));
cl::opt<int64_t> seqK("seq-k", cl::desc("Keys M (default N)"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(0));
cl::opt<int64_t> headDim("head-dim", cl::desc("Head dimension"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init(64));
cl::opt<std::string> dtype("dtype", cl::desc("bf16 or fp16"), cl::sub(runCommand), cl::sub(tuneCommand), cl::init("bf16"));
cl::opt<bool> causal("causal", cl::desc("Causal mask (bottom-right aligned)"), cl::sub(runCommand), cl::sub(tuneCommand));
cl::opt<bool> check("check", cl::desc("Compare with the float64 oracle"), cl::sub(runCommand), cl::sub(tuneCommand));
cl::opt<int> repeat("repeat", cl::desc("Timed runs (median reported)"), cl::sub(runCommand), cl::sub(tuneCommand),
                    cl::init(5));
cl::opt<bool> tune("tune", cl::desc("Autotune the tiles first (winners persist in the cache "
                                    "directory; FLASHBOB_AUTOTUNE=1 does the same)"),
                   cl::sub(runCommand));
cl::opt<bool> launchOverhead("launch-overhead",
                              cl::desc("Also measure the host cost of one warm call"),
                              cl::sub(runCommand));
cl::opt<int64_t> checkRows("check-rows",
                           cl::desc("Query rows checked when the problem is too large for a "
                                    "dense check (the last rows of head 0)"),
                           cl::sub(runCommand), cl::sub(tuneCommand), cl::init(64));
} // namespace

int runRun() {
  if (tune || tuneCommand) {
    api::setAutotune(true);
    // `tune` shows every candidate unless FLASHBOB_PRINT_AUTOTUNING says otherwise.
    if (tuneCommand && !support::rawValue(support::Knob::PrintAutotuning))
      support::setOverride(support::Knob::PrintAutotuning, "1");
  }
  RunOptions o;
  o.op = op;
  o.problem.batch = batch;
  o.problem.heads = heads;
  o.problem.seqQ = seqQ;
  o.problem.seqK = seqK ? seqK : seqQ;
  o.problem.headDim = headDim;
  if (dtype != "bf16" && dtype != "fp16") {
    llvm::errs() << "flashbob run: --dtype: unknown type '" << dtype << "' (bf16, fp16)\n";
    return kExitUsage;
  }
  o.problem.dtype = dtype == "bf16" ? DType::bf16 : DType::fp16;
  o.problem.causal = causal;
  o.check = check;
  o.repeat = repeat;
  o.checkRows = checkRows;
  o.launchOverhead = launchOverhead;
  auto report = runAttention(o, llvm::outs());
  if (!report) {
    support::ErrorReport failure = support::takeErrorReport(report.takeError());
    llvm::errs() << "flashbob run: " << failure.message << "\n";
    return exitCodeFor(failure.kind);
  }
  return report->passed ? kExitOk : kExitFailure;
}

} // namespace flashbob::tool

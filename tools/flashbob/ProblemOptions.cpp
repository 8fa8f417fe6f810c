#include "tools/flashbob/ProblemOptions.h"
#include "tools/flashbob/OptionCategories.h"

#include "jit/Launch.h"
#include "support/Errors.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace flashbob::tool {
namespace cl = llvm::cl;

ProblemOptions::ProblemOptions(std::initializer_list<cl::SubCommand *> subcommands,
                               const ProblemDefaults &defaults)
    : subcommands_(subcommands),
      op_("op", cl::desc("Operation"), cl::sub(subcommands_), cl::cat(problemCategory),
          cl::init(Op::bob),
          cl::values(clEnumValN(Op::fwd, "fwd", "forward: O, L"),
                     clEnumValN(Op::bwd, "bwd", "backward: dQ, dK, dV"),
                     clEnumValN(Op::bob, "bob", "backward-over-backward: gQ, gK, gV, gdO"))),
      batch_("batch", cl::desc("Batch size"), cl::sub(subcommands_), cl::cat(problemCategory),
             cl::init(1)),
      heads_("heads", cl::desc("Heads"), cl::sub(subcommands_), cl::cat(problemCategory),
             cl::init(1)),
      headsKv_("heads-kv",
               cl::desc("Key/value heads: a divisor of --heads, grouped-query attention "
                        "(1: multi-query; default --heads)"),
               cl::sub(subcommands_), cl::cat(problemCategory), cl::init(0)),
      seqQ_("seq-q", cl::desc("Queries N"), cl::sub(subcommands_), cl::cat(problemCategory),
            cl::init(defaults.seq)),
      // The keys default to the queries, so one length for both is just --seq-q. (Aliases are
      // hidden from --help unless told otherwise.)
      seq_("seq", cl::desc("Alias for --seq-q (N = M unless --seq-k is given)"),
           cl::aliasopt(seqQ_), cl::NotHidden),
      seqK_("seq-k", cl::desc("Keys M (default N)"), cl::sub(subcommands_),
            cl::cat(problemCategory), cl::init(0)),
      headDim_("head-dim", cl::desc("Head dimension d"), cl::sub(subcommands_),
               cl::cat(problemCategory), cl::init(64)),
      dtype_("dtype", cl::desc("Input type: bf16 or fp16"), cl::sub(subcommands_),
             cl::cat(problemCategory), cl::init("bf16")),
      causal_("causal", cl::desc("Causal mask (bottom-right aligned)"), cl::sub(subcommands_),
              cl::cat(problemCategory)),
      windowLeft_("window-left",
                  cl::desc("Sliding window: keys a query sees before its diagonal (-1: all)"),
                  cl::sub(subcommands_), cl::cat(problemCategory), cl::init(-1)),
      windowRight_("window-right",
                   cl::desc("Sliding window: keys a query sees after its diagonal (-1: all; "
                            "--causal makes it 0)"),
                   cl::sub(subcommands_), cl::cat(problemCategory), cl::init(-1)),
      scale_("scale", cl::desc("Softmax scale (default 1/sqrt(head-dim))"),
             cl::sub(subcommands_), cl::cat(problemCategory), cl::init(0.0)),
      iters_("iters", cl::desc("Timed runs (median reported)"), cl::sub(subcommands_),
             cl::cat(measureCategory), cl::init(defaults.iters)),
      warmup_("warmup", cl::desc("Untimed warm runs after the first call"),
              cl::sub(subcommands_), cl::cat(measureCategory), cl::init(defaults.warmup)),
      timeBudget_("time-budget",
                  cl::desc("Seconds: stop timing once the timed runs took this long, after at "
                           "least 2 (0: always --iters)"),
                  cl::sub(subcommands_), cl::cat(measureCategory), cl::init(0.0)),
      check_("check", cl::desc("Compare with the float64 oracle"), cl::sub(subcommands_),
             cl::cat(measureCategory)),
      checkRows_("check-rows",
                 cl::desc("Query rows checked when the problem is too large for a dense check "
                          "(the last rows of head 0)"),
                 cl::sub(subcommands_), cl::cat(measureCategory), cl::init(64)),
      progress_("progress", cl::desc("How compiling, autotuning and the timed runs show progress "
                                     "on stderr"),
                cl::sub(subcommands_), cl::cat(measureCategory),
                cl::init(ProgressStyle::automatic),
                cl::values(clEnumValN(ProgressStyle::automatic, "auto",
                                      "a bar on a terminal, else nothing"),
                           clEnumValN(ProgressStyle::bar, "bar", "a bar redrawn in place"),
                           clEnumValN(ProgressStyle::lines, "lines", "one line per step"),
                           clEnumValN(ProgressStyle::none, "none", "nothing"))) {}

namespace {
llvm::Error bad(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// A number as the user would have typed it (-5, 0.25), for error messages.
std::string plain(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

// jit::validateProblem's error ("flashbob: seq_q (N) = ... exceeds ...") as the flag's
// ("--seq-q: seq_q (N) = ... exceeds ..."), still an InvalidArgumentError.
llvm::Error asFlagError(llvm::Error e) {
  return llvm::handleErrors(std::move(e), [](const support::InvalidArgumentError &a) {
    const llvm::StringRef argument = a.argument();
    // The API's argument names with dashes: seq_q is --seq-q, window_left --window-left.
    std::string flag = "--" + argument.str();
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (argument == "batch")
      flag = "--batch, --heads";
    const std::string whole = a.message();
    llvm::StringRef message(whole);
    message.consume_front("flashbob: ");
    return support::makeInvalidArgument(flag, flag + ": " + message);
  });
}

llvm::Error positive(llvm::StringRef flag, int64_t v) {
  if (v <= 0)
    return bad(llvm::formatv("--{0}: must be positive, got {1}", flag, v));
  return llvm::Error::success();
}
} // namespace

llvm::Expected<RunOptions> ProblemOptions::runOptions() const {
  // (--seq is an alias: its values are --seq-q's, and so are the messages about them.)
  for (auto [flag, value] : {std::pair<llvm::StringRef, int64_t>{"batch", batch_},
                             {"heads", heads_},
                             {"seq-q", seqQ_}})
    if (llvm::Error e = positive(flag, value))
      return std::move(e);
  if (headsKv_ < 0)
    return bad(llvm::formatv("--heads-kv: must be positive (or 0 for --heads), got {0}",
                             int64_t(headsKv_)));
  if (seqK_ < 0)
    return bad(llvm::formatv("--seq-k: must be positive (or 0 for N), got {0}", int64_t(seqK_)));
  if (headDim_ < 16 || headDim_ > 256 || headDim_ % 16 != 0)
    return bad(llvm::formatv("--head-dim: {0} is unsupported (a multiple of 16 in [16, 256])",
                             int64_t(headDim_)));
  if (dtype_ != "bf16" && dtype_ != "fp16")
    return bad("--dtype: unknown type '" + dtype_ + "' (bf16, fp16)");
  if (scale_.getNumOccurrences() && !(scale_ > 0 && std::isfinite(scale_)))
    return bad("--scale: must be a positive finite number, got " + plain(scale_));

  RunOptions o;
  o.op = op_;
  AttentionProblem &p = o.problem;
  p.batch = batch_;
  p.heads = heads_;
  p.headsKv = headsKv_;
  p.seqQ = seqQ_;
  p.seqK = seqK_ ? int64_t(seqK_) : p.seqQ;
  p.headDim = headDim_;
  p.dtype = dtype_ == "bf16" ? DType::bf16 : DType::fp16;
  p.causal = causal_;
  p.windowLeft = windowLeft_;
  p.windowRight = windowRight_;
  if (scale_.getNumOccurrences())
    p.scale = scale_.getValue();
  // Every byte count of the run (the largest tensor is batch x heads x max(N, M) x d of 2-byte
  // elements) must fit in 64 bits: beyond that the sizes would wrap before any allocation.
  int64_t bytes = 2;
  for (int64_t factor : {p.batch, p.heads, std::max(p.seqQ, p.seqK), p.headDim})
    if (__builtin_mul_overflow(bytes, factor, &bytes))
      return bad(llvm::formatv("--batch {0} --heads {1} --seq-q {2} --seq-k {3} --head-dim {4}: "
                               "too large (a tensor's byte count overflows 64 bits)",
                               p.batch, p.heads, p.seqQ, p.seqK, p.headDim));

  // The API's own checks (the sizes the kernels can index, a scale float32 can hold, the grid's
  // limits), here so that they come before the driver is looked for, worded for the flags.
  if (llvm::Error e = jit::validateProblem(p))
    return asFlagError(std::move(e));

  if (iters_ < 1)
    return bad(llvm::formatv("--iters: must be at least 1, got {0}", int(iters_)));
  if (warmup_ < 0)
    return bad(llvm::formatv("--warmup: must be 0 or more, got {0}", int(warmup_)));
  if (!(timeBudget_ >= 0) || !std::isfinite(timeBudget_))
    return bad("--time-budget: must be 0 or a positive number of seconds, got " +
               plain(timeBudget_));
  if (llvm::Error e = positive("check-rows", checkRows_))
    return std::move(e);
  o.iters = iters_;
  o.warmup = warmup_;
  o.timeBudgetMs = timeBudget_ * 1e3;
  o.check = check_;
  o.checkRows = checkRows_;
  o.progress = progress_;
  return o;
}

} // namespace flashbob::tool

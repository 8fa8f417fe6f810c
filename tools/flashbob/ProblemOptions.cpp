#include "tools/flashbob/ProblemOptions.h"
#include "tools/flashbob/OptionCategories.h"

#include "compiler/dialect/Target.h"
#include "jit/Launch.h"
#include "jit/Validate.h"
#include "support/Errors.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

namespace flashbob::tool {
namespace cl = llvm::cl;

ProblemOptions::ProblemOptions(std::initializer_list<cl::SubCommand *> subcommands,
                               const ProblemDefaults &defaults)
    : subcommands_(subcommands),
      op_("op", cl::desc("Operation"), cl::sub(subcommands_), cl::cat(problemCategory),
          cl::init(Op::bob),
          cl::values(clEnumValN(Op::fwd, "fwd", "forward: O, L"),
                     clEnumValN(Op::bwd, "bwd", "backward: dQ, dK, dV"),
                     clEnumValN(Op::bob, "bob", "backward-over-backward: gQ, gK, gV, gdO"),
                     clEnumValN(Op::fwd_dual, "fwd_dual",
                                "forward and its JVP in one kernel: O, L, tO"))),
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
      headDimV_("head-dim-v",
                cl::desc("Head dimension d_v of v, o and dO, as in multi-head latent attention "
                         "(default --head-dim)"),
                cl::sub(subcommands_), cl::cat(problemCategory), cl::init(0)),
      seqlensQ_("seqlens-q",
                cl::desc("Variable-length batch: each sequence's query rows, packed one after "
                         "another (flash-attn's varlen; instead of --batch and --seq-q)"),
                cl::CommaSeparated, cl::sub(subcommands_), cl::cat(problemCategory)),
      seqlensK_("seqlens-k",
                cl::desc("Each sequence's key rows (default --seqlens-q), as many as it has"),
                cl::CommaSeparated, cl::sub(subcommands_), cl::cat(problemCategory)),
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

llvm::Error ProblemOptions::packBatch(RunOptions &o) const {
  if (batch_.getNumOccurrences() || seqQ_.getNumOccurrences() || seqK_.getNumOccurrences())
    return bad("--seqlens-q: gives the batch and its lengths; leave out --batch, --seq-q and "
               "--seq-k");
  std::vector<int64_t> lengthsK(seqlensK_.begin(), seqlensK_.end());
  if (lengthsK.empty())
    lengthsK.assign(seqlensQ_.begin(), seqlensQ_.end());
  if (lengthsK.size() != seqlensQ_.size())
    return bad(llvm::formatv("--seqlens-k: {0} sequences, but --seqlens-q has {1}",
                             lengthsK.size(), seqlensQ_.size()));
  AttentionProblem &p = o.problem;
  o.cuSeqlensQ = {0};
  o.cuSeqlensK = {0};
  for (auto [flag, lengths, offsets, longest] :
       {std::tuple{"seqlens-q", std::vector<int64_t>(seqlensQ_.begin(), seqlensQ_.end()),
                   &o.cuSeqlensQ, &p.maxSeqQ},
        std::tuple{"seqlens-k", lengthsK, &o.cuSeqlensK, &p.maxSeqK}}) {
    *longest = 0;
    for (int64_t length : lengths) {
      // Each sum below 2^31 (validateProblem's bound on the packed rows): the offsets are int32.
      if (length < 0 || offsets->back() + length > jit::kMaxSequence)
        return bad(llvm::formatv("--{0}: a length must be 0 or more and the sum at most {1}, "
                                 "got {2}",
                                 flag, jit::kMaxSequence, length));
      offsets->push_back(static_cast<int32_t>(offsets->back() + length));
      *longest = std::max(*longest, length);
    }
  }
  p.varlen = true;
  p.batch = static_cast<int64_t>(seqlensQ_.size());
  p.seqQ = o.cuSeqlensQ.back();
  p.seqK = o.cuSeqlensK.back();
  if (check_)
    return bad("--check: not for a packed batch (the GPU tests check packed sequences against "
               "the float64 oracle); run one sequence with --seq-q to check it");
  return llvm::Error::success();
}

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
  if (!bob::isSupportedHeadDim(headDim_))
    return bad(llvm::formatv("--head-dim: {0} is unsupported ({1} to {2}){3}", int64_t(headDim_),
                             bob::kMinHeadDim, bob::kMaxHeadDim, bob::wideHeadDimNote(headDim_)));
  if (headDimV_.getNumOccurrences() && !bob::isSupportedHeadDim(headDimV_))
    return bad(llvm::formatv("--head-dim-v: {0} is unsupported ({1} to {2}){3}",
                             int64_t(headDimV_), bob::kMinHeadDim, bob::kMaxHeadDim,
                             bob::wideHeadDimNote(headDimV_)));
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
  p.headDimV = headDimV_; // 0 unless given: --head-dim's
  p.dtype = dtype_ == "bf16" ? DType::bf16 : DType::fp16;
  p.causal = causal_;
  p.windowLeft = windowLeft_;
  p.windowRight = windowRight_;
  if (scale_.getNumOccurrences())
    p.scale = scale_.getValue();
  if (!seqlensQ_.empty()) {
    if (llvm::Error e = packBatch(o))
      return std::move(e);
  } else if (!seqlensK_.empty()) {
    return bad("--seqlens-k: needs --seqlens-q (the sequences' query rows)");
  }
  // Every byte count of the run (the largest tensor is batch x heads x max(N, M) x max(d, d_v)
  // of 2-byte elements) must fit in 64 bits: beyond that the sizes would wrap before any
  // allocation.
  int64_t bytes = 2;
  for (int64_t factor : {p.tensorBatch(), p.heads, std::max(p.seqQ, p.seqK),
                         std::max(p.headDim, p.valueDim())})
    if (__builtin_mul_overflow(bytes, factor, &bytes))
      return bad(llvm::formatv("--batch {0} --heads {1} --seq-q {2} --seq-k {3} --head-dim {4}{5}: "
                               "too large (a tensor's byte count overflows 64 bits)",
                               p.batch, p.heads, p.seqQ, p.seqK, p.headDim,
                               p.headDimV ? " --head-dim-v " + std::to_string(p.headDimV)
                                          : std::string()));

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

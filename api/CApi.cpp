// The C API (flashbob.h) over the C++ API: converts plain structs, maps errors to status codes
// by their class (support/Errors.h), keeps the last message per thread, and routes the log sink
// to an embedder's callback.
#include "api/flashbob.h"

#include "api/Attention.h"
#include "api/CApiStatus.h"
#include "compiler/dialect/Target.h"
#include "jit/Launch.h"
#include "jit/Tuning.h"
#include "jit/Validate.h"
#include "runtime/cache/DiskCache.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/STLExtras.h"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace flashbob::api {
flashbob_status statusFor(support::ErrorKind kind) {
  switch (kind) {
  case support::ErrorKind::InvalidArgument:
    return FLASHBOB_ERROR_INVALID_ARGUMENT;
  case support::ErrorKind::NoDriver:
    return FLASHBOB_ERROR_NO_DRIVER;
  case support::ErrorKind::CudaCall:
    return FLASHBOB_ERROR_CUDA;
  case support::ErrorKind::UnsupportedDevice:
    return FLASHBOB_ERROR_UNSUPPORTED_DEVICE;
  case support::ErrorKind::Compile:
  case support::ErrorKind::Other: // the compiler's own errors have no class of their own
    return FLASHBOB_ERROR_COMPILE;
  }
  return FLASHBOB_ERROR_COMPILE;
}
} // namespace flashbob::api

namespace {
thread_local std::string lastError;

flashbob_status fail(llvm::Error e) {
  flashbob::support::ErrorReport report = flashbob::support::takeErrorReport(std::move(e));
  lastError = std::move(report.message);
  return flashbob::api::statusFor(report.kind);
}

flashbob_status finish(llvm::Error e) {
  if (e)
    return fail(std::move(e));
  lastError.clear();
  return FLASHBOB_OK;
}

llvm::Error badArgument(llvm::StringRef argument, const llvm::Twine &what) {
  return flashbob::support::makeInvalidArgument(argument, "flashbob: " + argument + " " + what);
}

flashbob::Tensor tensor(const flashbob_tensor &t) {
  flashbob::Tensor out;
  out.data = reinterpret_cast<CUdeviceptr>(t.data);
  for (int i = 0; i < 4; ++i)
    out.stride[i] = t.stride[i];
  return out;
}

// The row vector `floats` floats into `p`, computed on the address as an integer: a caller's
// pointer is only an address here, and pointer arithmetic past its object would be undefined
// (callers check that the sum stays within the address space).
flashbob::RowVector rows(const float *p, uint64_t floats = 0) {
  return {p ? reinterpret_cast<CUdeviceptr>(p) + floats * sizeof(float) : CUdeviceptr(0)};
}

// A C enum a caller filled with any int. C++ may assume an enum object holds only values of its
// enumerators' range, so its bytes are read as the int C stored (a value outside 0..1 in a
// two-valued enum would be undefined behaviour, which UBSan found in fuzz_capi).
template <typename Enum> int enumValue(const Enum &e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on the platforms we build for");
  int value;
  std::memcpy(&value, &e, sizeof value);
  return value;
}

// The sizes of the flashbob_problem layouts this library reads (flashbob.h: each earlier layout
// is this one cut before a field appended since), oldest first.
constexpr uint32_t kProblemSizes[] = {
    offsetof(flashbob_problem, ring_step),  // before ring_step
    offsetof(flashbob_problem, head_dim_v), // before head_dim_v
    sizeof(flashbob_problem),
};
static_assert(offsetof(flashbob_problem, size) == 0, "size comes first in every layout");

// The caller's problem as this library's layout: its `size` bytes, the fields past them at their
// zero defaults. Only those bytes are read: an older caller's struct ends there.
llvm::Expected<flashbob_problem> callersProblem(const flashbob_problem *p) {
  if (!p)
    return badArgument("problem", "is a null pointer");
  uint32_t size;
  std::memcpy(&size, p, sizeof size);
  if (!llvm::is_contained(kProblemSizes, size)) {
    std::string known;
    for (size_t i = 0; i < std::size(kProblemSizes); ++i)
      known += (i == 0 ? "" : i + 1 == std::size(kProblemSizes) ? " or " : ", ") +
               std::to_string(kProblemSizes[i]);
    return flashbob::support::makeInvalidArgument(
        "p->size", "flashbob: p->size = " + llvm::Twine(size) +
                       " is not the size of a flashbob_problem layout this library knows (" +
                       known + " bytes): set it to sizeof(flashbob_problem) "
                       "(FLASHBOB_PROBLEM_INIT, flashbob_problem_init())" +
                       (size > sizeof(flashbob_problem) ? ", or use a newer libflashbob" : ""));
  }
  flashbob_problem copy{};
  std::memcpy(&copy, p, size);
  return copy;
}

llvm::Expected<flashbob::AttentionProblem> problem(const flashbob_problem *caller) {
  auto read = callersProblem(caller);
  if (!read)
    return read.takeError();
  const flashbob_problem *p = &*read;
  const int dtype = enumValue(p->dtype);
  if (dtype != FLASHBOB_BF16 && dtype != FLASHBOB_FP16)
    return badArgument("dtype", "must be FLASHBOB_BF16 or FLASHBOB_FP16");
  // NaN compares false both ways: without its own test it fell through to "0 means default".
  if (std::isnan(p->scale) || p->scale < 0)
    return badArgument("scale", "must be positive (or 0 for 1/sqrt(head_dim)), got " +
                                    llvm::Twine(std::isnan(p->scale) ? "nan" : "a negative number"));
  flashbob::AttentionProblem out;
  out.batch = p->batch;
  out.heads = p->heads;
  out.headsKv = p->heads_kv;
  if (p->sliding_window) {
    out.windowLeft = p->window_left;
    out.windowRight = p->window_right;
  }
  out.seqQ = p->seq_q;
  out.seqK = p->seq_k;
  out.headDim = p->head_dim;
  out.headDimV = p->head_dim_v;
  out.dtype = dtype == FLASHBOB_BF16 ? flashbob::DType::bf16 : flashbob::DType::fp16;
  out.causal = p->causal != 0;
  if (p->scale > 0)
    out.scale = p->scale;
  if (p->varlen) {
    out.varlen = true;
    out.cuSeqlensQ = reinterpret_cast<CUdeviceptr>(p->cu_seqlens_q);
    out.cuSeqlensK = reinterpret_cast<CUdeviceptr>(p->cu_seqlens_k);
    out.maxSeqQ = p->max_seqlen_q;
    out.maxSeqK = p->max_seqlen_k;
  }
  out.ringStep = p->ring_step != 0;
  // Checked here too, not only in the launch: flashbob_bob sizes the workspace from batch *
  // heads * N before that, which must not overflow.
  if (llvm::Error e = flashbob::jit::validateProblem(out))
    return std::move(e);
  return out;
}

CUstream stream(void *s) { return static_cast<CUstream>(s); }

// Three consecutive row vectors of batch x heads x seq_q floats each (D, c and b, or beta) at
// `first`: not null, and ending within the address space (problem() bounded their size).
llvm::Expected<std::array<flashbob::RowVector, 3>>
threeRows(llvm::StringRef name, const float *first, const flashbob::AttentionProblem &p) {
  const uint64_t n = static_cast<uint64_t>(p.tensorBatch() * p.heads * p.seqQ);
  if (!first)
    return badArgument(name, "is a null pointer");
  if (reinterpret_cast<uintptr_t>(first) > UINTPTR_MAX - 3 * n * sizeof(float))
    return badArgument(name, "of 3 x batch x heads x seq_q floats runs past the end of the "
                             "address space");
  return std::array<flashbob::RowVector, 3>{rows(first), rows(first, n), rows(first, 2 * n)};
}

// BoB's inputs (pass 2 reads no O: {}).
flashbob::BobInputs bobInputs(flashbob_tensor q, flashbob_tensor k, flashbob_tensor v,
                              flashbob_tensor o, flashbob_tensor d_o, const float *lse,
                              flashbob_tensor u_q, flashbob_tensor u_k, flashbob_tensor u_v) {
  return {tensor(q),   tensor(k),   tensor(v),   tensor(o), tensor(d_o),
          rows(lse),   tensor(u_q), tensor(u_k), tensor(u_v)};
}

// Every entry point that takes a problem: converted and validated first (nothing runs on a bad
// one), then `call` on it, its llvm::Error becoming the status and the last error message.
template <typename Call> flashbob_status withProblem(const flashbob_problem *p, Call call) {
  auto prob = problem(p);
  if (!prob)
    return fail(prob.takeError());
  return finish(call(*prob));
}
} // namespace

extern "C" {

const char *flashbob_version(void) { return FLASHBOB_VERSION; }

const char *flashbob_last_error(void) { return lastError.c_str(); }

int64_t flashbob_limit(flashbob_limit_kind kind) {
  switch (enumValue(kind)) {
  case FLASHBOB_LIMIT_HEAD_DIM_MULTIPLE: return 1; // every d in [min, max]: isSupportedHeadDim
  case FLASHBOB_LIMIT_HEAD_DIM_MAX: return flashbob::bob::kMaxHeadDim;
  case FLASHBOB_LIMIT_HEAD_DIM_MIN: return flashbob::bob::kMinHeadDim;
  case FLASHBOB_LIMIT_SEQUENCE_MAX: return flashbob::jit::kMaxSequence;
  case FLASHBOB_LIMIT_BATCH_HEADS_MAX: return flashbob::jit::kMaxGridY;
  }
  return -1;
}

flashbob_status flashbob_check_problem(const flashbob_problem *p) {
  return withProblem(p, [](const flashbob::AttentionProblem &) { return llvm::Error::success(); });
}

const char *flashbob_cache_dir(void) {
  static thread_local std::string dir;
  dir = flashbob::runtime::DiskCache::defaultDirectory();
  return dir.c_str();
}

void flashbob_set_autotune(int on) { flashbob::jit::setAutotune(on != 0); }

flashbob_status flashbob_set_cache_dir(const char *dir) {
  // The knob's override, not setenv: the environment is read once and is not thread safe to
  // change. "" (NULL) means unset, so the default directory applies.
  flashbob::support::setOverride(flashbob::support::Knob::CacheDir, dir ? dir : "");
  lastError.clear();
  return FLASHBOB_OK;
}

void flashbob_set_log_callback(flashbob_log_callback callback, void *user_data) {
  if (!callback) {
    flashbob::support::setLogSink(nullptr);
    return;
  }
  flashbob::support::setLogSink(
      [callback, user_data](flashbob::support::LogLevel level, llvm::StringRef message) {
        // The sink's message is not NUL-terminated; the callback gets a C string.
        std::string text = message.str();
        callback(static_cast<flashbob_log_level>(level), text.c_str(), user_data);
      });
}

flashbob_status flashbob_precompile(const flashbob_problem *p, flashbob_op op) {
  return flashbob_precompile_ops(p, &op, 1);
}

flashbob_status flashbob_precompile_ops(const flashbob_problem *p, const flashbob_op *ops,
                                        int64_t count) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) -> llvm::Error {
    if (count < 1 || count > 64)
      return badArgument("count", "must be 1 to 64, got " + std::to_string(count));
    if (!ops)
      return badArgument("ops", "must not be NULL");
    std::vector<flashbob::AttentionOp> list;
    for (int64_t i = 0; i < count; ++i) {
      const int value = enumValue(ops[i]);
      if (value < FLASHBOB_OP_FORWARD || value > FLASHBOB_OP_FORWARD_DUAL)
        return badArgument(count == 1 ? std::string("op") : "ops[" + std::to_string(i) + "]",
                           "must be FLASHBOB_OP_FORWARD, FLASHBOB_OP_BACKWARD, "
                           "FLASHBOB_OP_BOB, FLASHBOB_OP_FORWARD_JVP, FLASHBOB_OP_BOB_PASS1, "
                           "FLASHBOB_OP_BOB_PASS2 or FLASHBOB_OP_FORWARD_DUAL");
      list.push_back(static_cast<flashbob::AttentionOp>(value));
    }
    return flashbob::attentionPrecompile(prob, list);
  });
}

flashbob_status flashbob_forward(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                                 flashbob_tensor v, flashbob_tensor o, float *lse, void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) {
    return flashbob::attentionForward(prob, tensor(q), tensor(k), tensor(v), tensor(o), rows(lse),
                                      stream(s));
  });
}

flashbob_status flashbob_forward_jvp(const flashbob_problem *p, flashbob_tensor q,
                                     flashbob_tensor k, flashbob_tensor v, flashbob_tensor o,
                                     const float *lse, flashbob_tensor t_q, flashbob_tensor t_k,
                                     flashbob_tensor t_v, flashbob_tensor t_o, void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) {
    return flashbob::attentionForwardJvp(prob, tensor(q), tensor(k), tensor(v), tensor(o),
                                         rows(lse), tensor(t_q), tensor(t_k), tensor(t_v),
                                         tensor(t_o), stream(s));
  });
}

flashbob_status flashbob_forward_dual(const flashbob_problem *p, flashbob_tensor q,
                                      flashbob_tensor k, flashbob_tensor v, flashbob_tensor t_q,
                                      flashbob_tensor t_k, flashbob_tensor t_v,
                                      flashbob_tensor o, float *lse, flashbob_tensor t_o,
                                      void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) {
    return flashbob::attentionForwardDual(prob, tensor(q), tensor(k), tensor(v), tensor(t_q),
                                          tensor(t_k), tensor(t_v), tensor(o), rows(lse),
                                          tensor(t_o), stream(s));
  });
}

flashbob_status flashbob_backward(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                                  flashbob_tensor v, flashbob_tensor o, flashbob_tensor d_o,
                                  const float *lse, flashbob_tensor d_q, flashbob_tensor d_k,
                                  flashbob_tensor d_v, float *d_workspace, void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) {
    return flashbob::attentionBackward(prob, tensor(q), tensor(k), tensor(v), tensor(o),
                                       tensor(d_o), rows(lse), tensor(d_q), tensor(d_k),
                                       tensor(d_v), rows(d_workspace), stream(s));
  });
}

flashbob_status flashbob_bob(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                             flashbob_tensor v, flashbob_tensor o, flashbob_tensor d_o,
                             const float *lse, flashbob_tensor u_q, flashbob_tensor u_k,
                             flashbob_tensor u_v, flashbob_tensor g_q, flashbob_tensor g_k,
                             flashbob_tensor g_v, flashbob_tensor g_d_o, float *workspace,
                             void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) -> llvm::Error {
    auto work = threeRows("workspace", workspace, prob);
    if (!work)
      return work.takeError();
    auto [dRow, cRow, bRow] = *work;
    flashbob::BobOutputs out{tensor(g_q), tensor(g_k), tensor(g_v), tensor(g_d_o), dRow, cRow,
                             bRow};
    return flashbob::attentionBob(prob, bobInputs(q, k, v, o, d_o, lse, u_q, u_k, u_v), out,
                                  stream(s));
  });
}

flashbob_status flashbob_bob_pass1(const flashbob_problem *p, flashbob_tensor q,
                                   flashbob_tensor k, flashbob_tensor v, flashbob_tensor o,
                                   flashbob_tensor d_o, const float *lse, flashbob_tensor u_q,
                                   flashbob_tensor u_k, flashbob_tensor u_v, flashbob_tensor x1,
                                   flashbob_tensor x2, flashbob_tensor x3, flashbob_tensor x4,
                                   float *workspace, void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) -> llvm::Error {
    auto work = threeRows("workspace", workspace, prob);
    if (!work)
      return work.takeError();
    auto [dRow, cRow, betaRow] = *work;
    flashbob::BobPass1Outputs out{tensor(x1), tensor(x2), tensor(x3), tensor(x4),
                                  dRow,       cRow,       betaRow};
    return flashbob::attentionBobPass1(prob, bobInputs(q, k, v, o, d_o, lse, u_q, u_k, u_v), out,
                                       stream(s));
  });
}

flashbob_status flashbob_bob_pass2(const flashbob_problem *p, flashbob_tensor q,
                                   flashbob_tensor k, flashbob_tensor v, flashbob_tensor d_o,
                                   const float *lse, const float *row_scalars,
                                   flashbob_tensor u_q, flashbob_tensor u_k, flashbob_tensor u_v,
                                   flashbob_tensor g_k, flashbob_tensor g_v, void *s) {
  return withProblem(p, [&](const flashbob::AttentionProblem &prob) -> llvm::Error {
    auto scalars = threeRows("row_scalars", row_scalars, prob);
    if (!scalars)
      return scalars.takeError();
    auto [dRow, cRow, bRow] = *scalars;
    return flashbob::attentionBobPass2(prob, bobInputs(q, k, v, {}, d_o, lse, u_q, u_k, u_v),
                                       {dRow, cRow, bRow}, tensor(g_k), tensor(g_v), stream(s));
  });
}

} // extern "C"

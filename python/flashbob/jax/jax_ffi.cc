// XLA FFI handlers for flashbob.jax: one per C API call (forward, backward, BoB, forward JVP),
// each decoding XLA's buffers into the C API's problem and tensors and calling libflashbob.so
// on XLA's CUDA stream. Built by flashbob/jax/_ffi.py on first use (docs/jax.md, "The FFI shim"):
//
//   c++ -std=c++17 -O2 -shared -fPIC -I<jax.ffi.include_dir()> jax_ffi.cc -o <cache>/... -ldl
//
// It links neither CUDA nor libflashbob: flashbob_jax_ffi_init() dlopens the library that
// flashbob._capi resolved (the same handle, so one kernel cache per process) and looks up the
// calls, and a stream is only a pointer passed through (the C API takes it as void*).
//
// Buffers, as flashbob.jax lays them out (row-major, XLA's default for custom calls):
//   dense:  q (batch, seq_q, heads, d), k and v (batch, seq_k, heads_kv, d), row vectors (lse,
//           workspaces) (batch, heads, seq_q) float32;
//   packed: q (total_q, heads, d), k and v (total_k, heads_kv, d), row vectors (heads, total_q),
//           and two more operands, cu_seqlens_q and cu_seqlens_k (batch + 1 int32 each).
// Both are the C API's (batch, heads, seq, d) tensors without copies: strides
// {seq * heads * d, d, heads * d, 1}, stride[0] unused (0) for a packed batch.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Only ever passed through as a pointer: no CUDA header needed.
typedef struct CUstream_st *cudaStream_t;

#ifdef FLASHBOB_JAX_FFI_CHECK_HEADER
#include "api/flashbob.h"  // a checkout's header, to check the mirror below (test_jax_attention)
#endif

namespace {

// --- The C ABI of api/flashbob.h, mirrored: the wheel ships no header --------------------------
// The build passes ctypes.sizeof of flashbob._capi's Problem and Tensor, the Python mirror of the
// same structs, and the checkout's test compiles this file against the header itself.
namespace abi {

struct Problem {
  uint32_t size;  // sizeof(Problem): the layout this shim has (flashbob.h)
  int64_t batch, heads, seq_q, seq_k, head_dim;
  int dtype;  // 0: bf16, 1: fp16
  int causal;
  double scale;  // 0: 1/sqrt(head_dim)
  int64_t heads_kv;
  int sliding_window;
  int64_t window_left, window_right;
  int varlen;
  const int32_t *cu_seqlens_q, *cu_seqlens_k;
  int64_t max_seqlen_q, max_seqlen_k;
  int ring_step;  // context parallelism; always 0 here
  int64_t head_dim_v;  // v's head dim where it differs from q's and k's, else 0
};

struct Tensor {
  void *data;
  int64_t stride[4];
};

enum Status : int { kOk = 0, kInvalidArgument = 1, kNoDriver = 2, kUnsupportedDevice = 5 };

using ForwardFn = int (*)(const Problem *, Tensor q, Tensor k, Tensor v, Tensor o, float *lse,
                          void *stream);
using BackwardFn = int (*)(const Problem *, Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                           const float *lse, Tensor d_q, Tensor d_k, Tensor d_v,
                           float *d_workspace, void *stream);
using BobFn = int (*)(const Problem *, Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                      const float *lse, Tensor u_q, Tensor u_k, Tensor u_v, Tensor g_q,
                      Tensor g_k, Tensor g_v, Tensor g_d_o, float *workspace, void *stream);
using ForwardJvpFn = int (*)(const Problem *, Tensor q, Tensor k, Tensor v, Tensor o,
                             const float *lse, Tensor t_q, Tensor t_k, Tensor t_v, Tensor t_o,
                             void *stream);
using LastErrorFn = const char *(*)();

}  // namespace abi

#ifdef FLASHBOB_PROBLEM_SIZE
static_assert(sizeof(abi::Problem) == FLASHBOB_PROBLEM_SIZE,
              "abi::Problem differs from flashbob._capi.Problem: update both from api/flashbob.h");
#endif
#ifdef FLASHBOB_TENSOR_SIZE
static_assert(sizeof(abi::Tensor) == FLASHBOB_TENSOR_SIZE,
              "abi::Tensor differs from flashbob._capi.Tensor: update both from api/flashbob.h");
#endif

#ifdef FLASHBOB_JAX_FFI_CHECK_HEADER
#define FLASHBOB_SAME_FIELD(field)                                                           \
  static_assert(offsetof(abi::Problem, field) == offsetof(flashbob_problem, field) &&       \
                    sizeof(abi::Problem::field) == sizeof(flashbob_problem::field),          \
                "abi::Problem::" #field " differs from api/flashbob.h")
FLASHBOB_SAME_FIELD(size);
FLASHBOB_SAME_FIELD(batch);
FLASHBOB_SAME_FIELD(heads);
FLASHBOB_SAME_FIELD(seq_q);
FLASHBOB_SAME_FIELD(seq_k);
FLASHBOB_SAME_FIELD(head_dim);
FLASHBOB_SAME_FIELD(dtype);
FLASHBOB_SAME_FIELD(causal);
FLASHBOB_SAME_FIELD(scale);
FLASHBOB_SAME_FIELD(heads_kv);
FLASHBOB_SAME_FIELD(sliding_window);
FLASHBOB_SAME_FIELD(window_left);
FLASHBOB_SAME_FIELD(window_right);
FLASHBOB_SAME_FIELD(varlen);
FLASHBOB_SAME_FIELD(cu_seqlens_q);
FLASHBOB_SAME_FIELD(cu_seqlens_k);
FLASHBOB_SAME_FIELD(max_seqlen_q);
FLASHBOB_SAME_FIELD(max_seqlen_k);
FLASHBOB_SAME_FIELD(ring_step);
FLASHBOB_SAME_FIELD(head_dim_v);
#undef FLASHBOB_SAME_FIELD
static_assert(sizeof(abi::Problem) == sizeof(flashbob_problem), "problem size");
static_assert(sizeof(abi::Tensor) == sizeof(flashbob_tensor) &&
                  offsetof(abi::Tensor, stride) == offsetof(flashbob_tensor, stride),
              "abi::Tensor differs from api/flashbob.h");
#define FLASHBOB_SAME_VALUE(c_name, value) \
  static_assert(static_cast<int>(c_name) == static_cast<int>(value), #c_name " differs")
FLASHBOB_SAME_VALUE(FLASHBOB_BF16, 0);
FLASHBOB_SAME_VALUE(FLASHBOB_FP16, 1);
FLASHBOB_SAME_VALUE(FLASHBOB_OK, abi::kOk);
FLASHBOB_SAME_VALUE(FLASHBOB_ERROR_INVALID_ARGUMENT, abi::kInvalidArgument);
FLASHBOB_SAME_VALUE(FLASHBOB_ERROR_NO_DRIVER, abi::kNoDriver);
FLASHBOB_SAME_VALUE(FLASHBOB_ERROR_UNSUPPORTED_DEVICE, abi::kUnsupportedDevice);
#undef FLASHBOB_SAME_VALUE
#endif

// --- The library, looked up once by flashbob_jax_ffi_init ------------------------------------

struct Library {
  abi::ForwardFn forward = nullptr;
  abi::BackwardFn backward = nullptr;
  abi::BobFn bob = nullptr;
  abi::ForwardJvpFn forward_jvp = nullptr;
  abi::LastErrorFn last_error = nullptr;
};

Library library;
// Set (release) after `library` is filled; Python registers the handlers only after that, so a
// handler that finds it unset was called without flashbob.jax (a foreign registration).
std::atomic<bool> loaded{false};

template <typename Fn>
bool Find(void *handle, const char *name, Fn &slot, char *message, size_t size) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!slot)
    std::snprintf(message, size, "%s has no symbol %s: %s", "libflashbob.so", name, dlerror());
  return slot != nullptr;
}

// --- From XLA's buffers to the C API's arguments ----------------------------------------------

// The attributes every handler takes (flashbob/jax/_lowering.py, _ffi_attributes).
struct Config {
  int64_t causal, window_left, window_right;
  double scale;
  int64_t max_seqlen_q, max_seqlen_k;  // 0 for a dense batch
};

// The C API's (batch, heads, seq, d) view of a dense (batch, seq, heads, d) or packed
// (total, heads, d) buffer.
abi::Tensor View(const ffi::AnyBuffer &buffer) {
  const auto dims = buffer.dimensions();
  const size_t rank = dims.size();
  const int64_t rows = dims[rank - 3], heads = dims[rank - 2], head_dim = dims[rank - 1];
  abi::Tensor t;
  t.data = buffer.untyped_data();
  t.stride[0] = rank == 4 ? rows * heads * head_dim : 0;
  t.stride[1] = head_dim;
  t.stride[2] = heads * head_dim;
  t.stride[3] = 1;
  return t;
}

abi::Tensor View(ffi::Result<ffi::AnyBuffer> &buffer) { return View(*buffer); }

float *Rows(const ffi::AnyBuffer &buffer) { return static_cast<float *>(buffer.untyped_data()); }
float *Rows(ffi::Result<ffi::AnyBuffer> &buffer) { return Rows(*buffer); }

// Fills `p` with the problem of q and k's shapes; `offsets` holds cu_seqlens_q and cu_seqlens_k
// for a packed batch and nothing for a dense one.
ffi::Error MakeProblem(const ffi::AnyBuffer &q, const ffi::AnyBuffer &k, const ffi::AnyBuffer &v,
                       const ffi::RemainingArgs &offsets, const Config &c, abi::Problem &p) {
  if (!loaded.load(std::memory_order_acquire))
    return ffi::Error::Internal("flashbob.jax: the FFI shim was called before "
                                "flashbob_jax_ffi_init loaded libflashbob.so");
  p = abi::Problem{};
  p.size = sizeof(abi::Problem);
  switch (q.element_type()) {
    case ffi::DataType::BF16: p.dtype = 0; break;
    case ffi::DataType::F16: p.dtype = 1; break;
    default: return ffi::Error::InvalidArgument("flashbob: q must be bfloat16 or float16");
  }
  const auto qd = q.dimensions(), kd = k.dimensions();
  const bool packed = offsets.size() == 2;
  if (!packed && offsets.size() != 0)
    return ffi::Error::Internal("flashbob.jax: expected 0 or 2 offset operands");
  if (qd.size() != (packed ? 3u : 4u) || kd.size() != qd.size())
    return ffi::Error::Internal("flashbob.jax: q and k have the wrong rank for their layout");
  const size_t seq = packed ? 0 : 1;  // the sequence axis; heads and head_dim follow it
  p.batch = packed ? 0 : qd[0];
  p.seq_q = qd[seq];
  p.heads = qd[seq + 1];
  p.head_dim = qd[seq + 2];
  const auto vd = v.dimensions();
  if (vd.size() == qd.size() && vd[seq + 2] != qd[seq + 2])
    p.head_dim_v = vd[seq + 2];  // v and its kin of another width than q and k
  p.seq_k = kd[seq];
  p.heads_kv = kd[seq + 1];
  p.causal = c.causal != 0;
  p.scale = c.scale;
  p.sliding_window = c.window_left >= 0 || c.window_right >= 0;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  if (packed) {
    auto cu_q = offsets.get<ffi::AnyBuffer>(0);
    auto cu_k = offsets.get<ffi::AnyBuffer>(1);
    if (cu_q.has_error()) return cu_q.error();
    if (cu_k.has_error()) return cu_k.error();
    p.batch = static_cast<int64_t>(cu_q.value().element_count()) - 1;
    p.varlen = 1;
    p.cu_seqlens_q = static_cast<const int32_t *>(cu_q.value().untyped_data());
    p.cu_seqlens_k = static_cast<const int32_t *>(cu_k.value().untyped_data());
    p.max_seqlen_q = c.max_seqlen_q;
    p.max_seqlen_k = c.max_seqlen_k;
  }
  return ffi::Error::Success();
}

// A workspace output flashbob/jax/_lowering.py sized `copies` row vectors; checked, since the C
// API takes a bare pointer and trusts its length.
ffi::Error CheckWorkspace(const ffi::AnyBuffer &workspace, const abi::Problem &p, int copies) {
  const int64_t rows = p.varlen ? p.heads * p.seq_q : p.batch * p.heads * p.seq_q;
  if (static_cast<int64_t>(workspace.element_count()) < copies * rows)
    return ffi::Error::Internal("flashbob.jax: the workspace output is too small");
  return ffi::Error::Success();
}

// The C API's status as an FFI error with flashbob_last_error()'s message (thread-local: read
// right after the call, on the thread that made it).
ffi::Error Status(int status) {
  if (status == abi::kOk)
    return ffi::Error::Success();
  std::string message = library.last_error();
  switch (status) {
    case abi::kInvalidArgument:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::move(message));
    case abi::kNoDriver:
    case abi::kUnsupportedDevice:
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition, std::move(message));
    default:  // compile and CUDA failures
      return ffi::Error(ffi::ErrorCode::kInternal, std::move(message));
  }
}

// --- The handlers -----------------------------------------------------------------------------

ffi::Error Forward(cudaStream_t stream, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                   ffi::RemainingArgs offsets, ffi::Result<ffi::AnyBuffer> o,
                   ffi::Result<ffi::AnyBuffer> lse, int64_t causal, int64_t window_left,
                   int64_t window_right, double scale, int64_t max_seqlen_q,
                   int64_t max_seqlen_k) {
  const Config c{causal, window_left, window_right, scale, max_seqlen_q, max_seqlen_k};
  abi::Problem p;
  if (ffi::Error e = MakeProblem(q, k, v, offsets, c, p); e.failure()) return e;
  return Status(library.forward(&p, View(q), View(k), View(v), View(o), Rows(lse),
                                stream));
}

ffi::Error Backward(cudaStream_t stream, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                    ffi::AnyBuffer o, ffi::AnyBuffer lse, ffi::AnyBuffer d_o,
                    ffi::RemainingArgs offsets, ffi::Result<ffi::AnyBuffer> d_q,
                    ffi::Result<ffi::AnyBuffer> d_k, ffi::Result<ffi::AnyBuffer> d_v,
                    ffi::Result<ffi::AnyBuffer> workspace, int64_t causal, int64_t window_left,
                    int64_t window_right, double scale, int64_t max_seqlen_q,
                    int64_t max_seqlen_k) {
  const Config c{causal, window_left, window_right, scale, max_seqlen_q, max_seqlen_k};
  abi::Problem p;
  if (ffi::Error e = MakeProblem(q, k, v, offsets, c, p); e.failure()) return e;
  if (ffi::Error e = CheckWorkspace(*workspace, p, 1); e.failure()) return e;
  return Status(library.backward(&p, View(q), View(k), View(v), View(o), View(d_o),
                                 Rows(lse), View(d_q), View(d_k), View(d_v), Rows(workspace),
                                 stream));
}

ffi::Error Bob(cudaStream_t stream, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
               ffi::AnyBuffer o, ffi::AnyBuffer lse, ffi::AnyBuffer d_o, ffi::AnyBuffer u_q,
               ffi::AnyBuffer u_k, ffi::AnyBuffer u_v, ffi::RemainingArgs offsets,
               ffi::Result<ffi::AnyBuffer> g_q, ffi::Result<ffi::AnyBuffer> g_k,
               ffi::Result<ffi::AnyBuffer> g_v, ffi::Result<ffi::AnyBuffer> g_d_o,
               ffi::Result<ffi::AnyBuffer> workspace, int64_t causal, int64_t window_left,
               int64_t window_right, double scale, int64_t max_seqlen_q, int64_t max_seqlen_k) {
  const Config c{causal, window_left, window_right, scale, max_seqlen_q, max_seqlen_k};
  abi::Problem p;
  if (ffi::Error e = MakeProblem(q, k, v, offsets, c, p); e.failure()) return e;
  if (ffi::Error e = CheckWorkspace(*workspace, p, 3); e.failure()) return e;
  return Status(library.bob(&p, View(q), View(k), View(v), View(o), View(d_o), Rows(lse),
                            View(u_q), View(u_k), View(u_v), View(g_q), View(g_k), View(g_v),
                            View(g_d_o), Rows(workspace), stream));
}

ffi::Error ForwardJvp(cudaStream_t stream, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                      ffi::AnyBuffer o, ffi::AnyBuffer lse, ffi::AnyBuffer t_q,
                      ffi::AnyBuffer t_k, ffi::AnyBuffer t_v, ffi::RemainingArgs offsets,
                      ffi::Result<ffi::AnyBuffer> t_o, int64_t causal, int64_t window_left,
                      int64_t window_right, double scale, int64_t max_seqlen_q,
                      int64_t max_seqlen_k) {
  const Config c{causal, window_left, window_right, scale, max_seqlen_q, max_seqlen_k};
  abi::Problem p;
  if (ffi::Error e = MakeProblem(q, k, v, offsets, c, p); e.failure()) return e;
  return Status(library.forward_jvp(&p, View(q), View(k), View(v), View(o), Rows(lse),
                                    View(t_q), View(t_k), View(t_v), View(t_o), stream));
}

}  // namespace

// The attributes, in the handlers' order (their names are flashbob/jax/_lowering.py's
// _ffi_attributes).
#define FLASHBOB_CONFIG_ATTRS                                                          \
  .Attr<int64_t>("causal")                                                             \
      .Attr<int64_t>("window_left")                                                    \
      .Attr<int64_t>("window_right")                                                   \
      .Attr<double>("scale")                                                           \
      .Attr<int64_t>("max_seqlen_q")                                                   \
      .Attr<int64_t>("max_seqlen_k")

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashBobJaxForward, Forward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // q
                                  .Arg<ffi::AnyBuffer>()  // k
                                  .Arg<ffi::AnyBuffer>()  // v
                                  .RemainingArgs()        // cu_seqlens_q, cu_seqlens_k
                                  .Ret<ffi::AnyBuffer>()  // o
                                  .Ret<ffi::AnyBuffer>()  // lse
                                  FLASHBOB_CONFIG_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashBobJaxBackward, Backward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // q
                                  .Arg<ffi::AnyBuffer>()  // k
                                  .Arg<ffi::AnyBuffer>()  // v
                                  .Arg<ffi::AnyBuffer>()  // o
                                  .Arg<ffi::AnyBuffer>()  // lse
                                  .Arg<ffi::AnyBuffer>()  // d_o
                                  .RemainingArgs()        // cu_seqlens_q, cu_seqlens_k
                                  .Ret<ffi::AnyBuffer>()  // d_q
                                  .Ret<ffi::AnyBuffer>()  // d_k
                                  .Ret<ffi::AnyBuffer>()  // d_v
                                  .Ret<ffi::AnyBuffer>()  // workspace: D
                                  FLASHBOB_CONFIG_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashBobJaxBob, Bob,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // q
                                  .Arg<ffi::AnyBuffer>()  // k
                                  .Arg<ffi::AnyBuffer>()  // v
                                  .Arg<ffi::AnyBuffer>()  // o
                                  .Arg<ffi::AnyBuffer>()  // lse
                                  .Arg<ffi::AnyBuffer>()  // d_o
                                  .Arg<ffi::AnyBuffer>()  // u_q
                                  .Arg<ffi::AnyBuffer>()  // u_k
                                  .Arg<ffi::AnyBuffer>()  // u_v
                                  .RemainingArgs()        // cu_seqlens_q, cu_seqlens_k
                                  .Ret<ffi::AnyBuffer>()  // g_q
                                  .Ret<ffi::AnyBuffer>()  // g_k
                                  .Ret<ffi::AnyBuffer>()  // g_v
                                  .Ret<ffi::AnyBuffer>()  // g_d_o
                                  .Ret<ffi::AnyBuffer>()  // workspace: D, c, b
                                  FLASHBOB_CONFIG_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashBobJaxForwardJvp, ForwardJvp,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // q
                                  .Arg<ffi::AnyBuffer>()  // k
                                  .Arg<ffi::AnyBuffer>()  // v
                                  .Arg<ffi::AnyBuffer>()  // o
                                  .Arg<ffi::AnyBuffer>()  // lse
                                  .Arg<ffi::AnyBuffer>()  // t_q
                                  .Arg<ffi::AnyBuffer>()  // t_k
                                  .Arg<ffi::AnyBuffer>()  // t_v
                                  .RemainingArgs()        // cu_seqlens_q, cu_seqlens_k
                                  .Ret<ffi::AnyBuffer>()  // t_o
                                  FLASHBOB_CONFIG_ATTRS);

// Loads libflashbob.so from `path` (flashbob._capi's library) and looks up the calls. 0 on
// success; else 1 with the reason in `message`. Called once, before the handlers are registered.
extern "C" int flashbob_jax_ffi_init(const char *path, char *message, size_t size) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::snprintf(message, size, "cannot load %s: %s", path, dlerror());
    return 1;
  }
  Library found;
  if (!Find(handle, "flashbob_forward", found.forward, message, size) ||
      !Find(handle, "flashbob_backward", found.backward, message, size) ||
      !Find(handle, "flashbob_bob", found.bob, message, size) ||
      !Find(handle, "flashbob_forward_jvp", found.forward_jvp, message, size) ||
      !Find(handle, "flashbob_last_error", found.last_error, message, size))
    return 1;
  library = found;
  loaded.store(true, std::memory_order_release);
  return 0;
}

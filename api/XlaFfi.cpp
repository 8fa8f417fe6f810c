// The XLA FFI handlers flashbob.jax registers (flashbob_xla_* in flashbob.h): one per C API
// call, each decoding XLA's call frame (XlaFfiAbi.h) into the C API's problem and tensors and
// calling it on XLA's stream. Built into libflashbob.so, so JAX needs no compiler; the shim
// python/flashbob/jax/jax_ffi.cc, compiled against jaxlib's headers on first use, is the
// fallback where the installed jaxlib's FFI API is one these declarations do not follow.
//
// Operands, as flashbob/jax/_lowering.py lays them out (row-major):
//   dense:  q (batch, seq_q, heads, d), k and v (batch, seq_k, heads_kv, d), row vectors (lse,
//           workspaces) (batch, heads, seq_q) float32;
//   packed: q (total_q, heads, d), k and v (total_k, heads_kv, d), row vectors (heads, total_q),
//           then cu_seqlens_q and cu_seqlens_k (batch + 1 int32 each) after the tensors.
// Both are the C API's (batch, heads, seq, d) tensors without copies: strides
// {seq * heads * d, d, heads * d, 1}, stride[0] unused (0) for a packed batch.
// Attributes (sorted by name, as XLA passes them): causal, max_seqlen_k, max_seqlen_q (i64),
// scale (f64), window_left, window_right (i64).
#include "api/XlaFfiAbi.h"
#include "api/flashbob.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace xf = flashbob::xla_ffi;

namespace {

// The frame's fields this file reads end with the attributes; metadata queries may come with a
// shorter frame, so only the extension is read before this check.
constexpr size_t kFrameSize = offsetof(xf::CallFrame, attrs) + sizeof(xf::Attrs);

xf::Error *fail(const xf::CallFrame *frame, int code, const std::string &message) {
  xf::ErrorCreateArgs args{sizeof(xf::ErrorCreateArgs), nullptr, message.c_str(), code};
  return frame->api->errorCreate(&args);
}

// The C API's status as an XLA error with flashbob_last_error()'s message (thread-local: read
// right after the call, on the thread that made it).
xf::Error *status(const xf::CallFrame *frame, flashbob_status s) {
  switch (s) {
  case FLASHBOB_OK:
    return nullptr;
  case FLASHBOB_ERROR_INVALID_ARGUMENT:
    return fail(frame, xf::kInvalidArgument, flashbob_last_error());
  case FLASHBOB_ERROR_NO_DRIVER:
  case FLASHBOB_ERROR_UNSUPPORTED_DEVICE:
    return fail(frame, xf::kFailedPrecondition, flashbob_last_error());
  default: // compile and CUDA failures
    return fail(frame, xf::kInternal, flashbob_last_error());
  }
}

// The attributes every handler takes.
struct Config {
  int64_t causal = 0, windowLeft = -1, windowRight = -1, maxSeqlenQ = 0, maxSeqlenK = 0;
  double scale = 0;
};

// One decoded call: its buffers, attributes and stream, or the error that stopped decoding.
struct Call {
  const xf::CallFrame *frame;
  const xf::Buffer *const *args = nullptr;
  const xf::Buffer *const *rets = nullptr;
  int64_t argCount = 0, retCount = 0;
  Config config;
  void *stream = nullptr;
  xf::Error *error = nullptr;

  bool failed(int code, const std::string &message) {
    error = fail(frame, code, "flashbob.jax: " + message);
    return false;
  }
};

bool named(const xf::ByteSpan *name, const char *expected) {
  return name->length == std::strlen(expected) &&
         std::memcmp(name->ptr, expected, name->length) == 0;
}

bool readAttributes(Call &call) {
  const xf::Attrs &attrs = call.frame->attrs;
  struct Field {
    const char *name;
    int64_t *integer;
    double *real;
    bool seen;
  } fields[] = {{"causal", &call.config.causal, nullptr, false},
                {"max_seqlen_k", &call.config.maxSeqlenK, nullptr, false},
                {"max_seqlen_q", &call.config.maxSeqlenQ, nullptr, false},
                {"scale", nullptr, &call.config.scale, false},
                {"window_left", &call.config.windowLeft, nullptr, false},
                {"window_right", &call.config.windowRight, nullptr, false}};
  for (int64_t i = 0; i < attrs.size; ++i) {
    for (Field &f : fields) {
      if (!named(attrs.names[i], f.name))
        continue;
      const auto *scalar = static_cast<const xf::Scalar *>(attrs.attrs[i]);
      const int want = f.integer ? xf::kS64 : xf::kF64;
      if (attrs.types[i] != xf::kScalarAttr || scalar->dtype != want)
        return call.failed(xf::kInternal, std::string("attribute ") + f.name + " is not a " +
                                              (f.integer ? "64-bit integer" : "double"));
      if (f.integer)
        std::memcpy(f.integer, scalar->value, sizeof(int64_t));
      else
        std::memcpy(f.real, scalar->value, sizeof(double));
      f.seen = true;
    }
  }
  for (const Field &f : fields)
    if (!f.seen)
      return call.failed(xf::kInternal, std::string("attribute ") + f.name + " is missing");
  return true;
}

// Decodes the frame: `tensors` buffer operands (then 0 or 2 offsets) and `results` buffers.
bool decode(Call &call, int64_t tensors, int64_t results) {
  const xf::CallFrame *frame = call.frame;
  if (frame->args.size != tensors && frame->args.size != tensors + 2)
    return call.failed(xf::kInternal, "expected " + std::to_string(tensors) + " or " +
                                          std::to_string(tensors + 2) + " operands, got " +
                                          std::to_string(frame->args.size));
  if (frame->rets.size != results)
    return call.failed(xf::kInternal, "expected " + std::to_string(results) + " results, got " +
                                          std::to_string(frame->rets.size));
  for (int64_t i = 0; i < frame->args.size; ++i)
    if (frame->args.types[i] != xf::kBufferArg)
      return call.failed(xf::kInternal, "operand " + std::to_string(i) + " is not a buffer");
  for (int64_t i = 0; i < frame->rets.size; ++i)
    if (frame->rets.types[i] != xf::kBufferRet)
      return call.failed(xf::kInternal, "result " + std::to_string(i) + " is not a buffer");
  call.args = reinterpret_cast<const xf::Buffer *const *>(frame->args.args);
  call.rets = reinterpret_cast<const xf::Buffer *const *>(frame->rets.rets);
  call.argCount = frame->args.size;
  call.retCount = results;
  for (int64_t i = 0; i < call.argCount; ++i)
    if (call.args[i]->structSize < offsetof(xf::Buffer, dims) + sizeof(int64_t *))
      return call.failed(xf::kInternal, "operand " + std::to_string(i) + " is an older buffer");
  for (int64_t i = 0; i < call.retCount; ++i)
    if (call.rets[i]->structSize < offsetof(xf::Buffer, dims) + sizeof(int64_t *))
      return call.failed(xf::kInternal, "result " + std::to_string(i) + " is an older buffer");
  if (!readAttributes(call))
    return false;
  xf::StreamGetArgs stream{sizeof(xf::StreamGetArgs), nullptr, frame->context, nullptr};
  if (xf::Error *e = frame->api->streamGet(&stream)) {
    call.error = e;
    return false;
  }
  call.stream = stream.stream;
  return true;
}

// The C API's (batch, heads, seq, d) view of a dense (batch, seq, heads, d) or packed
// (total, heads, d) buffer.
flashbob_tensor view(const xf::Buffer *b) {
  const int64_t rank = b->rank;
  const int64_t rows = b->dims[rank - 3], heads = b->dims[rank - 2], width = b->dims[rank - 1];
  flashbob_tensor t;
  t.data = b->data;
  t.stride[0] = rank == 4 ? rows * heads * width : 0;
  t.stride[1] = width;
  t.stride[2] = heads * width;
  t.stride[3] = 1;
  return t;
}

float *rows(const xf::Buffer *b) { return static_cast<float *>(b->data); }

int64_t elements(const xf::Buffer *b) {
  int64_t n = 1;
  for (int64_t i = 0; i < b->rank; ++i)
    n *= b->dims[i];
  return n;
}

// The problem of q, k and v's shapes and the attributes; `tensors` operands precede the
// offsets.
bool problem(Call &call, int64_t tensors, flashbob_problem &p) {
  const xf::Buffer *q = call.args[0], *k = call.args[1], *v = call.args[2];
  p = FLASHBOB_PROBLEM_INIT;
  switch (q->dtype) {
  case xf::kBF16:
    p.dtype = FLASHBOB_BF16;
    break;
  case xf::kF16:
    p.dtype = FLASHBOB_FP16;
    break;
  default:
    return call.failed(xf::kInvalidArgument, "q must be bfloat16 or float16");
  }
  const bool packed = call.argCount == tensors + 2;
  const int64_t rank = packed ? 3 : 4;
  if (q->rank != rank || k->rank != rank || v->rank != rank)
    return call.failed(xf::kInternal, "q, k and v have the wrong rank for their layout");
  const int64_t seq = packed ? 0 : 1; // the sequence axis; heads and head_dim follow it
  p.batch = packed ? 0 : q->dims[0];
  p.seq_q = q->dims[seq];
  p.heads = q->dims[seq + 1];
  p.head_dim = q->dims[seq + 2];
  if (v->dims[seq + 2] != p.head_dim)
    p.head_dim_v = v->dims[seq + 2]; // v and its kin of another width than q and k
  p.seq_k = k->dims[seq];
  p.heads_kv = k->dims[seq + 1];
  const Config &c = call.config;
  p.causal = c.causal != 0;
  p.scale = c.scale;
  p.sliding_window = c.windowLeft >= 0 || c.windowRight >= 0;
  p.window_left = c.windowLeft;
  p.window_right = c.windowRight;
  if (packed) {
    const xf::Buffer *cuQ = call.args[tensors], *cuK = call.args[tensors + 1];
    if (cuQ->dtype != xf::kS32 || cuK->dtype != xf::kS32)
      return call.failed(xf::kInvalidArgument, "cu_seqlens_q and cu_seqlens_k must be int32");
    p.batch = elements(cuQ) - 1;
    p.varlen = 1;
    p.cu_seqlens_q = static_cast<const int32_t *>(cuQ->data);
    p.cu_seqlens_k = static_cast<const int32_t *>(cuK->data);
    p.max_seqlen_q = c.maxSeqlenQ;
    p.max_seqlen_k = c.maxSeqlenK;
  }
  return true;
}

// A workspace result _lowering sized `copies` row vectors; checked, since the C API takes a bare
// pointer and trusts its length.
bool workspaceFits(Call &call, const xf::Buffer *workspace, const flashbob_problem &p,
                   int copies) {
  const int64_t rowCount = p.varlen ? p.heads * p.seq_q : p.batch * p.heads * p.seq_q;
  if (workspace->dtype != xf::kF32 || elements(workspace) < copies * rowCount)
    return call.failed(xf::kInternal, "the workspace result is too small");
  return true;
}

// Every handler: XLA's metadata query answered, other stages skipped, the frame checked and
// decoded (`tensors` operands, then 0 or 2 offsets; `results` results, the last a workspace of
// `workspaceCopies` row vectors where that is not 0), then `launch(call, problem)`'s C API
// status returned as XLA's error.
template <typename Launch>
void *handle(void *callFrame, int64_t tensors, int64_t results, int workspaceCopies,
             Launch launch) {
  auto *frame = static_cast<xf::CallFrame *>(callFrame);
  for (const xf::ExtensionBase *e = frame->extensionStart; e; e = e->next) {
    if (e->type != xf::kMetadataExtension)
      continue;
    xf::Metadata *metadata = reinterpret_cast<const xf::MetadataExtension *>(e)->metadata;
    metadata->version = {sizeof(xf::ApiVersion), nullptr, xf::kApiMajor, xf::kApiMinor};
    metadata->traits = 0;
    return nullptr;
  }
  if (frame->structSize < kFrameSize)
    return fail(frame, xf::kInternal, "flashbob.jax: XLA's call frame is older than API 0.1");
  if (frame->stage != xf::kExecuteStage)
    return nullptr;
  Call call{frame};
  flashbob_problem p;
  if (!decode(call, tensors, results) || !problem(call, tensors, p) ||
      (workspaceCopies && !workspaceFits(call, call.rets[results - 1], p, workspaceCopies)))
    return call.error;
  return status(frame, launch(call, p));
}

} // namespace

extern "C" {

void *flashbob_xla_forward(void *callFrame) {
  // q, k, v -> o, lse
  return handle(callFrame, 3, 2, 0, [](const Call &c, const flashbob_problem &p) {
    const auto *a = c.args, *r = c.rets;
    return flashbob_forward(&p, view(a[0]), view(a[1]), view(a[2]), view(r[0]), rows(r[1]),
                            c.stream);
  });
}

void *flashbob_xla_backward(void *callFrame) {
  // q, k, v, o, lse, d_o -> d_q, d_k, d_v, (D)
  return handle(callFrame, 6, 4, 1, [](const Call &c, const flashbob_problem &p) {
    const auto *a = c.args, *r = c.rets;
    return flashbob_backward(&p, view(a[0]), view(a[1]), view(a[2]), view(a[3]), view(a[5]),
                             rows(a[4]), view(r[0]), view(r[1]), view(r[2]), rows(r[3]),
                             c.stream);
  });
}

void *flashbob_xla_bob(void *callFrame) {
  // q, k, v, o, lse, d_o, u_q, u_k, u_v -> g_q, g_k, g_v, g_d_o, (D, c, b)
  return handle(callFrame, 9, 5, 3, [](const Call &c, const flashbob_problem &p) {
    const auto *a = c.args, *r = c.rets;
    return flashbob_bob(&p, view(a[0]), view(a[1]), view(a[2]), view(a[3]), view(a[5]),
                        rows(a[4]), view(a[6]), view(a[7]), view(a[8]), view(r[0]), view(r[1]),
                        view(r[2]), view(r[3]), rows(r[4]), c.stream);
  });
}

void *flashbob_xla_forward_jvp(void *callFrame) {
  // q, k, v, o, lse, t_q, t_k, t_v -> t_o
  return handle(callFrame, 8, 1, 0, [](const Call &c, const flashbob_problem &p) {
    const auto *a = c.args, *r = c.rets;
    return flashbob_forward_jvp(&p, view(a[0]), view(a[1]), view(a[2]), view(a[3]), rows(a[4]),
                                view(a[5]), view(a[6]), view(a[7]), view(r[0]), c.stream);
  });
}

} // extern "C"

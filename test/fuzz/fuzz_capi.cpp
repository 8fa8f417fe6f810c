// Fuzz target: the C API's argument checking (api/flashbob.h), without a GPU. Each input decodes
// (FuzzedDataProvider) into one call of flashbob_forward, flashbob_backward, flashbob_bob,
// flashbob_set_cache_dir, flashbob_precompile, flashbob_bob_pass1 or flashbob_bob_pass2 (ring
// steps, with the problem's ring_step): the problem struct (or a null pointer), every
// tensor's pointer and strides, the row pointers and the stream, or the op; last (so that inputs
// older than them decode as before), the problem's size field (this header's layout, the one
// before ring_step, or an odd size) and now and then an output tensor put on another tensor's
// memory. Selector value 0 always picks a valid argument, so an empty input is a valid forward
// call and every mutation makes one argument odd.
//
// The driver is a library that does not exist (FLASHBOB_CUDA_DRIVER, set before the first call),
// and the arguments are checked before the driver is loaded, so a call either fails validation
// (INVALID_ARGUMENT) or gets as far as loading the driver (NO_DRIVER). Checked on every call:
//  - the status is INVALID_ARGUMENT or NO_DRIVER: never OK (nothing can have run) and never
//    COMPILE or CUDA (nothing was compiled or called);
//  - on failure flashbob_last_error() is one non-empty line;
//  - a call that got past validation (NO_DRIVER) obeys what flashbob.h documents: a problem,
//    dtype BF16 or FP16, positive sizes, head_dim 8 to 256, every tensor non-null with
//    stride[3] = 1 and positive strides, 16-byte aligned with strides multiples of 8 (of 4 for
//    a ring step's float32 outputs) unless head_dim is no multiple of 8 or head_dim_v differs
//    (copied into padded memory: aligned to its element), head_dim_v 0 or 8 to 256 and no ring
//    step where it differs, row vectors non-null and 4-byte aligned; BoB whole is no ring step
//    and its pass 1 alone is one; p->size one of the layouts' (an older one's later fields read
//    as 0); no output tensor at another tensor's address.
// With FLASHBOB_FUZZ_STRICT=1 it also checks the limits on the scale and the sizes (scale NaN or
// not finite as float32, batch * heads or batch * heads * seq_q overflowing int64, seq_q / seq_k
// past 2^31 - 1), which jit::validateProblem enforces; CTest runs it so (test/fuzz/
// CMakeLists.txt). The corpus files corpus/capi/strict-* are one input of each kind strict mode
// found before those checks (bench/results/2026-12-01-fuzz.md).
#include "api/flashbob.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {
bool strict = false;
bool verbose = false; // FLASHBOB_FUZZ_VERBOSE=1: one line per input (op, status, message)

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "fuzz_capi: %s\n", what.c_str());
  std::abort();
}

// A valid value (selector 0-2, the most likely) or an odd one.
int64_t pickInt(FuzzedDataProvider &in, int64_t valid) {
  static const int64_t special[] = {0,
                                    -1,
                                    1,
                                    8,
                                    16,
                                    255,
                                    256,
                                    272,
                                    65535,
                                    65536,
                                    (int64_t(1) << 31) - 1,
                                    int64_t(1) << 31,
                                    (int64_t(1) << 38) + 64,
                                    0x5555555555555556,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
  case 3:
    return in.ConsumeIntegralInRange<int64_t>(-4, 300);
  case 4:
    return special[in.ConsumeIntegralInRange<size_t>(0, std::size(special) - 1)];
  case 5:
    return in.ConsumeIntegral<int64_t>();
  case 6:
    return valid * in.ConsumeIntegralInRange<int64_t>(2, 4);
  case 7:
    return valid + in.ConsumeIntegralInRange<int64_t>(-16, 16);
  default:
    return valid;
  }
}

// A device address: distinct, 256-byte aligned ones are valid.
void *pickPointer(FuzzedDataProvider &in, uintptr_t valid) {
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
  case 3:
    return nullptr;
  case 4:
    return reinterpret_cast<void *>(valid + in.ConsumeIntegralInRange<uintptr_t>(1, 15));
  case 5:
    return reinterpret_cast<void *>(in.ConsumeIntegral<uintptr_t>());
  default:
    return reinterpret_cast<void *>(valid);
  }
}

double pickScale(FuzzedDataProvider &in) {
  static const double special[] = {-1.0,
                                   std::nan(""),
                                   INFINITY,
                                   -INFINITY,
                                   1e300,
                                   1e-320,
                                   -0.0,
                                   DBL_MIN,
                                   double(FLT_MAX),
                                   double(FLT_MAX) * 2,
                                   double(FLT_TRUE_MIN) / 2};
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
  case 3:
    return 0.125;
  case 4:
    return special[in.ConsumeIntegralInRange<size_t>(0, std::size(special) - 1)];
  case 5:
    return in.ConsumeFloatingPoint<double>();
  default:
    return 0; // 1/sqrt(head_dim)
  }
}

struct Call {
  int op = 0; // 0 forward, 1 backward, 2 BoB, 3 set_cache_dir, 4 precompile, 5 BoB pass 1,
              // 6 BoB pass 2
  flashbob_op precompileOp = FLASHBOB_OP_FORWARD;
  bool nullProblem = false;
  flashbob_problem p = FLASHBOB_PROBLEM_INIT;
  std::vector<flashbob_tensor> tensors; // in the order of the function's parameters
  std::vector<float *> rows;            // lse, then the workspace (backward, BoB)
  void *stream = nullptr;
  std::string dir;
};

// Tensor counts per operation: forward q k v o; backward q k v o dO dQ dK dV; BoB q k v o dO
// uQ uK uV gQ gK gV gdO; pass 1 q k v o dO uQ uK uV X1 X2 X3 X4; pass 2 q k v dO uQ uK uV gK gV.
// Row vectors: forward lse; the others lse and a workspace (pass 2: D, c, b).
constexpr size_t kTensors[] = {4, 8, 12, 0, 0, 12, 9};
// The first output tensor of each operation (the rest follow it): float32 in a ring step.
constexpr size_t kFirstOutput[] = {3, 5, 8, 0, 0, 8, 7};

bool keySide(int op, size_t i) {
  switch (op) {
  case 1: return i == 1 || i == 2 || i == 6 || i == 7;
  case 2: return i == 1 || i == 2 || i == 6 || i == 7 || i == 9 || i == 10;
  case 5: return i == 1 || i == 2 || i == 6 || i == 7;
  case 6: return i == 1 || i == 2 || i == 5 || i == 6 || i == 7 || i == 8;
  default: return i == 1 || i == 2;
  }
}

// The layouts before ring_step and before head_dim_v (flashbob.h), which the library reads with
// those fields 0.
constexpr uint32_t kSizeBeforeRingStep = offsetof(flashbob_problem, ring_step);
constexpr uint32_t kSizeBeforeHeadDimV = offsetof(flashbob_problem, head_dim_v);

// What decode reads after everything else: the values' head dim, the problem's size, and
// whether an output tensor takes another tensor's address.
void decodeLast(FuzzedDataProvider &in, Call &c) {
  c.p.head_dim_v = in.ConsumeIntegral<uint8_t>() % 4 == 3 ? pickInt(in, 128) : 0;
  switch (in.ConsumeIntegral<uint8_t>() % 16) {
  case 12:
    c.p.size = kSizeBeforeHeadDimV;
    break;
  case 13:
    c.p.size = kSizeBeforeRingStep;
    break;
  case 14:
    c.p.size = in.ConsumeIntegralInRange<uint32_t>(0, sizeof(flashbob_problem) + 16);
    break;
  case 15:
    c.p.size = in.ConsumeIntegral<uint32_t>();
    break;
  default:
    c.p.size = sizeof(flashbob_problem);
  }
  if (c.tensors.empty() || in.ConsumeIntegral<uint8_t>() % 8 != 7)
    return;
  const size_t out = in.ConsumeIntegralInRange<size_t>(kFirstOutput[c.op], c.tensors.size() - 1);
  const size_t other = in.ConsumeIntegralInRange<size_t>(0, c.tensors.size() - 1);
  if (other != out)
    c.tensors[out].data = c.tensors[other].data;
}

Call decode(FuzzedDataProvider &in) {
  Call c;
  c.op = in.ConsumeIntegral<uint8_t>() % 7;
  if (c.op == 3) {
    c.dir = in.ConsumeRandomLengthString(512);
    return c;
  }
  c.nullProblem = in.ConsumeIntegral<uint8_t>() % 16 == 15;
  flashbob_problem &p = c.p;
  p.batch = pickInt(in, 2);
  p.heads = pickInt(in, 4);
  p.seq_q = pickInt(in, 128);
  p.seq_k = pickInt(in, 96);
  p.head_dim = pickInt(in, 64);
  // What a C caller may put in the enum field: any int.
  int dtype = 0;
  switch (in.ConsumeIntegral<uint8_t>() % 4) {
  case 1:
    dtype = FLASHBOB_FP16;
    break;
  case 2:
    dtype = in.ConsumeIntegral<int>();
    break;
  default:
    dtype = FLASHBOB_BF16;
  }
  static_assert(sizeof(p.dtype) == sizeof(int), "flashbob_dtype is an int-sized enum");
  std::memcpy(&p.dtype, &dtype, sizeof dtype);
  p.causal = in.ConsumeIntegral<uint8_t>() % 4 == 3 ? in.ConsumeIntegral<int>() : 0;
  p.scale = pickScale(in);
  p.heads_kv = pickInt(in, 0); // 0: as many as heads
  p.sliding_window = in.ConsumeIntegral<uint8_t>() % 4 == 3 ? in.ConsumeIntegral<int>() : 0;
  p.window_left = pickInt(in, -1);
  p.window_right = pickInt(in, 16);
  // A packed batch, now and then: its bounds and offsets, valid for the default sizes at 0.
  p.varlen = in.ConsumeIntegral<uint8_t>() % 4 == 3 ? in.ConsumeIntegral<int>() : 0;
  if (p.varlen) {
    p.max_seqlen_q = pickInt(in, 128);
    p.max_seqlen_k = pickInt(in, 96);
    p.cu_seqlens_q = static_cast<const int32_t *>(pickPointer(in, 0x7f2000000000));
    p.cu_seqlens_k = static_cast<const int32_t *>(pickPointer(in, 0x7f2000100000));
  }
  // A ring step where pass 1 needs one (selector 0), now and then the other way or any int.
  const int ringDefault = c.op == 5 ? 1 : 0;
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
  case 6:
    p.ring_step = 1 - ringDefault;
    break;
  case 7:
    p.ring_step = in.ConsumeIntegral<int>();
    break;
  default:
    p.ring_step = ringDefault;
  }
  if (c.op == 4) {
    // Only the enumerators: a C++ caller passing another value in an enum-typed argument is
    // itself undefined behaviour (UBSan flags the harness, not the library). A C caller may pass
    // any int; capi_smoke.c checks that one (9) is refused naming op.
    c.precompileOp = static_cast<flashbob_op>(
        in.ConsumeIntegralInRange<int>(FLASHBOB_OP_FORWARD, FLASHBOB_OP_FORWARD_DUAL));
    decodeLast(in, c);
    return c;
  }

  // Strides of a contiguous tensor for the valid sizes (whatever the problem decoded to).
  for (size_t i = 0; i < kTensors[c.op]; ++i) {
    const int64_t rows = keySide(c.op, i) ? 96 : 128, d = 64;
    flashbob_tensor t;
    t.data = pickPointer(in, 0x7f0000000000 + i * 0x100000);
    const int64_t valid[4] = {4 * rows * d, rows * d, d, 1};
    for (int k = 0; k < 4; ++k)
      t.stride[k] = pickInt(in, valid[k]);
    c.tensors.push_back(t);
  }
  for (size_t i = 0; i < (c.op == 0 ? 1u : 2u); ++i) {
    void *ptr = pickPointer(in, 0x7f1000000000 + i * 0x100000);
    c.rows.push_back(static_cast<float *>(ptr));
  }
  if (in.ConsumeIntegral<uint8_t>() % 8 == 7)
    c.stream = reinterpret_cast<void *>(in.ConsumeIntegral<uintptr_t>());
  decodeLast(in, c);
  return c;
}

flashbob_status run(const Call &c) {
  const flashbob_problem *p = c.nullProblem ? nullptr : &c.p;
  const std::vector<flashbob_tensor> &t = c.tensors;
  switch (c.op) {
  case 0:
    return flashbob_forward(p, t[0], t[1], t[2], t[3], c.rows[0], c.stream);
  case 1:
    return flashbob_backward(p, t[0], t[1], t[2], t[3], t[4], c.rows[0], t[5], t[6], t[7],
                             c.rows[1], c.stream);
  case 2:
    return flashbob_bob(p, t[0], t[1], t[2], t[3], t[4], c.rows[0], t[5], t[6], t[7], t[8],
                        t[9], t[10], t[11], c.rows[1], c.stream);
  case 3:
    return flashbob_set_cache_dir(c.dir.c_str());
  case 5:
    return flashbob_bob_pass1(p, t[0], t[1], t[2], t[3], t[4], c.rows[0], t[5], t[6], t[7],
                              t[8], t[9], t[10], t[11], c.rows[1], c.stream);
  case 6:
    return flashbob_bob_pass2(p, t[0], t[1], t[2], t[3], c.rows[0], c.rows[1], t[4], t[5], t[6],
                              t[7], t[8], c.stream);
  default:
    return flashbob_precompile(p, c.precompileOp);
  }
}

std::string describe(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

// Why a call that passed validation should not have, or "" if it obeys flashbob.h.
std::string undocumentedPass(const Call &c) {
  if (c.nullProblem)
    return "a null problem";
  if (c.p.size != sizeof(flashbob_problem) && c.p.size != kSizeBeforeRingStep &&
      c.p.size != kSizeBeforeHeadDimV)
    return "p->size " + std::to_string(c.p.size);
  // The problem as the library reads it: the older layouts lack the later fields.
  flashbob_problem p = c.p;
  if (p.size <= kSizeBeforeHeadDimV)
    p.head_dim_v = 0;
  if (p.size == kSizeBeforeRingStep)
    p.ring_step = 0;
  int dtype;
  std::memcpy(&dtype, &p.dtype, sizeof dtype);
  if (dtype != FLASHBOB_BF16 && dtype != FLASHBOB_FP16)
    return "dtype " + std::to_string(dtype);
  if (p.batch <= 0 || p.heads <= 0 || p.seq_q <= 0 || p.seq_k <= 0)
    return "a size that is not positive";
  if (p.head_dim < 8 || p.head_dim > 256)
    return "head_dim " + std::to_string(p.head_dim);
  if (p.head_dim_v != 0 && (p.head_dim_v < 8 || p.head_dim_v > 256))
    return "head_dim_v " + std::to_string(p.head_dim_v);
  const bool otherWidth = p.head_dim_v != 0 && p.head_dim_v != p.head_dim;
  if (otherWidth && p.ring_step)
    return "ring_step with head_dim_v " + std::to_string(p.head_dim_v) + " != head_dim";
  if (p.scale < 0)
    return "a negative scale";
  if (p.heads_kv < 0 || (p.heads_kv > 0 && p.heads % p.heads_kv != 0))
    return "heads_kv " + std::to_string(p.heads_kv) + " with heads " + std::to_string(p.heads);
  if (p.varlen) {
    if (p.max_seqlen_q < 1 || p.max_seqlen_q > p.seq_q || p.max_seqlen_k < 1 ||
        p.max_seqlen_k > p.seq_k)
      return "max_seqlen " + std::to_string(p.max_seqlen_q) + ", " +
             std::to_string(p.max_seqlen_k) + " with totals " + std::to_string(p.seq_q) + ", " +
             std::to_string(p.seq_k);
    // Precompiling needs no memory; a call needs its offsets.
    if (c.op != 4)
      for (const int32_t *offsets : {p.cu_seqlens_q, p.cu_seqlens_k})
        if (!offsets || reinterpret_cast<uintptr_t>(offsets) % 4 != 0)
          return "cu_seqlens null or not 4-byte aligned";
  }
  if (p.sliding_window) {
    const int64_t longest =
        p.varlen ? std::max(p.max_seqlen_q, p.max_seqlen_k) : std::max(p.seq_q, p.seq_k);
    for (int64_t side : {p.window_left, p.window_right})
      if (side < -1 || side > longest)
        return "window side " + std::to_string(side) + " with sequences " +
               std::to_string(p.seq_q) + ", " + std::to_string(p.seq_k);
  }
  if (c.op == 4) {
    int op;
    std::memcpy(&op, &c.precompileOp, sizeof op);
    if (op < FLASHBOB_OP_FORWARD || op > FLASHBOB_OP_FORWARD_DUAL)
      return "op " + std::to_string(op);
    if (p.ring_step && (op == FLASHBOB_OP_FORWARD_JVP || op == FLASHBOB_OP_FORWARD_DUAL))
      return "ring_step with the forward's JVP";
  }
  if (c.op == 2 && p.ring_step)
    return "ring_step for flashbob_bob (a ring runs its two passes apart)";
  if (c.op == 5 && !p.ring_step)
    return "flashbob_bob_pass1 without ring_step";
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const flashbob_tensor &t = c.tensors[i];
    const std::string name = "tensor " + std::to_string(i);
    // Rows 16-byte aligned: 8 elements of bf16/fp16, 4 of a ring step's float32 outputs; a
    // head_dim copied into padded memory (no multiple of 8, or v of another width) needs
    // aligned elements only.
    const int64_t elementBytes = p.ring_step && i >= kFirstOutput[c.op] ? 4 : 2;
    const int64_t alignment = p.head_dim % 8 != 0 || otherWidth ? elementBytes : 16;
    if (!t.data || reinterpret_cast<uintptr_t>(t.data) % alignment != 0)
      return name + " null or not " + std::to_string(alignment) + "-byte aligned";
    if (t.stride[3] != 1)
      return name + " with stride[3] = " + std::to_string(t.stride[3]);
    const int64_t perRow = alignment / elementBytes;
    for (int k = p.varlen ? 1 : 0; k < 3; ++k) // a packed batch's stride[0] is never read
      if (t.stride[k] <= 0 || t.stride[k] % perRow != 0)
        return name + " with stride[" + std::to_string(k) + "] = " + std::to_string(t.stride[k]);
  }
  for (float *r : c.rows)
    if (!r || reinterpret_cast<uintptr_t>(r) % 4 != 0)
      return "a row vector null or not 4-byte aligned";
  // Two tensors at one address share their first bytes: an output there is aliased.
  for (size_t i = kFirstOutput[c.op]; i < c.tensors.size(); ++i)
    for (size_t j = 0; j < c.tensors.size(); ++j)
      if (j != i && c.tensors[i].data == c.tensors[j].data)
        return "output tensor " + std::to_string(i) + " at tensor " + std::to_string(j) +
               "'s address";
  if (strict) {
    if (std::isnan(p.scale) || p.scale > FLT_MAX || (p.scale > 0 && p.scale < FLT_TRUE_MIN))
      return "scale " + describe(p.scale) + " (NaN, or not finite and positive in float32)";
    int64_t bh, bhn;
    if (__builtin_mul_overflow(p.batch, p.heads, &bh) || bh > 65535)
      return "batch * heads overflowing or past the grid limit: batch " + std::to_string(p.batch) +
             ", heads " + std::to_string(p.heads);
    if (__builtin_mul_overflow(bh, p.seq_q, &bhn))
      return "batch * heads * seq_q overflowing int64: " + std::to_string(p.batch) + " * " +
             std::to_string(p.heads) + " * " + std::to_string(p.seq_q);
    if (p.seq_q > INT32_MAX || p.seq_k > INT32_MAX)
      return "seq_q " + std::to_string(p.seq_q) + " or seq_k " + std::to_string(p.seq_k) +
             " past 2^31 - 1, which the kernels' i32 positions cannot address";
  }
  return "";
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Never a real driver: a call that passes validation would launch on made-up pointers.
  setenv("FLASHBOB_CUDA_DRIVER", "/nonexistent/flashbob-fuzz/libcuda.so.1", 1);
  const char *s = std::getenv("FLASHBOB_FUZZ_STRICT");
  strict = s && std::strcmp(s, "1") == 0;
  const char *v = std::getenv("FLASHBOB_FUZZ_VERBOSE");
  verbose = v && std::strcmp(v, "1") == 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Call c = decode(in);
  const flashbob_status status = run(c);
  const std::string error = flashbob_last_error() ? flashbob_last_error() : "(null)";
  if (verbose)
    std::fprintf(stderr, "fuzz_capi: op %d (problem size %u) status %d: %s\n", c.op,
                 unsigned(c.p.size), int(status), error.c_str());
  if (c.op == 3) {
    // Any directory name is accepted (or refused with a message); nothing is created yet.
    if (status != FLASHBOB_OK && status != FLASHBOB_ERROR_INVALID_ARGUMENT)
      finding("flashbob_set_cache_dir returned status " + std::to_string(status));
    if (status != FLASHBOB_OK && (error.empty() || error.find('\n') != std::string::npos))
      finding("flashbob_set_cache_dir failed without a one-line message");
    flashbob_set_cache_dir(nullptr);
    return 0;
  }
  if (status == FLASHBOB_OK)
    finding("a call returned OK without a driver");
  if (status != FLASHBOB_ERROR_INVALID_ARGUMENT && status != FLASHBOB_ERROR_NO_DRIVER)
    finding("status " + std::to_string(status) + " without a driver: " + error);
  if (error.empty() || error.find('\n') != std::string::npos)
    finding("status " + std::to_string(status) + " with last_error not one non-empty line: '" +
            error + "'");
  if (status == FLASHBOB_ERROR_NO_DRIVER) {
    std::string why = undocumentedPass(c);
    if (!why.empty())
      finding("op " + std::to_string(c.op) + " passed validation with " + why);
  }
  return 0;
}

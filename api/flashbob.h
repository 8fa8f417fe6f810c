/* FlashBoB C API: exact attention forward, backward and backward-over-backward (BoB) on CUDA
 * device pointers, JIT-compiled for each problem's specialization.
 *
 * Stable C ABI: no C++ types cross it, and flashbob_problem carries its own size (below), so a
 * binding built against another version of this header is understood or refused, never misread.
 * Every call returns a flashbob_status; on failure, flashbob_last_error() gives a one-line
 * message for the calling thread that names the bad argument or the failing CUDA/LLVM call.
 * Nothing is launched when an argument is invalid.
 *
 * Layouts: tensors are (batch, heads, seq, head_dim) in the problem's dtype with strides in
 * elements (head_dim stride 1; v and its kin head_dim_v wide where that is set), 16-byte
 * aligned: the address and every stride a multiple of 16 bytes (for a head_dim that is no
 * multiple of 8 or a head_dim_v that differs, which the call copies: only aligned to their
 * element); row vectors (lse, D, c, b) are contiguous (batch, heads, seq) float32. Streams are CUstream values (NULL: the legacy default stream). Work runs in the
 * current device's primary context, the one CUDA runtimes and frameworks use.
 *
 * Aliasing: no output may share memory with an input or with another output (kernels would read
 * what other blocks already overwrote): such a call is refused with
 * FLASHBOB_ERROR_INVALID_ARGUMENT naming both arguments ("o overlaps k"), judged from each
 * argument's bytes (its pointer, sizes and strides; a row vector's element count). Inputs may
 * share memory (self-attention with q, k and v one tensor), and outputs may interleave with
 * each other or with inputs in one buffer without sharing bytes (dq, dk, dv views of one packed
 * dqkv tensor).
 */
#ifndef FLASHBOB_H
#define FLASHBOB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHBOB_VERSION_MAJOR 0
#define FLASHBOB_VERSION_MINOR 2
#define FLASHBOB_VERSION_PATCH 0

typedef enum flashbob_status {
  FLASHBOB_OK = 0,
  FLASHBOB_ERROR_INVALID_ARGUMENT = 1, /* nothing was launched */
  FLASHBOB_ERROR_NO_DRIVER = 2,        /* no CUDA driver or device */
  FLASHBOB_ERROR_COMPILE = 3,          /* generating or assembling a kernel failed */
  FLASHBOB_ERROR_CUDA = 4,             /* a CUDA driver call failed (named in the message) */
  FLASHBOB_ERROR_UNSUPPORTED_DEVICE = 5, /* the GPU is not one the kernels run on (below sm_80,
                                            or unknown, e.g. sm_100); nothing was launched */
} flashbob_status;

typedef enum flashbob_dtype { FLASHBOB_BF16 = 0, FLASHBOB_FP16 = 1 } flashbob_dtype;

/* A problem's layout grows only by fields appended at its end, and its first field, `size`,
 * says which layout the caller has: sizeof(flashbob_problem) of the header it was compiled
 * against. Start every problem from FLASHBOB_PROBLEM_INIT or flashbob_problem_init(), which set
 * `size` and give every other field its default, zero. The library accepts the size of each
 * layout it knows: this header's, and each earlier one, which ends before a field appended since
 * (the layout before ring_step: offsetof(flashbob_problem, ring_step) bytes). It reads only
 * `size` bytes of the struct, and the fields past them keep their zero defaults, so an older
 * binding works with a newer library. Any other size (0, size not set; a size between two
 * layouts; a newer layout than this library knows, whose fields it would ignore) is refused with
 * FLASHBOB_ERROR_INVALID_ARGUMENT, the message naming p->size and the sizes accepted. */
typedef struct flashbob_problem {
  uint32_t size;    /* sizeof(flashbob_problem): see above */
  int64_t batch, heads;
  int64_t seq_q;    /* N, queries */
  int64_t seq_k;    /* M, keys */
  int64_t head_dim; /* d: 8 to 256 (flashbob_limit). The kernels' tiles are a multiple of 16
                       wide: another d runs at the next multiple of 16 with zero columns past
                       d, exact in every output, the default scale still 1/sqrt(d). A multiple
                       of 8 is padded inside the kernels, on the tensors as they are; any other
                       d is copied into zero-padded device memory the call allocates on the
                       stream (cuMemAllocAsync: the call's tensors at the padded width, freed
                       on the stream when it ends) and the outputs' first d columns copied
                       back: stream operations only, so graph capture works */
  flashbob_dtype dtype;
  int causal;       /* non-zero: causal mask, bottom-right aligned when M != N */
  double scale;     /* softmax scale; 0 means 1/sqrt(head_dim). The default runs kernels
                       with its value compiled in; any other is passed to the kernels at launch
                       (as f32, with scale * log2(e)): after the first, a new scale compiles
                       nothing */
  int64_t heads_kv; /* key/value heads (K, V and their gradients and cotangents): a divisor of
                       heads, grouped-query attention (1: multi-query); 0 means heads. Query head
                       h reads key/value head h / (heads / heads_kv); dK, dV, gK and gV are summed
                       over each group inside the kernels (deterministic) */
  int sliding_window; /* non-zero: query i sees key j only if
                         i + (M - N) - window_left <= j <= i + (M - N) + window_right (flash-attn's
                         window_size); -1 leaves a side unbounded.
                         With causal the right side is 0. Blocks outside the window are skipped:
                         the work grows with N x window. Zero: no window (the sizes are ignored) */
  int64_t window_left, window_right; /* each -1 or >= 0, at most max(seq_q, seq_k) (for a
                                        packed batch: max(max_seqlen_q, max_seqlen_k)) */
  int varlen; /* non-zero: a packed batch of variable-length sequences (flash-attn's varlen):
                 `batch` sequences whose rows follow one another, seq_q and seq_k the total
                 rows of each side. Tensors are then (1, heads, total, head_dim) (stride[0]
                 is ignored; (total, heads, head_dim) memory is stride {0, head_dim,
                 heads * head_dim, 1}), row vectors and workspaces heads x total_q floats.
                 Sequence s has the query rows cu_seqlens_q[s] .. cu_seqlens_q[s + 1] - 1 and
                 the key rows cu_seqlens_k[s] .. cu_seqlens_k[s + 1] - 1, and attends only to
                 itself, with the mask in its own rows (causal: bottom-right per sequence). No
                 work is spent past a sequence's end */
  const int32_t *cu_seqlens_q, *cu_seqlens_k; /* device memory, batch + 1 int32 each: 0, the
                 running sums of the lengths, the total. Read back and checked (a
                 synchronization of the stream) unless the stream is being captured into a CUDA
                 graph; the kernels keep every access inside the tensors whatever they hold */
  int64_t max_seqlen_q, max_seqlen_k; /* at least the longest sequence's rows, at most the
                 totals: the grid covers that many rows per sequence */
  int ring_step; /* non-zero: one step of a context-parallel ring (ring attention split over
                 GPUs by sequence): the problem is a pair of shards, seq_q rows of queries and
                 seq_k of keys, with the pair's mask (causal on a diagonal pair of equal shards,
                 none where every key comes first); lse and the workspaces' D, c, b are the
                 whole sequence's. Every tensor output is float32 (strides in float32
                 elements, multiples of 4) and a partial over the pair, for the caller to
                 combine over the ring: flashbob_forward's o and lse merge by log-sum-exp
                 (L = log sum exp L_t, O = sum exp(L_t - L) O_t); flashbob_backward's d_q, d_k,
                 d_v and flashbob_bob_pass2's g_k, g_v add up; BoB's first pass is
                 flashbob_bob_pass1. The forward's JVP (flashbob_forward_jvp,
                 flashbob_forward_dual) has no ring step. See the repository's
                 docs/context-parallel.md */
  int64_t head_dim_v; /* the values' head dim, when it differs from q's and k's (head_dim), as
                 in multi-head latent attention (q and k 192 wide, v 128): v, o, dO and the
                 tensors shaped like them (d_v, u_v, g_v, g_d_o, t_v, t_o) have rows this wide.
                 0 means head_dim; else 8 to 256 like head_dim. The default scale stays
                 1/sqrt(head_dim). A different width runs on zero-padded copies as a head_dim
                 that is no multiple of 8 does (see head_dim): both sides at the wider one's
                 kernel width. Not with ring_step */
} flashbob_problem;

/* A problem with `size` set and every other field zero (its default), for C and C++ callers:
 *   flashbob_problem p = FLASHBOB_PROBLEM_INIT;   or   p = flashbob_problem_init();
 * then set the sizes and options. */
#ifdef __cplusplus
static inline flashbob_problem flashbob_problem_init(void) {
  flashbob_problem p = flashbob_problem(); /* value-initialized: every field zero */
  p.size = (uint32_t)sizeof p;
  return p;
}
#define FLASHBOB_PROBLEM_INIT flashbob_problem_init()
#else
#define FLASHBOB_PROBLEM_INIT {.size = (uint32_t)sizeof(flashbob_problem)}
static inline flashbob_problem flashbob_problem_init(void) {
  flashbob_problem p = FLASHBOB_PROBLEM_INIT;
  return p;
}
#endif

typedef struct flashbob_tensor {
  void *data;        /* device pointer */
  int64_t stride[4]; /* elements; stride[3] must be 1 */
} flashbob_tensor;

/* "MAJOR.MINOR.PATCH", as the macros above (e.g. "0.2.0") */
const char *flashbob_version(void);
/* The message of the calling thread's last failed call ("" if none). */
const char *flashbob_last_error(void);

/* Autotuning of tile sizes (off by default, or FLASHBOB_AUTOTUNE=1): when on, the first call for
 * a problem class times the candidate tiles on the real problem and persists the winner in the
 * cache directory; later calls and processes reuse it. */
void flashbob_set_autotune(int on);
/* Directory of the on-disk kernel cache and tuning records (default: $FLASHBOB_CACHE_DIR, else
 * $XDG_CACHE_HOME/flashbob, else ~/.cache/flashbob). Overrides FLASHBOB_CACHE_DIR for this
 * process without changing the environment. Affects caches opened after the call, so call it
 * before the first attention call. NULL or "" restores the default directory (ignoring
 * FLASHBOB_CACHE_DIR). */
flashbob_status flashbob_set_cache_dir(const char *dir);

typedef enum flashbob_log_level {
  FLASHBOB_LOG_DEBUG = 0,   /* every kernel cache hit, store and pruning; autotuning details */
  FLASHBOB_LOG_INFO = 1,    /* a kernel compiling ("compiling bob_q (1/2): <kernel>"), autotuning
                               started (details too with FLASHBOB_PRINT_AUTOTUNING=1) */
  FLASHBOB_LOG_WARNING = 2, /* e.g. the cache directory is not writable, a malformed knob */
  FLASHBOB_LOG_ERROR = 3,
} flashbob_log_level;

/* Receives one message: a single line without newline, valid only during the call. */
typedef void (*flashbob_log_callback)(flashbob_log_level level, const char *message,
                                      void *user_data);

/* Routes FlashBoB's messages (kernel cache, autotuning, warnings) to `callback` for the whole
 * process instead of stderr, so an embedder can send them to its own logging. The callback gets
 * every level, Debug included, and may be called from any thread that calls FlashBoB,
 * concurrently. Messages can come while FlashBoB holds its locks, so the callback must not call
 * the attention functions (flashbob_set_log_callback itself is fine). NULL restores the default:
 * Info and above to stderr (`flashbob env` lists FLASHBOB_PRINT_AUTOTUNING and the other knobs).
 * Failures of API calls are not logged: they are returned as statuses with flashbob_last_error(). */
void flashbob_set_log_callback(flashbob_log_callback callback, void *user_data);

/* O and the log-sum-exp L (float32, batch x heads x N; heads x total_q for a packed batch) of
 * softmax(scale Q K^T) V. */
flashbob_status flashbob_forward(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                                 flashbob_tensor v, flashbob_tensor o, float *lse, void *stream);

/* dQ, dK, dV from the forward's O and L. d_workspace: batch x heads x N floats (receives D). */
flashbob_status flashbob_backward(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                                  flashbob_tensor v, flashbob_tensor o, flashbob_tensor d_o,
                                  const float *lse, flashbob_tensor d_q, flashbob_tensor d_k,
                                  flashbob_tensor d_v, float *d_workspace, void *stream);

/* BoB: given cotangents uQ, uK, uV of (dQ, dK, dV), the gradients of <uQ,dQ>+<uK,dK>+<uV,dV>
 * with respect to Q, K, V, dO. workspace: 3 x batch x heads x N floats (D, c, b). Not a ring
 * step (ring_step is refused): a ring runs flashbob_bob_pass1 and flashbob_bob_pass2. */
flashbob_status flashbob_bob(const flashbob_problem *p, flashbob_tensor q, flashbob_tensor k,
                             flashbob_tensor v, flashbob_tensor o, flashbob_tensor d_o,
                             const float *lse, flashbob_tensor u_q, flashbob_tensor u_k,
                             flashbob_tensor u_v, flashbob_tensor g_q, flashbob_tensor g_k,
                             flashbob_tensor g_v, flashbob_tensor g_d_o, float *workspace,
                             void *stream);

/* The forward's JVP (forward-mode derivative): t_o, the change of O along tangents t_q, t_k,
 * t_v of q, k, v (t_q like q, t_k and t_v like k), from the forward's O and L. One kernel: it
 * is BoB's gdO at cotangents (t_q, t_k, t_v), without the rest of BoB. */
flashbob_status flashbob_forward_jvp(const flashbob_problem *p, flashbob_tensor q,
                                     flashbob_tensor k, flashbob_tensor v, flashbob_tensor o,
                                     const float *lse, flashbob_tensor t_q, flashbob_tensor t_k,
                                     flashbob_tensor t_v, flashbob_tensor t_o, void *stream);

/* The forward and its JVP in one kernel: o and lse as flashbob_forward writes them, and t_o as
 * flashbob_forward_jvp computes it along tangents t_q, t_k, t_v (t_q like q, t_k and t_v like
 * k), in one sweep over the keys instead of the forward's and the JVP's two, and from O before
 * it is rounded to the dtype. No ring step (ring_step is refused). */
flashbob_status flashbob_forward_dual(const flashbob_problem *p, flashbob_tensor q,
                                      flashbob_tensor k, flashbob_tensor v, flashbob_tensor t_q,
                                      flashbob_tensor t_k, flashbob_tensor t_v,
                                      flashbob_tensor o, float *lse, flashbob_tensor t_o,
                                      void *stream);

/* BoB as two ring steps (ring_step set), for context parallelism. Pass 1 on a (query shard, key
 * shard) pair writes the query shard's unfinished accumulators x1..x4 (float32 tensors shaped
 * like q) and, in workspace (3 x batch x heads x seq_q floats), D, c and beta; summed over every
 * key shard (D is the same each time) they finish elementwise: b = sum beta - c o D,
 * g_q = scale (X1 - c o X2 - b o X3), g_d_o = X4 - c o O. */
flashbob_status flashbob_bob_pass1(const flashbob_problem *p, flashbob_tensor q,
                                   flashbob_tensor k, flashbob_tensor v, flashbob_tensor o,
                                   flashbob_tensor d_o, const float *lse, flashbob_tensor u_q,
                                   flashbob_tensor u_k, flashbob_tensor u_v, flashbob_tensor x1,
                                   flashbob_tensor x2, flashbob_tensor x3, flashbob_tensor x4,
                                   float *workspace, void *stream);
/* Pass 2: the key shard's g_k, g_v from the query shard's whole-sequence D, c and b
 * (row_scalars: 3 x batch x heads x seq_q floats, in that order, as flashbob_bob's workspace
 * holds them);
 * with ring_step float32 partials that add up over query shards. */
flashbob_status flashbob_bob_pass2(const flashbob_problem *p, flashbob_tensor q,
                                   flashbob_tensor k, flashbob_tensor v, flashbob_tensor d_o,
                                   const float *lse, const float *row_scalars, flashbob_tensor u_q,
                                   flashbob_tensor u_k, flashbob_tensor u_v, flashbob_tensor g_k,
                                   flashbob_tensor g_v, void *stream);

typedef enum flashbob_op {
  FLASHBOB_OP_FORWARD = 0,  /* flashbob_forward's kernel */
  FLASHBOB_OP_BACKWARD = 1, /* flashbob_backward's two kernels */
  FLASHBOB_OP_BOB = 2,      /* flashbob_bob's two kernels */
  FLASHBOB_OP_FORWARD_JVP = 3, /* flashbob_forward_jvp's kernel */
  FLASHBOB_OP_BOB_PASS1 = 4, /* flashbob_bob_pass1's kernel */
  FLASHBOB_OP_BOB_PASS2 = 5, /* flashbob_bob_pass2's kernel */
  FLASHBOB_OP_FORWARD_DUAL = 6, /* flashbob_forward_dual's kernel */
} flashbob_op;

/* Compiles (or loads from the disk cache) the kernels `op` runs for problem `p` on the current
 * device, launching nothing: the first real call then pays no compile time. The log callback
 * sees each compilation (Info level). */
flashbob_status flashbob_precompile(const flashbob_problem *p, flashbob_op op);

/* flashbob_precompile for `count` (1 to 64) operations at once, e.g. the four of a
 * Hessian-vector product step: every kernel they run is compiled on a thread of its own, so a
 * cold start costs the slowest compilation rather than the sum. Errors name ops[i]. */
flashbob_status flashbob_precompile_ops(const flashbob_problem *p, const flashbob_op *ops,
                                        int64_t count);

/* The limits of the problems this library's kernels take, for a front end that checks its
 * arguments before any call (when a framework traces a program, with no GPU) instead of
 * restating them; flashbob_check_problem applies them. */
typedef enum flashbob_limit_kind {
  FLASHBOB_LIMIT_HEAD_DIM_MULTIPLE = 0, /* head_dim is a multiple of this (1: any) ... */
  FLASHBOB_LIMIT_HEAD_DIM_MAX = 1,      /* ... at most this ... */
  FLASHBOB_LIMIT_SEQUENCE_MAX = 2,      /* seq_q and seq_k (a packed batch's totals) at most */
  FLASHBOB_LIMIT_BATCH_HEADS_MAX = 3,   /* batch * heads at most (one grid row each) */
  FLASHBOB_LIMIT_HEAD_DIM_MIN = 4,      /* ... and head_dim at least this */
} flashbob_limit_kind;

/* The value of limit `kind`; -1 for a kind this library does not know (a newer header's). */
int64_t flashbob_limit(flashbob_limit_kind kind);

/* Checks problem `p` as every call does before it launches anything (its size field, the sizes
 * and the limits above, dtype, mask, window, scale, heads_kv), needing no GPU and launching
 * nothing: FLASHBOB_OK, or FLASHBOB_ERROR_INVALID_ARGUMENT with flashbob_last_error() naming
 * the field. A packed batch's offsets are device memory: only the calls read them. */
flashbob_status flashbob_check_problem(const flashbob_problem *p);

/* The directory of the kernel cache and tuning records as this library uses it:
 * flashbob_set_cache_dir's, else FLASHBOB_CACHE_DIR, else the default (docs: the cache). The
 * string is valid until this thread's next call of this function. */
const char *flashbob_cache_dir(void);

/* XLA FFI handlers of flashbob_forward, flashbob_backward, flashbob_bob and
 * flashbob_forward_jvp, for JAX (flashbob.jax registers them with jax.ffi.register_ffi_target):
 * each takes an XLA_FFI_CallFrame* and returns an XLA_FFI_Error* (NULL: success), following
 * XLA's FFI C API 0.1 and its later minor versions (api/XlaFfiAbi.h). Their operands, results and
 * attributes are flashbob.jax's (python/flashbob/jax/_lowering.py); they are not meant to be
 * called otherwise. */
void *flashbob_xla_forward(void *call_frame);
void *flashbob_xla_backward(void *call_frame);
void *flashbob_xla_bob(void *call_frame);
void *flashbob_xla_forward_jvp(void *call_frame);

/* The `flashbob` command-line tool (env, devices, cache, compile, run, bench, demo) inside this
 * library, with its LLVM: argv[0] is the program's name, the rest its arguments; returns the
 * tool's exit code (0 ok, 1 failure, 2 usage). It is a program's main, not a library call: like
 * the tool, --help and --version end the process. The Python package's `flashbob` command and
 * `python -m flashbob` run it. */
int flashbob_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* FLASHBOB_H */

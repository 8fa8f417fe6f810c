/* A C program against the C API (flashbob.h), built as C. Without a GPU it checks the error
 * paths (bad arguments named, no driver reported); with one it runs the forward, backward and
 * BoB on a small problem through a dlopen'ed driver and checks the outputs are finite and that
 * the backward of a constant upstream gradient has the right symmetry (sum of dV over keys equals
 * sum of dO over queries times 1, since each row of P sums to 1); the forward's JVP against BoB's
 * gdO, and the forward with its JVP in one kernel against the forward's and the JVP's.
 * Exit: 0 pass, 1 fail, 77 GPU part skipped (printed) after the CPU part passed. */
#include "api/flashbob.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define EXPECT(cond, ...)                                                                        \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                \
      printf(__VA_ARGS__);                                                                       \
      printf("\n");                                                                              \
      ++failures;                                                                                \
    }                                                                                            \
  } while (0)

static flashbob_tensor contiguous(void *data, const flashbob_problem *p, int64_t rows) {
  flashbob_tensor t;
  t.data = data;
  t.stride[0] = p->heads * rows * p->head_dim;
  t.stride[1] = rows * p->head_dim;
  t.stride[2] = p->head_dim;
  t.stride[3] = 1;
  return t;
}

/* bf16 <-> float, round to nearest even. */
static unsigned short to_bf16(float f) {
  unsigned int b;
  memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (unsigned short)(b >> 16);
}
static float from_bf16(unsigned short h) {
  unsigned int b = (unsigned int)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

/* Relative L2 distance of n bf16 values from the reference ones. */
static double relative_l2(const unsigned short *got, const unsigned short *ref, size_t n) {
  double diff = 0, norm = 0;
  for (size_t j = 0; j < n; ++j) {
    double a = from_bf16(got[j]), b = from_bf16(ref[j]);
    diff += (a - b) * (a - b);
    norm += b * b;
  }
  return norm > 0 ? sqrt(diff / norm) : INFINITY;
}

static int logged = 0;
static void on_log(flashbob_log_level level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  ++*(int *)user_data;
}

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_ctx_retain_t)(void **, int);
typedef int (*cu_ctx_set_t)(void *);
typedef int (*cu_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_copy_h2d_t)(unsigned long long, const void *, size_t);
typedef int (*cu_copy_d2h_t)(void *, unsigned long long, size_t);
typedef int (*cu_sync_t)(void);

static int gpu_part(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    printf("SKIPPED: no CUDA driver found: %s\n", dlerror());
    return 77;
  }
  cu_init_t cuInit = (cu_init_t)dlsym(cuda, "cuInit");
  cu_device_get_t cuDeviceGet = (cu_device_get_t)dlsym(cuda, "cuDeviceGet");
  cu_ctx_retain_t retain = (cu_ctx_retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain");
  cu_ctx_set_t setCurrent = (cu_ctx_set_t)dlsym(cuda, "cuCtxSetCurrent");
  cu_alloc_t alloc = (cu_alloc_t)dlsym(cuda, "cuMemAlloc_v2");
  cu_copy_h2d_t h2d = (cu_copy_h2d_t)dlsym(cuda, "cuMemcpyHtoD_v2");
  cu_copy_d2h_t d2h = (cu_copy_d2h_t)dlsym(cuda, "cuMemcpyDtoH_v2");
  cu_sync_t sync = (cu_sync_t)dlsym(cuda, "cuCtxSynchronize");
  int dev = 0;
  void *ctx = NULL;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || retain(&ctx, dev) || setCurrent(ctx)) {
    printf("SKIPPED: no usable CUDA device\n");
    return 77;
  }

  flashbob_problem p = FLASHBOB_PROBLEM_INIT;
  p.batch = 1;
  p.heads = 2;
  p.seq_q = 96;
  p.seq_k = 80;
  p.head_dim = 64;
  p.dtype = FLASHBOB_BF16;
  p.causal = 1;
  const size_t nq = (size_t)(p.batch * p.heads * p.seq_q * p.head_dim);
  const size_t nk = (size_t)(p.batch * p.heads * p.seq_k * p.head_dim);
  const size_t rows = (size_t)(p.batch * p.heads * p.seq_q);
  unsigned short *host = malloc(2 * (nq > nk ? nq : nk));
  unsigned long long buf[16];
  size_t sizes[16] = {nq, nk, nk, nq, nq, nq, nk, nk, nq, nk, nk, nq, nk, nk, nq, 0};
  for (int i = 0; i < 15; ++i) {
    EXPECT(alloc(&buf[i], sizes[i] * 2) == 0, "cuMemAlloc");
    for (size_t j = 0; j < sizes[i]; ++j)
      host[j] = to_bf16((float)sin(0.37 * (double)j + i) * (i == 4 ? 0.0f : 1.0f) + (i == 4));
    EXPECT(h2d(buf[i], host, sizes[i] * 2) == 0, "cuMemcpyHtoD");
  }
  unsigned long long lse, work;
  EXPECT(alloc(&lse, rows * 4) == 0 && alloc(&work, 3 * rows * 4) == 0, "cuMemAlloc rows");
  /* 0 q, 1 k, 2 v, 3 o, 4 dO (all ones), 5 dQ, 6 dK, 7 dV, 8 uQ, 9 uK, 10 uV, 11 gQ, 12 gK, 13 gV, 14 gdO */
#define T(i, r) contiguous((void *)(uintptr_t)buf[i], &p, r)
  /* Compiling ahead of the calls: the kernels of every op, nothing launched; one op, then the
   * four of an HVP step at once. */
  EXPECT(flashbob_precompile(&p, FLASHBOB_OP_FORWARD) == FLASHBOB_OK, "precompile forward: %s",
         flashbob_last_error());
  const flashbob_op step_ops[] = {FLASHBOB_OP_FORWARD, FLASHBOB_OP_BACKWARD, FLASHBOB_OP_BOB,
                                  FLASHBOB_OP_FORWARD_JVP};
  EXPECT(flashbob_precompile_ops(&p, step_ops, 4) == FLASHBOB_OK, "precompile an HVP step: %s",
         flashbob_last_error());
  EXPECT(flashbob_forward(&p, T(0, p.seq_q), T(1, p.seq_k), T(2, p.seq_k), T(3, p.seq_q),
                          (float *)(uintptr_t)lse, NULL) == FLASHBOB_OK,
         "flashbob_forward: %s", flashbob_last_error());
  EXPECT(flashbob_backward(&p, T(0, p.seq_q), T(1, p.seq_k), T(2, p.seq_k), T(3, p.seq_q),
                           T(4, p.seq_q), (const float *)(uintptr_t)lse, T(5, p.seq_q),
                           T(6, p.seq_k), T(7, p.seq_k), (float *)(uintptr_t)work, NULL) == FLASHBOB_OK,
         "flashbob_backward: %s", flashbob_last_error());
  EXPECT(flashbob_bob(&p, T(0, p.seq_q), T(1, p.seq_k), T(2, p.seq_k), T(3, p.seq_q),
                      T(4, p.seq_q), (const float *)(uintptr_t)lse, T(8, p.seq_q), T(9, p.seq_k),
                      T(10, p.seq_k), T(11, p.seq_q), T(12, p.seq_k), T(13, p.seq_k),
                      T(14, p.seq_q), (float *)(uintptr_t)work, NULL) == FLASHBOB_OK,
         "flashbob_bob: %s", flashbob_last_error());
  /* The forward's JVP along (uQ, uK, uV) into dQ's buffer (read no more): BoB's gdO at those
   * cotangents is the same quantity (docs/bob-math.md), computed by another kernel. */
  EXPECT(flashbob_forward_jvp(&p, T(0, p.seq_q), T(1, p.seq_k), T(2, p.seq_k), T(3, p.seq_q),
                              (const float *)(uintptr_t)lse, T(8, p.seq_q), T(9, p.seq_k),
                              T(10, p.seq_k), T(5, p.seq_q), NULL) == FLASHBOB_OK,
         "flashbob_forward_jvp: %s", flashbob_last_error());
  /* The forward and its JVP in one kernel, along the same tangents, into buffers of its own. */
  unsigned long long dual_o, dual_lse, dual_to;
  EXPECT(alloc(&dual_o, nq * 2) == 0 && alloc(&dual_lse, rows * 4) == 0 &&
             alloc(&dual_to, nq * 2) == 0,
         "cuMemAlloc dual");
  EXPECT(flashbob_precompile(&p, FLASHBOB_OP_FORWARD_DUAL) == FLASHBOB_OK,
         "precompile forward_dual: %s", flashbob_last_error());
  EXPECT(flashbob_forward_dual(&p, T(0, p.seq_q), T(1, p.seq_k), T(2, p.seq_k), T(8, p.seq_q),
                               T(9, p.seq_k), T(10, p.seq_k),
                               contiguous((void *)(uintptr_t)dual_o, &p, p.seq_q),
                               (float *)(uintptr_t)dual_lse,
                               contiguous((void *)(uintptr_t)dual_to, &p, p.seq_q),
                               NULL) == FLASHBOB_OK,
         "flashbob_forward_dual: %s", flashbob_last_error());
  EXPECT(sync() == 0, "cuCtxSynchronize");
  /* With dO = 1: dV = P^T 1, and sum over keys of dV[:, j] = sum over queries of rowsum(P) = the
   * number of queries that see at least one key (all of them here: M >= ... causal keeps
   * N - M = 16 rows fully masked, which contribute 0). */
  EXPECT(d2h(host, buf[7], nk * 2) == 0, "cuMemcpyDtoH");
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    double total = 0;
    for (int64_t j = 0; j < p.seq_k; ++j)
      total += from_bf16(host[(bh * p.seq_k + j) * p.head_dim]);
    double expected = (double)(p.seq_q - (p.seq_q - p.seq_k)); /* unmasked query rows */
    EXPECT(fabs(total - expected) < 0.02 * expected, "sum of dV column = %f, expected %f", total, expected);
  }
  for (int i = 11; i < 15; ++i) {
    EXPECT(d2h(host, buf[i], sizes[i] * 2) == 0, "cuMemcpyDtoH");
    for (size_t j = 0; j < sizes[i]; ++j)
      if (!isfinite(from_bf16(host[j]))) {
        EXPECT(0, "BoB output %d has a non-finite value at %zu", i, j);
        break;
      }
  }
  {
    unsigned short *jvp = malloc(sizes[14] * 2);
    EXPECT(jvp && d2h(jvp, buf[5], sizes[14] * 2) == 0 && d2h(host, buf[14], sizes[14] * 2) == 0,
           "cuMemcpyDtoH");
    double diff = 0, norm = 0;
    for (size_t j = 0; j < sizes[14]; ++j) {
      double a = from_bf16(jvp[j]), b = from_bf16(host[j]);
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    EXPECT(norm > 0 && sqrt(diff / norm) < 1e-2, "forward JVP vs BoB's gdO: relative %g",
           sqrt(diff / (norm > 0 ? norm : 1)));
    free(jvp);
  }
  {
    /* One kernel's O, L and tO against the forward's and the JVP kernel's (which read the
     * forward's bf16 O where the one kernel keeps it in f32: close, not equal). L is -inf in the
     * causal problem's N - M = 16 rows that see no key, in both. */
    unsigned short *got = malloc(nq * 2), *ref = malloc(nq * 2);
    float *got_lse = malloc(rows * 4), *ref_lse = malloc(rows * 4);
    EXPECT(got && ref && got_lse && ref_lse, "malloc");
    EXPECT(d2h(got, dual_o, nq * 2) == 0 && d2h(ref, buf[3], nq * 2) == 0, "cuMemcpyDtoH");
    EXPECT(relative_l2(got, ref, nq) < 1e-2, "forward_dual's O vs the forward's: relative %g",
           relative_l2(got, ref, nq));
    EXPECT(d2h(got, dual_to, nq * 2) == 0 && d2h(ref, buf[5], nq * 2) == 0, "cuMemcpyDtoH");
    EXPECT(relative_l2(got, ref, nq) < 1e-2, "forward_dual's tO vs forward_jvp's: relative %g",
           relative_l2(got, ref, nq));
    EXPECT(d2h(got_lse, dual_lse, rows * 4) == 0 && d2h(ref_lse, lse, rows * 4) == 0,
           "cuMemcpyDtoH");
    for (size_t i = 0; i < rows; ++i)
      if (!(got_lse[i] == ref_lse[i] ||
            fabs(got_lse[i] - ref_lse[i]) < 1e-4 * (1 + fabs(ref_lse[i])))) {
        EXPECT(0, "forward_dual's L[%zu] = %g, the forward's %g", i, got_lse[i], ref_lse[i]);
        break;
      }
    free(got);
    free(ref);
    free(got_lse);
    free(ref_lse);
  }
  free(host);
  printf("C API GPU run: forward, backward, BoB, forward JVP, forward with JVP ok\n");
  return 0;
}

int main(void) {
  printf("flashbob %s\n", flashbob_version());
  {
    char header[32];
    snprintf(header, sizeof header, "%d.%d.%d", FLASHBOB_VERSION_MAJOR, FLASHBOB_VERSION_MINOR,
             FLASHBOB_VERSION_PATCH);
    EXPECT(strcmp(flashbob_version(), header) == 0, "version %s, header %s", flashbob_version(),
           header);
  }

  flashbob_problem p = flashbob_problem_init();
  EXPECT(p.size == sizeof(flashbob_problem) && p.batch == 0 && p.cu_seqlens_q == NULL &&
             p.ring_step == 0,
         "flashbob_problem_init: size %u", (unsigned)p.size);
  p.batch = 1;
  p.heads = 1;
  p.seq_q = 128;
  p.seq_k = 128;
  p.head_dim = 64;
  /* q, k and v may be one tensor (self-attention); o is a tensor of its own, 256 KiB further. */
  flashbob_tensor t = contiguous((void *)(uintptr_t)0x100000, &p, 128);
  flashbob_tensor o = contiguous((void *)(uintptr_t)0x140000, &p, 128);
  flashbob_tensor null_t = t;
  null_t.data = NULL;
  float *lse = (float *)(uintptr_t)0x200000;

  /* Bad arguments: named, nothing launched (these need no GPU). */
  EXPECT(flashbob_forward(NULL, t, t, t, o, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "null problem");
  EXPECT(strstr(flashbob_last_error(), "problem is a null pointer") != NULL, "%s", flashbob_last_error());
  EXPECT(flashbob_forward(&p, t, null_t, t, o, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "null k");
  EXPECT(strstr(flashbob_last_error(), "k is a null pointer") != NULL, "%s", flashbob_last_error());
  flashbob_problem bad = p;
  bad.head_dim = 257;
  EXPECT(flashbob_forward(&bad, t, t, t, o, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "head_dim");
  EXPECT(strstr(flashbob_last_error(), "head_dim 257") != NULL, "%s", flashbob_last_error());
  bad = p;
  bad.dtype = (flashbob_dtype)7;
  EXPECT(flashbob_forward(&bad, t, t, t, o, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "dtype");
  /* A problem whose size was never set (a struct filled field by field from zero) is refused,
   * naming the field, not read as some layout. */
  bad = p;
  bad.size = 0;
  EXPECT(flashbob_forward(&bad, t, t, t, o, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "size 0");
  EXPECT(strstr(flashbob_last_error(), "p->size = 0") != NULL, "%s", flashbob_last_error());
  /* An output on an input's memory: refused naming both. */
  EXPECT(flashbob_forward(&p, t, t, t, t, lse, NULL) == FLASHBOB_ERROR_INVALID_ARGUMENT, "o == q");
  EXPECT(strstr(flashbob_last_error(), "o overlaps q") != NULL, "%s", flashbob_last_error());
  EXPECT(flashbob_bob(&p, t, t, t, t, t, lse, t, t, t, t, t, t, t, NULL, NULL) ==
             FLASHBOB_ERROR_INVALID_ARGUMENT, "null workspace");
  EXPECT(strstr(flashbob_last_error(), "workspace is a null pointer") != NULL, "%s", flashbob_last_error());
  EXPECT(flashbob_precompile(&p, (flashbob_op)9) == FLASHBOB_ERROR_INVALID_ARGUMENT, "precompile op");
  EXPECT(strstr(flashbob_last_error(), "op must be") != NULL, "%s", flashbob_last_error());
  EXPECT(flashbob_precompile(&bad, FLASHBOB_OP_BOB) == FLASHBOB_ERROR_INVALID_ARGUMENT, "precompile dtype");
  const flashbob_op ops[] = {FLASHBOB_OP_FORWARD, (flashbob_op)9};
  EXPECT(flashbob_precompile_ops(&p, ops, 2) == FLASHBOB_ERROR_INVALID_ARGUMENT, "precompile ops");
  EXPECT(strstr(flashbob_last_error(), "ops[1] must be") != NULL, "%s", flashbob_last_error());
  EXPECT(flashbob_precompile_ops(&p, ops, 0) == FLASHBOB_ERROR_INVALID_ARGUMENT, "precompile count");

  /* Switches: the cache directory overrides FLASHBOB_CACHE_DIR inside the library, leaving the
   * environment alone (capi_test checks what the cache opens); NULL restores the default. */
  const char *env_before = getenv("FLASHBOB_CACHE_DIR");
  EXPECT(flashbob_set_cache_dir("/tmp/flashbob-capi-cache") == FLASHBOB_OK, "set_cache_dir");
  EXPECT(getenv("FLASHBOB_CACHE_DIR") == env_before ||
             (env_before && getenv("FLASHBOB_CACHE_DIR") &&
              strcmp(getenv("FLASHBOB_CACHE_DIR"), env_before) == 0),
         "flashbob_set_cache_dir changed the environment");
  EXPECT(flashbob_set_cache_dir(NULL) == FLASHBOB_OK, "flashbob_set_cache_dir(NULL)");
  flashbob_set_autotune(0);
  /* The log callback is exported and can be set and reset (capi_test checks what it receives). */
  flashbob_set_log_callback(on_log, &logged);
  flashbob_set_log_callback(NULL, NULL);

  /* Valid arguments without a driver: one clear status and message. */
  if (getenv("FLASHBOB_CUDA_DRIVER")) {
    EXPECT(flashbob_forward(&p, t, t, t, o, lse, NULL) == FLASHBOB_ERROR_NO_DRIVER, "no driver");
    EXPECT(strncmp(flashbob_last_error(), "no CUDA driver found", 20) == 0, "%s", flashbob_last_error());
    EXPECT(flashbob_precompile(&p, FLASHBOB_OP_BOB) == FLASHBOB_ERROR_NO_DRIVER, "precompile, no driver");
    EXPECT(flashbob_precompile_ops(&p, ops, 1) == FLASHBOB_ERROR_NO_DRIVER, "precompile_ops, no driver");
  }
  if (failures)
    return 1;
  printf("C API CPU checks: ok\n");
  if (getenv("FLASHBOB_CUDA_DRIVER"))
    return 0; /* the driver is simulated absent: the GPU part is capi_gpu's */
  int gpu = gpu_part();
  return failures ? 1 : gpu;
}

// The C API's plumbing without a GPU: error kinds become status codes by class, the no-driver
// path, flashbob_set_cache_dir as a knob override, and the log callback receiving the cache's
// and the autotuner's messages. CApi.cpp is compiled into this test (libflashbob.so hides the
// C++ it would need to look inside).
#include "api/CApiStatus.h"
#include "api/flashbob.h"
#include "runtime/cache/DiskCache.h"
#include "runtime/tune/Autotuner.h"
#include "support/Errors.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace flashbob;

namespace {

struct Received {
  flashbob_log_level level;
  std::string message;
};

void collect(flashbob_log_level level, const char *message, void *userData) {
  static_cast<std::vector<Received> *>(userData)->push_back({level, message});
}

bool anyStartsWith(const std::vector<Received> &log, flashbob_log_level level,
                   llvm::StringRef prefix) {
  for (const Received &r : log)
    if (r.level == level && llvm::StringRef(r.message).starts_with(prefix))
      return true;
  return false;
}

// batch 1, heads 1, N = M = 128, d = 64, bf16: each tensor 16 KiB (32 KiB as a ring step's
// float32 output).
flashbob_problem smallProblem() {
  flashbob_problem p = FLASHBOB_PROBLEM_INIT;
  p.batch = 1;
  p.heads = 1;
  p.seq_q = 128;
  p.seq_k = 128;
  p.head_dim = 64;
  p.dtype = FLASHBOB_BF16;
  return p;
}

// The contiguous tensor of smallProblem() at `address`, or the i-th of a row of tensors 1 MiB
// apart (never dereferenced: without a driver nothing runs).
flashbob_tensor tensorAtAddress(uintptr_t address) {
  return {reinterpret_cast<void *>(address), {8192, 8192, 64, 1}};
}
flashbob_tensor tensorAt(int i) { return tensorAtAddress(0x1000000 + uintptr_t(i) * 0x100000); }

struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { REQUIRE(!llvm::sys::fs::createUniqueDirectory("flashbob-capi-test", path)); }
  ~TempDir() { (void)llvm::sys::fs::remove_directories(path, /*IgnoreErrors=*/true); }
};

} // namespace

TEST_CASE("every error kind has its C status", "[capi]") {
  CHECK(api::statusFor(support::ErrorKind::InvalidArgument) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(api::statusFor(support::ErrorKind::NoDriver) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK(api::statusFor(support::ErrorKind::CudaCall) == FLASHBOB_ERROR_CUDA);
  CHECK(api::statusFor(support::ErrorKind::Compile) == FLASHBOB_ERROR_COMPILE);
  CHECK(api::statusFor(support::ErrorKind::UnsupportedDevice) == FLASHBOB_ERROR_UNSUPPORTED_DEVICE);
  CHECK(api::statusFor(support::ErrorKind::Other) == FLASHBOB_ERROR_COMPILE);
}

TEST_CASE("bad arguments and a missing driver give their statuses", "[capi]") {
  // Before the first driver access of this process: the driver is absent, whatever the machine.
  support::setOverride(support::Knob::CudaDriver, "/nonexistent/libcuda.so.1");
  flashbob_problem p = smallProblem();
  // q, k and v one tensor (inputs may share memory); every output apart (outputs may not).
  const flashbob_tensor t = tensorAt(0);
  float *lse = reinterpret_cast<float *>(uintptr_t(0x200000));
  flashbob_tensor o = tensorAt(3);

  CHECK(flashbob_forward(nullptr, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: problem is a null pointer");
  flashbob_problem bad = p;
  bad.seq_q = -3;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: seq_q (N) must be positive, got -3");

  // A NaN scale is refused (it used to become 1/sqrt(d), status OK); so are finite doubles that
  // float32, the kernels' type, cannot hold.
  bad = p;
  bad.scale = std::nan("");
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("scale") && Catch::Contains("nan"));
  for (double scale : {1e300, 1e-320}) {
    bad.scale = scale;
    CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(flashbob_last_error(), Catch::Contains("scale"));
  }

  CHECK(flashbob_forward(&p, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK_THAT(flashbob_last_error(),
             Catch::StartsWith("no CUDA driver found: /nonexistent/libcuda.so.1"));
  // Remembered: the same status and line on every later call.
  CHECK(flashbob_forward(&p, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("no CUDA driver found"));

  // A window is read only with sliding_window set (zero-initialized problems have none); its
  // sides are checked then, before the driver.
  bad = p;
  bad.window_left = -7;
  bad.sliding_window = 1;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) ==
        "flashbob: window_left must be -1 (unbounded) or >= 0, got -7");
  bad.sliding_window = 0; // the same sizes, ignored
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // A packed batch: its bounds and offsets are read only with varlen set, and checked before
  // the driver (the offsets' contents need it: tested with the fake driver).
  bad = p;
  bad.max_seqlen_q = 129; // seq_q = 128 packed rows
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  bad.varlen = 1;
  bad.max_seqlen_k = 64;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) ==
        "flashbob: max_seqlen_q = 129 must be in 1..seq_q = 128 (the longest sequence's rows, or "
        "more)");
  bad.max_seqlen_q = 128;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: cu_seqlens_q is a null pointer");
  const int32_t *misaligned = reinterpret_cast<const int32_t *>(uintptr_t(0x300002));
  bad.cu_seqlens_q = reinterpret_cast<const int32_t *>(uintptr_t(0x300000));
  bad.cu_seqlens_k = misaligned;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: cu_seqlens_k is not 4-byte aligned");
  // The window's bound is the longest sequence, not the packed rows.
  bad.cu_seqlens_k = bad.cu_seqlens_q;
  bad.sliding_window = 1;
  bad.window_left = 129;
  bad.window_right = -1;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(),
             Catch::Contains("window_left = 129 is larger than the sequences (max_seqlen_q = 128, "
                             "max_seqlen_k = 64)"));
  bad.window_left = 100;
  CHECK(flashbob_forward(&bad, t, t, t, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // Ring steps: BoB's passes apart, their row vectors named, the forward's JVP refused; valid
  // calls reach the (missing) driver.
  flashbob_problem ring = p;
  ring.ring_step = 1;
  // Pass 1's outputs X1..X4 (float32) and its workspace, each apart.
  const flashbob_tensor x1 = tensorAt(4), x2 = tensorAt(5), x3 = tensorAt(6), x4 = tensorAt(7);
  float *work = reinterpret_cast<float *>(uintptr_t(0x300000));
  CHECK(flashbob_bob_pass1(&ring, t, t, t, t, t, lse, t, t, t, x1, x2, x3, x4, nullptr,
                           nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: workspace is a null pointer");
  CHECK(flashbob_bob_pass1(&ring, t, t, t, t, t, lse, t, t, t, x1, x2, x3, x4, work, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_bob_pass1(&p, t, t, t, t, t, lse, t, t, t, x1, x2, x3, x4, work, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: BoB's first pass alone is a ring "
                                                      "step: set ring_step"));
  CHECK(flashbob_bob(&ring, t, t, t, t, t, lse, t, t, t, x1, x2, x3, x4, work, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: BoB's ring steps are its two "
                                                      "passes apart"));
  CHECK(flashbob_bob_pass2(&ring, t, t, t, t, lse, nullptr, t, t, t, x1, x2, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: row_scalars is a null pointer");
  for (const flashbob_problem *q : {&p, &ring}) // pass 2 runs on one GPU too
    CHECK(flashbob_bob_pass2(q, t, t, t, t, lse, work, t, t, t, x1, x2, nullptr) ==
          FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_forward_jvp(&ring, t, t, t, o, lse, t, t, t, x1, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: ring_step: fwd_jvp has no ring-step form"));
  // The forward with its JVP: refused as a ring step, at the call and at precompile; on one GPU
  // it reaches the driver.
  CHECK(flashbob_forward_dual(&ring, t, t, t, t, t, t, o, lse, x1, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(),
             Catch::StartsWith("flashbob: ring_step: fwd_dual has no ring-step form"));
  CHECK(flashbob_precompile(&ring, FLASHBOB_OP_FORWARD_DUAL) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("ring_step"));
  CHECK(flashbob_forward_dual(&p, t, t, t, t, t, t, o, lse, x1, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_precompile(&p, FLASHBOB_OP_FORWARD_DUAL) == FLASHBOB_ERROR_NO_DRIVER);
  const flashbob_op passes[] = {FLASHBOB_OP_BOB_PASS1, FLASHBOB_OP_BOB_PASS2};
  CHECK(flashbob_precompile_ops(&ring, passes, 2) == FLASHBOB_ERROR_NO_DRIVER);
  const int beyond = FLASHBOB_OP_FORWARD_DUAL + 1;
  flashbob_op unknown;
  std::memcpy(&unknown, &beyond, sizeof unknown);
  CHECK(flashbob_precompile(&ring, unknown) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("FLASHBOB_OP_FORWARD_DUAL"));
}

TEST_CASE("flashbob_problem's size: the layouts the library knows are read, others refused",
          "[capi]") {
  support::setOverride(support::Knob::CudaDriver, "/nonexistent/libcuda.so.1");
  const flashbob_tensor q = tensorAt(0), o = tensorAt(3);
  float *lse = reinterpret_cast<float *>(uintptr_t(0x200000));
  const uint32_t before = offsetof(flashbob_problem, ring_step); // the layout before ring_step
  const uint32_t beforeV = offsetof(flashbob_problem, head_dim_v); // ... before head_dim_v
  REQUIRE(before == 136);
  REQUIRE(beforeV == 144);
  REQUIRE(sizeof(flashbob_problem) == 152);

  // 0 (never set), sizes that are no layout's (too small, inside a field, between the two
  // layouts, larger than this library knows): refused naming p->size and the sizes accepted.
  for (uint32_t size : {0u, 4u, 8u, 100u, 140u, 143u, 148u, 160u, 4096u, 0xffffffffu}) {
    INFO("size " << size);
    flashbob_problem p = smallProblem();
    p.size = size;
    CHECK(flashbob_forward(&p, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(flashbob_last_error(),
               Catch::StartsWith("flashbob: p->size = " + std::to_string(size) +
                                 " is not the size of a flashbob_problem layout this library "
                                 "knows (136, 144 or 152 bytes)"));
    CHECK_THAT(flashbob_last_error(), Catch::Contains("FLASHBOB_PROBLEM_INIT"));
    CHECK(flashbob_precompile(&p, FLASHBOB_OP_FORWARD) == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(flashbob_last_error(), Catch::Contains("p->size"));
  }
  flashbob_problem newer = smallProblem();
  newer.size = 160;
  CHECK(flashbob_forward(&newer, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::EndsWith("or use a newer libflashbob"));

  // Both layouts are accepted (the call gets as far as the missing driver). The init helpers set
  // the size of this header's.
  flashbob_problem current = smallProblem();
  CHECK(current.size == sizeof(flashbob_problem));
  CHECK(flashbob_problem_init().size == sizeof(flashbob_problem));
  CHECK(flashbob_forward(&current, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // An older caller's struct ends where its layout does: placed against a page the process may
  // not read, the library must read no byte past `size` (reading one faults).
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  void *pages = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                       0);
  REQUIRE(pages != MAP_FAILED);
  REQUIRE(::mprotect(static_cast<char *>(pages) + page, page, PROT_NONE) == 0);
  flashbob_problem fields = smallProblem();
  fields.size = before;
  char *end = static_cast<char *>(pages) + page;
  std::memcpy(end - before, &fields, before);
  const auto *old = reinterpret_cast<const flashbob_problem *>(end - before);
  CHECK(flashbob_forward(old, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_precompile(old, FLASHBOB_OP_BOB) == FLASHBOB_ERROR_NO_DRIVER);
  // Its ring_step is the default, 0: pass 1 (a ring step only) is refused for the want of it.
  const flashbob_tensor x[4] = {tensorAt(4), tensorAt(5), tensorAt(6), tensorAt(7)};
  float *work = reinterpret_cast<float *>(uintptr_t(0x300000));
  CHECK(flashbob_bob_pass1(old, q, q, q, q, q, lse, q, q, q, x[0], x[1], x[2], x[3], work,
                           nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("set ring_step"));
  ::munmap(pages, 2 * page);

  // The bytes after an old layout are not the caller's: garbage there (a ring_step that BoB
  // whole and the forward's JVP refuse) is never read.
  flashbob_problem garbage = smallProblem();
  std::memset(reinterpret_cast<char *>(&garbage) + before, 0x5a, sizeof garbage - before);
  REQUIRE(garbage.ring_step != 0);
  garbage.head_dim_v = 0; // (read at the full size only: its own case is below)
  garbage.size = before;
  const flashbob_tensor g[4] = {tensorAt(8), tensorAt(9), tensorAt(10), tensorAt(11)};
  CHECK(flashbob_bob(&garbage, q, q, q, o, q, lse, q, q, q, g[0], g[1], g[2], g[3], work,
                     nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_forward_jvp(&garbage, q, q, q, o, lse, q, q, q, g[0], nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  // The same struct at its full size does read it.
  garbage.size = sizeof garbage;
  CHECK(flashbob_forward_jvp(&garbage, q, q, q, o, lse, q, q, q, g[0], nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("ring_step"));

  // The layout before head_dim_v: garbage where head_dim_v would be is not read; at the full
  // size it is, and refused by name.
  flashbob_problem noWidth = smallProblem();
  std::memset(reinterpret_cast<char *>(&noWidth) + beforeV, 0x5a, sizeof noWidth - beforeV);
  noWidth.size = beforeV;
  CHECK(flashbob_forward(&noWidth, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  noWidth.size = sizeof noWidth;
  CHECK(flashbob_forward(&noWidth, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("head_dim_v"));
}

TEST_CASE("an output sharing memory with an input or another output is refused naming both",
          "[capi]") {
  support::setOverride(support::Knob::CudaDriver, "/nonexistent/libcuda.so.1");
  const flashbob_problem p = smallProblem(); // tensors of 16 KiB
  const uintptr_t kib16 = 16 * 1024;
  const flashbob_tensor q = tensorAt(0), k = tensorAt(1), v = tensorAt(2), o = tensorAt(3),
                        dO = tensorAt(4);
  float *lse = reinterpret_cast<float *>(uintptr_t(0x200000)); // 512 bytes
  float *work = reinterpret_cast<float *>(uintptr_t(0x300000));
  auto refused = [](flashbob_status status, const std::string &pair) {
    CHECK(status == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(flashbob_last_error(),
               Catch::StartsWith("flashbob: " + pair + ": an output must not share memory with an "
                                                       "input or another output"));
  };

  // Inputs may share memory: self-attention on one tensor.
  CHECK(flashbob_forward(&p, q, q, q, o, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  // o on k, on q, or on its last row.
  refused(flashbob_forward(&p, q, k, v, k, lse, nullptr), "o overlaps k");
  refused(flashbob_forward(&p, q, q, q, q, lse, nullptr), "o overlaps q");
  refused(flashbob_forward(&p, q, k, v, tensorAtAddress(uintptr_t(v.data) + kib16 - 128), lse,
                           nullptr),
          "o overlaps v");
  // lse (batch x heads x N floats) on o's first bytes.
  refused(flashbob_forward(&p, q, k, v, o, static_cast<float *>(o.data), nullptr),
          "o overlaps lse");

  // The backward: outputs end to end are accepted; dQ on dK's last row is refused, as is the
  // workspace (D) on lse.
  const uintptr_t grads = 0x4000000;
  const flashbob_tensor dQ = tensorAtAddress(grads), dK = tensorAtAddress(grads + kib16),
                        dV = tensorAtAddress(grads + 2 * kib16);
  CHECK(flashbob_backward(&p, q, k, v, o, dO, lse, dQ, dK, dV, work, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  refused(flashbob_backward(&p, q, k, v, o, dO, lse, tensorAtAddress(grads + 2 * kib16 - 128), dK,
                            dV, work, nullptr),
          "dQ overlaps dK");
  refused(flashbob_backward(&p, q, k, v, o, dO, lse, dQ, dK, dV, lse, nullptr), "D overlaps lse");
  refused(flashbob_backward(&p, q, k, v, o, dO, lse, dQ, dK, dO, work, nullptr), "dV overlaps dO");

  // BoB: its workspace's D, c, b are three row vectors end to end (accepted); gdO on uQ refused.
  const flashbob_tensor uQ = tensorAt(5), uK = tensorAt(6), uV = tensorAt(7), gQ = tensorAt(8),
                        gK = tensorAt(9), gV = tensorAt(10), gdO = tensorAt(11);
  CHECK(flashbob_bob(&p, q, k, v, o, dO, lse, uQ, uK, uV, gQ, gK, gV, gdO, work, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  refused(flashbob_bob(&p, q, k, v, o, dO, lse, uQ, uK, uV, gQ, gK, gV, uQ, work, nullptr),
          "gdO overlaps uQ");
  // The workspace's b (its last third) on gQ's first bytes.
  refused(flashbob_bob(&p, q, k, v, o, dO, lse, uQ, uK, uV, gQ, gK, gV, gdO,
                       reinterpret_cast<float *>(uintptr_t(gQ.data) - 2 * 512), nullptr),
          "gQ overlaps b");
  // The forward's JVP: t_o on a tangent.
  refused(flashbob_forward_jvp(&p, q, k, v, o, lse, uQ, uK, uV, uK, nullptr), "tO overlaps tK");
  // The forward with its JVP: its three outputs apart from the six inputs and each other.
  CHECK(flashbob_forward_dual(&p, q, k, v, uQ, uK, uV, o, lse, gQ, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  refused(flashbob_forward_dual(&p, q, k, v, uQ, uK, uV, o, lse, uV, nullptr), "tO overlaps tV");
  refused(flashbob_forward_dual(&p, q, k, v, uQ, uK, uV, uQ, lse, gQ, nullptr), "o overlaps tQ");
  refused(flashbob_forward_dual(&p, q, k, v, uQ, uK, uV, o, lse, o, nullptr), "o overlaps tO");
  refused(flashbob_forward_dual(&p, q, k, v, uQ, uK, uV, o, static_cast<float *>(gQ.data), gQ,
                                nullptr),
          "lse overlaps tO");
}

TEST_CASE("overlap is judged by each argument's own extent: ring steps, packed batches, packed "
          "qkv views",
          "[capi]") {
  support::setOverride(support::Knob::CudaDriver, "/nonexistent/libcuda.so.1");
  const uintptr_t kib16 = 16 * 1024;
  const flashbob_tensor k = tensorAt(1);
  float *lse = reinterpret_cast<float *>(uintptr_t(0x200000));

  // A ring step's o is float32: 32 KiB where a bf16 o would take 16.
  flashbob_problem ring = smallProblem();
  ring.ring_step = 1;
  const uintptr_t at = 0x4000000;
  const flashbob_tensor ringQ = tensorAtAddress(at), ringO = tensorAtAddress(at + kib16);
  CHECK(flashbob_forward(&ring, ringQ, k, k, ringO, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  const flashbob_tensor afterBf16 = tensorAtAddress(at + 2 * kib16);
  CHECK(flashbob_forward(&ring, ringQ, afterBf16, afterBf16, ringO, lse, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps k"));
  CHECK(flashbob_forward(&ring, ringQ, tensorAtAddress(at + 3 * kib16), afterBf16, ringO, lse,
                         nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps v"));
  CHECK(flashbob_forward(&ring, ringQ, tensorAtAddress(at + 3 * kib16),
                         tensorAtAddress(at + 3 * kib16), ringO, lse,
                         nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // A packed batch: (total, heads, d) tensors of one batch whatever `batch` and stride[0] are;
  // lse heads x total floats. 3 sequences, 128 rows in all, 2 heads: 32 KiB a tensor.
  flashbob_problem packed = smallProblem();
  packed.batch = 3;
  packed.heads = 2;
  packed.varlen = 1;
  packed.max_seqlen_q = packed.max_seqlen_k = 64;
  packed.cu_seqlens_q = packed.cu_seqlens_k = reinterpret_cast<const int32_t *>(uintptr_t(0x500000));
  auto rowsOfHeads = [](uintptr_t address) { // (total, heads, d): stride[0] never read
    return flashbob_tensor{reinterpret_cast<void *>(address), {999999 * 8, 64, 128, 1}};
  };
  const flashbob_tensor pq = rowsOfHeads(at), po = rowsOfHeads(at + 2 * kib16);
  CHECK(flashbob_forward(&packed, pq, pq, pq, po, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_forward(&packed, pq, pq, pq, rowsOfHeads(at + 2 * kib16 - 16), lse, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps q"));
  // lse holds heads x total floats (1 KiB): o may start right after it, not before its end.
  float *packedLse = reinterpret_cast<float *>(uintptr_t(at + 4 * kib16));
  CHECK(flashbob_forward(&packed, pq, pq, pq, rowsOfHeads(at + 4 * kib16 + 1024), packedLse,
                         nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_forward(&packed, pq, pq, pq, rowsOfHeads(at + 4 * kib16 + 1008), packedLse,
                         nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps lse"));
  // The offsets are inputs too (batch + 1 int32).
  CHECK(flashbob_forward(&packed, pq, pq, pq, rowsOfHeads(0x500000 - 2 * kib16 + 16), lse,
                         nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps cu_seqlens_q"));

  // flash-attn's packed qkv, (batch, seq, 3, heads, d), and its gradient dqkv likewise: q, k, v
  // and dq, dk, dv are views whose rows interleave without meeting. Accepted; shifted by 16
  // bytes, dk's rows run into dv's.
  flashbob_problem dense = smallProblem();
  dense.heads = 2;
  auto qkvView = [](uintptr_t base, int which) { // heads x d = 128 elements per view and row
    return flashbob_tensor{reinterpret_cast<void *>(base + uintptr_t(which) * 128 * 2),
                           {128 * 3 * 128, 64, 3 * 128, 1}};
  };
  const uintptr_t qkv = 0x8000000, dqkv = 0x9000000;
  const flashbob_tensor vq = qkvView(qkv, 0), vk = qkvView(qkv, 1), vv = qkvView(qkv, 2);
  const flashbob_tensor denseO = {reinterpret_cast<void *>(uintptr_t(0xa200000)),
                                  {2 * 8192, 8192, 64, 1}};
  const flashbob_tensor denseDO = {reinterpret_cast<void *>(uintptr_t(0xa300000)),
                                   {2 * 8192, 8192, 64, 1}};
  CHECK(flashbob_backward(&dense, vq, vk, vv, denseO, denseDO, lse, qkvView(dqkv, 0),
                          qkvView(dqkv, 1), qkvView(dqkv, 2), reinterpret_cast<float *>(0x300000),
                          nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  flashbob_tensor shifted = qkvView(dqkv, 1);
  shifted.data = static_cast<char *>(shifted.data) + 16;
  CHECK(flashbob_backward(&dense, vq, vk, vv, denseO, denseDO, lse, qkvView(dqkv, 0), shifted,
                          qkvView(dqkv, 2), reinterpret_cast<float *>(0x300000), nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: dK overlaps dV"));
  // An output on the inputs' qkv: the same rows.
  CHECK(flashbob_forward(&dense, vq, vk, vv, qkvView(qkv, 1), lse, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: o overlaps k"));
}

TEST_CASE("flashbob_set_cache_dir overrides FLASHBOB_CACHE_DIR without touching the environment",
          "[capi]") {
  const char *before = std::getenv("FLASHBOB_CACHE_DIR");
  const std::string saved = before ? before : "";
  CHECK(flashbob_set_cache_dir("/tmp/flashbob-capi-cache") == FLASHBOB_OK);
  CHECK(runtime::DiskCache::defaultDirectory() == "/tmp/flashbob-capi-cache");
  CHECK(runtime::DiskCache::fromEnvironment().directory() == "/tmp/flashbob-capi-cache");
  const char *after = std::getenv("FLASHBOB_CACHE_DIR");
  CHECK(std::string(after ? after : "") == saved);
  CHECK(std::string(flashbob_cache_dir()) == "/tmp/flashbob-capi-cache");
  CHECK(flashbob_set_cache_dir(nullptr) == FLASHBOB_OK);
  CHECK(runtime::DiskCache::defaultDirectory() != "/tmp/flashbob-capi-cache");
  CHECK(std::string(flashbob_cache_dir()) == runtime::DiskCache::defaultDirectory());
  CHECK_THAT(runtime::DiskCache::defaultDirectory(),
             Catch::EndsWith("flashbob") || Catch::EndsWith("flashbob-cache"));
  support::clearOverride(support::Knob::CacheDir);
}

TEST_CASE("flashbob_check_problem applies the limits flashbob_limit states, needing no GPU",
          "[capi]") {
  // Without a driver: the check is the one every call makes before anything else.
  support::setOverride(support::Knob::CudaDriver, "/nonexistent/libcuda.so.1");
  const int64_t multiple = flashbob_limit(FLASHBOB_LIMIT_HEAD_DIM_MULTIPLE);
  const int64_t minHeadDim = flashbob_limit(FLASHBOB_LIMIT_HEAD_DIM_MIN);
  const int64_t maxHeadDim = flashbob_limit(FLASHBOB_LIMIT_HEAD_DIM_MAX);
  const int64_t maxSequence = flashbob_limit(FLASHBOB_LIMIT_SEQUENCE_MAX);
  const int64_t maxBatchHeads = flashbob_limit(FLASHBOB_LIMIT_BATCH_HEADS_MAX);
  CHECK(flashbob_limit(static_cast<flashbob_limit_kind>(99)) == -1);
  // Every head dim from 8 to 256 (no multiple of 16 runs zero-padded to the next one).
  CHECK(multiple == 1);
  CHECK(minHeadDim == 8);
  CHECK(maxHeadDim == 256);
  auto check = [](const flashbob_problem &p) {
    const flashbob_status s = flashbob_check_problem(&p);
    return std::pair<flashbob_status, std::string>(s, s == FLASHBOB_OK ? "" : flashbob_last_error());
  };
  flashbob_problem p = smallProblem();
  CHECK(check(p).first == FLASHBOB_OK);
  // head_dim: every value from the minimum to the maximum, nothing else.
  for (int64_t d = minHeadDim; d <= maxHeadDim; d += multiple) {
    p.head_dim = d;
    CHECK(check(p).first == FLASHBOB_OK);
  }
  for (int64_t d : {int64_t(0), minHeadDim - 1, maxHeadDim + 1, int64_t(-8)}) {
    p.head_dim = d;
    auto [status, message] = check(p);
    CHECK(status == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(message, Catch::Contains("head_dim"));
  }
  p = smallProblem();
  // Sequences: up to the maximum.
  p.seq_q = p.seq_k = maxSequence;
  CHECK(check(p).first == FLASHBOB_OK);
  p.seq_k = maxSequence + 1;
  CHECK(check(p).first == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(check(p).second, Catch::Contains("seq_k"));
  p = smallProblem();
  // batch x heads: one grid row each, up to the maximum.
  p.batch = maxBatchHeads;
  CHECK(check(p).first == FLASHBOB_OK);
  p.batch = maxBatchHeads + 1;
  CHECK(check(p).first == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(check(p).second, Catch::Contains("batch"));
  // The struct's own size is checked too.
  p = smallProblem();
  p.size = 3;
  CHECK(check(p).first == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(flashbob_check_problem(nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  support::clearOverride(support::Knob::CudaDriver);
}

TEST_CASE("the log callback receives the cache's and the autotuner's messages", "[capi]") {
  std::vector<Received> log;
  flashbob_set_log_callback(collect, &log);

  support::log(support::LogLevel::Warning, "flashbob: warning: direct");
  REQUIRE(log.size() == 1);
  CHECK(log[0].level == FLASHBOB_LOG_WARNING);
  CHECK(log[0].message == "flashbob: warning: direct");

  // The kernel cache: a store and a hit at debug level.
  TempDir dir;
  {
    runtime::DiskCache cache(std::string(dir.path) + "/cache");
    REQUIRE(!cache.store("key text", {{"kernel.ptx", "ptx"}}, llvm::json::Object{}));
    REQUIRE(cache.lookup("key text"));
  }
  CHECK(anyStartsWith(log, FLASHBOB_LOG_DEBUG, "flashbob cache: stored "));
  CHECK(anyStartsWith(log, FLASHBOB_LOG_DEBUG, "flashbob cache: hit "));

  // The cache directory is unusable: the process's one warning comes here, not to stderr.
  const std::string file = std::string(dir.path) + "/a-file";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    REQUIRE(!ec);
  }
  {
    runtime::DiskCache cache(file);
    REQUIRE(!cache.store("key text", {{"kernel.ptx", "ptx"}}, llvm::json::Object{}));
  }
  CHECK(anyStartsWith(log, FLASHBOB_LOG_WARNING,
                      "flashbob: warning: kernel cache directory " + file + " is not writable"));

  // The autotuner: the start at info level, each candidate at debug level (print knob off) ...
  log.clear();
  support::setOverride(support::Knob::PrintAutotuning, "0");
  runtime::Autotuner tuner(std::string(dir.path) + "/autotune");
  auto measure = [](size_t i) -> llvm::Expected<double> { return i == 0 ? 2.0 : 1.0; };
  REQUIRE(static_cast<bool>(tuner.tune("key A", {"a", "b"}, measure, 1)));
  CHECK(anyStartsWith(log, FLASHBOB_LOG_INFO, "flashbob autotune: tuning key A over 2 candidates"));
  CHECK(anyStartsWith(log, FLASHBOB_LOG_DEBUG, "flashbob autotune: [1/2] a: 2.000 ms"));
  CHECK(anyStartsWith(log, FLASHBOB_LOG_DEBUG, "flashbob autotune: key A: chose b"));
  // ... and at info level with FLASHBOB_PRINT_AUTOTUNING on, as `flashbob tune` sets it.
  log.clear();
  support::setOverride(support::Knob::PrintAutotuning, "1");
  REQUIRE(static_cast<bool>(tuner.tune("key B", {"a", "b"}, measure, 1)));
  CHECK(anyStartsWith(log, FLASHBOB_LOG_INFO, "flashbob autotune: [2/2] b: 1.000 ms"));
  CHECK(!anyStartsWith(log, FLASHBOB_LOG_INFO, "flashbob autotune: tuning"));
  support::clearOverride(support::Knob::PrintAutotuning);

  // NULL restores the default sink: nothing more arrives here.
  flashbob_set_log_callback(nullptr, nullptr);
  log.clear();
  support::log(support::LogLevel::Debug, "dropped by the default sink");
  CHECK(log.empty());
  CHECK(!support::logs(support::LogLevel::Debug));
}

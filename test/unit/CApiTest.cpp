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

#include <cstring>

#include <cmath>
#include <cstdlib>
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
  flashbob_problem p = {1, 1, 128, 128, 64, FLASHBOB_BF16, 0, 0.0};
  flashbob_tensor t = {reinterpret_cast<void *>(uintptr_t(0x100000)), {8192, 8192, 64, 1}};
  float *lse = reinterpret_cast<float *>(uintptr_t(0x200000));

  CHECK(flashbob_forward(nullptr, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: problem is a null pointer");
  flashbob_problem bad = p;
  bad.seq_q = -3;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: seq_q (N) must be positive, got -3");

  // A NaN scale is refused (it used to become 1/sqrt(d), status OK); so are finite doubles that
  // float32, the kernels' type, cannot hold.
  bad = p;
  bad.scale = std::nan("");
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("scale") && Catch::Contains("nan"));
  for (double scale : {1e300, 1e-320}) {
    bad.scale = scale;
    CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(flashbob_last_error(), Catch::Contains("scale"));
  }

  CHECK(flashbob_forward(&p, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK_THAT(flashbob_last_error(),
             Catch::StartsWith("no CUDA driver found: /nonexistent/libcuda.so.1"));
  // Remembered: the same status and line on every later call.
  CHECK(flashbob_forward(&p, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("no CUDA driver found"));

  // A window is read only with sliding_window set (zero-initialized problems have none); its
  // sides are checked then, before the driver.
  bad = p;
  bad.window_left = -7;
  bad.sliding_window = 1;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) ==
        "flashbob: window_left must be -1 (unbounded) or >= 0, got -7");
  bad.sliding_window = 0; // the same sizes, ignored
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // A packed batch: its bounds and offsets are read only with varlen set, and checked before
  // the driver (the offsets' contents need it: tested with the fake driver).
  bad = p;
  bad.max_seqlen_q = 129; // seq_q = 128 packed rows
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);
  bad.varlen = 1;
  bad.max_seqlen_k = 64;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) ==
        "flashbob: max_seqlen_q = 129 must be in 1..seq_q = 128 (the longest sequence's rows, or "
        "more)");
  bad.max_seqlen_q = 128;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: cu_seqlens_q is a null pointer");
  const int32_t *misaligned = reinterpret_cast<const int32_t *>(uintptr_t(0x300002));
  bad.cu_seqlens_q = reinterpret_cast<const int32_t *>(uintptr_t(0x300000));
  bad.cu_seqlens_k = misaligned;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: cu_seqlens_k is not 4-byte aligned");
  // The window's bound is the longest sequence, not the packed rows.
  bad.cu_seqlens_k = bad.cu_seqlens_q;
  bad.sliding_window = 1;
  bad.window_left = 129;
  bad.window_right = -1;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(),
             Catch::Contains("window_left = 129 is larger than the sequences (max_seqlen_q = 128, "
                             "max_seqlen_k = 64)"));
  bad.window_left = 100;
  CHECK(flashbob_forward(&bad, t, t, t, t, lse, nullptr) == FLASHBOB_ERROR_NO_DRIVER);

  // Ring steps: BoB's passes apart, their row vectors named, the forward's JVP refused; valid
  // calls reach the (missing) driver.
  flashbob_problem ring = p;
  ring.ring_step = 1;
  CHECK(flashbob_bob_pass1(&ring, t, t, t, t, t, lse, t, t, t, t, t, t, t, nullptr, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: workspace is a null pointer");
  CHECK(flashbob_bob_pass1(&ring, t, t, t, t, t, lse, t, t, t, t, t, t, t, lse, nullptr) ==
        FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_bob_pass1(&p, t, t, t, t, t, lse, t, t, t, t, t, t, t, lse, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: BoB's first pass alone is a ring "
                                                      "step: set ring_step"));
  CHECK(flashbob_bob(&ring, t, t, t, t, t, lse, t, t, t, t, t, t, t, lse, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: BoB's ring steps are its two "
                                                      "passes apart"));
  CHECK(flashbob_bob_pass2(&ring, t, t, t, t, lse, nullptr, t, t, t, t, t, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(flashbob_last_error()) == "flashbob: row_scalars is a null pointer");
  for (const flashbob_problem *q : {&p, &ring}) // pass 2 runs on one GPU too
    CHECK(flashbob_bob_pass2(q, t, t, t, t, lse, lse, t, t, t, t, t, nullptr) ==
          FLASHBOB_ERROR_NO_DRIVER);
  CHECK(flashbob_forward_jvp(&ring, t, t, t, t, lse, t, t, t, t, nullptr) ==
        FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::StartsWith("flashbob: ring_step: fwd_jvp has no ring-step form"));
  const flashbob_op passes[] = {FLASHBOB_OP_BOB_PASS1, FLASHBOB_OP_BOB_PASS2};
  CHECK(flashbob_precompile_ops(&ring, passes, 2) == FLASHBOB_ERROR_NO_DRIVER);
  const int beyond = FLASHBOB_OP_BOB_PASS2 + 1;
  flashbob_op unknown;
  std::memcpy(&unknown, &beyond, sizeof unknown);
  CHECK(flashbob_precompile(&ring, unknown) == FLASHBOB_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(flashbob_last_error(), Catch::Contains("FLASHBOB_OP_BOB_PASS2"));
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
  CHECK(flashbob_set_cache_dir(nullptr) == FLASHBOB_OK);
  CHECK(runtime::DiskCache::defaultDirectory() != "/tmp/flashbob-capi-cache");
  CHECK_THAT(runtime::DiskCache::defaultDirectory(),
             Catch::EndsWith("flashbob") || Catch::EndsWith("flashbob-cache"));
  support::clearOverride(support::Knob::CacheDir);
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

// support/: the knob table (defaults, parsing, the one-time read of the environment, overrides),
// the error kinds and the log sink.
#include "support/Errors.h"
#include "support/Integers.h"
#include "support/Json.h"
#include "support/Knobs.h"
#include "support/LibraryFile.h"
#include "support/Log.h"
#include "support/Progress.h"
#include "test/unit/ChildProcess.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace flashbob::support;

namespace {

// Collects what reaches the log sink for one scope, then restores the default sink.
struct CapturedLog {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  CapturedLog() {
    setLogSink([this](LogLevel level, llvm::StringRef message) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(level, message.str());
    });
  }
  ~CapturedLog() { setLogSink(nullptr); }
};

// Overrides a knob for one scope.
struct ScopedOverride {
  Knob knob;
  ScopedOverride(Knob k, llvm::StringRef value) : knob(k) { setOverride(k, value); }
  ~ScopedOverride() { clearOverride(knob); }
};

} // namespace

TEST_CASE("the environment is read once, at a knob's first access", "[knobs]") {
  // First in the file (Catch runs cases in declaration order): the table test below reads every
  // knob, and FLASHBOB_CUBLAS is read by no code this test links, so this is its first access.
  ::setenv("FLASHBOB_CUBLAS", "/first/libcublas.so", 1);
  CHECK(knobs::cublas() == "/first/libcublas.so");
  ::setenv("FLASHBOB_CUBLAS", "/second/libcublas.so", 1);
  CHECK(knobs::cublas() == "/first/libcublas.so");
  {
    ScopedOverride o(Knob::Cublas, "/override/libcublas.so");
    CHECK(knobs::cublas() == "/override/libcublas.so");
  }
  CHECK(knobs::cublas() == "/first/libcublas.so"); // clearOverride: back to the environment
  ::unsetenv("FLASHBOB_CUBLAS");
}

TEST_CASE("the knob table declares each variable once, with a default of its type", "[knobs]") {
  llvm::StringSet<> names;
  size_t index = 0;
  for (const KnobInfo &k : allKnobs()) {
    INFO(k.name.str());
    CHECK(size_t(k.knob) == index++); // the table is indexed by Knob
    CHECK(&knobInfo(k.knob) == &k);
    CHECK(k.name.starts_with("FLASHBOB_"));
    CHECK(names.insert(k.name).second);
    CHECK(k.doc.size() > 20);
    ScopedOverride unset(k.knob, ""); // whatever the test's environment holds
    CHECK(!rawValue(k.knob));
    CHECK(!checkValue(k.knob));
    // The default is a value of the knob's own type.
    {
      ScopedOverride asDefault(k.knob, k.defaultValue);
      CHECK(!checkValue(k.knob));
    }
  }
  CHECK(names.size() == 23);
  {
    // Head dims that are a multiple of 8 pad inside the kernels unless told to copy.
    ScopedOverride unset(Knob::PadInKernel, "");
    CHECK(knobs::padInKernel());
    ScopedOverride off(Knob::PadInKernel, "0");
    CHECK(!knobs::padInKernel());
  }
  {
    // Register-A products are on unless turned off.
    ScopedOverride unset(Knob::RegisterA, "");
    CHECK(knobs::registerA());
    ScopedOverride off(Knob::RegisterA, "0");
    CHECK(!knobs::registerA());
  }
  {
    // So is the fused backward (until verified on the GPU).
    ScopedOverride unset(Knob::FusedBackward, "");
    CHECK(!knobs::fusedBackward());
    ScopedOverride on(Knob::FusedBackward, "1");
    CHECK(knobs::fusedBackward());
  }
  {
    // Long sweeps: unset lets the sweep's length decide; 1 and 0 force the flush on and off.
    ScopedOverride unset(Knob::LongSweep, "");
    CHECK(!knobs::longSweep());
    ScopedOverride on(Knob::LongSweep, "1");
    CHECK(knobs::longSweep() == std::optional<bool>(true));
    ScopedOverride off(Knob::LongSweep, "0");
    CHECK(knobs::longSweep() == std::optional<bool>(false));
  }
  {
    // A packed batch's offsets are checked unless told not to.
    ScopedOverride unset(Knob::CheckOffsets, "");
    CHECK(knobs::checkOffsets());
    ScopedOverride off(Knob::CheckOffsets, "0");
    CHECK(!knobs::checkOffsets());
  }
  CHECK(knobInfo(Knob::Library).reader == KnobReader::Python);
  CHECK(knobInfo(Knob::JaxFfi).reader == KnobReader::Python);
  CHECK(knobInfo(Knob::PtxSnapshotDir).reader == KnobReader::Tests);
  CHECK(knobInfo(Knob::CacheDir).reader == KnobReader::Library);
}

TEST_CASE("knob defaults apply when unset or empty", "[knobs]") {
  ScopedOverride a(Knob::Autotune, ""), p(Knob::PrintAutotuning, ""), d(Knob::CudaDriver, ""),
      m(Knob::CacheMaxMB, ""), r(Knob::Producer, ""), c(Knob::CacheDir, "");
  CHECK(!knobs::autotune());
  CHECK(!knobs::printAutotuning());
  CHECK(knobs::cudaDriver() == "libcuda.so.1");
  CHECK(knobs::cacheMaxMB() == 2048);
  CHECK(!knobs::producer().has_value()); // the tile table decides
  CHECK(knobs::cacheDir().empty());
}

TEST_CASE("knob values parse by type; overrides win over the environment", "[knobs]") {
  for (const char *on : {"1", "true", "ON", "yes", " 1 "}) {
    ScopedOverride o(Knob::Autotune, on);
    CHECK(knobs::autotune());
  }
  for (const char *off : {"0", "false", "Off", "no"}) {
    ScopedOverride o(Knob::Autotune, off);
    CHECK(!knobs::autotune());
  }
  {
    ScopedOverride o(Knob::Producer, "0");
    CHECK(knobs::producer() == std::optional<bool>(false));
  }
  {
    ScopedOverride o(Knob::Producer, "1");
    CHECK(knobs::producer() == std::optional<bool>(true));
  }
  {
    ScopedOverride o(Knob::CacheMaxMB, "17");
    CHECK(knobs::cacheMaxMB() == 17);
  }
  {
    ScopedOverride o(Knob::CacheMaxMB, "0");
    CHECK(knobs::cacheMaxMB() == 0);
  }
  {
    ScopedOverride o(Knob::Arch, "sm_90");
    CHECK(knobs::arch() == "sm_90");
    CHECK(rawValue(Knob::Arch) == std::optional<std::string>("sm_90"));
  }
}

TEST_CASE("a malformed knob value falls back to the default, warns once, and checkValue names it",
          "[knobs]") {
  CapturedLog captured;
  {
    ScopedOverride o(Knob::CacheMaxMB, "lots");
    CHECK(knobs::cacheMaxMB() == 2048);
    CHECK(knobs::cacheMaxMB() == 2048);
    llvm::Error e = checkValue(Knob::CacheMaxMB);
    REQUIRE(static_cast<bool>(e));
    ErrorReport report = takeErrorReport(std::move(e));
    CHECK(report.kind == ErrorKind::InvalidArgument);
    CHECK(report.message == "FLASHBOB_CACHE_MAX_MB='lots' is not a non-negative integer");
  }
  {
    ScopedOverride o(Knob::CacheMaxMB, "-5");
    CHECK(knobs::cacheMaxMB() == 2048);
  }
  {
    ScopedOverride o(Knob::Producer, "maybe");
    CHECK(!knobs::producer().has_value());
  }
  {
    ScopedOverride o(Knob::Autotune, "2");
    CHECK(!knobs::autotune());
  }
  REQUIRE(captured.lines.size() == 4); // once per bad value, not per read
  CHECK(captured.lines[0].first == LogLevel::Warning);
  CHECK(captured.lines[0].second == "flashbob: warning: FLASHBOB_CACHE_MAX_MB='lots' is not a "
                                    "non-negative integer; using the default 2048");
  CHECK(captured.lines[1].second == "flashbob: warning: FLASHBOB_CACHE_MAX_MB='-5' is not a "
                                    "non-negative integer; using the default 2048");
  CHECK(captured.lines[2].second ==
        "flashbob: warning: FLASHBOB_PRODUCER='maybe' is not a boolean (1/0, true/false, on/off, "
        "yes/no); ignoring it");
  CHECK(captured.lines[3].second == "flashbob: warning: FLASHBOB_AUTOTUNE='2' is not a boolean (1/0, "
                                    "true/false, on/off, yes/no); using the default 0");
}

TEST_CASE("integers are decimal, in knobs and flags alike, within their type's range",
          "[integers]") {
  CHECK(parseInteger<int64_t>("0") == 0);
  CHECK(parseInteger<int64_t>("-0") == 0);
  CHECK(parseInteger<int64_t>("128") == 128);
  CHECK(parseInteger<int64_t>("-1") == -1);
  CHECK(parseInteger<int64_t>("9223372036854775807") == INT64_MAX);
  CHECK(parseInteger<int64_t>("-9223372036854775808") == INT64_MIN);
  CHECK(parseInteger<uint64_t>("18446744073709551615") == UINT64_MAX);
  CHECK(parseInteger<int>("-2147483648") == INT32_MIN);

  // What a C or LLVM radix-0 parser reads in another base: named as such.
  const std::string otherBase = " (decimal digits only: no leading 0, 0x or 0b)";
  for (const char *text : {"010", "0x80", "0b11", "00", "-010", "0X1F"}) {
    INFO(text);
    CHECK(!parseInteger<int64_t>(text));
    CHECK(integerProblem<int64_t>(text) == "is not an integer" + otherBase);
    CHECK(integerProblem<uint64_t>(text) == "is not a non-negative integer" + otherBase);
  }
  for (const char *text : {"", "-", "+5", " 5", "5 ", "1e3", "lots", "--1", "12a"}) {
    INFO(text);
    CHECK(!parseInteger<int64_t>(text));
    CHECK(integerProblem<int64_t>(text) == "is not an integer");
  }
  CHECK(integerProblem<uint64_t>("-5") == "is not a non-negative integer");
  CHECK(integerProblem<uint64_t>("-0") == "is not a non-negative integer");
  CHECK(integerProblem<int64_t>("9223372036854775808") ==
        "is out of range ([-9223372036854775808, 9223372036854775807])");
  CHECK(integerProblem<int64_t>("-9223372036854775809") ==
        "is out of range ([-9223372036854775808, 9223372036854775807])");
  CHECK(integerProblem<uint64_t>("99999999999999999999") ==
        "is out of range (at most 18446744073709551615)");
  CHECK(integerProblem<int>("2147483648") == "is out of range ([-2147483648, 2147483647])");
  CHECK(integerProblem<int64_t>("128").empty());

  // A knob reads the same way (around its value's spaces): 010 was 10 there, 8 in a flag.
  CapturedLog captured;
  for (const char *text : {"010", "0x80", "0b11"}) {
    ScopedOverride o(Knob::CacheMaxMB, text);
    CHECK(knobs::cacheMaxMB() == 2048);
    ErrorReport report = takeErrorReport(checkValue(Knob::CacheMaxMB));
    CHECK(report.message == "FLASHBOB_CACHE_MAX_MB='" + std::string(text) +
                                "' is not a non-negative integer" + otherBase);
  }
  ScopedOverride padded(Knob::CacheMaxMB, " 64\n");
  CHECK(knobs::cacheMaxMB() == 64);
}

TEST_CASE("knobs are safe to read and override from many threads", "[knobs]") {
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t == 0)
          setOverride(Knob::Arch, i % 2 ? "sm_90" : "sm_80");
        std::string arch = knobs::arch();
        if (arch != "sm_90" && arch != "sm_80" && !arch.empty())
          ++wrong;
      }
    });
  for (std::thread &t : threads)
    t.join();
  clearOverride(Knob::Arch);
  CHECK(wrong == 0);
}

TEST_CASE("error kinds print their message and classify by class", "[errors]") {
  auto report = [](llvm::Error e) { return takeErrorReport(std::move(e)); };

  ErrorReport invalid = report(makeInvalidArgument("head_dim", "flashbob: head_dim 100 is bad"));
  CHECK(invalid.kind == ErrorKind::InvalidArgument);
  CHECK(invalid.message == "flashbob: head_dim 100 is bad");

  ErrorReport noDriver = report(makeNoDriver("libcuda.so.1: cannot open shared object file"));
  CHECK(noDriver.kind == ErrorKind::NoDriver);
  CHECK(noDriver.message == "no CUDA driver found: libcuda.so.1: cannot open shared object file");

  ErrorReport cuda = report(makeCudaCallError("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY (out)"));
  CHECK(cuda.kind == ErrorKind::CudaCall);
  CHECK(cuda.message == "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out)");

  ErrorReport device = report(makeUnsupportedDevice("sm_75", "the kernels need sm_80 or newer"));
  CHECK(device.kind == ErrorKind::UnsupportedDevice);
  CHECK(device.message == "this GPU (sm_75) is not supported: the kernels need sm_80 or newer");

  ErrorReport compile = report(makeCompileError("ptxas", "ptxas failed (exit 255)"));
  CHECK(compile.kind == ErrorKind::Compile);
  CHECK(compile.message == "ptxas failed (exit 255)");

  // Messages alone decide nothing: a string error that reads like a driver error is Other.
  ErrorReport other = report(llvm::createStringError(llvm::inconvertibleErrorCode(),
                                                     "no CUDA driver found: just text"));
  CHECK(other.kind == ErrorKind::Other);
  // ... unless it carries errc::invalid_argument, the older way of marking argument errors.
  CHECK(report(llvm::createStringError(std::make_error_code(std::errc::invalid_argument), "x"))
            .kind == ErrorKind::InvalidArgument);

  // A list: the first payload with a kind decides; every message is kept.
  ErrorReport list = report(llvm::joinErrors(
      llvm::createStringError(llvm::inconvertibleErrorCode(), "first"),
      makeCudaCallError("cuLaunchKernel", 1, "CUDA_ERROR_INVALID_VALUE (invalid argument)")));
  CHECK(list.kind == ErrorKind::CudaCall);
  CHECK(list.message == "first\ncuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)");

  // The typed fields survive for callers that want them.
  llvm::Error e = makeCudaCallError("cuInit", 100, "CUDA_ERROR_NO_DEVICE (no device)");
  llvm::handleAllErrors(std::move(e), [](const CudaCallError &c) {
    CHECK(c.call() == "cuInit");
    CHECK(c.result() == 100);
  });
  llvm::handleAllErrors(makeInvalidArgument("k", "flashbob: k is a null pointer"),
                        [](const InvalidArgumentError &a) { CHECK(a.argument() == "k"); });
  llvm::handleAllErrors(makeCompileError("ptxas", "x"),
                        [](const CompileError &c) { CHECK(c.stage() == "ptxas"); });
}

TEST_CASE("the log sink receives every level; the default drops debug", "[log]") {
  {
    CapturedLog captured;
    CHECK(logs(LogLevel::Debug));
    log(LogLevel::Debug, "flashbob cache: hit");
    log(LogLevel::Info, llvm::Twine("flashbob autotune: ") + "tuning");
    log(LogLevel::Warning, "flashbob: warning: w");
    REQUIRE(captured.lines.size() == 3);
    CHECK(captured.lines[0] == std::make_pair(LogLevel::Debug, std::string("flashbob cache: hit")));
    CHECK(captured.lines[1] ==
          std::make_pair(LogLevel::Info, std::string("flashbob autotune: tuning")));
    CHECK(captured.lines[2].first == LogLevel::Warning);
  }
  CHECK(!logs(LogLevel::Debug)); // the default sink again
  CHECK(logs(LogLevel::Info));

  // A sink may log itself (no deadlock) and replace the sink.
  std::vector<std::string> seen;
  setLogSink([&](LogLevel level, llvm::StringRef message) {
    seen.push_back(message.str());
    if (level == LogLevel::Info)
      log(LogLevel::Debug, "nested");
  });
  log(LogLevel::Info, "outer");
  setLogSink(nullptr);
  CHECK(seen == std::vector<std::string>{"outer", "nested"});
}

TEST_CASE("the default log sink never stops the process over a stderr it cannot write",
          "[log]") {
  // A host may close stderr or point it at a full disk or pipe. A stream that keeps the write
  // error (llvm::errs()) reports it at exit with "LLVM ERROR: IO failure on output stream" and
  // exit(1); the message is lost either way, the process must end as it would have.
  for (const char *target : {"/dev/full", "closed"}) {
    INFO(target);
    flashbob::test::ChildResult child = flashbob::test::runInChild(
        [&] {
          if (std::string(target) == "closed")
            ::close(STDERR_FILENO);
          else if (::dup2(::open(target, O_WRONLY), STDERR_FILENO) < 0)
            return 10;
          log(LogLevel::Warning, "flashbob: warning: lost");
          log(LogLevel::Info, "flashbob: lost too");
          return 0;
        },
        std::chrono::seconds(30));
    INFO(child.describe());
    CHECK(child.succeeded());
  }
}

TEST_CASE("a library path that is not a regular file is refused before dlopen", "[library]") {
  llvm::SmallString<128> dir;
  REQUIRE_FALSE(llvm::sys::fs::createUniqueDirectory("flashbob-library", dir));
  const std::string fifo = (dir + "/fifo").str(), file = (dir + "/lib.so").str();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  { std::ofstream(file) << "not really a library"; }

  for (auto [path, what] : {std::pair<std::string, std::string>{fifo, "a FIFO"},
                            {dir.str().str(), "a directory"},
                            {"/dev/null", "a character device"}}) {
    INFO(path);
    ErrorReport named = takeErrorReport(checkLibraryFile(path, Knob::Cublas));
    CHECK(named.kind == ErrorKind::InvalidArgument);
    CHECK(named.message == "FLASHBOB_CUBLAS='" + path + "' is not a regular file (" + what + ")");
    ErrorReport unnamed = takeErrorReport(checkLibraryFile(path, std::nullopt));
    CHECK(unnamed.message == "'" + path + "' is not a regular file (" + what + ")");
  }
  // What dlopen itself should see: a file, a name it looks for on the loader's path, a path
  // that does not exist (its error says so).
  for (const std::string &path : {file, std::string("libcuda.so.1"), dir.str().str() + "/none.so"}) {
    INFO(path);
    CHECK_FALSE(static_cast<bool>(checkLibraryFile(path, Knob::CudaDriver)));
  }
  ::unlink(fifo.c_str()); // llvm::sys::fs removes no FIFO
  llvm::sys::fs::remove_directories(dir);
}

TEST_CASE("progress events become log messages by default, or go to a sink", "[progress]") {
  {
    CapturedLog captured;
    reportProgress({"compiling bob_q", 1, 2, "bob_q_d64", LogLevel::Info});
    reportProgress({"autotuning bob_q", 3, 24, "64x64x2", LogLevel::Debug});
    reportProgress({"compiling fwd", 0, 0, "", LogLevel::Info}); // no count known
    REQUIRE(captured.lines.size() == 3);
    CHECK(captured.lines[0] ==
          std::make_pair(LogLevel::Info, std::string("flashbob: compiling bob_q (1/2): bob_q_d64")));
    CHECK(captured.lines[1] == std::make_pair(LogLevel::Debug,
                                              std::string("flashbob: autotuning bob_q (3/24): 64x64x2")));
    CHECK(captured.lines[2].second == "flashbob: compiling fwd");

    // A progress sink takes the events instead of the log.
    std::vector<Progress> seen;
    setProgressSink([&](const Progress &p) { seen.push_back(p); });
    reportProgress({"timing bob", 2, 5, "", LogLevel::Debug});
    setProgressSink(nullptr);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].task == "timing bob");
    CHECK(seen[0].step == 2);
    CHECK(seen[0].total == 5);
    CHECK(captured.lines.size() == 3);
  }
}

TEST_CASE("the kernel step is per thread and nests", "[progress]") {
  CHECK(KernelStep::current() == std::make_pair(size_t(0), size_t(0)));
  {
    KernelStep outer(1, 2);
    CHECK(KernelStep::current() == std::make_pair(size_t(1), size_t(2)));
    std::pair<size_t, size_t> onOtherThread{9, 9};
    std::thread([&] { onOtherThread = KernelStep::current(); }).join();
    CHECK(onOtherThread == std::make_pair(size_t(0), size_t(0)));
    {
      KernelStep inner(3, 3);
      CHECK(KernelStep::current() == std::make_pair(size_t(3), size_t(3)));
    }
    CHECK(KernelStep::current() == std::make_pair(size_t(1), size_t(2)));
  }
  CHECK(KernelStep::current() == std::make_pair(size_t(0), size_t(0)));
}

TEST_CASE("parseJson refuses nesting past its bound before parsing", "[json]") {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  llvm::Expected<llvm::json::Value> ok = parseJson(nested(kMaxJsonDepth));
  REQUIRE(static_cast<bool>(ok));
  CHECK(ok->getAsArray());

  // Deep enough to overflow the stack in llvm::json::parse: refused, with why.
  llvm::Expected<llvm::json::Value> deep = parseJson(nested(1000000));
  REQUIRE(!deep);
  CHECK(llvm::toString(deep.takeError()) == "JSON nests deeper than 256 levels");
  CHECK(!parseJson(nested(3), /*maxDepth=*/2));

  // Brackets inside strings (escaped quotes too) are text, not nesting.
  const std::string text = "{\"k\": \"" + std::string(1000, '[') + "\\\"" +
                           std::string(1000, '{') + "\"}";
  llvm::Expected<llvm::json::Value> strings = parseJson(text);
  REQUIRE(static_cast<bool>(strings));
  CHECK(strings->getAsObject()->getString("k")->size() == 2001);

  // Malformed text is the parser's to report.
  llvm::Expected<llvm::json::Value> bad = parseJson("{\"a\": ");
  REQUIRE(!bad);
  CHECK_THAT(llvm::toString(bad.takeError()), !Catch::Contains("nests"));
}

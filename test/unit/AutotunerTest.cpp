// The generic autotuner with measured times injected (no GPU): picks the fastest, scores failing
// candidates as unusable, persists the winner so another tuner (another process) reuses it with
// no timing, and re-tunes when the candidate list changes.
#include "runtime/tune/Autotuner.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

using flashbob::runtime::Autotuner;

namespace {
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    ::umask(022); // a group-writable store directory (umask 002) would be refused
    REQUIRE_FALSE(llvm::sys::fs::createUniqueDirectory("flashbob-tune", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
};

llvm::Error failure(const char *why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}
} // namespace

TEST_CASE("autotuner picks the fastest usable candidate and persists it", "[tune]") {
  TempDir dir;
  const std::vector<std::string> names = {"m64_n64_w4", "m128_n32_w8", "m64_n32_w4"};
  const double ms[] = {2.0, 1.5, 3.0};
  int calls = 0;
  auto measure = [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    if (i == 1)
      return failure("needs 300000 B of shared memory");  // unusable, not fatal
    return ms[i];
  };
  Autotuner tuner(std::string(dir.path));
  auto first = tuner.tune("bob_q d=64 bf16 gpu=X", names, measure, 3);
  REQUIRE(static_cast<bool>(first));
  CHECK(first->winner == "m64_n64_w4");
  CHECK_FALSE(first->reused);
  CHECK(first->medianMs.size() == 2);
  CHECK(calls == 4 + 1 + 4); // warm-up + 3 timed for each usable one; 1 failed attempt

  // A new tuner (as in another process) reuses the record without measuring.
  Autotuner again(std::string(dir.path));
  calls = 0;
  auto second = again.tune("bob_q d=64 bf16 gpu=X", names, measure, 3);
  REQUIRE(static_cast<bool>(second));
  CHECK(second->reused);
  CHECK(second->winner == "m64_n64_w4");
  CHECK(calls == 0);

  // A different key, or one more candidate, is tuned afresh.
  auto otherKey = again.tune("bob_q d=64 bf16 gpu=Y", names, measure, 3);
  REQUIRE(static_cast<bool>(otherKey));
  CHECK_FALSE(otherKey->reused);
  std::vector<std::string> more = names;
  more.push_back("m32_n32_w2");
  const double moreMs[] = {2.0, 1.5, 3.0, 0.5};
  auto measureMore = [&](size_t i) -> llvm::Expected<double> { return moreMs[i]; };
  auto extended = again.tune("bob_q d=64 bf16 gpu=X", more, measureMore, 3);
  REQUIRE(static_cast<bool>(extended));
  CHECK_FALSE(extended->reused);
  CHECK(extended->winner == "m32_n32_w2");
}

TEST_CASE("autotuner fails clearly when every candidate fails, and ignores a damaged record",
          "[tune]") {
  TempDir dir;
  Autotuner tuner(std::string(dir.path));
  auto none = tuner.tune("k", {"a", "b"}, [](size_t) -> llvm::Expected<double> {
    return failure("compile error");
  });
  REQUIRE_FALSE(static_cast<bool>(none));
  std::string message = llvm::toString(none.takeError());
  CHECK_THAT(message, Catch::Contains("every candidate failed") && Catch::Contains("compile error"));
  // With a label (the kernel's name), messages name it rather than the key's many lines.
  auto labelled = tuner.tune(
      "flashbob kernel\nspec x\ngpu y\n", {"a", "b"},
      [](size_t) -> llvm::Expected<double> { return failure("compile error"); },
      Autotuner::kRepeats, "bob_q_d64 (seq<=4096)");
  REQUIRE_FALSE(static_cast<bool>(labelled));
  message = llvm::toString(labelled.takeError());
  CHECK_THAT(message, Catch::Contains("failed for bob_q_d64 (seq<=4096)") &&
                          !Catch::Contains("spec x"));

  // A truncated record is not trusted: the tuner measures again.
  std::string path = tuner.recordPath("k2", {"a", "b"});
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    REQUIRE_FALSE(ec);
    os << "{\"key\": \"k2\", \"winn";
  }
  int calls = 0;
  Autotuner fresh(std::string(dir.path));
  auto result = fresh.tune("k2", {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    return i == 0 ? 1.0 : 2.0;
  });
  REQUIRE(static_cast<bool>(result));
  CHECK(result->winner == "a");
  CHECK(calls > 0);

  // A record nested deep enough to overflow a recursive parser's stack: a miss, not a crash.
  std::string deepPath = tuner.recordPath("k3", {"a", "b"});
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(deepPath, ec);
    REQUIRE_FALSE(ec);
    os << std::string(1000000, '[') << std::string(1000000, ']');
  }
  calls = 0;
  Autotuner afterDeep(std::string(dir.path));
  auto deep = afterDeep.tune("k3", {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    return i == 0 ? 2.0 : 1.0;
  });
  REQUIRE(static_cast<bool>(deep));
  CHECK(deep->winner == "b");
  CHECK_FALSE(deep->reused);
  CHECK(calls > 0);
}

// A record that is not a regular file is a miss, never a hang or a read until memory runs out,
// and the new record replaces it.
TEST_CASE("autotuner reads records only from regular files of bounded size", "[tune]") {
  TempDir dir;
  ::alarm(60); // before the fix the FIFO blocked forever: fail instead of hanging the suite
  const std::string fifo = Autotuner(std::string(dir.path)).recordPath("fifo", {"a", "b"});
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string zero = Autotuner(std::string(dir.path)).recordPath("zero", {"a", "b"});
  REQUIRE_FALSE(llvm::sys::fs::create_link("/dev/zero", zero));
  for (const char *key : {"fifo", "zero"}) {
    INFO(key);
    int calls = 0;
    Autotuner tuner(std::string(dir.path));
    auto result = tuner.tune(key, {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
      ++calls;
      return i == 0 ? 1.0 : 2.0;
    });
    REQUIRE(static_cast<bool>(result));
    CHECK_FALSE(result->reused);
    CHECK(calls > 0);
    // Replaced by a regular record that the next tuner reuses.
    Autotuner next(std::string(dir.path));
    auto again = next.tune(key, {"a", "b"}, [](size_t) -> llvm::Expected<double> { return 1.0; });
    REQUIRE(static_cast<bool>(again));
    CHECK(again->reused);
  }
  ::alarm(0);
}

TEST_CASE("clearRecords removes only tuning records", "[tune]") {
  TempDir dir;
  Autotuner tuner(std::string(dir.path));
  auto tuned = tuner.tune("k", {"a", "b"}, [](size_t) -> llvm::Expected<double> { return 1.0; });
  REQUIRE(static_cast<bool>(tuned));
  const std::string mine = std::string(dir.path) + "/mine.json";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(mine, ec);
    REQUIRE_FALSE(ec);
    os << "{}";
  }
  std::vector<std::string> failures;
  CHECK(Autotuner::clearRecords(dir.path, failures) == 1);
  CHECK(failures.empty());
  CHECK_FALSE(llvm::sys::fs::exists(tuner.recordPath("k", {"a", "b"})));
  CHECK(llvm::sys::fs::exists(mine));
  CHECK(Autotuner::clearRecords(std::string(dir.path) + "/missing", failures) == 0);
  CHECK(failures.empty());
}

// Another user's records could choose which kernels run: a store directory writable by others
// is not used (the winner stays in memory), and a new one is created 0700.
TEST_CASE("autotuner uses only a records directory that nobody else can write", "[tune]") {
  TempDir dir;
  const std::string store = std::string(dir.path) + "/records";
  {
    Autotuner tuner(store);
    auto first = tuner.tune("k", {"a", "b"}, [](size_t i) -> llvm::Expected<double> {
      return i == 0 ? 1.0 : 2.0;
    });
    REQUIRE(static_cast<bool>(first));
    llvm::sys::fs::file_status status;
    REQUIRE_FALSE(llvm::sys::fs::status(store, status));
    CHECK((status.permissions() & llvm::sys::fs::all_perms) == llvm::sys::fs::owner_all);
  }
  // A planted record (b wins) in a directory others can write: not trusted, measured afresh.
  REQUIRE(::chmod(store.c_str(), 0777) == 0);
  int calls = 0;
  Autotuner open(store);
  auto again = open.tune("k", {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    return i == 0 ? 1.0 : 2.0;
  });
  REQUIRE(static_cast<bool>(again));
  CHECK_FALSE(again->reused);
  CHECK(calls > 0);
}

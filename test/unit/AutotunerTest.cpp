// The generic autotuner with measured times injected (no GPU): picks the fastest, scores failing
// candidates as unusable, persists the winner so another tuner (another process) reuses it with
// no timing, and re-tunes when the candidate list changes.
#include "runtime/tune/Autotuner.h"
#include "support/Log.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using flashbob::runtime::Autotuner;

namespace {
// A fresh directory standing for the cache directory (0700, this user's), with the records'
// directory `store` made inside it as the tuner makes it.
struct TempDir {
  llvm::SmallString<128> path;
  std::string store;
  TempDir() {
    ::umask(022); // a group-writable store directory (umask 002) would be refused
    REQUIRE_FALSE(llvm::sys::fs::createUniqueDirectory("flashbob-tune", path));
    store = std::string(path) + "/autotune";
    REQUIRE(::mkdir(store.c_str(), 0700) == 0);
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
  Autotuner tuner(dir.store);
  auto first = tuner.tune("bob_q d=64 bf16 gpu=X", names, measure, 3);
  REQUIRE(static_cast<bool>(first));
  CHECK(first->winner == "m64_n64_w4");
  CHECK_FALSE(first->reused);
  CHECK(first->medianMs.size() == 2);
  CHECK(calls == 4 + 1 + 4); // warm-up + 3 timed for each usable one; 1 failed attempt

  // A new tuner (as in another process) reuses the record without measuring.
  Autotuner again(dir.store);
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
  Autotuner tuner(dir.store);
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
  Autotuner fresh(dir.store);
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
  Autotuner afterDeep(dir.store);
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
  const std::string fifo = Autotuner(dir.store).recordPath("fifo", {"a", "b"});
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string zero = Autotuner(dir.store).recordPath("zero", {"a", "b"});
  REQUIRE_FALSE(llvm::sys::fs::create_link("/dev/zero", zero));
  for (const char *key : {"fifo", "zero"}) {
    INFO(key);
    int calls = 0;
    Autotuner tuner(dir.store);
    auto result = tuner.tune(key, {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
      ++calls;
      return i == 0 ? 1.0 : 2.0;
    });
    REQUIRE(static_cast<bool>(result));
    CHECK_FALSE(result->reused);
    CHECK(calls > 0);
    // Replaced by a regular record that the next tuner reuses.
    Autotuner next(dir.store);
    auto again = next.tune(key, {"a", "b"}, [](size_t) -> llvm::Expected<double> { return 1.0; });
    REQUIRE(static_cast<bool>(again));
    CHECK(again->reused);
  }
  ::alarm(0);
}

TEST_CASE("clearRecords removes only tuning records", "[tune]") {
  TempDir dir;
  Autotuner tuner(dir.store);
  auto tuned = tuner.tune("k", {"a", "b"}, [](size_t) -> llvm::Expected<double> { return 1.0; });
  REQUIRE(static_cast<bool>(tuned));
  const std::string mine = dir.store + "/mine.json";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(mine, ec);
    REQUIRE_FALSE(ec);
    os << "{}";
  }
  std::vector<std::string> failures;
  CHECK(Autotuner::clearRecords(dir.store, failures) == 1);
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

namespace {
// Waits for a child process; true when it exited 0.
bool childSucceeded(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid)
    return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::vector<std::string> namesIn(const std::string &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(llvm::sys::path::filename(it->path()).str());
  return names;
}

void writeFile(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  REQUIRE_FALSE(ec);
  os << bytes;
}

auto firstIsFaster = [](size_t i) -> llvm::Expected<double> { return i == 0 ? 1.0 : 2.0; };
} // namespace

// A full disk (here a file size limit: the same failed write, EFBIG instead of ENOSPC) while a
// record is written: llvm::writeToOutput's stream ended the process ("LLVM ERROR: IO failure
// on output stream") and left a 0-byte record. Now: one warning, the winner kept in memory,
// nothing left in the directory. In a child process, which the limit and the exit stay in.
TEST_CASE("a record that cannot be written is one warning, never an exit, and leaves nothing",
          "[tune]") {
  TempDir dir;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<std::string> warnings;
    flashbob::support::setLogSink([&](flashbob::support::LogLevel level, llvm::StringRef m) {
      if (level == flashbob::support::LogLevel::Warning)
        warnings.push_back(m.str());
    });
    ::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails (EFBIG) instead of killing
    struct rlimit limit;
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 16; // less than any record
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
      ::_exit(10);
    Autotuner tuner(dir.store);
    auto first = tuner.tune("k", {"a", "b"}, firstIsFaster);
    auto second = tuner.tune("k2", {"a", "b"}, firstIsFaster);
    if (!first || first->winner != "a" || !second || second->winner != "a")
      ::_exit(11);
    auto again = tuner.tune("k", {"a", "b"}, firstIsFaster); // from memory
    if (!again || !again->reused || again->winner != "a")
      ::_exit(12);
    if (!namesIn(dir.store).empty()) // no record, no temporary, no 0-byte file
      ::_exit(13);
    if (warnings.size() != 1 ||
        !llvm::StringRef(warnings[0]).starts_with("flashbob: warning: tuning record " +
                                                  tuner.recordPath("k", {"a", "b"}) +
                                                  " not written (") ||
        !llvm::StringRef(warnings[0]).contains("File too large"))
      ::_exit(14);
    ::_exit(0);
  }
  CHECK(childSucceeded(pid));
  CHECK(namesIn(dir.store).empty());
}

// The records' directory is opened once: renaming the cache directory away and putting another
// (with a planted record) in its place afterwards changes nothing for a tuner that already
// opened it. Before, each record was read by path again.
TEST_CASE("the records' directory is opened once: swapping its path afterwards redirects nothing",
          "[tune]") {
  TempDir dir;
  const std::string cache = std::string(dir.path) + "/cache";
  REQUIRE(::mkdir(cache.c_str(), 0700) == 0);
  Autotuner tuner(cache + "/autotune");
  REQUIRE(static_cast<bool>(tuner.tune("k", {"a", "b"}, firstIsFaster)));

  // Planted: a record choosing b for "planted", in a directory of this user's (it passes every
  // check) that takes the cache directory's place.
  const std::string planted = std::string(dir.path) + "/planted";
  REQUIRE(::mkdir(planted.c_str(), 0700) == 0);
  {
    Autotuner planter(planted + "/autotune");
    auto bWins = [](size_t i) -> llvm::Expected<double> { return i == 0 ? 2.0 : 1.0; };
    REQUIRE(static_cast<bool>(planter.tune("planted", {"a", "b"}, bWins)));
  }
  const std::string moved = std::string(dir.path) + "/moved";
  REQUIRE(::rename(cache.c_str(), moved.c_str()) == 0);
  REQUIRE(::rename(planted.c_str(), cache.c_str()) == 0);

  int calls = 0;
  auto result = tuner.tune("planted", {"a", "b"}, [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    return i == 0 ? 1.0 : 2.0;
  });
  REQUIRE(static_cast<bool>(result));
  CHECK_FALSE(result->reused);
  CHECK(calls > 0);
  CHECK(result->winner == "a");
  // Its record went to the directory it opened, now at `moved`.
  const std::string name = llvm::sys::path::filename(tuner.recordPath("planted", {"a", "b"})).str();
  CHECK(llvm::sys::fs::exists(moved + "/autotune/" + name));
}

// A record chooses which kernels run: a records' directory that is a symbolic link (even to a
// directory of this user's), or whose cache directory is another user's link, is not used.
TEST_CASE("a records' directory reached through a link is not used", "[tune]") {
  TempDir dir;
  const std::string real = std::string(dir.path) + "/real";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  {
    Autotuner seed(real + "/autotune");
    REQUIRE(static_cast<bool>(seed.tune("k", {"a", "b"}, firstIsFaster)));
  }
  // autotune/ itself a link to those records.
  const std::string linked = std::string(dir.path) + "/linked";
  REQUIRE(::mkdir(linked.c_str(), 0700) == 0);
  REQUIRE(::symlink((real + "/autotune").c_str(), (linked + "/autotune").c_str()) == 0);
  int calls = 0;
  auto counting = [&](size_t i) -> llvm::Expected<double> {
    ++calls;
    return i == 0 ? 1.0 : 2.0;
  };
  Autotuner throughLink(linked + "/autotune");
  auto result = throughLink.tune("k", {"a", "b"}, counting);
  REQUIRE(static_cast<bool>(result));
  CHECK_FALSE(result->reused);
  CHECK(calls > 0);

  // The cache directory a link of this user's: followed (a cache moved to another disk) ...
  const std::string ownLink = std::string(dir.path) + "/own-link";
  REQUIRE(::symlink(real.c_str(), ownLink.c_str()) == 0);
  calls = 0;
  Autotuner viaOwnLink(ownLink + "/autotune");
  result = viaOwnLink.tune("k", {"a", "b"}, counting);
  REQUIRE(static_cast<bool>(result));
  CHECK(result->reused);
  CHECK(calls == 0);
  // ... another user's (the /tmp attack): refused.
  if (::geteuid() == 0) {
    REQUIRE(::lchown(ownLink.c_str(), 65534, 65534) == 0);
    Autotuner viaTheirLink(ownLink + "/autotune");
    result = viaTheirLink.tune("k", {"a", "b"}, counting);
    REQUIRE(static_cast<bool>(result));
    CHECK_FALSE(result->reused);
    CHECK(calls > 0);
  }
}

// `flashbob cache clear` removed records through a symbolic link autotune/ (files outside the
// cache) and in an autotune/ of another user's or writable by others.
TEST_CASE("clearRecords never follows a link and leaves a directory others could write alone",
          "[tune]") {
  TempDir dir;
  const std::string record = std::string(64, 'c') + ".json";
  const std::string outside = std::string(dir.path) + "/outside";
  REQUIRE(::mkdir(outside.c_str(), 0700) == 0);
  writeFile(outside + "/" + record, "{}");
  REQUIRE(::rmdir(dir.store.c_str()) == 0);
  REQUIRE(::symlink(outside.c_str(), dir.store.c_str()) == 0);
  std::vector<std::string> failures;
  CHECK(Autotuner::clearRecords(dir.store, failures) == 0);
  CHECK(llvm::sys::fs::exists(outside + "/" + record));
  REQUIRE(failures.size() == 1);
  CHECK_THAT(failures[0], Catch::Contains("a symbolic link, not followed"));
  CHECK(llvm::sys::fs::is_symlink_file(dir.store)); // the user's link stays too

  REQUIRE(::unlink(dir.store.c_str()) == 0);
  REQUIRE(::mkdir(dir.store.c_str(), 0700) == 0);
  writeFile(dir.store + "/" + record, "{}");
  REQUIRE(::chmod(dir.store.c_str(), 0777) == 0);
  failures.clear();
  CHECK(Autotuner::clearRecords(dir.store, failures) == 0);
  CHECK(llvm::sys::fs::exists(dir.store + "/" + record));
  REQUIRE(failures.size() == 1);
  CHECK_THAT(failures[0], Catch::Contains("writable by others (mode 0777)"));
  if (::geteuid() == 0) {
    REQUIRE(::chmod(dir.store.c_str(), 0700) == 0);
    REQUIRE(::chown(dir.store.c_str(), 65534, 65534) == 0);
    failures.clear();
    CHECK(Autotuner::clearRecords(dir.store, failures) == 0);
    CHECK(llvm::sys::fs::exists(dir.store + "/" + record));
    REQUIRE(failures.size() == 1);
    CHECK_THAT(failures[0], Catch::Contains("owned by uid 65534"));
    REQUIRE(::chown(dir.store.c_str(), 0, 0) == 0);
  }
  // Ours again: cleared.
  REQUIRE(::chmod(dir.store.c_str(), 0700) == 0);
  failures.clear();
  CHECK(Autotuner::clearRecords(dir.store, failures) == 1);
  CHECK(failures.empty());
}

// XDG_CACHE_HOME naming a regular file: the records' directory would be under a file. Nothing
// exists there, so there is nothing to clear and nothing failed (it said "1 thing(s) left
// behind", from ENOTDIR).
TEST_CASE("clearRecords under a file has nothing to clear", "[tune]") {
  TempDir dir;
  const std::string file = std::string(dir.path) + "/a-file";
  writeFile(file, "not a directory");
  std::vector<std::string> failures;
  CHECK(Autotuner::clearRecords(file + "/flashbob/autotune", failures) == 0);
  CHECK(Autotuner::clearRecords(file + "/autotune", failures) == 0);
  CHECK(Autotuner::clearRecords(file, failures) == 0);
  CHECK(failures.empty());
}

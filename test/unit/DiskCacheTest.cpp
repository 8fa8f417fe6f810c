// The on-disk kernel cache: hits return what was stored, every key field matters, entries
// appear whole or not at all (also across processes), damage is a miss that heals, and an
// unusable directory degrades to memory with one warning.
#include "runtime/cache/CacheDirectory.h"
#include "runtime/cache/DiskCache.h"
#include "runtime/cache/TrustedDirectory.h"
#include "support/Knobs.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <memory>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace flashbob::runtime;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

// A fresh directory per test, removed afterwards.
struct TempDir {
  llvm::SmallString<128> dir;
  TempDir() {
    // Directories the tests make must not be group-writable under a umask of 002, or the cache
    // would (rightly) refuse them.
    ::umask(022);
    REQUIRE(!fs::createUniqueDirectory("flashbob-disk-cache-test", dir));
  }
  ~TempDir() { (void)fs::remove_directories(dir, /*IgnoreErrors=*/true); }
  std::string sub(llvm::StringRef a, llvm::StringRef b = "", llvm::StringRef c = "") const {
    llvm::SmallString<256> p(dir);
    for (llvm::StringRef part : {a, b, c})
      if (!part.empty()) // path::append would add a trailing '/' for an empty part
        path::append(p, part);
    return p.str().str();
  }
};

// Sets (or unsets, for nullptr) an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> saved;
  ScopedEnv(const char *n, const char *value) : name(n) {
    if (const char *old = std::getenv(n))
      saved = old;
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (saved)
      ::setenv(name.c_str(), saved->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

// Overrides a knob for one scope (the environment is read once per process, so tests that vary
// FLASHBOB_* values override them the way flashbob_set_cache_dir does).
struct ScopedKnob {
  flashbob::support::Knob knob;
  ScopedKnob(flashbob::support::Knob k, llvm::StringRef value) : knob(k) {
    flashbob::support::setOverride(k, value);
  }
  ~ScopedKnob() { flashbob::support::clearOverride(knob); }
};

// The key fields a caller composes, one "field: value" line each.
struct KeyFields {
  std::string spec = "bob_q head_dim=64 causal=0 dtype=f16";
  std::string options = "-O3 tile=64x64 stages=2";
  std::string projectVersion = "0.1.0";
  std::string compilerHash = "a7b3be0";
  std::string llvmVersion = "22.1.0";
  std::string ptxasVersion = "12.8.93";
  std::string arch = "sm_90a";
};

std::string composeKey(const KeyFields &f) {
  return "spec: " + f.spec + "\noptions: " + f.options + "\nflashbob: " + f.projectVersion +
         "\ncompiler: " + f.compilerHash + "\nllvm: " + f.llvmVersion +
         "\nptxas: " + f.ptxasVersion + "\narch: " + f.arch + "\n";
}

std::vector<CacheFile> sampleFiles(llvm::StringRef tag) {
  std::string cubin("\x7f" "ELF\0\0\xff\xfe", 8);
  for (int i = 0; i < 4096; ++i)
    cubin.push_back(char(i * 131 + tag.size()));
  return {{"kernel.bob.mlir", "bob.kernel @" + tag.str() + " {}\n"},
          {"kernel.lowered.mlir", "gpu.module @" + tag.str() + " {}\n"},
          {"kernel.ll", "define void @" + tag.str() + "() { ret void }\n"},
          {"kernel.ptx", ".version 8.5\n.target sm_90a\n.entry " + tag.str() + "() { ret; }\n"},
          {"kernel.cubin", cubin},
          {"ptxas.log", "ptxas info: Used 168 registers\n"}};
}

llvm::json::Object sampleMeta(llvm::StringRef name) {
  return llvm::json::Object{{"name", name},
                            {"entry", name},
                            {"threads", 128},
                            {"sharedBytes", 49152},
                            {"registers", 168}};
}

void storeOk(DiskCache &cache, llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files,
             llvm::json::Object meta) {
  llvm::Error e = cache.store(keyText, files, std::move(meta));
  INFO((e ? llvm::toString(std::move(e)) : std::string()));
  REQUIRE(!e);
}

bool sameFiles(const CacheEntry &entry, const std::vector<CacheFile> &files) {
  if (entry.files.size() != files.size())
    return false;
  for (size_t i = 0; i < files.size(); ++i)
    if (entry.files[i].name != files[i].name || entry.files[i].bytes != files[i].bytes)
      return false;
  return true;
}

std::string entryDir(const DiskCache &cache, llvm::StringRef keyText) {
  std::string key = DiskCache::keyFor(keyText);
  llvm::SmallString<256> p(cache.directory());
  path::append(p, key.substr(0, 2), key);
  return p.str().str();
}

std::set<std::string> filesIn(llvm::StringRef dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.insert(path::filename(it->path()).str());
  return names;
}

void writeBytes(llvm::StringRef filePath, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(filePath, ec);
  INFO("open " << filePath.str() << ": " << ec.message());
  REQUIRE(!ec);
  os << bytes;
}

std::string readBytes(llvm::StringRef filePath) {
  auto buffer = llvm::MemoryBuffer::getFile(filePath, /*IsText=*/false);
  REQUIRE(buffer);
  return (*buffer)->getBuffer().str();
}

// Waits for a child process; true when it exited 0.
bool childSucceeded(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid)
    return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A child's barrier; gives up (exit 2) after 20 s so a failed parent never leaves it behind.
void waitForFile(const std::string &barrier) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(barrier))
    if (std::chrono::steady_clock::now() > deadline)
      ::_exit(2);
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
}

} // namespace

TEST_CASE("miss on an empty cache, then a hit returns the stored bytes and metadata", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const std::string keyText = composeKey(KeyFields());
  CHECK(!cache.lookup(keyText));
  CHECK(cache.writable());

  std::vector<CacheFile> files = sampleFiles("bob_q");
  storeOk(cache, keyText, files, sampleMeta("bob_q"));

  // A fresh object reads the disk, not this object's memory.
  DiskCache again(tmp.sub("cache"));
  std::optional<CacheEntry> hit = again.lookup(keyText);
  REQUIRE(hit);
  CHECK(hit->key == DiskCache::keyFor(keyText));
  CHECK(hit->keyText == keyText);
  CHECK(sameFiles(*hit, files));
  CHECK(hit->metadata == sampleMeta("bob_q"));
  REQUIRE(hit->file("kernel.cubin"));
  CHECK(*hit->file("kernel.cubin") == files[4].bytes);
  CHECK(!hit->file("missing"));

  // The key is SHA-256 hex, sharded by its first two digits.
  const std::string key = DiskCache::keyFor(keyText);
  CHECK(key.size() == 64);
  CHECK(DiskCache::keyFor("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(fs::is_directory(tmp.sub("cache", key.substr(0, 2), key)));
}

TEST_CASE("store rejects bad file names", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  for (const char *bad : {"", "../escape", "a/b", ".hidden", "metadata.json"}) {
    llvm::Error e = cache.store("key", {{bad, "x"}}, {});
    CHECK(bool(e));
    llvm::consumeError(std::move(e));
  }
  llvm::Error twice = cache.store("key", {{"a", "1"}, {"a", "2"}}, {});
  CHECK_THAT(twice ? llvm::toString(std::move(twice)) : "", Catch::Contains("given twice"));
  CHECK(!cache.lookup("key"));
}

TEST_CASE("every field of the composed key text changes the key", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const KeyFields base;
  storeOk(cache, composeKey(base), sampleFiles("base"), sampleMeta("base"));
  REQUIRE(cache.lookup(composeKey(base)));

  std::vector<std::pair<const char *, std::string KeyFields::*>> fields = {
      {"spec", &KeyFields::spec},
      {"options", &KeyFields::options},
      {"project version", &KeyFields::projectVersion},
      {"compiler hash", &KeyFields::compilerHash},
      {"LLVM version", &KeyFields::llvmVersion},
      {"ptxas version", &KeyFields::ptxasVersion},
      {"arch", &KeyFields::arch}};
  std::set<std::string> keys = {DiskCache::keyFor(composeKey(base))};
  for (auto &[name, member] : fields) {
    INFO("changed field: " << name);
    KeyFields changed = base;
    changed.*member += "x";
    const std::string text = composeKey(changed);
    CHECK(DiskCache::keyFor(text) != DiskCache::keyFor(composeKey(base)));
    keys.insert(DiskCache::keyFor(text));
    CHECK(!cache.lookup(text));
  }
  CHECK(keys.size() == fields.size() + 1);
  CHECK(cache.lookup(composeKey(base))); // the misses did not disturb the stored entry
}

TEST_CASE("no partially written entry is ever visible", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const std::string keyText = composeKey(KeyFields());
  const std::string key = DiskCache::keyFor(keyText);
  const std::string shard = tmp.sub("cache", key.substr(0, 2));

  // A writer that crashed left a half-built temporary (with a complete-looking one beside it).
  REQUIRE(!fs::create_directories(shard + "/." + key + ".tmp-dead01"));
  writeBytes(shard + "/." + key + ".tmp-dead01/kernel.ptx", ".version 8");
  REQUIRE(!fs::create_directories(shard + "/." + key + ".tmp-dead02"));
  for (const CacheFile &f : sampleFiles("crashed"))
    writeBytes(shard + "/." + key + ".tmp-dead02/" + f.name, f.bytes);
  CHECK(!cache.lookup(keyText));
  CHECK(cache.list().empty());

  std::vector<CacheFile> files = sampleFiles("whole");
  storeOk(cache, keyText, files, sampleMeta("whole"));
  std::optional<CacheEntry> hit = cache.lookup(keyText);
  REQUIRE(hit);
  CHECK(sameFiles(*hit, files));
  CHECK(filesIn(entryDir(cache, keyText)) ==
        std::set<std::string>{"kernel.bob.mlir", "kernel.lowered.mlir", "kernel.ll", "kernel.ptx",
                              "kernel.cubin", "ptxas.log", "metadata.json"});
  // The store left no temporary of its own: only the entry and the two crashed ones.
  CHECK(filesIn(shard).size() == 3);
  CHECK(cache.list().size() == 1);

  // While another process stores many entries, every entry directory this one can see is
  // complete: a lookup of it hits.
  const int count = 40;
  std::vector<std::string> texts;
  for (int i = 0; i < count; ++i)
    texts.push_back("atomicity " + std::to_string(i) + "\n" + std::string(size_t(i) * 1000, 'k'));
  std::vector<CacheFile> big = sampleFiles("big");
  big[4].bytes.append(std::string(1 << 20, '\x5a'));
  const std::string barrier = tmp.sub("go");
  pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    waitForFile(barrier);
    DiskCache child(tmp.sub("cache"));
    for (const std::string &t : texts)
      if (llvm::Error e = child.store(t, big, sampleMeta("big"))) {
        llvm::consumeError(std::move(e));
        ::_exit(1);
      }
    ::_exit(0);
  }
  writeBytes(barrier, "");
  int seenWhole = 0, seenPartial = 0, writerStatus = -1;
  DiskCache reader(tmp.sub("cache"));
  for (bool done = false; !done;) {
    done = ::waitpid(writer, &writerStatus, WNOHANG) == writer; // a last pass after it exits
    for (const std::string &t : texts) {
      if (!fs::is_directory(entryDir(reader, t)))
        continue;
      std::optional<CacheEntry> e = reader.lookup(t);
      (e && sameFiles(*e, big) ? seenWhole : seenPartial)++;
    }
  }
  CHECK((WIFEXITED(writerStatus) && WEXITSTATUS(writerStatus) == 0));
  CHECK(seenPartial == 0);
  CHECK(seenWhole >= count);
}

TEST_CASE("a damaged entry is a miss, is removed, and a new store heals it", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const std::string keyText = composeKey(KeyFields());
  const std::string dir = entryDir(cache, keyText);
  const std::vector<CacheFile> files = sampleFiles("bob_kv");
  auto storeFresh = [&] {
    storeOk(cache, keyText, files, sampleMeta("bob_kv"));
    REQUIRE(cache.lookup(keyText));
  };

  SECTION("truncated cubin") {
    storeFresh();
    REQUIRE(::truncate((dir + "/kernel.cubin").c_str(), 100) == 0);
    CHECK(!cache.lookup(keyText));
    CHECK(!fs::exists(dir));
  }
  SECTION("one byte flipped in the PTX (same size)") {
    storeFresh();
    std::string ptx = readBytes(dir + "/kernel.ptx");
    ptx[3] ^= 0x20;
    writeBytes(dir + "/kernel.ptx", ptx);
    CHECK(!cache.lookup(keyText));
    CHECK(!fs::exists(dir));
  }
  SECTION("a file missing") {
    storeFresh();
    REQUIRE(!fs::remove(dir + "/ptxas.log"));
    CHECK(!cache.lookup(keyText));
  }
  SECTION("metadata.json garbage of many kinds") {
    const std::string nested = std::string(200000, '[') + std::string(200000, ']');
    const std::string binary("\0\xff\x01{\"", 5);
    for (const std::string &garbage :
         {std::string(), std::string("{\"format\":1,"), binary, std::string("[]"),
          std::string("{\"format\":\"1\"}"), std::string("{\"format\":1,\"files\":\"x\"}"),
          std::string("{\"format\":1,\"files\":[{\"name\":\"../../x\",\"size\":1}]}"), nested}) {
      INFO("garbage of " << garbage.size() << " bytes");
      storeFresh();
      writeBytes(dir + "/metadata.json", garbage);
      CHECK(!cache.lookup(keyText));
      CHECK(!fs::exists(dir));
    }
  }
  SECTION("another format version or key text in metadata.json") {
    for (auto [from, to] : {std::pair<std::string, std::string>{"\"format\": 1", "\"format\": 2"},
                            {"spec: bob_q", "spec: bob_z"}}) {
      INFO("replacing " << from);
      storeFresh();
      std::string meta = readBytes(dir + "/metadata.json");
      size_t at = meta.find(from);
      REQUIRE(at != std::string::npos);
      meta.replace(at, from.size(), to);
      writeBytes(dir + "/metadata.json", meta);
      CHECK(!cache.lookup(keyText));
    }
  }
  SECTION("an empty directory where the entry should be") {
    REQUIRE(!fs::create_directories(dir));
    CHECK(!cache.lookup(keyText));
  }
  SECTION("a regular file where the entry should be") {
    REQUIRE(!fs::create_directories(path::parent_path(dir)));
    writeBytes(dir, "stray");
    CHECK(!cache.lookup(keyText));
    CHECK(!fs::exists(dir));
    writeBytes(dir, "stray"); // and in the way of the store below
  }
  SECTION("a damaged entry in the way of a store is replaced") {
    storeFresh();
    REQUIRE(::truncate((dir + "/kernel.cubin").c_str(), 1) == 0);
  }

  storeOk(cache, keyText, files, sampleMeta("bob_kv"));
  std::optional<CacheEntry> hit = cache.lookup(keyText);
  REQUIRE(hit);
  CHECK(sameFiles(*hit, files));
}

TEST_CASE("two processes storing the same key both succeed and leave one entry", "[cache]") {
  TempDir tmp;
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    const std::string keyText = "race round " + std::to_string(round);
    const std::string barrier = tmp.sub("barrier" + std::to_string(round));
    std::vector<CacheFile> files = sampleFiles("race");
    files[4].bytes.append(std::string(256 << 10, char(round)));
    pid_t children[2];
    for (pid_t &child : children) {
      child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        waitForFile(barrier);
        DiskCache cache(tmp.sub("cache"));
        llvm::Error e = cache.store(keyText, files, sampleMeta("race"));
        bool ok = !e && cache.writable();
        llvm::consumeError(std::move(e));
        std::optional<CacheEntry> hit = cache.lookup(keyText);
        ::_exit(ok && hit && sameFiles(*hit, files) ? 0 : 1);
      }
    }
    writeBytes(barrier, "");
    CHECK(childSucceeded(children[0]));
    CHECK(childSucceeded(children[1]));

    DiskCache cache(tmp.sub("cache"));
    std::optional<CacheEntry> hit = cache.lookup(keyText);
    REQUIRE(hit);
    CHECK(sameFiles(*hit, files));
    // One entry, and the loser's temporary is gone.
    const std::string key = DiskCache::keyFor(keyText);
    CHECK(filesIn(tmp.sub("cache", key.substr(0, 2))) == std::set<std::string>{key});
  }
}

namespace {
// Runs `body` with stderr going to a file; returns what was written there.
template <typename Body> std::string capturingStderr(const TempDir &tmp, Body body) {
  const std::string captured = tmp.sub("stderr.txt");
  int savedStderr = ::dup(2);
  int capture = ::open(captured.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  REQUIRE(savedStderr >= 0);
  REQUIRE(capture >= 0);
  ::dup2(capture, 2);
  ::close(capture);
  body();
  ::dup2(savedStderr, 2);
  ::close(savedStderr);
  return readBytes(captured);
}
} // namespace

TEST_CASE("an unwritable cache directory degrades to memory with one warning", "[cache]") {
  TempDir tmp;
  const std::string file = tmp.sub("not-a-directory");
  writeBytes(file, "a regular file");
  const std::string keyText = composeKey(KeyFields());
  const std::vector<CacheFile> files = sampleFiles("mem");

  bool missBefore = false, writableFile = true, writableUnder = true, hitInMemory = false,
       missFresh = false;
  std::string storeErrors;
  // stderr goes to a file while the caches run (llvm::errs() is unbuffered).
  const std::string warnings = capturingStderr(tmp, [&] {
    ScopedKnob dir(flashbob::support::Knob::CacheDir, file);
    DiskCache cache = DiskCache::fromEnvironment();
    missBefore = !cache.lookup(keyText);
    for (int i = 0; i < 3; ++i)
      if (llvm::Error e = cache.store(keyText, files, sampleMeta("mem")))
        storeErrors += llvm::toString(std::move(e));
    writableFile = cache.writable();
    std::optional<CacheEntry> hit = cache.lookup(keyText);
    hitInMemory = hit && sameFiles(*hit, files);
    missFresh = !DiskCache(file).lookup(keyText);

    // A path under a regular file: create_directories fails outright.
    DiskCache under(file + "/sub/dir");
    if (llvm::Error e = under.store(keyText, files, sampleMeta("mem")))
      storeErrors += llvm::toString(std::move(e));
    writableUnder = under.writable();
  });

  CHECK(missBefore);
  CHECK(storeErrors.empty());
  CHECK(!writableFile);
  CHECK(!writableUnder);
  CHECK(hitInMemory);
  CHECK(missFresh);
  CHECK(std::count(warnings.begin(), warnings.end(), '\n') == 1);
  CHECK_THAT(warnings, Catch::StartsWith("flashbob: warning: kernel cache directory " + file +
                                         " is not writable (") &&
                           Catch::EndsWith("); caching in memory only\n"));
  CHECK(readBytes(file) == "a regular file");
}

TEST_CASE("fromEnvironment: FLASHBOB_CACHE_DIR, then XDG_CACHE_HOME, then HOME", "[cache]") {
  using flashbob::support::Knob;
  ScopedKnob flashbob(Knob::CacheDir, "/srv/fb-cache");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
  ScopedEnv home("HOME", "/home/tester");
  CHECK(DiskCache::defaultDirectory() == "/srv/fb-cache");
  CHECK(DiskCache::fromEnvironment().directory() == "/srv/fb-cache");

  flashbob::support::setOverride(Knob::CacheDir, ""); // empty counts as unset
  CHECK(DiskCache::fromEnvironment().directory() == "/xdg/cache/flashbob");

  ::unsetenv("XDG_CACHE_HOME");
  CHECK(DiskCache::fromEnvironment().directory() == "/home/tester/.cache/flashbob");

  // A relative directory is made absolute once, so a later chdir does not move the cache.
  flashbob::support::setOverride(Knob::CacheDir, "rel/cache");
  llvm::SmallString<256> expected;
  REQUIRE(!fs::current_path(expected));
  path::append(expected, "rel", "cache");
  CHECK(DiskCache::fromEnvironment().directory() == expected.str());
}

TEST_CASE("list shows every entry and clear removes only entries", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  CHECK(cache.list().empty());
  {
    llvm::Expected<ClearResult> nothing = cache.clear(); // no directory yet
    REQUIRE(static_cast<bool>(nothing));
    CHECK(nothing->entries == 0);
  }

  const auto before = std::chrono::system_clock::now() - std::chrono::seconds(5);
  std::vector<CacheFile> files = sampleFiles("listed");
  storeOk(cache, "first line of key A\nmore", files, sampleMeta("kernel_a"));
  storeOk(cache, "first line of key B\nmore", files, sampleMeta("kernel_b"));
  storeOk(cache, "unnamed kernel key\nmore", files, llvm::json::Object{{"threads", 64}});

  // Foreign things in the cache directory: listed never, removed never.
  writeBytes(tmp.sub("cache", "README"), "mine");
  REQUIRE(!fs::create_directories(tmp.sub("cache", "keep-me")));
  writeBytes(tmp.sub("cache", "keep-me", "x"), "mine");
  REQUIRE(!fs::create_directories(tmp.sub("cache", "abc")));

  std::vector<ListedEntry> listed = cache.list();
  REQUIRE(listed.size() == 3);
  std::set<std::string> summaries;
  for (const ListedEntry &e : listed) {
    summaries.insert(e.summary);
    const std::string dir = tmp.sub("cache", e.key.substr(0, 2), e.key);
    uint64_t metaSize = 0;
    REQUIRE(!fs::file_size(dir + "/metadata.json", metaSize));
    uint64_t expected = metaSize;
    for (const CacheFile &f : files)
      expected += f.bytes.size();
    CHECK(e.bytes == expected);
    CHECK(e.modified > before);
  }
  CHECK(std::is_sorted(listed.begin(), listed.end(),
                       [](const ListedEntry &a, const ListedEntry &b) { return a.key < b.key; }));
  CHECK(summaries == std::set<std::string>{"kernel_a", "kernel_b", "unnamed kernel key"});

  // A two-hex-digit folder of the user's, and a user's file inside a real shard.
  REQUIRE(!fs::create_directories(tmp.sub("cache", "cd")));
  writeBytes(tmp.sub("cache", "cd", "notes.txt"), "mine");
  const std::string shardA = listed[0].key.substr(0, 2);
  writeBytes(tmp.sub("cache", shardA, "mine.txt"), "mine");

  llvm::Expected<ClearResult> cleared = cache.clear();
  REQUIRE(static_cast<bool>(cleared));
  CHECK(cleared->entries == 3);
  CHECK(cleared->failures.empty());
  CHECK(cache.list().empty());
  CHECK(fs::exists(tmp.sub("cache", "cd", "notes.txt")));
  CHECK(filesIn(tmp.sub("cache", shardA)) == std::set<std::string>{"mine.txt"});
  REQUIRE(!fs::remove(tmp.sub("cache", "cd", "notes.txt")));
  REQUIRE(!fs::remove(tmp.sub("cache", "cd")));
  REQUIRE(!fs::remove(tmp.sub("cache", shardA, "mine.txt")));
  REQUIRE(!fs::remove(tmp.sub("cache", shardA)));
  CHECK(!cache.lookup("first line of key A\nmore"));
  CHECK(fs::exists(tmp.sub("cache", "README")));
  CHECK(fs::exists(tmp.sub("cache", "keep-me", "x")));
  CHECK(fs::exists(tmp.sub("cache", "abc")));
  CHECK(filesIn(tmp.sub("cache")) ==
        std::set<std::string>{"README", "keep-me", "abc", ".flashbob-cache"});

  // The cache still works after a clear.
  storeOk(cache, "after clear", files, sampleMeta("again"));
  CHECK(cache.lookup("after clear"));
}

TEST_CASE("concurrent calls from threads of one process", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const std::vector<CacheFile> files = sampleFiles("threads");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string keyText = "thread key " + std::to_string(i % 7);
        if (llvm::Error e = cache.store(keyText, files, sampleMeta("t" + std::to_string(t)))) {
          llvm::consumeError(std::move(e));
          ++failures;
        }
        std::optional<CacheEntry> hit = cache.lookup(keyText);
        if (!hit || !sameFiles(*hit, files))
          ++failures;
      }
    });
  for (std::thread &t : threads)
    t.join();
  CHECK(failures == 0);
  CHECK(cache.list().size() == 7);
}

namespace {

// Sets when an entry was last used (its metadata.json's modification time).
void setLastUsed(const std::string &entryDir, std::chrono::seconds ago) {
  int fd = -1;
  REQUIRE(!fs::openFileForRead(entryDir + "/metadata.json", fd));
  auto when = std::chrono::time_point_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now() - ago);
  CHECK(!fs::setLastAccessAndModificationTime(fd, when));
  (void)llvm::sys::Process::SafelyCloseFileDescriptor(fd);
}

std::set<std::string> keysIn(DiskCache &cache) {
  std::set<std::string> keys;
  for (const ListedEntry &e : cache.list())
    keys.insert(e.key);
  return keys;
}

} // namespace

TEST_CASE("the size bound comes from FLASHBOB_CACHE_MAX_MB", "[cache]") {
  TempDir tmp;
  {
    ScopedKnob unset(flashbob::support::Knob::CacheMaxMB, "");
    CHECK(DiskCache(tmp.sub("c")).maxBytes() == uint64_t(2048) << 20);
  }
  {
    ScopedKnob one(flashbob::support::Knob::CacheMaxMB, "1");
    CHECK(DiskCache(tmp.sub("c")).maxBytes() == uint64_t(1) << 20);
  }
  {
    ScopedKnob none(flashbob::support::Knob::CacheMaxMB, "0");
    CHECK(DiskCache(tmp.sub("c")).maxBytes() == 0);
  }
}

TEST_CASE("the size bound removes least recently used entries and nothing else", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  cache.setMaxBytes(0); // no bound while filling
  const std::vector<CacheFile> files = {{"kernel.cubin", std::string(10000, 'c')}};
  const std::vector<std::string> keyTexts = {"key 0", "key 1", "key 2", "key 3"};
  for (const std::string &k : keyTexts)
    storeOk(cache, k, files, sampleMeta(k));
  // Used 40, 30, 20 and 10 seconds ago; then key 0, the oldest, is hit and becomes the newest.
  for (size_t i = 0; i < keyTexts.size(); ++i) {
    const std::string key = DiskCache::keyFor(keyTexts[i]);
    setLastUsed(tmp.sub("cache", key.substr(0, 2), key), std::chrono::seconds(40 - 10 * i));
  }
  REQUIRE(cache.lookup("key 0"));

  // Things that are not entries, some large, some reached only through symbolic links: a link
  // shard, a link where an entry could be (in a real shard), another process's entry being
  // built, foreign files. None is counted or removed, nothing behind a link is touched.
  const std::string outside = tmp.sub("outside");
  REQUIRE(!fs::create_directories(outside));
  writeBytes(outside + "/precious", std::string(50000, 'p'));
  writeBytes(outside + "/metadata.json", "{}");
  const std::string key1 = DiskCache::keyFor("key 1");
  const std::string shard = tmp.sub("cache", key1.substr(0, 2));
  const std::string linkedKey = key1.substr(0, 2) + std::string(62, 'e');
  REQUIRE(!fs::create_link(outside, shard + "/" + linkedKey));
  REQUIRE(!fs::create_link(outside, tmp.sub("cache", "ee")));
  const std::string building = shard + "/." + key1 + ".tmp-abcdef";
  REQUIRE(!fs::create_directories(building));
  writeBytes(building + "/kernel.cubin", std::string(50000, 'b'));
  writeBytes(tmp.sub("cache", "README"), std::string(50000, 'r'));

  std::vector<ListedEntry> listed = cache.list();
  REQUIRE(listed.size() == 4);
  uint64_t largest = 0;
  for (const ListedEntry &e : listed)
    largest = std::max(largest, e.bytes);

  // Room for two entries: the two least recently used go (keys 1 and 2; key 0 was just hit).
  cache.setMaxBytes(2 * largest + largest / 2);
  PruneResult removed = cache.prune();
  CHECK(removed.entries == 2);
  CHECK(keysIn(cache) == std::set<std::string>{DiskCache::keyFor("key 0"), DiskCache::keyFor("key 3")});
  CHECK(!cache.lookup("key 1"));
  CHECK(!cache.lookup("key 2"));
  CHECK(readBytes(outside + "/precious") == std::string(50000, 'p'));
  CHECK(fs::is_symlink_file(shard + "/" + linkedKey));
  CHECK(fs::is_symlink_file(tmp.sub("cache", "ee")));
  CHECK(fs::exists(building + "/kernel.cubin"));
  CHECK(fs::exists(tmp.sub("cache", "README")));

  // Under the bound: nothing to do.
  CHECK(cache.prune().entries == 0);

  // A store prunes afterwards, keeping the entry just stored even when it alone is too large.
  cache.setMaxBytes(1);
  storeOk(cache, "key 4", files, sampleMeta("key 4"));
  CHECK(keysIn(cache) == std::set<std::string>{DiskCache::keyFor("key 4")});
  CHECK(cache.lookup("key 4"));
  CHECK(readBytes(outside + "/precious") == std::string(50000, 'p'));
  CHECK(fs::exists(building + "/kernel.cubin"));
}

TEST_CASE("a symbolic link where an entry belongs is removed, not followed", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  const std::string outside = tmp.sub("outside");
  REQUIRE(!fs::create_directories(outside));
  writeBytes(outside + "/precious", "keep me");
  const std::string key = DiskCache::keyFor("linked key");
  REQUIRE(!fs::create_directories(tmp.sub("cache", key.substr(0, 2))));
  const std::string entry = tmp.sub("cache", key.substr(0, 2), key);
  REQUIRE(!fs::create_link(outside, entry));

  CHECK(!cache.lookup("linked key")); // not an entry: a miss, and the link is discarded
  CHECK(!fs::exists(entry));
  CHECK(readBytes(outside + "/precious") == "keep me");
  storeOk(cache, "linked key", sampleFiles("x"), sampleMeta("x"));
  CHECK(cache.lookup("linked key"));
}

// Planted special files: a FIFO would block the read (lookup, list) forever, a link to /dev/zero
// would be read until memory runs out, and a FIFO left the .trash-* directory behind (fs::remove
// refuses FIFOs). Each must be a quick miss that removes the entry completely.
TEST_CASE("FIFOs and links to devices in an entry are misses, removed without a trace", "[cache]") {
  ::alarm(60); // before the fix this hung: fail instead of hanging the suite
  struct Plant {
    const char *file;
    bool fifo; // else a symbolic link to /dev/zero
  };
  for (Plant plant : {Plant{"metadata.json", true}, Plant{"kernel.cubin", true},
                      Plant{"metadata.json", false}, Plant{"kernel.cubin", false}}) {
    INFO(plant.file << (plant.fifo ? " as a FIFO" : " as a link to /dev/zero"));
    TempDir tmp;
    DiskCache cache(tmp.sub("cache"));
    const std::string keyText = "planted key";
    storeOk(cache, keyText, sampleFiles("p"), sampleMeta("p"));
    const std::string entry = entryDir(cache, keyText);
    const std::string target = entry + "/" + plant.file;
    REQUIRE(!fs::remove(target));
    if (plant.fifo)
      REQUIRE(::mkfifo(target.c_str(), 0600) == 0);
    else
      REQUIRE(!fs::create_link("/dev/zero", target));

    std::vector<ListedEntry> listed = cache.list(); // must not block either
    REQUIRE(listed.size() == 1);
    if (llvm::StringRef(plant.file) == "metadata.json")
      CHECK(listed[0].summary == "(damaged: unreadable metadata.json)");
    CHECK(!DiskCache(tmp.sub("cache")).lookup(keyText));
    CHECK(!fs::exists(entry));
    CHECK(filesIn(path::parent_path(entry)).empty()); // no .trash-* left behind
    storeOk(cache, keyText, sampleFiles("p"), sampleMeta("p"));
    CHECK(DiskCache(tmp.sub("cache")).lookup(keyText));
  }
  ::alarm(0);
}

TEST_CASE("a symbolic link where a shard belongs is removed, not followed", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  storeOk(cache, "other key", sampleFiles("o"), sampleMeta("o")); // creates the cache directory
  const std::string key = DiskCache::keyFor("shard-linked key");
  // Outside: what looks like a whole entry, damaged, that a lookup through the link would read
  // and then discard.
  const std::string outside = tmp.sub("outside");
  REQUIRE(!fs::create_directories(outside + "/" + key));
  writeBytes(outside + "/" + key + "/metadata.json", "{ damaged");
  const std::string shard = tmp.sub("cache", key.substr(0, 2));
  (void)fs::remove_directories(shard);
  REQUIRE(!fs::create_link(outside, shard));

  CHECK(!cache.lookup("shard-linked key"));
  CHECK(!fs::exists(shard));
  CHECK(readBytes(outside + "/" + key + "/metadata.json") == "{ damaged");
  storeOk(cache, "shard-linked key", sampleFiles("x"), sampleMeta("x"));
  CHECK(cache.lookup("shard-linked key"));
}


TEST_CASE("a cache directory is trusted only if this user owns it and nobody else can write it",
          "[cache]") {
  const uid_t me = ::geteuid();
  const gid_t mine = 4242, shared = 100;
  CHECK(!untrustedReason(S_IFDIR | 0700, me, shared, me, std::nullopt));
  CHECK(!untrustedReason(S_IFDIR | 0755, me, shared, me, std::nullopt));
  CHECK(untrustedReason(S_IFDIR | 0700, me + 1, shared, me, std::nullopt) ==
        "owned by uid " + std::to_string(me + 1) + ", not by this user (uid " +
            std::to_string(me) + ")");
  CHECK(untrustedReason(S_IFDIR | 0777, me, mine, me, mine) ==
        std::string("writable by others (mode 0777)"));
  CHECK(untrustedReason(S_IFDIR | 0770, me, shared, me, mine) ==
        std::string("writable by its group (mode 0770)"));
  CHECK(untrustedReason(S_IFDIR | 0770, me, shared, me, std::nullopt) ==
        std::string("writable by its group (mode 0770)"));
  // umask 002 with a user private group: group-writable by nobody else.
  CHECK(!untrustedReason(S_IFDIR | 0775, me, mine, me, mine));
  CHECK(untrustedReason(S_IFREG | 0600, me, mine, me, mine) == std::string("not a directory"));

  // A new directory is created 0700.
  TempDir tmp;
  DiskCache fresh(tmp.sub("new", "cache"));
  storeOk(fresh, "key", sampleFiles("k"), sampleMeta("k"));
  fs::file_status status;
  REQUIRE(!fs::status(tmp.sub("new", "cache"), status));
  CHECK((status.permissions() & fs::all_perms) == fs::owner_all);

  // Writable by others: a planted entry with valid checksums is not used, nothing is stored
  // there, and one warning says why.
  REQUIRE(::chmod(tmp.sub("new", "cache").c_str(), 0777) == 0);
  bool hit = true, writable = true, listedNothing = false;
  std::string warnings = capturingStderr(tmp, [&] {
    DiskCache open(tmp.sub("new", "cache"));
    hit = open.lookup("key").has_value();
    storeOk(open, "other key", sampleFiles("o"), sampleMeta("o"));
    writable = open.writable();
    listedNothing = open.list().empty();
  });
  CHECK(!hit);
  CHECK(!writable);
  CHECK(listedNothing);
  CHECK(!fs::exists(entryDir(fresh, "other key")));
  CHECK(fs::exists(entryDir(fresh, "key"))); // not ours to remove either
  CHECK_THAT(warnings, Catch::Contains("kernel cache directory " + tmp.sub("new", "cache") +
                                       " is not used: it is writable by others (mode 0777)"));

  // Owned by someone else (needs root to arrange).
  if (me == 0) {
    REQUIRE(::chmod(tmp.sub("new", "cache").c_str(), 0700) == 0);
    REQUIRE(::chown(tmp.sub("new", "cache").c_str(), 65534, 65534) == 0);
    CHECK(!DiskCache(tmp.sub("new", "cache")).lookup("key"));
    REQUIRE(::chown(tmp.sub("new", "cache").c_str(), 0, 0) == 0);
  }
}

TEST_CASE("without a home the default cache is per user", "[cache]") {
  const std::string dir = perUserTempDirectory();
  CHECK_THAT(dir, Catch::EndsWith("/flashbob-cache-" + std::to_string(::geteuid())));
}

// A full disk (here a file size limit: the same failed write, EFBIG instead of ENOSPC) fails one
// store: a warning, the entry kept in memory, nothing half-written left behind, and the
// directory stays in use for the entries after it.
TEST_CASE("a failed store keeps the directory in use for other entries", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  storeOk(cache, "first", sampleFiles("a"), sampleMeta("a"));
  const std::string blocked = "blocked", later = "later";

  std::string warnings = capturingStderr(tmp, [&] {
    struct rlimit saved, limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    limit = saved;
    limit.rlim_cur = 1000; // less than the sample cubin
    void (*savedHandler)(int) = ::signal(SIGXFSZ, SIG_IGN); // EFBIG, not death
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    storeOk(cache, blocked, sampleFiles("b"), sampleMeta("b"));
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &saved) == 0);
    ::signal(SIGXFSZ, savedHandler);
    storeOk(cache, later, sampleFiles("c"), sampleMeta("c"));
  });
  CHECK(cache.writable());
  CHECK(cache.lookup(blocked)); // from memory
  CHECK(!DiskCache(tmp.sub("cache")).lookup(blocked));
  // Nothing of it on disk: no entry, no temporary with a partial file.
  const std::string blockedKey = DiskCache::keyFor(blocked);
  for (const std::string &name : filesIn(tmp.sub("cache", blockedKey.substr(0, 2))))
    CHECK_THAT(name, !Catch::Contains(blockedKey));
  CHECK(DiskCache(tmp.sub("cache")).lookup(later)); // on disk
  CHECK_THAT(warnings, Catch::Contains("could not store " + blockedKey.substr(0, 16)) &&
                           Catch::Contains("File too large") && !Catch::Contains("not writable"));
}

// A regular file or FIFO where a shard belongs made every store of its keys fail (a warning and
// a recompile on every run): it is removed, never followed or read, and the shard made again.
TEST_CASE("a file or FIFO where a shard belongs is removed, so the next run hits", "[cache]") {
  ::alarm(60); // a FIFO must never block: fail instead of hanging the suite
  for (bool fifo : {false, true}) {
    INFO((fifo ? "a FIFO" : "a regular file"));
    TempDir tmp;
    storeOk(*std::make_unique<DiskCache>(tmp.sub("cache")), "first", sampleFiles("a"),
            sampleMeta("a"));
    const std::string keyText = "blocked key";
    const std::string key = DiskCache::keyFor(keyText);
    const std::string shard = tmp.sub("cache", key.substr(0, 2));
    (void)fs::remove_directories(shard);
    if (fifo)
      REQUIRE(::mkfifo(shard.c_str(), 0600) == 0);
    else
      writeBytes(shard, "in the way");

    std::string warnings = capturingStderr(tmp, [&] {
      DiskCache run(tmp.sub("cache")); // the first run: a miss, compiles and stores
      CHECK(!run.lookup(keyText));
      storeOk(run, keyText, sampleFiles("b"), sampleMeta("b"));
    });
    CHECK(warnings.empty());
    CHECK(fs::is_directory(shard));
    CHECK(DiskCache(tmp.sub("cache")).lookup(keyText)); // the next run hits

    // The same without a lookup first: the store itself makes room.
    (void)fs::remove_directories(shard);
    if (fifo)
      REQUIRE(::mkfifo(shard.c_str(), 0600) == 0);
    else
      writeBytes(shard, "in the way");
    storeOk(*std::make_unique<DiskCache>(tmp.sub("cache")), keyText, sampleFiles("b"),
            sampleMeta("b"));
    CHECK(DiskCache(tmp.sub("cache")).lookup(keyText));
  }
  ::alarm(0);
}

// A store created the shard with create_directories, which follows a link: the entry was
// written outside the cache, wherever the link pointed.
TEST_CASE("a store never writes through a symbolic link where a shard belongs", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  storeOk(cache, "other key", sampleFiles("o"), sampleMeta("o")); // creates the cache directory
  const std::string key = DiskCache::keyFor("shard-linked key");
  const std::string outside = tmp.sub("outside");
  REQUIRE(!fs::create_directories(outside));
  const std::string shard = tmp.sub("cache", key.substr(0, 2));
  (void)fs::remove_directories(shard);
  REQUIRE(!fs::create_link(outside, shard));

  storeOk(cache, "shard-linked key", sampleFiles("x"), sampleMeta("x")); // no lookup first
  CHECK(filesIn(outside).empty());
  CHECK(!fs::is_symlink_file(shard));
  CHECK(fs::is_directory(shard));
  CHECK(DiskCache(tmp.sub("cache")).lookup("shard-linked key"));
}

// The /tmp attack, step one: another user makes the per-user cache name a symbolic link to a
// directory this user owns, which passes every check on the directory itself. Such a link is
// refused; a link of this user's own (a cache moved to another disk) is followed.
TEST_CASE("a cache path that is another user's symbolic link is refused", "[cache]") {
  TempDir tmp;
  const std::string real = tmp.sub("real");
  storeOk(*std::make_unique<DiskCache>(real), "key", sampleFiles("k"), sampleMeta("k"));
  const std::string link = tmp.sub("link");
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  CHECK(DiskCache(link).lookup("key")); // this user's link

  if (::geteuid() != 0) {
    WARN("not root: cannot give the link to another user");
    return;
  }
  REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
  bool hit = true, writable = true;
  // The warning is once per process (an earlier test may have had it): its reason is checked
  // on TrustedDirectory, which gives it.
  (void)capturingStderr(tmp, [&] {
    DiskCache refused(link);
    hit = refused.lookup("key").has_value();
    storeOk(refused, "new key", sampleFiles("n"), sampleMeta("n"));
    writable = refused.writable();
  });
  CHECK(!hit);
  CHECK(!writable);
  CHECK(!fs::exists(entryDir(DiskCache(real), "new key")));
  TrustedDirectory opened = TrustedDirectory::open(link, /*create=*/true);
  CHECK(opened.status() == TrustedDirectory::Status::Untrusted);
  CHECK(opened.reason() == "a symbolic link owned by uid 65534, not by this user (uid 0)");
}

// The /tmp attack, step two: after the check, the path is swapped for a directory (or a link
// to one) holding a planted entry with valid checksums. The cache opened its directory once and
// goes on using that one: the planted entry is never seen, and stores go where they went.
TEST_CASE("the cache directory is opened once: swapping its path afterwards redirects nothing",
          "[cache]") {
  for (bool asLink : {false, true}) {
    INFO((asLink ? "swapped for a link" : "swapped for a directory"));
    TempDir tmp;
    const std::string path = tmp.sub("cache");
    DiskCache cache(path);
    storeOk(cache, "mine", sampleFiles("m"), sampleMeta("m"));
    CHECK(!cache.lookup("victim key"));

    const std::string planted = tmp.sub("planted");
    storeOk(*std::make_unique<DiskCache>(planted), "victim key", sampleFiles("planted"),
            sampleMeta("planted"));
    const std::string moved = tmp.sub("moved");
    REQUIRE(::rename(path.c_str(), moved.c_str()) == 0);
    if (asLink)
      REQUIRE(::symlink(planted.c_str(), path.c_str()) == 0);
    else
      REQUIRE(::rename(planted.c_str(), path.c_str()) == 0);

    CHECK(!cache.lookup("victim key"));
    CHECK(cache.lookup("mine"));
    storeOk(cache, "after the swap", sampleFiles("s"), sampleMeta("s"));
    CHECK(fs::is_directory(entryDir(DiskCache(moved), "after the swap")));
    CHECK(!fs::exists(entryDir(DiskCache(path), "after the swap")));
    CHECK(cache.list().size() == 2); // mine, after the swap
  }
}

// prune removed what looked like entries in a directory without the marker, which clear
// refuses: the user's data in a directory FLASHBOB_CACHE_DIR pointed at by mistake.
TEST_CASE("prune removes nothing in a directory the cache did not mark as its own", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.sub("dir");
  {
    DiskCache filler(dir);
    filler.setMaxBytes(0);
    for (const char *k : {"a", "b", "c"})
      storeOk(filler, k, sampleFiles(k), sampleMeta(k));
  }
  REQUIRE(!fs::remove(tmp.sub("dir", DiskCache::MarkerFileName)));

  DiskCache cache(dir);
  cache.setMaxBytes(1);
  PruneResult pruned = cache.prune();
  CHECK(pruned.entries == 0);
  REQUIRE(pruned.refused);
  CHECK_THAT(*pruned.refused, Catch::Contains("has no .flashbob-cache marker") &&
                                  Catch::Contains("nothing removed"));
  for (const char *k : {"a", "b", "c"})
    CHECK(fs::is_directory(entryDir(cache, k)));

  // Nor after a store of an object that marked the directory once, the marker gone since.
  DiskCache marking(tmp.sub("dir"));
  marking.setMaxBytes(0);
  storeOk(marking, "d", sampleFiles("d"), sampleMeta("d"));
  REQUIRE(!fs::remove(tmp.sub("dir", DiskCache::MarkerFileName)));
  marking.setMaxBytes(1);
  storeOk(marking, "e", sampleFiles("e"), sampleMeta("e"));
  for (const char *k : {"a", "b", "c", "d", "e"})
    CHECK(fs::is_directory(entryDir(cache, k)));

  // Marked: pruned to the bound.
  writeBytes(tmp.sub("dir", DiskCache::MarkerFileName), "");
  pruned = cache.prune();
  CHECK(!pruned.refused);
  CHECK(pruned.entries == 5);
}

// XDG_CACHE_HOME naming a regular file: the cache directory would be under a file. Nothing
// exists there, so clear has nothing to do and nothing fails; likewise a file in the cache
// directory's own place.
TEST_CASE("clear under a file, or of a file, has nothing to clear", "[cache]") {
  TempDir tmp;
  const std::string file = tmp.sub("a-file");
  writeBytes(file, "not a directory");
  for (const std::string &dir : {file + "/flashbob", file}) {
    INFO(dir);
    llvm::Expected<ClearResult> cleared = DiskCache(dir).clear();
    REQUIRE(static_cast<bool>(cleared));
    CHECK(cleared->entries == 0);
    CHECK(cleared->failures.empty());
  }
  CHECK(readBytes(file) == "not a directory");
}

TEST_CASE("clear removes nothing in a directory the cache did not mark as its own", "[cache]") {
  TempDir tmp;
  // What looks like an entry, in a directory without the marker (e.g. FLASHBOB_CACHE_DIR
  // pointed at the wrong place).
  const std::string key = DiskCache::keyFor("k");
  REQUIRE(!fs::create_directories(tmp.sub("dir", key.substr(0, 2), key)));
  writeBytes(tmp.sub("dir", key.substr(0, 2), key) + "/metadata.json", "{}");
  DiskCache cache(tmp.sub("dir"));
  llvm::Expected<ClearResult> cleared = cache.clear();
  REQUIRE(!static_cast<bool>(cleared));
  CHECK_THAT(llvm::toString(cleared.takeError()),
             Catch::Contains("has no .flashbob-cache marker") && Catch::Contains("nothing removed"));
  CHECK(fs::exists(tmp.sub("dir", key.substr(0, 2), key) + "/metadata.json"));

  // The cache's first store marks it; then clear removes the entries it finds there.
  storeOk(cache, "other", sampleFiles("o"), sampleMeta("o"));
  CHECK(fs::exists(tmp.sub("dir", ".flashbob-cache")));
  cleared = cache.clear();
  REQUIRE(static_cast<bool>(cleared));
  CHECK(cleared->entries == 2);
}

TEST_CASE("an entry its caller's check rejects is a miss, removed, and stored anew", "[cache]") {
  TempDir tmp;
  DiskCache cache(tmp.sub("cache"));
  storeOk(cache, "checked", sampleFiles("c"), sampleMeta("c"));
  auto threadsAre = [](int64_t expected) {
    return [expected](const CacheEntry &e) -> llvm::Error {
      if (e.metadata.getInteger("threads") == expected)
        return llvm::Error::success();
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "threads differ");
    };
  };
  std::string warnings;
  bool hit = false, rejected = true;
  warnings = capturingStderr(tmp, [&] {
    DiskCache fresh(tmp.sub("cache"));
    hit = fresh.lookup("checked", threadsAre(128)).has_value();
    rejected = fresh.lookup("checked", threadsAre(256)).has_value();
  });
  CHECK(hit);
  CHECK(!rejected);
  CHECK(!fs::exists(entryDir(cache, "checked")));
  CHECK_THAT(warnings, Catch::Contains("not used (threads differ); removed, the kernel is recompiled"));
  storeOk(cache, "checked", sampleFiles("c"), sampleMeta("c"));
  CHECK(DiskCache(tmp.sub("cache")).lookup("checked", threadsAre(128)));
}

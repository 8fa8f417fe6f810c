#include "runtime/tune/Autotuner.h"

#include "runtime/cache/SafeFile.h"

#include "support/Json.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

namespace {
// Details are Info (printed by the default sink) when FLASHBOB_PRINT_AUTOTUNING is on, else
// Debug (only a log callback sees them).
support::LogLevel detailLevel() {
  return support::knobs::printAutotuning() ? support::LogLevel::Info : support::LogLevel::Debug;
}
} // namespace

namespace {
// The records' directory inside its parent (the cache directory): each opened once and checked
// on its descriptor, the records' directory never through a link.
struct StoreDirectory {
  TrustedDirectory parent, store;
};

StoreDirectory openStore(llvm::StringRef storeDir, bool create) {
  llvm::StringRef parentPath = llvm::sys::path::parent_path(storeDir);
  StoreDirectory result;
  result.parent = TrustedDirectory::open(parentPath.empty() ? "." : parentPath, create);
  result.store = TrustedDirectory::openAt(result.parent, llvm::sys::path::filename(storeDir),
                                          storeDir, create);
  return result;
}

// The file name of a record: a hash of the key and the candidate list.
std::string recordName(llvm::StringRef key, llvm::ArrayRef<std::string> candidates) {
  llvm::SHA256 hash;
  hash.update(key);
  for (const std::string &c : candidates) {
    hash.update("\n");
    hash.update(c);
  }
  return llvm::toHex(hash.final(), /*LowerCase=*/true) + ".json";
}
} // namespace

Autotuner::Autotuner(std::string storeDir) : storeDir_(std::move(storeDir)) {
  // "<cache>/autotune/" names the same directory as "<cache>/autotune".
  while (storeDir_.size() > 1 && storeDir_.back() == '/')
    storeDir_.pop_back();
}

bool Autotuner::storeUsableLocked() {
  if (storeDir_.empty())
    return false;
  if (state_ != Store::Unknown)
    return state_ == Store::Usable;
  state_ = Store::Unusable;
  StoreDirectory opened = openStore(storeDir_, /*create=*/true);
  if (opened.store.isOpen()) {
    store_ = std::move(opened.store);
    state_ = Store::Usable;
    return true;
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    support::log(support::LogLevel::Warning, "flashbob: warning: tuning records in " + storeDir_ +
                                                 " not used (" + opened.store.reason() +
                                                 "); tuning results kept in memory only");
  return false;
}

std::string Autotuner::recordPath(llvm::StringRef key, llvm::ArrayRef<std::string> candidates) const {
  std::string name = recordName(key, candidates);
  if (storeDir_.empty())
    return name;
  llvm::SmallString<256> path(storeDir_);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

namespace {
// A record is a few hundred bytes; the bound leaves room for the depth guard to be what refuses a
// deeply nested one (AutotunerTest).
constexpr uint64_t kMaxRecordBytes = 4 << 20;

std::optional<std::string> readWinner(int store, llvm::StringRef name, llvm::StringRef path,
                                      llvm::StringRef key, llvm::ArrayRef<std::string> candidates) {
  // Not through a link, not a FIFO (which would block), not past a bound (a link to /dev/zero):
  // a record is a few hundred bytes. Anything else is a miss; the new record replaces it.
  llvm::Expected<std::string> text = readRegularFileAt(store, name, kMaxRecordBytes, path);
  if (!text) {
    support::log(support::LogLevel::Debug,
                 "flashbob autotune: record not used: " + llvm::toString(text.takeError()));
    return std::nullopt;
  }
  auto json = support::parseJson(*text); // a damaged record is a miss
  if (!json) {
    llvm::consumeError(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *o = json->getAsObject();
  if (!o)
    return std::nullopt;
  // The file name is a hash: check the record really is this key and candidate list.
  auto storedKey = o->getString("key");
  auto winner = o->getString("winner");
  const llvm::json::Array *stored = o->getArray("candidates");
  if (!storedKey || *storedKey != key || !winner || !stored || stored->size() != candidates.size())
    return std::nullopt;
  for (size_t i = 0; i < candidates.size(); ++i)
    if ((*stored)[i].getAsString() != llvm::StringRef(candidates[i]))
      return std::nullopt;
  if (std::find(candidates.begin(), candidates.end(), winner->str()) == candidates.end())
    return std::nullopt;
  return winner->str();
}

// Written whole under a temporary name, then renamed over the record: readers never see half a
// record and concurrent writers both succeed. Every write is checked (not llvm::writeToOutput,
// whose stream ends the process on a write error such as a full disk); a failed write leaves
// nothing behind.
llvm::Error writeRecord(int store, llvm::StringRef storeDir, llvm::StringRef name,
                        const llvm::json::Value &record) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::formatv("{0:2}", record) << "\n";
  llvm::Expected<std::string> temp = writeUniqueFileAt(store, (name + ".tmp-").str(), text, storeDir);
  if (!temp)
    return temp.takeError();
  if (::renameat(store, temp->c_str(), store, name.str().c_str()) == 0)
    return llvm::Error::success();
  const std::error_code ec(errno, std::generic_category());
  (void)::unlinkat(store, temp->c_str(), 0);
  return llvm::createStringError(ec, "rename(" + storeDir + "/" + *temp + ", " + storeDir + "/" +
                                         name + "): " + ec.message());
}
} // namespace

llvm::Expected<TuneResult> Autotuner::tune(
    llvm::StringRef key, llvm::ArrayRef<std::string> candidates,
    const std::function<llvm::Expected<double>(size_t)> &measureMs, int repeats,
    llvm::StringRef label) {
  const std::string name = (label.empty() ? key : label).str();
  if (candidates.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "autotune: no candidates for " + name);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string path = recordPath(key, candidates);
  const std::string fileName = recordName(key, candidates);
  for (auto &[p, w] : memory_)
    if (p == path)
      return TuneResult{w, {}, true};
  const support::LogLevel detail = detailLevel();
  const bool usable = storeUsableLocked();
  if (usable)
    if (auto winner = readWinner(store_.fd(), fileName, path, key, candidates)) {
      support::log(detail, "flashbob autotune: " + name + ": reusing " + *winner + " (" + path +
                               ")");
      memory_.emplace_back(path, *winner);
      return TuneResult{*winner, {}, true};
    }

  // Tuning can take a while (each candidate is compiled and timed): always say it is happening.
  if (detail != support::LogLevel::Info)
    support::log(support::LogLevel::Info,
                 llvm::formatv("flashbob autotune: tuning {0} over {1} candidates "
                               "(FLASHBOB_PRINT_AUTOTUNING=1 shows each)",
                               name, candidates.size()));
  TuneResult result;
  double best = 0;
  std::string failures;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string label =
        llvm::formatv("flashbob autotune: [{0}/{1}] {2}", i + 1, candidates.size(), candidates[i]);
    std::vector<double> times;
    std::string error;
    for (int r = 0; r < std::max(1, repeats) + 1; ++r) { // the first run warms up (JIT, caches)
      auto t = measureMs(i);
      if (!t) {
        error = llvm::toString(t.takeError());
        break;
      }
      if (r > 0)
        times.push_back(*t);
    }
    if (!error.empty()) {
      support::log(detail, label + ": unusable: " + error);
      failures += "\n  " + candidates[i] + ": " + error;
      continue;
    }
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    result.medianMs.emplace_back(candidates[i], median);
    support::log(detail, label + llvm::formatv(": {0:F3} ms", median).str());
    if (result.winner.empty() || median < best) {
      best = median;
      result.winner = candidates[i];
    }
  }
  if (result.winner.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "autotune: every candidate failed for " + name + failures);
  support::log(detail, "flashbob autotune: " + name + ": chose " + result.winner);

  llvm::json::Array names, times;
  for (const std::string &c : candidates)
    names.push_back(c);
  for (auto &[name, ms] : result.medianMs)
    times.push_back(llvm::json::Object{{"candidate", name}, {"median_ms", ms}});
  if (usable)
    if (llvm::Error e = writeRecord(store_.fd(), storeDir_, fileName,
                                    llvm::json::Object{{"key", key},
                                                       {"candidates", std::move(names)},
                                                       {"winner", result.winner},
                                                       {"times", std::move(times)}})) {
      // A full disk: the choice holds for this process, and the next one tunes again.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        support::log(support::LogLevel::Warning,
                     "flashbob: warning: tuning record " + path + " not written (" +
                         llvm::toString(std::move(e)) + "); the choice is kept in memory for "
                                                        "this process");
      else
        llvm::consumeError(std::move(e));
    }
  memory_.emplace_back(path, result.winner);
  return result;
}

size_t Autotuner::clearRecords(llvm::StringRef storeDirRef, std::vector<std::string> &failures) {
  std::string storeDir = storeDirRef.str();
  while (storeDir.size() > 1 && storeDir.back() == '/')
    storeDir.pop_back();
  StoreDirectory opened = openStore(storeDir, /*create=*/false);
  switch (opened.store.status()) {
  case TrustedDirectory::Status::Missing:
  case TrustedDirectory::Status::NotDirectory:
    return 0; // nothing there to clear
  case TrustedDirectory::Status::Unusable:
  case TrustedDirectory::Status::Untrusted:
    // Never through a link (its target is not the cache's), never in a directory someone else
    // may have filled.
    failures.push_back(storeDir + ": not cleared (" + opened.store.reason() + ")");
    return 0;
  case TrustedDirectory::Status::Opened:
    break;
  }
  const int store = opened.store.fd();
  // The names recordName gives and the temporaries of their writes (".tmp-" now; an older
  // flashbob's llvm::writeToOutput left ".temp-stream-").
  auto isRecordName = [](llvm::StringRef name) {
    llvm::StringRef hex = name.take_front(64);
    llvm::StringRef rest = name.drop_front(hex.size());
    return hex.size() == 64 && llvm::all_of(hex, llvm::isHexDigit) &&
           (rest == ".json" || rest.starts_with(".json.tmp-") ||
            rest.starts_with(".json.temp-stream-"));
  };
  std::vector<std::string> names;
  if (std::error_code ec = readDirectoryAt(store, names))
    failures.push_back("read directory(" + storeDir + "): " + ec.message());
  size_t removed = 0;
  for (const std::string &n : names) {
    struct stat st;
    if (!isRecordName(n) ||
        (::fstatat(store, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)))
      continue;
    if (removeTreeAt(store, n, storeDir + "/" + n, failures) &&
        llvm::StringRef(n).ends_with(".json"))
      ++removed;
  }
  // Only if empty: other files keep it.
  (void)::unlinkat(opened.parent.fd(), llvm::sys::path::filename(storeDir).str().c_str(),
                   AT_REMOVEDIR);
  return removed;
}

} // namespace flashbob::runtime

#include "runtime/tune/Autotuner.h"

#include "runtime/cache/CacheDirectory.h"
#include "runtime/cache/SafeFile.h"

#include "support/Json.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>

namespace flashbob::runtime {

namespace {
// Details are Info (printed by the default sink) when FLASHBOB_PRINT_AUTOTUNING is on, else
// Debug (only a log callback sees them).
support::LogLevel detailLevel() {
  return support::knobs::printAutotuning() ? support::LogLevel::Info : support::LogLevel::Debug;
}
} // namespace

Autotuner::Autotuner(std::string storeDir) : storeDir_(std::move(storeDir)) {}

bool Autotuner::storeUsableLocked() {
  if (storeDir_.empty())
    return false;
  if (store_ != Store::Unknown)
    return store_ == Store::Usable;
  store_ = Store::Unusable;
  std::string why;
  if (std::error_code ec = llvm::sys::fs::create_directories(storeDir_, /*IgnoreExisting=*/true,
                                                             llvm::sys::fs::owner_all))
    why = "create_directories: " + ec.message();
  else if (std::optional<std::string> untrusted = untrustedReason(storeDir_))
    why = *untrusted;
  if (why.empty()) {
    store_ = Store::Usable;
    return true;
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    support::log(support::LogLevel::Warning, "flashbob: warning: tuning records in " + storeDir_ +
                                                 " not used (" + why +
                                                 "); tuning results kept in memory only");
  return false;
}

std::string Autotuner::recordPath(llvm::StringRef key, llvm::ArrayRef<std::string> candidates) const {
  llvm::SHA256 hash;
  hash.update(key);
  for (const std::string &c : candidates) {
    hash.update("\n");
    hash.update(c);
  }
  std::string name = llvm::toHex(hash.final(), /*LowerCase=*/true) + ".json";
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

std::optional<std::string> readWinner(const std::string &path, llvm::StringRef key,
                                      llvm::ArrayRef<std::string> candidates) {
  // Not through a link, not a FIFO (which would block), not past a bound (a link to /dev/zero):
  // a record is a few hundred bytes. Anything else is a miss; the new record replaces it.
  llvm::Expected<std::string> text = readRegularFile(path, kMaxRecordBytes);
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

// llvm::writeToOutput writes a temporary file and renames it: readers never see half a record;
// concurrent writers both succeed. Unwritable: the winner stays in memory (said at Debug level).
void writeRecord(const std::string &path, const llvm::json::Value &record) {
  (void)llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", record) << "\n";
        return llvm::Error::success();
      }))
    support::log(support::LogLevel::Debug, "flashbob autotune: record not written: " +
                                               llvm::toString(std::move(e)));
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
  for (auto &[p, w] : memory_)
    if (p == path)
      return TuneResult{w, {}, true};
  const support::LogLevel detail = detailLevel();
  const bool usable = storeUsableLocked();
  if (usable)
    if (auto winner = readWinner(path, key, candidates)) {
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
    writeRecord(path, llvm::json::Object{{"key", key},
                                         {"candidates", std::move(names)},
                                         {"winner", result.winner},
                                         {"times", std::move(times)}});
  memory_.emplace_back(path, result.winner);
  return result;
}

size_t Autotuner::clearRecords(llvm::StringRef storeDir, std::vector<std::string> &failures) {
  namespace fs = llvm::sys::fs;
  // The names recordPath gives, and llvm::writeToOutput's temporaries beside them.
  auto isRecordName = [](llvm::StringRef name) {
    llvm::StringRef hex = name.take_front(64);
    llvm::StringRef rest = name.drop_front(hex.size());
    return hex.size() == 64 && llvm::all_of(hex, llvm::isHexDigit) &&
           (rest == ".json" || rest.starts_with(".json.temp-stream-"));
  };
  std::vector<std::string> records;
  std::error_code ec;
  for (fs::directory_iterator it(storeDir, ec, /*follow_symlinks=*/false), end;
       !ec && it != end; it.increment(ec))
    if (it->type() != fs::file_type::directory_file &&
        isRecordName(llvm::sys::path::filename(it->path())))
      records.push_back(it->path());
  if (ec && ec != std::errc::no_such_file_or_directory)
    failures.push_back("read directory(" + storeDir.str() + "): " + ec.message());
  size_t removed = 0;
  for (const std::string &r : records)
    if (removeTree(r, failures) && !llvm::StringRef(r).contains(".temp-stream-"))
      ++removed;
  (void)fs::remove(storeDir, /*IgnoreNonExisting=*/true); // only if empty
  return removed;
}

} // namespace flashbob::runtime

#include "runtime/cache/DiskCache.h"
#include "runtime/cache/CacheDirectory.h"
#include "runtime/cache/SafeFile.h"

#include "support/Errors.h"
#include "support/Json.h"
#include "support/Knobs.h"
#include "support/Log.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace flashbob::runtime {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace {

llvm::Error failure(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

llvm::Error failure(const llvm::Twine &call, std::error_code ec) {
  return llvm::createStringError(ec, call + ": " + ec.message());
}

std::string sha256Hex(llvm::StringRef bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)), /*LowerCase=*/true);
}

bool isLowerHex(llvm::StringRef s, size_t length) {
  return s.size() == length &&
         llvm::all_of(s, [](char c) { return llvm::isDigit(c) || (c >= 'a' && c <= 'f'); });
}

// Names come back from metadata.json on lookup too, so this also keeps a damaged or hostile
// metadata file from pointing outside the entry ("../x") or at metadata.json itself.
bool isPlainFileName(llvm::StringRef name) {
  return !name.empty() && !name.starts_with(".") && !name.contains('/') &&
         !name.contains('\0') && name != DiskCache::MetadataFileName;
}

llvm::Error writeFile(llvm::StringRef filePath, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(filePath, ec, fs::OF_None);
  if (ec)
    return failure("open " + filePath, ec);
  os << bytes;
  os.close();
  if (os.has_error()) {
    ec = os.error();
    os.clear_error();
    return failure("write " + filePath, ec);
  }
  // No fsync: a file cut short by a power loss fails its checksum and the entry is dropped.
  return llvm::Error::success();
}

// Bounds on what lookup and list read: a planted link to /dev/zero or a huge file is refused by
// its size, not read until memory runs out. metadata.json holds the key text and a few records;
// a stage file (PTX, LLVM IR of a large kernel) stays far below 256 MiB.
constexpr uint64_t kMaxMetadataBytes = 1 << 20;
constexpr uint64_t kMaxStageFileBytes = uint64_t(256) << 20;

// lstat, not stat: a symbolic link (or anything else) where a directory belongs is no entry.
bool isRealDirectory(llvm::StringRef p) {
  fs::file_status status;
  return !fs::status(p, status, /*follow=*/false) &&
         status.type() == fs::file_type::directory_file;
}

llvm::Expected<llvm::json::Object> readMetadata(llvm::StringRef entryDir) {
  llvm::SmallString<256> metaPath(entryDir);
  path::append(metaPath, DiskCache::MetadataFileName);
  llvm::Expected<std::string> text = readRegularFile(metaPath, kMaxMetadataBytes);
  if (!text)
    return text.takeError();
  llvm::Expected<llvm::json::Value> value = support::parseJson(*text);
  if (!value)
    return failure("parse " + metaPath + ": " + llvm::toString(value.takeError()));
  llvm::json::Object *object = value->getAsObject();
  if (!object)
    return failure(metaPath + " is not a JSON object");
  return std::move(*object);
}

// Reads and verifies one entry directory; any error means "damaged or not this key".
llvm::Expected<CacheEntry> readEntry(llvm::StringRef entryDir, llvm::StringRef key,
                                     llvm::StringRef keyText) {
  llvm::Expected<llvm::json::Object> meta = readMetadata(entryDir);
  if (!meta)
    return meta.takeError();
  if (meta->getInteger("format") != DiskCache::FormatVersion)
    return failure(entryDir + ": format version is not " + llvm::Twine(DiskCache::FormatVersion));
  if (meta->getString("key") != std::optional<llvm::StringRef>(key))
    return failure(entryDir + ": stored key differs");
  if (meta->getString("keyText") != std::optional<llvm::StringRef>(keyText))
    return failure(entryDir + ": stored key text differs");
  const llvm::json::Array *files = meta->getArray("files");
  const llvm::json::Object *callerMeta = meta->getObject("metadata");
  if (!files || !callerMeta)
    return failure(entryDir + ": metadata.json lacks files or metadata");

  CacheEntry entry;
  entry.key = key.str();
  entry.keyText = keyText.str();
  entry.metadata = *callerMeta;
  llvm::StringSet<> seen;
  for (const llvm::json::Value &f : *files) {
    const llvm::json::Object *record = f.getAsObject();
    std::optional<llvm::StringRef> name = record ? record->getString("name") : std::nullopt;
    std::optional<int64_t> size = record ? record->getInteger("size") : std::nullopt;
    std::optional<llvm::StringRef> sha = record ? record->getString("sha256") : std::nullopt;
    if (!name || !size || !sha || !isPlainFileName(*name) || !seen.insert(*name).second)
      return failure(entryDir + ": bad file record in metadata.json");
    llvm::SmallString<256> filePath(entryDir);
    path::append(filePath, *name);
    if (*size < 0 || uint64_t(*size) > kMaxStageFileBytes)
      return failure(filePath + ": size in metadata.json out of range");
    // Bounded by the recorded size: a longer file is damaged, whatever it is.
    llvm::Expected<std::string> bytes = readRegularFile(filePath, uint64_t(*size));
    if (!bytes)
      return bytes.takeError();
    if (bytes->size() != uint64_t(*size) || sha256Hex(*bytes) != *sha)
      return failure(filePath + ": SHA-256 differs from metadata.json");
    entry.files.push_back({name->str(), std::move(*bytes)});
  }
  return entry;
}

// Removes an entry without ever showing a half-deleted one: first an atomic rename out of the
// way, then the slow delete. Best effort: a read-only cache keeps its damaged entry (still a miss).
// removeTree never follows a link (a link where an entry belongs is removed itself, never what
// it points to) and unlinks FIFOs and sockets too (fs::remove refuses them, which left the
// .trash-* directory behind).
void discard(llvm::StringRef entryDir) {
  llvm::SmallString<256> trash;
  fs::createUniquePath(entryDir + ".trash-%%%%%%%%", trash, /*MakeAbsolute=*/false);
  // The trash name ends in ".trash-..." so list() and lookup never take it for an entry.
  llvm::StringRef victim = fs::rename(entryDir, trash) ? entryDir : llvm::StringRef(trash);
  std::vector<std::string> failures;
  if (!removeTree(victim, failures))
    support::log(support::LogLevel::Debug,
                 "flashbob cache: could not remove " + victim + ": " + failures.front());
}

// Marks an entry used now (its metadata.json's modification time), for least-recently-used
// pruning. Best effort: in a cache of another user's entries the time stays as it was.
void markUsed(llvm::StringRef entryDir) {
  llvm::SmallString<256> metaPath(entryDir);
  path::append(metaPath, DiskCache::MetadataFileName);
  (void)touchRegularFile(metaPath);
}

std::string shortKey(llvm::StringRef key) { return key.take_front(16).str(); }

std::string firstLine(llvm::StringRef text) { return text.split('\n').first.rtrim("\r").str(); }

} // namespace

const std::string *CacheEntry::file(llvm::StringRef name) const {
  for (const CacheFile &f : files)
    if (f.name == name)
      return &f.bytes;
  return nullptr;
}

DiskCache::DiskCache(llvm::StringRef directory) {
  llvm::SmallString<256> absolute(directory);
  // A relative FLASHBOB_CACHE_DIR must not change meaning if the process changes directory.
  (void)fs::make_absolute(absolute);
  path::remove_dots(absolute, /*remove_dot_dot=*/true);
  directory_ = absolute.str().str();
  // MiB to bytes, saturating: a bound past 2^64 bytes is no bound.
  const uint64_t mib = support::knobs::cacheMaxMB();
  maxBytes_ = mib > (UINT64_MAX >> 20) ? 0 : mib << 20;
}

std::string DiskCache::defaultDirectory() {
  if (std::string dir = support::knobs::cacheDir(); !dir.empty())
    return dir;
  llvm::SmallString<256> result;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    result = xdg;
    path::append(result, "flashbob");
    return result.str().str();
  }
  const char *home = std::getenv("HOME");
  if (home && *home)
    result = home;
  else if (!path::home_directory(result)) // HOME unset: the password database
    result.clear();
  if (result.empty()) // no home at all (a bare container): a per-user temp directory
    return perUserTempDirectory();
  path::append(result, ".cache", "flashbob");
  return result.str().str();
}

std::string DiskCache::keyFor(llvm::StringRef keyText) { return sha256Hex(keyText); }

std::string DiskCache::entryPath(llvm::StringRef key) const {
  llvm::SmallString<256> p(directory_);
  path::append(p, key.take_front(2), key);
  return p.str().str();
}

namespace {
// One line per process, not per cache object or per kernel: a read-only home would otherwise
// print it for every kernel compiled.
// One flag per kind of warning, so one kind never hides another.
void warnOnce(std::atomic<bool> &warned, const std::string &message) {
  if (!warned.exchange(true))
    support::log(support::LogLevel::Warning, message);
}
} // namespace

void DiskCache::degradeLocked(const llvm::Twine &reason) {
  state_ = DirState::Unwritable;
  static std::atomic<bool> warned{false};
  warnOnce(warned, "flashbob: warning: kernel cache directory " + directory_ + " is not writable (" +
           reason.str() + "); caching in memory only");
}

DiskCache::DirState DiskCache::openLocked(bool create) {
  if (state_ != DirState::Unknown)
    return state_;
  if (!fs::exists(directory_)) {
    if (!create)
      return DirState::Unknown; // nothing to read; decided when something is stored
    // 0700: entries become GPU code in this process; nobody else needs to read or write them.
    if (std::error_code ec = fs::create_directories(directory_, /*IgnoreExisting=*/true,
                                                    fs::owner_all)) {
      degradeLocked("create_directories: " + ec.message());
      return state_;
    }
  }
  // stat, not lstat: a link to a directory of this user's (a cache moved to another disk) is
  // fine; what it points to is checked.
  struct stat st;
  if (::stat(directory_.c_str(), &st) != 0) {
    degradeLocked("stat: " + std::error_code(errno, std::generic_category()).message());
    return state_;
  }
  if (!S_ISDIR(st.st_mode)) { // create_directories accepts an existing file of that name
    degradeLocked("not a directory");
    return state_;
  }
  if (std::optional<std::string> why = untrustedReason(st.st_mode, st.st_uid, st.st_gid, ::geteuid(), userPrivateGroup())) {
    state_ = DirState::Refused;
    static std::atomic<bool> warned{false};
    warnOnce(warned, "flashbob: warning: kernel cache directory " + directory_ + " is not used: it is " +
             *why + "; it must belong to this user and be writable by nobody else (chmod 700); "
             "caching in memory only");
    return state_;
  }
  if (std::error_code ec = fs::access(directory_, fs::AccessMode::Write)) {
    // Read-only but ours: its entries may still be used.
    degradeLocked("access: " + ec.message());
    state_ = DirState::ReadOnly;
    return state_;
  }
  state_ = DirState::Writable;
  return state_;
}

void DiskCache::markLocked() {
  if (marked_)
    return;
  // The marker tells clear() that this directory is a cache it may empty: it removes nothing
  // elsewhere. Written on the first store, not on a lookup: looking into a directory does not
  // make it ours. Best effort: without it the cache works, only clear() refuses.
  llvm::SmallString<256> marker(directory_);
  path::append(marker, MarkerFileName);
  fs::file_status markerStatus;
  if (fs::status(marker, markerStatus, /*follow=*/false))
    if (llvm::Error e = writeFile(marker, "This directory is a FlashBoB kernel cache: `flashbob "
                                          "cache clear` removes only the entries it wrote.\n"))
      llvm::consumeError(std::move(e));
  marked_ = true;
}

bool DiskCache::writable() {
  std::lock_guard<std::mutex> lock(mutex_);
  return openLocked(/*create=*/true) == DirState::Writable;
}

std::optional<CacheEntry>
DiskCache::lookup(llvm::StringRef keyText,
                  llvm::function_ref<llvm::Error(const CacheEntry &)> check) {
  std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end() && it->second.keyText == keyText) {
    // Checked like a disk entry: the caller may depend on what `check` derives from it.
    if (!check)
      return it->second;
    llvm::Error e = check(it->second);
    if (!e)
      return it->second;
    llvm::consumeError(std::move(e));
    memory_.erase(it);
    return std::nullopt;
  }
  // Never read entries from a directory someone else can write: they would run as GPU code.
  if (DirState state = openLocked(/*create=*/false);
      state != DirState::Writable && state != DirState::ReadOnly)
    return std::nullopt;
  std::string entryDir = entryPath(key);
  if (!fs::exists(entryDir) && !fs::is_symlink_file(entryDir))
    return std::nullopt;
  // Not through a link, neither the entry nor its shard: the files read below must be the
  // cache's own. A link or file where the shard belongs is removed itself (never followed).
  if (llvm::StringRef shard = path::parent_path(entryDir); !isRealDirectory(shard)) {
    discard(shard);
    support::log(support::LogLevel::Debug,
                 "flashbob cache: removed " + shard + ": not a directory");
    return std::nullopt;
  }
  llvm::Expected<CacheEntry> entry =
      isRealDirectory(entryDir) ? readEntry(entryDir, key, keyText)
                                : llvm::Expected<CacheEntry>(failure(entryDir + ": not a directory"));
  if (!entry) {
    std::string why = llvm::toString(entry.takeError());
    discard(entryDir);
    support::log(support::LogLevel::Debug,
                 "flashbob cache: removed damaged entry " + shortKey(key) + " (" + why + ")");
    return std::nullopt;
  }
  if (check)
    if (llvm::Error e = check(*entry)) {
      // Sound files with wrong contents: tampering or a bug of another build. Said, not hidden.
      support::log(support::LogLevel::Warning,
                   "flashbob: warning: kernel cache entry " + entryDir + " not used (" +
                       llvm::toString(std::move(e)) + "); removed, the kernel is recompiled");
      discard(entryDir);
      return std::nullopt;
    }
  markUsed(entryDir);
  support::log(support::LogLevel::Debug, "flashbob cache: hit " + shortKey(key) + " in " +
                                             directory_);
  return std::move(*entry);
}

void DiskCache::discardEntry(llvm::StringRef keyText, const llvm::Twine &why) {
  const std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.erase(key);
  if (DirState state = openLocked(/*create=*/false);
      state != DirState::Writable && state != DirState::ReadOnly)
    return;
  const std::string entryDir = entryPath(key);
  if (!isRealDirectory(path::parent_path(entryDir)) || !isRealDirectory(entryDir))
    return; // a link where an entry belongs: the next lookup removes it
  support::log(support::LogLevel::Warning, "flashbob: warning: kernel cache entry " + entryDir +
                                               " not used (" + why +
                                               "); removed, the kernel is recompiled");
  discard(entryDir);
}

namespace {

llvm::Error validateStore(llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files) {
  // metadata.json holds the key text as a JSON string, which must be UTF-8 to read back equal.
  if (!llvm::json::isUTF8(keyText))
    return support::makeInvalidArgument("keyText",
                                        "DiskCache::store: the key text is not valid UTF-8");
  llvm::StringSet<> seen;
  for (const CacheFile &f : files) {
    if (!isPlainFileName(f.name))
      return support::makeInvalidArgument(
          "files", "DiskCache::store: bad file name '" + f.name +
                       "' (must be a plain name, not hidden, not metadata.json)");
    if (!seen.insert(f.name).second)
      return support::makeInvalidArgument("files", "DiskCache::store: file name '" + f.name +
                                                       "' given twice");
  }
  return llvm::Error::success();
}

// Builds the entry in a temporary directory beside its final place, then renames it in.
llvm::Error storeOnDisk(llvm::StringRef entryDir, llvm::StringRef key, llvm::StringRef keyText,
                        llvm::ArrayRef<CacheFile> files, const llvm::json::Object &callerMeta) {
  llvm::StringRef shard = path::parent_path(entryDir);
  if (std::error_code ec = fs::create_directories(shard))
    return failure("create_directories " + shard, ec);
  llvm::SmallString<256> temp;
  // A leading dot and a suffix keep a leftover (crashed) temporary from ever looking like an entry.
  if (std::error_code ec = fs::createUniqueDirectory(shard + "/." + key + ".tmp", temp))
    return failure("createUniqueDirectory in " + shard, ec);
  llvm::scope_exit removeTemp(
      [&] { (void)fs::remove_directories(temp, /*IgnoreErrors=*/true); });

  llvm::json::Array records;
  for (const CacheFile &f : files) {
    llvm::SmallString<256> filePath(temp);
    path::append(filePath, f.name);
    if (llvm::Error e = writeFile(filePath, f.bytes))
      return e;
    records.push_back(llvm::json::Object{{"name", f.name},
                                         {"size", int64_t(f.bytes.size())},
                                         {"sha256", sha256Hex(f.bytes)}});
  }
  llvm::json::Object meta{{"format", DiskCache::FormatVersion},
                          {"key", key},
                          {"keyText", keyText},
                          {"files", std::move(records)},
                          {"metadata", llvm::json::Object(callerMeta)}};
  std::string metaText;
  llvm::raw_string_ostream(metaText) << llvm::formatv("{0:2}", llvm::json::Value(std::move(meta)))
                                     << "\n";
  llvm::SmallString<256> metaPath(temp);
  path::append(metaPath, DiskCache::MetadataFileName);
  if (llvm::Error e = writeFile(metaPath, metaText))
    return e;

  // rename(2) refuses to replace a non-empty directory, so exactly one process gets its entry in.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::error_code ec = fs::rename(temp, entryDir);
    if (!ec)
      return llvm::Error::success();
    if (!fs::exists(entryDir))
      return failure("rename " + temp + " to " + entryDir, ec);
    // Another process won the race: keep its entry if it is sound, else replace it once.
    llvm::Expected<CacheEntry> existing = readEntry(entryDir, key, keyText);
    if (existing)
      return llvm::Error::success();
    llvm::consumeError(existing.takeError());
    discard(entryDir);
  }
  // Still losing to someone storing the same key; their entry stands.
  if (fs::is_directory(entryDir))
    return llvm::Error::success();
  return failure("rename " + temp + " to " + entryDir + ": gave up after retrying");
}

} // namespace

llvm::Error DiskCache::store(llvm::StringRef keyText, llvm::ArrayRef<CacheFile> files,
                             llvm::json::Object metadata) {
  if (llvm::Error e = validateStore(keyText, files))
    return e;
  std::string key = keyFor(keyText);
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/true) == DirState::Writable) {
    markLocked();
    llvm::Error e = storeOnDisk(entryPath(key), key, keyText, files, metadata);
    if (!e) {
      support::log(support::LogLevel::Debug, "flashbob cache: stored " + shortKey(key) + " in " +
                                                 directory_);
      pruneLocked(key);
      return llvm::Error::success();
    }
    // One entry failed (a full disk, a stray file where its shard belongs): the directory stays
    // in use for the others; this one is kept in memory.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      support::log(support::LogLevel::Warning,
                   "flashbob: warning: kernel cache: could not store " + shortKey(key) + " in " +
                       directory_ + " (" + llvm::toString(std::move(e)) +
                       "); kept in memory for this process");
    else
      llvm::consumeError(std::move(e));
  }
  memory_[key] = CacheEntry{key, keyText.str(), files.vec(), std::move(metadata)};
  return llvm::Error::success();
}

std::vector<ListedEntry> DiskCache::list() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/false) == DirState::Refused)
    return {}; // not ours: the warning said why
  return listLocked(/*withSummaries=*/true);
}

std::vector<ListedEntry> DiskCache::listLocked(bool withSummaries) {
  std::vector<ListedEntry> result;
  std::error_code ec;
  for (fs::directory_iterator shard(directory_, ec, /*follow_symlinks=*/false), end;
       !ec && shard != end; shard.increment(ec)) {
    llvm::StringRef shardName = path::filename(shard->path());
    if (shard->type() != fs::file_type::directory_file || !isLowerHex(shardName, 2))
      continue;
    std::error_code innerEc;
    for (fs::directory_iterator it(shard->path(), innerEc, false); !innerEc && it != end;
         it.increment(innerEc)) {
      llvm::StringRef key = path::filename(it->path());
      if (it->type() != fs::file_type::directory_file || !isLowerHex(key, 64) ||
          !key.starts_with(shardName))
        continue;
      ListedEntry listed;
      listed.key = key.str();
      // Pruning needs sizes and times only: parsing every metadata.json after each store would
      // cost more than the walk.
      if (withSummaries) {
        llvm::Expected<llvm::json::Object> meta = readMetadata(it->path());
        if (meta) {
          const llvm::json::Object *callerMeta = meta->getObject("metadata");
          std::optional<llvm::StringRef> name =
              callerMeta ? callerMeta->getString("name") : std::nullopt;
          std::optional<llvm::StringRef> keyText = meta->getString("keyText");
          listed.summary = name ? name->str() : keyText ? firstLine(*keyText) : "";
        } else {
          llvm::consumeError(meta.takeError());
          listed.summary = "(damaged: unreadable metadata.json)";
        }
      }
      fs::file_status dirStatus;
      if (!fs::status(it->path(), dirStatus, /*follow=*/false))
        listed.modified = dirStatus.getLastModificationTime();
      llvm::SmallString<256> metaPath(it->path());
      path::append(metaPath, MetadataFileName);
      fs::file_status metaStatus;
      listed.lastUsed = fs::status(metaPath, metaStatus, /*follow=*/false)
                            ? listed.modified
                            : metaStatus.getLastModificationTime();
      std::error_code fileEc;
      for (fs::directory_iterator f(it->path(), fileEc, false); !fileEc && f != end;
           f.increment(fileEc)) {
        fs::file_status st;
        if (!fs::status(f->path(), st, /*follow=*/false) && st.type() == fs::file_type::regular_file)
          listed.bytes += st.getSize();
      }
      result.push_back(std::move(listed));
    }
  }
  std::sort(result.begin(), result.end(),
            [](const ListedEntry &a, const ListedEntry &b) { return a.key < b.key; });
  return result;
}

PruneResult DiskCache::prune(llvm::StringRef keepKey) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (openLocked(/*create=*/false) != DirState::Writable)
    return {}; // missing, read-only or not ours: nothing to remove
  return pruneLocked(keepKey);
}

PruneResult DiskCache::pruneLocked(llvm::StringRef keepKey) {
  PruneResult removed;
  if (maxBytes_ == 0)
    return removed;
  // listLocked walks only real entry directories (two-hex shard / 64-hex key, no symbolic
  // links), so nothing else in the directory can be chosen below.
  std::vector<ListedEntry> entries = listLocked(/*withSummaries=*/false);
  uint64_t total = 0;
  for (const ListedEntry &e : entries)
    total += e.bytes;
  if (total <= maxBytes_)
    return removed;
  std::stable_sort(entries.begin(), entries.end(), [](const ListedEntry &a, const ListedEntry &b) {
    return a.lastUsed < b.lastUsed;
  });
  for (const ListedEntry &e : entries) {
    if (total <= maxBytes_)
      break;
    if (e.key == keepKey)
      continue;
    discard(entryPath(e.key));
    total -= e.bytes;
    ++removed.entries;
    removed.bytes += e.bytes;
  }
  support::log(support::LogLevel::Debug,
               llvm::formatv("flashbob cache: pruned {0} least recently used entries ({1} B) to "
                             "stay under {2} MiB (FLASHBOB_CACHE_MAX_MB)",
                             removed.entries, removed.bytes, maxBytes_ >> 20));
  return removed;
}

namespace {
// The names the cache gives things in a shard: entries, temporaries being built, trash being
// removed.
bool isCacheWrittenName(llvm::StringRef name, llvm::StringRef shardName) {
  llvm::StringRef key = name;
  if (key.consume_front(".")) { // .<key>.tmp-XXXXXX
    size_t dot = key.find('.');
    if (dot == llvm::StringRef::npos || !key.substr(dot).starts_with(".tmp"))
      return false;
    key = key.take_front(dot);
  } else if (size_t trash = key.find(".trash-"); trash != llvm::StringRef::npos) {
    key = key.take_front(trash);
  }
  return isLowerHex(key, 64) && key.starts_with(shardName);
}
} // namespace

llvm::Expected<ClearResult> DiskCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
  ClearResult result;
  if (!fs::exists(directory_))
    return result; // nothing there
  DirState state = openLocked(/*create=*/false);
  if (state == DirState::Refused || state == DirState::Unwritable)
    return failure(directory_ + " is not used as a kernel cache (see the warning above); nothing "
                                "removed");
  llvm::SmallString<256> marker(directory_);
  path::append(marker, MarkerFileName);
  fs::file_status markerStatus;
  if (fs::status(marker, markerStatus, /*follow=*/false) ||
      markerStatus.type() != fs::file_type::regular_file)
    return failure(directory_ + " has no " + MarkerFileName +
                   " marker, so flashbob did not write it as a cache; nothing removed (a cache "
                   "of an older flashbob gets the marker on its next store)");
  std::error_code ec;
  for (fs::directory_iterator shard(directory_, ec, /*follow_symlinks=*/false), end;
       !ec && shard != end; shard.increment(ec)) {
    llvm::StringRef shardName = path::filename(shard->path());
    if (shard->type() != fs::file_type::directory_file || !isLowerHex(shardName, 2))
      continue;
    std::vector<std::string> ours;
    std::error_code innerEc;
    for (fs::directory_iterator it(shard->path(), innerEc, false); !innerEc && it != end;
         it.increment(innerEc))
      if (isCacheWrittenName(path::filename(it->path()), shardName))
        ours.push_back(it->path());
    if (innerEc) {
      result.failures.push_back("read directory(" + shard->path() + "): " + innerEc.message());
      continue;
    }
    for (const std::string &p : ours)
      if (removeTree(p, result.failures) && isLowerHex(path::filename(p), 64))
        ++result.entries;
    // The shard goes only when nothing else is left in it; a user's file keeps it.
    (void)fs::remove(shard->path(), /*IgnoreNonExisting=*/true);
  }
  if (ec)
    result.failures.push_back("read directory(" + directory_ + "): " + ec.message());
  return result;
}

} // namespace flashbob::runtime
